#include "core/tensor.h"

#include <fmt/format.h>

#include "core/status.h"

namespace tessera {

const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

Tensor Tensor::contiguous(void* data, DType dtype, const int64_t* shape, int ndim, Device device) {
    TS_CHECK(ndim >= 0 && ndim <= kMaxDims, "tensor rank {} not supported (max {})", ndim, kMaxDims);
    Tensor t;
    t.data = data;
    t.dtype = dtype;
    t.device = device;
    t.ndim = ndim;
    for (int i = 0; i < ndim; ++i) {
        TS_CHECK(shape[i] >= 0, "negative dimension {} in tensor shape", shape[i]);
        t.shape[i] = shape[i];
    }
    const auto& info = dtype_info(dtype);
    if (ndim > 0) {
        t.stride[ndim - 1] = info.quantized ? 0 : info.block_bytes;
        int64_t s = int64_t(dtype_row_bytes(dtype, shape[ndim - 1]));
        for (int i = ndim - 2; i >= 0; --i) {
            t.stride[i] = s;
            s *= shape[i];
        }
    }
    return t;
}

Tensor::Tensor(void* d, DType dt, std::initializer_list<int64_t> s, Device dev) {
    *this = contiguous(d, dt, s.begin(), int(s.size()), dev);
}

int64_t Tensor::numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
}

size_t Tensor::nbytes() const { return size_t(rows()) * row_bytes(); }

bool Tensor::is_contiguous() const {
    if (ndim == 0) return true;
    Tensor c = contiguous(data, dtype, shape.data(), ndim, device);
    for (int i = 0; i < ndim; ++i)
        if (shape[i] > 1 && c.stride[i] != stride[i]) return false;
    return true;
}

void* Tensor::row_ptr(int64_t r) const {
    if (ndim <= 1) return data;
    // Decompose r over dims [0, ndim-1).
    int64_t off = 0;
    for (int i = ndim - 2; i >= 0; --i) {
        off += (r % shape[i]) * stride[i];
        r /= shape[i];
    }
    return static_cast<char*>(data) + off;
}

Tensor Tensor::view(std::initializer_list<int64_t> new_shape) const {
    TS_CHECK(is_contiguous(), "view of a non-contiguous tensor {}", describe());
    int64_t dims[kMaxDims];
    int n = 0, infer = -1;
    int64_t known = 1;
    for (int64_t d : new_shape) {
        TS_CHECK(n < kMaxDims, "view rank {} too large", new_shape.size());
        if (d == -1) {
            TS_CHECK(infer < 0, "view with two -1 dimensions");
            infer = n;
        } else {
            known *= d;
        }
        dims[n++] = d;
    }
    if (infer >= 0) {
        TS_CHECK(known > 0 && numel() % known == 0, "cannot view {} as a shape with {} known elements", describe(), known);
        dims[infer] = numel() / known;
        known *= dims[infer];
    }
    TS_CHECK(known == numel(), "cannot view {} ({} elements) with {} elements", describe(), numel(), known);
    return contiguous(data, dtype, dims, n, device);
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
    TS_CHECK(ndim >= 1 && 0 <= begin && begin <= end && end <= shape[0], "slice [{}, {}) out of range for {}", begin,
             end, describe());
    Tensor t = *this;
    const int64_t s0 = ndim == 1 ? int64_t(dtype_info(dtype).block_bytes) : stride[0];
    TS_CHECK(ndim > 1 || !dtype_is_quantized(dtype), "row slice of a 1-D quantized tensor");
    t.data = static_cast<char*>(data) + begin * s0;
    t.shape[0] = end - begin;
    return t;
}

std::string Tensor::shape_str() const {
    std::string s = "[";
    for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

std::string Tensor::describe() const { return fmt::format("{} {} {}", dtype_name(dtype), shape_str(), device_name(device)); }

void check_shape(const Tensor& t, std::initializer_list<int64_t> expected, const std::string& what) {
    bool ok = int(expected.size()) == t.ndim;
    int i = 0;
    for (int64_t d : expected) ok = ok && t.shape[i++] == d;
    if (!ok) {
        std::string e = "[";
        i = 0;
        for (int64_t d : expected) e += (i++ ? ", " : "") + std::to_string(d);
        fail(ErrorKind::Invalid, "{}: expected {} got {}", what, e + "]", t.shape_str());
    }
}

}  // namespace tessera

// Tensor: a non-owning view (dtype, shape, byte strides, pointer, device). Shapes are written
// outermost first, like PyTorch: a weight is [out, in] with `in` contiguous. Quantized tensors
// are views of whole blocks along the last dimension; only their rows may be strided.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/dtype.h"

namespace tessera {

enum class Device : uint8_t { CPU, CUDA };
const char* device_name(Device d);

struct Tensor {
    static constexpr int kMaxDims = 4;

    void* data = nullptr;
    DType dtype = DType::F32;
    Device device = Device::CPU;
    int ndim = 0;
    std::array<int64_t, kMaxDims> shape{};   // shape[ndim-1] is the contiguous dimension
    std::array<int64_t, kMaxDims> stride{};  // in bytes; stride[ndim-1] is the element size (or 0 for quant)

    Tensor() = default;
    // A contiguous view over `data`.
    Tensor(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device = Device::CPU);
    static Tensor contiguous(void* data, DType dtype, const int64_t* shape, int ndim, Device device = Device::CPU);

    int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
    int64_t numel() const;
    int64_t rows() const { return ndim == 0 ? 1 : numel() / shape[ndim - 1]; }  // all but the last dim
    int64_t cols() const { return ndim == 0 ? 1 : shape[ndim - 1]; }
    size_t row_bytes() const { return dtype_row_bytes(dtype, cols()); }
    size_t nbytes() const;                 // bytes spanned if contiguous
    bool is_contiguous() const;
    bool empty() const { return data == nullptr; }

    template <typename T> T* ptr() const { return static_cast<T*>(data); }
    // Pointer to row r of a tensor viewed as 2-D [rows, cols] (requires rows to be evenly strided).
    void* row_ptr(int64_t r) const;

    // Views (no copy). Throw Error on a bad shape.
    Tensor view(std::initializer_list<int64_t> new_shape) const;  // contiguous only; one dim may be -1
    Tensor slice_rows(int64_t begin, int64_t end) const;         // along dim 0

    std::string shape_str() const;  // "[2, 3, 4]"
    std::string describe() const;   // "bf16 [2, 3, 4] cpu"
};

// Throws Error "<what>: expected [a, b] got [c, d]" if t's shape differs.
void check_shape(const Tensor& t, std::initializer_list<int64_t> expected, const std::string& what);

}  // namespace tessera

// GgufWriter: validates what is added, then streams header, metadata, tensor infos and tensor
// data to disk with the offsets and zero padding llama.cpp's gguf_write produces.
#include "formats/gguf_writer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "core/status.h"
#include "formats/ggml_types.h"
#include "formats/gguf.h"

namespace tessera {

namespace {
constexpr size_t kMaxNameBytes = 63;  // llama.cpp GGML_MAX_NAME (64) with its terminating NUL

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

void check_alignment(uint64_t a) {
    TS_CHECK(a != 0 && a <= std::numeric_limits<uint32_t>::max() && (a & (a - 1)) == 0,
             "GGUF alignment {} is not a u32 power of two", a);
}

// Closes the FILE and removes the partial file unless release()d.
struct PartialFile {
    std::FILE* f = nullptr;
    std::string path;
    ~PartialFile() {
        if (f) {
            std::fclose(f);
            std::remove(path.c_str());
        }
    }
    void put(const void* p, size_t n) {
        if (n && std::fwrite(p, 1, n, f) != n) fail(ErrorKind::Io, "{}: write failed: {}", path, std::strerror(errno));
    }
    void zeros(size_t n) {
        static const char kZero[64] = {};
        while (n) {
            const size_t k = std::min(n, sizeof(kZero));
            put(kZero, k);
            n -= k;
        }
    }
};
}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) { check_alignment(alignment); }

void GgufWriter::set(const std::string& key, GgufValue value) {
    TS_CHECK(!key.empty(), "GGUF metadata key is empty");
    TS_CHECK(!keys_.count(key), "GGUF metadata key {} set twice", key);
    if (key == "general.alignment") {
        TS_CHECK(value.type() == GgufType::U32, "key general.alignment: expected u32, found {}", value.type_str());
        TS_CHECK(tensors_.empty(), "key general.alignment: set it before adding tensors");
        check_alignment(value.as_u64());
        alignment_ = uint32_t(value.as_u64());
    }
    keys_.insert(key);
    kvs_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                            const void* data) {
    TS_CHECK(data != nullptr, "tensor {}: null data", name);
    add(name, with_context("tensor " + name, [&] { return dtype_to_ggml_type(dtype); }), shape, data, nullptr);
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                            Producer produce) {
    TS_CHECK(produce != nullptr, "tensor {}: no data producer", name);
    add(name, with_context("tensor " + name, [&] { return dtype_to_ggml_type(dtype); }), shape, nullptr,
        std::move(produce));
}

void GgufWriter::add_tensor_ggml(const std::string& name, uint32_t ggml_type, const std::vector<int64_t>& shape,
                                 Producer produce) {
    TS_CHECK(produce != nullptr, "tensor {}: no data producer", name);
    add(name, ggml_type, shape, nullptr, std::move(produce));
}

void GgufWriter::add(const std::string& name, uint32_t ggml_type, const std::vector<int64_t>& shape,
                     const void* data, Producer produce) {
    with_context("tensor " + name, [&] {
        TS_CHECK(!name.empty(), "empty tensor name");
        TS_CHECK(name.size() <= kMaxNameBytes, "name is {} bytes, llama.cpp allows at most {}", name.size(),
                 kMaxNameBytes);
        TS_CHECK(!tensor_names_.count(name), "added twice");
        const GgmlTypeInfo* info = ggml_type_info(ggml_type);
        if (!info) fail(ErrorKind::Invalid, "unknown ggml type id {}", ggml_type);
        TS_CHECK(!shape.empty() && shape.size() <= 4, "{} dimensions (1 to 4 are supported)", shape.size());
        int64_t numel = 1;
        for (int64_t d : shape) {
            TS_CHECK(d > 0, "dimension {} is not positive", d);
            TS_CHECK(!__builtin_mul_overflow(numel, d, &numel), "element count overflows int64");
        }
        const int64_t ne0 = shape.back();
        TS_CHECK(ne0 % info->block_elems == 0, "row length {} is not a multiple of the {} block size {}", ne0,
                 info->name, info->block_elems);
        uint64_t nbytes = 0;
        TS_CHECK(!__builtin_mul_overflow(uint64_t(numel) / info->block_elems, uint64_t(info->block_bytes), &nbytes) &&
                     nbytes <= uint64_t(std::numeric_limits<int64_t>::max()),
                 "byte size of {} {} elements overflows", numel, info->name);
        tensor_names_.insert(name);
        tensors_.push_back({name, ggml_type, shape, nbytes, data_size_, data, std::move(produce)});
        data_size_ += align_up(nbytes, alignment_);
    });
}

std::string GgufWriter::header_bytes() const {
    std::string out;
    auto put_u32 = [&](uint32_t x) { out.append(reinterpret_cast<const char*>(&x), 4); };
    auto put_u64 = [&](uint64_t x) { out.append(reinterpret_cast<const char*>(&x), 8); };
    put_u32(kGgufMagic);
    put_u32(3);
    // A non-default alignment the caller did not set as a key is recorded first.
    const bool implicit_alignment = alignment_ != kGgufDefaultAlignment && !keys_.count("general.alignment");
    put_u64(tensors_.size());
    put_u64(kvs_.size() + (implicit_alignment ? 1 : 0));
    if (implicit_alignment) {
        gguf_write_string("general.alignment", out);
        put_u32(uint32_t(GgufType::U32));
        gguf_write_value(GgufValue::u32(alignment_), out);
    }
    for (const auto& [key, value] : kvs_) {
        gguf_write_string(key, out);
        put_u32(uint32_t(value.type()));
        gguf_write_value(value, out);
    }
    for (const auto& t : tensors_) {
        gguf_write_string(t.name, out);
        put_u32(uint32_t(t.shape.size()));
        for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) put_u64(uint64_t(*it));  // ne[0] innermost
        put_u32(t.ggml_type);
        put_u64(t.offset);
    }
    return out;
}

void GgufWriter::write(const std::string& path) const {
    PartialFile out;
    out.path = path + ".partial";
    out.f = std::fopen(out.path.c_str(), "wb");
    if (!out.f) fail(ErrorKind::Io, "{}: cannot create: {}", out.path, std::strerror(errno));
    std::setvbuf(out.f, nullptr, _IOFBF, 1 << 20);

    const std::string header = header_bytes();
    out.put(header.data(), header.size());
    out.zeros(size_t(align_up(header.size(), alignment_) - header.size()));

    for (const auto& t : tensors_) {
        uint64_t written = 0;
        const Sink sink = [&](const void* p, size_t n) {
            TS_CHECK(written + n <= t.nbytes, "tensor {}: producer wrote more than its {} bytes", t.name, t.nbytes);
            out.put(p, n);
            written += n;
        };
        if (t.data)
            sink(t.data, size_t(t.nbytes));
        else
            t.produce(sink);
        TS_CHECK(written == t.nbytes, "tensor {}: producer wrote {} bytes, expected {}", t.name, written, t.nbytes);
        out.zeros(size_t(align_up(t.nbytes, alignment_) - t.nbytes));
    }

    std::FILE* f = std::exchange(out.f, nullptr);
    if (std::fclose(f) != 0) {
        std::remove(out.path.c_str());
        fail(ErrorKind::Io, "{}: write failed: {}", out.path, std::strerror(errno));
    }
    if (std::rename(out.path.c_str(), path.c_str()) != 0) {
        const int e = errno;
        std::remove(out.path.c_str());
        fail(ErrorKind::Io, "{}: cannot rename to {}: {}", out.path, path, std::strerror(e));
    }
}

}  // namespace tessera

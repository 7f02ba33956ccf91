// Streaming safetensors writing (see synth_safetensors.h).
#include "synth_safetensors.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace tessera::cli {

size_t safetensors_dtype_size(const std::string& dtype) {
    if (dtype == "U32" || dtype == "F32") return 4;
    if (dtype == "BF16" || dtype == "F16") return 2;
    fail(ErrorKind::Invalid, "safetensors dtype {} is not written by synth", dtype);
}

SafetensorsWriter::SafetensorsWriter(std::map<std::string, std::string> metadata) : metadata_(std::move(metadata)) {}

void SafetensorsWriter::add(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                            Producer produce) {
    uint64_t n = safetensors_dtype_size(dtype);
    for (int64_t d : shape) {
        TS_CHECK(d > 0, "tensor {}: dimension {} is not positive", name, d);
        n *= uint64_t(d);
    }
    for (const auto& t : tensors_) TS_CHECK(t.name != name, "tensor {} added twice", name);
    tensors_.push_back({name, dtype, shape, data_bytes_, data_bytes_ + n, std::move(produce)});
    data_bytes_ += n;
}

std::vector<std::string> SafetensorsWriter::names() const {
    std::vector<std::string> v;
    for (const auto& t : tensors_) v.push_back(t.name);
    return v;
}

void SafetensorsWriter::write(const std::string& path, const std::function<void(uint64_t)>& progress) const {
    nlohmann::ordered_json h;
    if (!metadata_.empty()) h["__metadata__"] = metadata_;
    for (const auto& t : tensors_) h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
    std::string header = h.dump();
    header.resize((header.size() + 7) / 8 * 8, ' ');  // data starts 8-byte aligned

    const std::string partial = path + ".partial";
    std::FILE* f = std::fopen(partial.c_str(), "wb");
    if (!f) fail(ErrorKind::Io, "{}: cannot create: {}", partial, std::strerror(errno));
    std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
    auto put = [&](const void* p, size_t n) {
        if (std::fwrite(p, 1, n, f) != n) fail(ErrorKind::Io, "{}: write failed: {}", partial, std::strerror(errno));
    };
    try {
        const uint64_t len = header.size();
        put(&len, 8);
        put(header.data(), header.size());
        for (const auto& t : tensors_) {
            uint64_t written = 0;
            t.produce([&](const void* p, size_t n) {
                TS_CHECK(written + n <= t.end - t.begin, "tensor {}: producer wrote more than its {} bytes", t.name,
                         t.end - t.begin);
                put(p, n);
                written += n;
                if (progress) progress(n);
            });
            TS_CHECK(written == t.end - t.begin, "tensor {}: producer wrote {} bytes, expected {}", t.name, written,
                     t.end - t.begin);
        }
    } catch (...) {
        std::fclose(f);
        std::remove(partial.c_str());
        throw;
    }
    if (std::fclose(f) != 0) {
        std::remove(partial.c_str());
        fail(ErrorKind::Io, "{}: write failed: {}", partial, std::strerror(errno));
    }
    if (std::rename(partial.c_str(), path.c_str()) != 0) {
        const int e = errno;
        std::remove(partial.c_str());
        fail(ErrorKind::Io, "{}: cannot rename to {}: {}", partial, path, std::strerror(e));
    }
}

}  // namespace tessera::cli

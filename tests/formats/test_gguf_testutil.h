// Test helpers for GGUF: a hand-rolled little-endian byte builder (independent of GgufWriter)
// and a scratch directory.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace gguf_test {

struct Bytes {
    std::vector<uint8_t> b;
    template <typename T> Bytes& put(T v) {
        uint8_t tmp[sizeof(T)];
        std::memcpy(tmp, &v, sizeof(T));
        b.insert(b.end(), tmp, tmp + sizeof(T));
        return *this;
    }
    Bytes& u32(uint32_t v) { return put(v); }
    Bytes& u64(uint64_t v) { return put(v); }
    Bytes& str(const std::string& s) {
        u64(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    Bytes& pad_to(size_t align) {
        while (b.size() % align) b.push_back(0);
        return *this;
    }
    Bytes& raw(const std::vector<uint8_t>& r) {
        b.insert(b.end(), r.begin(), r.end());
        return *this;
    }
    size_t size() const { return b.size(); }
};

// A scratch directory removed at the end of the test.
struct TempDir {
    std::filesystem::path path;
    TempDir() {
        path = std::filesystem::temp_directory_path() /
               ("tessera_gguf_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
        std::filesystem::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::string file(const std::string& name) const { return (path / name).string(); }
    static int& counter() {
        static int n = 0;
        return n;
    }
};

}  // namespace gguf_test

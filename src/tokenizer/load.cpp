// load_tokenizer(PATH): picks the loader from what PATH is (directory, tokenizer.json, .gguf).
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/status.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (ec || !fs::exists(st)) fail(ErrorKind::NotFound, "{}: no such file or directory", path);
    if (fs::is_directory(st)) {
        if (fs::is_regular_file(fs::path(path) / "tokenizer.json")) return Tokenizer::from_hf_dir(path);
        // A folder holding a GGUF model: its (first, for split files) .gguf carries the tokenizer.
        std::vector<fs::path> ggufs;
        for (const auto& e : fs::directory_iterator(path, ec))
            if (e.is_regular_file() && e.path().extension() == ".gguf") ggufs.push_back(e.path());
        if (!ggufs.empty()) {
            std::sort(ggufs.begin(), ggufs.end());
            return Tokenizer::from_gguf(GgufFile::open(ggufs.front().string()));
        }
        fail(ErrorKind::NotFound, "{}: no tokenizer.json and not a .gguf file", path);
    }
    char magic[4] = {};
    {
        std::ifstream f(path, std::ios::binary);
        if (!f) fail(ErrorKind::Io, "{}: cannot open", path);
        f.read(magic, 4);
    }
    if (std::string_view(magic, 4) == "GGUF") return Tokenizer::from_gguf(GgufFile::open(path));
    if (fs::path(path).filename() == "tokenizer.json") {
        const fs::path dir = fs::path(path).parent_path();
        return Tokenizer::from_hf_dir(dir.empty() ? "." : dir.string());
    }
    fail(ErrorKind::Invalid, "{}: no tokenizer.json and not a .gguf file", path);
}

}  // namespace tessera

// A safetensors checkpoint: which files make it up (single file, index.json shards, or every
// *.safetensors in a directory), and the name -> tensor table across them.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/status.h"
#include "formats/safetensors.h"

namespace tessera {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string read_text(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) fail(ErrorKind::Io, "{}: cannot read", p.string());
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Files named in index.json must stay inside the checkpoint directory.
fs::path shard_path(const fs::path& dir, const std::string& shard, const std::string& index) {
    const fs::path rel(shard);
    bool escapes = shard.empty() || rel.is_absolute();
    for (const auto& part : rel) escapes = escapes || part == "..";
    TS_CHECK(!escapes, "{}: shard file name '{}' must be a relative path inside the checkpoint", index, shard);
    return dir / rel;
}

// name -> shard file of model.safetensors.index.json.
std::map<std::string, std::string> read_index(const fs::path& index_path) {
    const std::string where = index_path.string();
    json j;
    try {
        j = json::parse(read_text(index_path));
    } catch (const json::exception& e) {
        fail(ErrorKind::Invalid, "{}: bad JSON: {}", where, e.what());
    }
    TS_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(),
             "{}: expected an object with a 'weight_map' object", where);
    std::map<std::string, std::string> map;
    for (const auto& [name, file] : j["weight_map"].items()) {
        TS_CHECK(file.is_string(), "{}: weight_map['{}'] must be a file name string, got {}", where, name, file.dump());
        map[name] = file.get<std::string>();
    }
    TS_CHECK(!map.empty(), "{}: weight_map is empty", where);
    return map;
}

}  // namespace

void SafetensorsCheckpoint::add_file(const std::string& file_path) {
    if (!fs::exists(file_path)) fail(ErrorKind::NotFound, "{}: safetensors file not found", file_path);
    MappedFile mf(file_path);
    SafetensorsHeader h = parse_safetensors(mf.data(), mf.size(), file_path);
    for (auto& t : h.tensors) {
        auto it = tensors_.find(t.name);
        TS_CHECK(it == tensors_.end(), "tensor '{}' is in both {} and {}", t.name, it->second.file, file_path);
        const std::string name = t.name;
        tensors_.emplace(name, std::move(t));
    }
    for (auto& [k, v] : h.metadata) metadata_.emplace(k, v);
    files_.push_back(std::move(mf));  // the mapping's address survives the move
    paths_.push_back(file_path);
}

void SafetensorsCheckpoint::add_index(const std::string& dir_str, const std::string& index) {
    const fs::path dir(dir_str);
    const auto map = read_index(index);
    std::set<std::string> files;
    for (const auto& [name, file] : map) files.insert(file);
    for (const auto& file : files) {
        const fs::path sp = shard_path(dir, file, index);
        if (!fs::exists(sp)) fail(ErrorKind::NotFound, "{}: shard '{}' listed in the index does not exist", index, sp.string());
        add_file(sp.string());
    }
    for (const auto& [name, file] : map) {
        auto it = tensors_.find(name);
        TS_CHECK(it != tensors_.end() && it->second.file == shard_path(dir, file, index).string(),
                 "{}: weight_map puts '{}' in '{}', but that shard has no such tensor", index, name, file);
    }
}

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::string& dir_or_file) {
    SafetensorsCheckpoint ck;
    ck.path_ = dir_or_file;
    const fs::path p(dir_or_file);
    std::error_code ec;
    if (!fs::exists(p, ec)) fail(ErrorKind::NotFound, "{}: no such file or directory", dir_or_file);
    if (!fs::is_directory(p, ec)) {
        if (ends_with(p.filename().string(), ".safetensors.index.json"))
            ck.add_index(p.parent_path().empty() ? "." : p.parent_path().string(), p.string());
        else
            ck.add_file(p.string());
        return ck;
    }

    std::vector<fs::path> indexes, shards;
    fs::directory_iterator it(p, ec);
    if (ec) fail(ErrorKind::Io, "{}: cannot list directory: {}", dir_or_file, ec.message());
    for (const auto& e : it) {
        const std::string fname = e.path().filename().string();
        if (ends_with(fname, ".safetensors.index.json")) indexes.push_back(e.path());
        else if (ends_with(fname, ".safetensors") && e.is_regular_file()) shards.push_back(e.path());
    }
    std::sort(indexes.begin(), indexes.end());
    std::sort(shards.begin(), shards.end());

    fs::path index;
    if (fs::exists(p / "model.safetensors.index.json")) index = p / "model.safetensors.index.json";
    else if (indexes.size() == 1) index = indexes[0];
    else if (indexes.size() > 1 && !fs::exists(p / "model.safetensors"))
        fail(ErrorKind::Invalid, "{}: several *.safetensors.index.json files and no model.safetensors.index.json",
             dir_or_file);

    if (!index.empty()) {
        ck.add_index(p.string(), index.string());
        return ck;
    }
    if (fs::exists(p / "model.safetensors")) {
        ck.add_file((p / "model.safetensors").string());
        return ck;
    }
    if (shards.empty()) fail(ErrorKind::NotFound, "{}: no *.safetensors files in the directory", dir_or_file);
    for (const auto& s : shards) ck.add_file(s.string());
    return ck;
}

const SafetensorsTensorInfo& SafetensorsCheckpoint::info(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) fail(ErrorKind::NotFound, "{}: no tensor '{}' in the checkpoint", path_, name);
    return it->second;
}

Tensor SafetensorsCheckpoint::tensor(const std::string& name) const {
    const SafetensorsTensorInfo& t = info(name);
    if (!t.dtype)
        fail(ErrorKind::Unsupported, "tensor '{}' ({}): safetensors dtype {} is not supported", name, t.file, t.dtype_name);
    if (t.shape.size() > size_t(Tensor::kMaxDims))
        fail(ErrorKind::Unsupported, "tensor '{}' ({}): rank {} {} is over the supported {}", name, t.file,
             t.shape.size(), t.shape_str(), Tensor::kMaxDims);
    return Tensor::contiguous(const_cast<uint8_t*>(t.data), *t.dtype, t.shape.data(), int(t.shape.size()));
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
    std::vector<std::string> out;
    out.reserve(tensors_.size());
    for (const auto& [name, t] : tensors_) out.push_back(name);
    return out;
}

}  // namespace tessera

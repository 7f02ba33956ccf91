// `tessera inspect PATH`: what a checkpoint (a .gguf file, or a Hugging Face safetensors directory
// or file) holds — architecture, metadata, tensors by type and size — as text or (--json) JSON.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>

#include "cli.h"
#include "core/status.h"
#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "formats/safetensors.h"

namespace tessera::cli {
namespace {

using ojson = nlohmann::ordered_json;

constexpr size_t kJsonArrayLimit = 64;  // longer arrays are summarized unless --full
constexpr size_t kPreview = 8;          // elements shown of a summarized array

std::string human_bytes(uint64_t n) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = double(n);
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, ++u;
    return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.2f} {}", v, units[u]);
}

// A string for one line of text: control characters escaped, long strings cut.
std::string quote(const std::string& s, size_t max_chars) {
    std::string out = "\"";
    size_t i = 0;
    for (; i < s.size() && i < max_chars; ++i) {
        const unsigned char c = s[i];
        if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '"' || c == '\\') out += std::string("\\") + char(c);
        else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
        else out += char(c);
    }
    out += "\"";
    if (i < s.size()) out += fmt::format("... ({} bytes)", s.size());
    return out;
}

// One scalar value as text.
std::string scalar_text(const GgufValue& v) {
    switch (v.type()) {
        case GgufType::STRING: return quote(v.as_string(), 80);
        case GgufType::BOOL: return v.as_bool() ? "true" : "false";
        case GgufType::F32: return fmt::format("{}", float(v.as_f64()));
        case GgufType::F64: return fmt::format("{}", v.as_f64());
        case GgufType::I8: case GgufType::I16: case GgufType::I32: case GgufType::I64:
            return std::to_string(v.as_i64());
        default: return std::to_string(v.as_u64());
    }
}

std::string value_text(const GgufValue& v) {
    if (!v.is_array()) return scalar_text(v);
    const size_t n = v.size();
    const size_t shown = n <= 8 ? n : 4;
    std::string s = n <= 8 ? "[" : fmt::format("{} {}: [", n, v.elem_type() == GgufType::STRING ? "strings" : gguf_type_name(v.elem_type()));
    for (size_t i = 0; i < shown; ++i) {
        const GgufValue e = v.at(i);
        s += (i ? ", " : "") + (e.is_array() ? fmt::format("array[{}]", e.size()) : e.type() == GgufType::STRING ? quote(e.as_string(), 24) : scalar_text(e));
    }
    return s + (shown < n ? ", ...]" : "]");
}

ojson float_json(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    return d;
}

// A value as JSON: scalars as numbers/strings/bools, arrays as lists (long ones summarized).
ojson value_json(const GgufValue& v, bool full) {
    switch (v.type()) {
        case GgufType::STRING: return v.as_string();
        case GgufType::BOOL: return v.as_bool();
        case GgufType::F32: return float_json(float(v.as_f64()));
        case GgufType::F64: return float_json(v.as_f64());
        case GgufType::I8: case GgufType::I16: case GgufType::I32: case GgufType::I64: return v.as_i64();
        case GgufType::ARRAY: {
            ojson list = ojson::array();
            const size_t n = full || v.size() <= kJsonArrayLimit ? v.size() : kPreview;
            for (size_t i = 0; i < n; ++i) list.push_back(value_json(v.at(i), full));
            return list;
        }
        default: return v.as_u64();
    }
}

ojson entry_json(const GgufValue& v, bool full) {
    ojson e;
    e["type"] = gguf_type_name(v.type());
    if (v.is_array()) {
        e["elem_type"] = gguf_type_name(v.elem_type());
        e["length"] = v.size();
        const bool summarized = !full && v.size() > kJsonArrayLimit;
        e[summarized ? "preview" : "value"] = value_json(v, full);
        if (summarized) e["truncated"] = true;
    } else {
        e["value"] = value_json(v, full);
    }
    return e;
}

struct TypeTotal {
    size_t count = 0;
    uint64_t bytes = 0;
};

void print_type_totals(const std::map<std::string, TypeTotal>& by_type) {
    for (const auto& [name, tt] : by_type)
        std::printf("  %-8s %6zu tensor%s %12s\n", name.c_str(), tt.count, tt.count == 1 ? " " : "s",
                    human_bytes(tt.bytes).c_str());
}

int inspect_gguf(const std::string& path, const Args& args) {
    const GgufFile f = GgufFile::open(path);
    std::map<std::string, TypeTotal> by_type;
    uint64_t total = 0;
    for (const auto& t : f.tensors()) {
        auto& tt = by_type[t.type_name()];
        ++tt.count;
        tt.bytes += t.nbytes;
        total += t.nbytes;
    }

    if (args.flag("json")) {
        const bool full = args.flag("full");
        ojson j;
        j["path"] = path;
        j["format"] = "gguf";
        j["version"] = f.version();
        j["file_size"] = f.file_size();
        j["alignment"] = f.alignment();
        j["data_offset"] = f.data_offset();
        j["architecture"] = f.architecture();
        ojson meta = ojson::object();
        for (const auto& kv : f.metadata()) meta[kv.key] = entry_json(kv.value, full);
        j["metadata"] = std::move(meta);
        j["tensor_count"] = f.tensors().size();
        j["total_bytes"] = total;
        ojson types = ojson::object();
        for (const auto& [name, tt] : by_type) types[name] = {{"count", tt.count}, {"bytes", tt.bytes}};
        j["types"] = std::move(types);
        ojson tensors = ojson::array();
        for (const auto& t : f.tensors())
            tensors.push_back({{"name", t.name},
                               {"type", t.type_name()},
                               {"ggml_type", t.ggml_type},
                               {"shape", std::vector<int64_t>(t.shape.begin(), t.shape.begin() + t.ndim)},
                               {"offset", t.offset},
                               {"nbytes", t.nbytes}});
        j["tensors"] = std::move(tensors);
        std::printf("%s\n", j.dump(1, ' ', false, ojson::error_handler_t::replace).c_str());
        return 0;
    }

    std::printf("file:         %s\n", path.c_str());
    std::printf("format:       GGUF v%u, %s, alignment %u, data at offset %llu\n", f.version(),
                human_bytes(f.file_size()).c_str(), f.alignment(), (unsigned long long)f.data_offset());
    const std::string arch = f.architecture();
    std::printf("architecture: %s\n", arch.empty() ? "(none: no general.architecture)" : arch.c_str());
    std::printf("metadata:     %zu keys\n", f.metadata().size());
    size_t width = 0;
    for (const auto& kv : f.metadata()) width = std::max(width, std::min<size_t>(kv.key.size(), 48));
    for (const auto& kv : f.metadata())
        std::printf("  %-*s %-14s %s\n", int(width), kv.key.c_str(), kv.value.type_str().c_str(),
                    value_text(kv.value).c_str());
    std::printf("tensors:      %zu, %s\n", f.tensors().size(), human_bytes(total).c_str());
    print_type_totals(by_type);
    if (args.flag("tensors")) {
        size_t nw = 0;
        for (const auto& t : f.tensors()) nw = std::max(nw, std::min<size_t>(t.name.size(), 64));
        std::printf("\n  %-*s %-8s %-24s %12s\n", int(nw), "name", "type", "shape", "size");
        for (const auto& t : f.tensors())
            std::printf("  %-*s %-8s %-24s %12s\n", int(nw), t.name.c_str(), t.type_name().c_str(),
                        t.shape_str().c_str(), human_bytes(t.nbytes).c_str());
    }
    return 0;
}

// A config.json value for one line of text: objects and long lists summarized.
std::string config_text(const nlohmann::json& v) {
    if (v.is_object()) return fmt::format("{{{} keys}}", v.size());
    if (v.is_array() && v.size() > 8) return fmt::format("[{} items]", v.size());
    std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return s.size() > 100 ? s.substr(0, 100) + "..." : s;
}

int inspect_hf(const std::string& path, const Args& args) {
    namespace fs = std::filesystem;
    const SafetensorsCheckpoint ck = SafetensorsCheckpoint::open(path);
    const fs::path dir = fs::is_directory(path) ? fs::path(path) : fs::path(path).parent_path();
    std::optional<HfConfig> config;
    if (fs::exists(dir / "config.json")) config = HfConfig::load(dir.string());
    const std::vector<std::string> archs = config ? config->architectures() : std::vector<std::string>{};
    const std::string model_type = config ? config->model_type() : "";
    const std::string arch = !archs.empty() ? archs[0] : model_type;

    std::map<std::string, TypeTotal> by_type;
    uint64_t total = 0;
    const std::vector<std::string> names = ck.names();
    for (const auto& n : names) {
        const auto& t = ck.info(n);
        auto& tt = by_type[t.dtype_name];
        ++tt.count;
        tt.bytes += t.nbytes;
        total += t.nbytes;
    }

    if (args.flag("json")) {
        ojson j;
        j["path"] = path;
        j["format"] = "safetensors";
        j["files"] = ck.files();
        j["architecture"] = arch;
        j["architectures"] = archs;
        j["model_type"] = model_type;
        j["config"] = config ? ojson::parse(config->raw().dump()) : ojson(nullptr);
        j["metadata"] = ck.metadata();
        j["tensor_count"] = names.size();
        j["total_bytes"] = total;
        ojson types = ojson::object();
        for (const auto& [name, tt] : by_type) types[name] = {{"count", tt.count}, {"bytes", tt.bytes}};
        j["types"] = std::move(types);
        ojson tensors = ojson::array();
        for (const auto& n : names) {
            const auto& t = ck.info(n);
            tensors.push_back({{"name", n}, {"type", t.dtype_name}, {"shape", t.shape}, {"nbytes", t.nbytes},
                               {"file", fs::path(t.file).filename().string()}});
        }
        j["tensors"] = std::move(tensors);
        std::printf("%s\n", j.dump(1, ' ', false, ojson::error_handler_t::replace).c_str());
        return 0;
    }

    std::printf("path:         %s\n", path.c_str());
    std::printf("format:       Hugging Face safetensors, %zu file%s\n", ck.files().size(),
                ck.files().size() == 1 ? "" : "s");
    if (arch.empty())
        std::printf("architecture: (unknown: no config.json)\n");
    else
        std::printf("architecture: %s%s\n", arch.c_str(),
                    model_type.empty() || model_type == arch ? "" : fmt::format(" (model_type {})", model_type).c_str());
    if (config) {
        std::printf("config:       %zu keys\n", config->json().size());
        size_t width = 0;
        for (const auto& [k, v] : config->json().items()) width = std::max(width, std::min<size_t>(k.size(), 40));
        for (const auto& [k, v] : config->json().items())
            std::printf("  %-*s %s\n", int(width), k.c_str(), config_text(v).c_str());
    }
    std::printf("tensors:      %zu, %s\n", names.size(), human_bytes(total).c_str());
    print_type_totals(by_type);
    if (args.flag("tensors")) {
        size_t nw = 0;
        for (const auto& n : names) nw = std::max(nw, std::min<size_t>(n.size(), 64));
        std::printf("\n  %-*s %-8s %-24s %12s\n", int(nw), "name", "type", "shape", "size");
        for (const auto& n : names) {
            const auto& t = ck.info(n);
            std::printf("  %-*s %-8s %-24s %12s\n", int(nw), n.c_str(), t.dtype_name.c_str(), t.shape_str().c_str(),
                        human_bytes(t.nbytes).c_str());
        }
    }
    return 0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int run_inspect(const Args& args) {
    const std::string path = args.model_path(true);
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) fail(ErrorKind::NotFound, "{}: no such file or directory", path);
    if (std::filesystem::is_directory(path, ec) || ends_with(path, ".safetensors")) return inspect_hf(path, args);
    return inspect_gguf(path, args);
}

}  // namespace

TESSERA_VERB("inspect", "show a checkpoint's architecture, metadata and tensors",
             {{"model", true, "a .gguf file, or a Hugging Face checkpoint directory / .safetensors file (or the first argument)"},
              {"json", false, "print a machine-readable JSON dump"},
              {"full", false, "with --json: every array element (default: arrays over 64 are summarized)"},
              {"tensors", false, "list every tensor (name, type, shape, size)"}},
             run_inspect);

}  // namespace tessera::cli

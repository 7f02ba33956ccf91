#include "models/registry.h"

#include "core/status.h"

namespace tessera {

namespace {
// llama.cpp's dense family: Llama, Qwen2 (q/k/v bias), Qwen3 (q/k norm) share one forward.
const ModelEntry kModels[] = {
    {"llama", make_llama},
    {"qwen2", make_llama},
    {"qwen3", make_llama},
    // Gated DeltaNet hybrids: qwen35.cpp.
    {"qwen35", make_qwen35},
    {"qwen35moe", make_qwen35},
    {"qwen3next", make_qwen35},
};
}  // namespace

const ModelEntry& find_model(const std::string& arch) {
    for (const auto& m : kModels)
        if (arch == m.arch) return m;
    std::string known;
    for (const auto& m : kModels) known += (known.empty() ? "" : ", ") + std::string(m.arch);
    fail(ErrorKind::Unsupported, "architecture '{}' is not supported (known: {})", arch, known);
}

std::vector<std::string> known_architectures() {
    std::vector<std::string> v;
    for (const auto& m : kModels) v.push_back(m.arch);
    return v;
}

}  // namespace tessera

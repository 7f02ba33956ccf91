// `tessera synth` presets: real models' published sizes (config.json values) as ModelConfigs, per
// architecture, plus tessera's tiny test sizes. Each preset names where its numbers come from.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "models/model_config.h"

namespace tessera::cli {

struct SynthPreset {
    std::string name;
    std::string source;  // where the numbers come from
    ModelConfig cfg;
};

// The architectures synth writes, for help and errors.
constexpr const char* kSynthArchs = "qwen3 | llama | qwen35moe | qwen3next";

// The presets of `arch`; throws Error(Invalid) for an architecture synth does not know.
std::vector<SynthPreset> synth_presets(const std::string& arch);
// The preset's config with `layers` layers (if given); hybrid models get their layer types
// (full attention every 4th layer, or every layer-count-th layer below 4 layers).
SynthPreset synth_preset(const std::string& arch, const std::string& name, std::optional<int64_t> layers);

}  // namespace tessera::cli

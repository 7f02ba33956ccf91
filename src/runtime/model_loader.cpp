#include "runtime/model_loader.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/memlog.h"
#include "core/status.h"
#ifdef TESSERA_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device.h"
#endif
#include "formats/gguf.h"
#include "models/registry.h"
#include "runtime/gguf_source.h"
#include "runtime/hf_source.h"

namespace tessera {

bool is_gguf_path(const std::string& path) {
    return std::filesystem::is_regular_file(path) && path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
}

std::unique_ptr<TensorSource> open_tensor_source(const std::string& path, ModelConfig* config) {
    namespace fs = std::filesystem;
    if (!fs::exists(path)) fail(ErrorKind::NotFound, "{}: no such file or directory", path);
    if (fs::is_directory(path)) {
        auto src = std::make_unique<HfSource>(path);
        if (config) *config = src->config();
        return src;
    }
    if (fs::path(path).extension() == ".safetensors" || fs::path(path).filename() == "config.json")
        fail(ErrorKind::Invalid, "{}: pass the checkpoint directory (config.json + *.safetensors), not one file", path);
    auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
    if (config) *config = gguf_model_config(*file);
    return std::make_unique<GgufSource>(file);
}

std::vector<int32_t> checkpoint_eos_ids(const std::string& path) {
    std::vector<int32_t> ids;
    if (std::filesystem::is_directory(path)) {
        std::ifstream f(std::filesystem::path(path) / "generation_config.json");
        if (!f) return ids;
        const auto j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
        if (!j.is_object() || !j.contains("eos_token_id")) return ids;
        const auto& e = j["eos_token_id"];
        if (e.is_number_integer()) ids.push_back(e.get<int32_t>());
        if (e.is_array())
            for (const auto& x : e)
                if (x.is_number_integer()) ids.push_back(x.get<int32_t>());
    } else if (is_gguf_path(path)) {
        const GgufFile g = GgufFile::open(path);
        if (auto e = g.find_u32("tokenizer.ggml.eos_token_id")) ids.push_back(int32_t(*e));
    }
    return ids;
}

LoadedModel load_model(const std::string& path, const LoadOptions& opts) {
    LoadedModel m;
    m.path = path;
    m.source = open_tensor_source(path, &m.config);
    const ModelEntry& entry = find_model(m.config.arch);
    TS_CHECK(opts.device == "cpu" || opts.device == "auto" || opts.device == "cuda",
             "unknown device '{}' (cpu, cuda or auto)", opts.device);
    // TESSERA_KERNELS (or --kernels): which CUDA kernels run — fast (the default: the kernel pack
    // on repacked quantized weights) or reference. Checked in every build, so a typo is an error.
    const char* kernels = std::getenv("TESSERA_KERNELS");
    TS_CHECK(!kernels || !*kernels || std::string(kernels) == "reference" || std::string(kernels) == "fast",
             "TESSERA_KERNELS={}: expected fast (the default) or reference", kernels);
    // auto: the GPU when this build has the CUDA backend and a device is present, else the CPU.
    std::string device = opts.device;
    if (device == "auto") {
#ifdef TESSERA_HAVE_CUDA
        device = cuda::device_count() > 0 ? "cuda" : "cpu";
#else
        device = "cpu";
#endif
    }
    if (device == "cuda") {
#ifdef TESSERA_HAVE_CUDA
        m.backend = make_cuda_backend(0, parse_cuda_kernels(kernels));
#else
        fail(ErrorKind::Unsupported, "--device cuda: this build has no CUDA backend (configure with CUDA; see README)");
#endif
    } else {
        m.backend = make_cpu_backend();
    }
    m.weights = std::make_unique<WeightStore>(*m.source, m.backend.get());
    m.model = with_context(path, [&] { return entry.make(m.config, *m.weights, *m.backend, opts.max_batch_tokens); });
    // Decode steps replay CUDA graphs on a device backend unless TESSERA_CUDA_GRAPHS=0 (--no-cuda-graphs).
    const char* graphs = std::getenv("TESSERA_CUDA_GRAPHS");
    TS_CHECK(!graphs || !*graphs || std::string(graphs) == "0" || std::string(graphs) == "1",
             "TESSERA_CUDA_GRAPHS={}: expected 0 or 1", graphs);
    m.model->enable_decode_graphs(m.backend->device() != Device::CPU && opts.decode_graphs &&
                                  !(graphs && std::string(graphs) == "0"));
    TS_LOG_DEBUG("loaded {}: {}", path, m.config.describe());
    int64_t weight_bytes = 0;
    for (const auto& name : m.source->names()) weight_bytes += int64_t(m.source->get(name).nbytes());
    MemLog::global().set("weights", weight_bytes);
    MemLog::global().set("weights_owned", int64_t(m.weights->owned_bytes()));
    MemLog::global().snapshot("create");
    return m;
}

}  // namespace tessera

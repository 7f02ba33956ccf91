// `tessera synth` GGUF output: llama.cpp's metadata, tokenizer and tensors, streamed to disk.
#include <fmt/format.h>

#include "core/status.h"
#include "formats/gguf_writer.h"
#include "runtime/gguf_export.h"
#include "runtime/gguf_export_hybrid.h"
#include "synth_fill.h"
#include "synth_job.h"
#include "synth_progress.h"
#include "synth_stream.h"
#include "synth_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_export.h"

namespace tessera::cli {

DType synth_gguf_type(const SynthTensor& t, DType want) {
    if (t.store != SynthStore::Matrix) return DType::F32;
    return export_matrix_type(want, t.cols());
}

namespace {

// llama.cpp's qwen35 / qwen35moe loaders require rope.dimension_sections (Qwen3.5's MRoPE
// sections, [11, 11, 10] of 32 rotary pairs, padded to 4); text-only use reduces it to 1-D RoPE.
void add_rope_sections(GgufWriter& w, const ModelConfig& c) {
    const int32_t pairs = int32_t(c.rot_dims / 2), s = (pairs * 11 + 16) / 32;
    const std::vector<int32_t> sections = {s, s, pairs - 2 * s, 0};
    w.set(c.arch + ".rope.dimension_sections", GgufValue::array(sections));
}

void add_tokenizer(GgufWriter& w, const SynthJob& job) {
    const ModelConfig& c = job.preset.cfg;
    if (job.tok)
        add_tokenizer_to_gguf(*job.tok, w, c.vocab_size);
    else
        add_tokenizer_metadata(w, make_synth_tokenizer(c.vocab_size));
}

}  // namespace

void write_synth_gguf(const SynthJob& job) {
    const ModelConfig& c = job.preset.cfg;
    GgufWriter w;
    add_model_metadata(w, c, job.type, fmt::format("tessera-synth-{}-{}", c.arch, job.preset.name));
    if (c.arch == "qwen35moe") add_rope_sections(w, c);
    if (c.gdn_k_heads > 0) add_hybrid_metadata(w, c);
    add_tokenizer(w, job);

    const auto plan = gguf_tensor_plan(c);
    uint64_t total = 0;
    for (const auto& t : plan) total += dtype_row_bytes(synth_gguf_type(t, job.type), t.cols()) * uint64_t(t.rows());
    SynthProgress progress("synth", total);
    for (const SynthTensor& t : plan) {
        const DType type = synth_gguf_type(t, job.type);
        const uint64_t key = synth_tensor_key(job.seed, t);
        w.add_tensor(t.name, type, t.shape, [&t, type, key, &progress](const GgufWriter::Sink& sink) {
            synth_stream_rows(
                t.rows(), dtype_row_bytes(type, t.cols()),
                [&](int64_t r0, int64_t n, void* dst) { synth_rows(t, type, key, r0, n, dst); },
                [&](const void* p, size_t n) {
                    sink(p, n);
                    progress.add(n);
                });
        });
    }
    w.write(job.out);
    progress.finish(fmt::format("{} ({}, {})", job.out, c.describe(), job.type_name));
}

}  // namespace tessera::cli

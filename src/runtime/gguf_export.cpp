#include "runtime/gguf_export.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "core/status.h"
#include "formats/quants.h"
#include "runtime/gguf_export_hybrid.h"

namespace tessera {

namespace {

// llama.cpp's LLAMA_FTYPE of a file whose matrices are mostly `t`.
uint32_t llama_file_type(DType t) {
    switch (t) {
        case DType::F32: return 0;
        case DType::F16: return 1;
        case DType::Q4_0: return 2;
        case DType::Q8_0: return 7;
        case DType::Q4_K: return 15;  // Q4_K_M
        case DType::Q6_K: return 18;
        case DType::BF16: return 32;
        default: fail(ErrorKind::Unsupported, "no GGUF file type for {}", dtype_name(t));
    }
}

// llama.cpp's convert permutes Llama's q/k rows so that within each head the two rotate-half
// halves become interleaved pairs: new row h*D + 2i + j = old row h*D + j*D/2 + i.
int64_t permuted_row(int64_t r, int64_t head_dim) {
    const int64_t h = r / head_dim, w = r % head_dim, i = w / 2, j = w % 2;
    return h * head_dim + j * (head_dim / 2) + i;
}

}  // namespace

DType export_matrix_type(DType want, int64_t cols) {
    auto fits = [&](DType t) { return cols % dtype_info(t).block_elems == 0; };
    if (fits(want)) return want;
    if (want == DType::Q4_K && fits(DType::Q4_0)) return DType::Q4_0;  // row not a multiple of 256
    if (want == DType::Q6_K && fits(DType::Q8_0)) return DType::Q8_0;
    return DType::F16;
}

void add_model_metadata(GgufWriter& w, const ModelConfig& c, DType type, const std::string& name) {
    const std::string a = c.arch + ".";
    w.set("general.architecture", GgufValue::string(c.arch));
    w.set("general.name", GgufValue::string(name));
    w.set("general.file_type", GgufValue::u32(llama_file_type(type)));
    if (dtype_is_quantized(type)) w.set("general.quantization_version", GgufValue::u32(2));
    w.set(a + "vocab_size", GgufValue::u32(uint32_t(c.vocab_size)));
    w.set(a + "context_length", GgufValue::u32(uint32_t(c.max_ctx)));
    w.set(a + "embedding_length", GgufValue::u32(uint32_t(c.hidden)));
    w.set(a + "block_count", GgufValue::u32(uint32_t(c.n_layers)));
    w.set(a + "feed_forward_length", GgufValue::u32(uint32_t(c.ffn_hidden)));
    w.set(a + "attention.head_count", GgufValue::u32(uint32_t(c.n_heads)));
    w.set(a + "attention.head_count_kv", GgufValue::u32(uint32_t(c.n_kv_heads)));
    w.set(a + "attention.key_length", GgufValue::u32(uint32_t(c.head_dim)));
    w.set(a + "attention.value_length", GgufValue::u32(uint32_t(c.head_dim)));
    w.set(a + "attention.layer_norm_rms_epsilon", GgufValue::f32(c.rms_eps));
    w.set(a + "rope.freq_base", GgufValue::f32(c.rope_theta));
    w.set(a + "rope.dimension_count", GgufValue::u32(uint32_t(c.rot_dims)));
}

void export_gguf(const TensorSource& src, const ModelConfig& cfg, const std::string& out_path,
                 const ExportOptions& opts) {
    GgufWriter w;
    add_model_metadata(w, cfg, opts.type, opts.name);
    if (opts.add_tokenizer) opts.add_tokenizer(w);

    // Llama-3 style rope scaling travels as per-frequency divisors (llama.cpp's rope_freqs).
    std::vector<float> rope_factors;
    const auto base = rope_default_inv_freq(cfg.rot_dims, cfg.rope_theta);
    if (!cfg.inv_freq.empty()) {
        bool scaled = false;
        for (size_t i = 0; i < base.size(); ++i) {
            rope_factors.push_back(base[i] / cfg.inv_freq[i]);
            scaled = scaled || std::fabs(rope_factors.back() - 1.f) > 1e-6f;
        }
        if (scaled) w.add_tensor("rope_freqs.weight", DType::F32, {int64_t(rope_factors.size())}, rope_factors.data());
    }

    // Per-expert checkpoints (blk.N.ffn_gate_exps.E.weight) are written stacked, as llama.cpp wants.
    std::map<std::string, std::vector<std::string>> stacks;  // stacked name -> expert tensors in order
    std::vector<std::string> names;
    for (const std::string& name : src.names()) {
        const auto dot = name.rfind(".weight");
        const auto exps = name.find("_exps.");
        if (exps != std::string::npos && dot != std::string::npos && dot > exps + 6) {
            stacks[name.substr(0, exps + 5) + ".weight"].push_back(name);
            continue;
        }
        if (name.compare(0, 4, "mtp.") == 0) continue;  // not in llama.cpp's qwen35 tensors yet
        names.push_back(name);
    }
    for (auto& [stacked, parts] : stacks) {
        // Expert order by number, not by string ("10" after "9").
        std::sort(parts.begin(), parts.end(), [](const std::string& x, const std::string& y) {
            auto num = [](const std::string& s) { return std::stoll(s.substr(s.find("_exps.") + 6)); };
            return num(x) < num(y);
        });
        names.push_back(stacked);
    }
    const size_t total = names.size();
    size_t done = 0;
    const bool hybrid = cfg.n_recurrent_layers() > 0;
    if (hybrid) add_hybrid_metadata(w, cfg);
    for (const std::string& name : names) {
        // The source tensors this output is made of: one, or one per expert (stacked along dim 0).
        std::vector<Tensor> parts;
        if (auto it = stacks.find(name); it != stacks.end())
            for (const auto& p : it->second) parts.push_back(src.get(p));
        else
            parts.push_back(src.get(name));
        const Tensor& t = parts[0];
        const int64_t cols = t.cols(), rows = t.rows();
        std::vector<int64_t> shape(t.shape.begin(), t.shape.begin() + t.ndim);
        if (parts.size() > 1) shape.insert(shape.begin(), int64_t(parts.size()));
        const bool matrix = shape.size() >= 2 && name != "rope_freqs.weight" && name.find("ssm_conv1d") == std::string::npos;
        const DType out = matrix ? export_matrix_type(opts.type, cols) : DType::F32;
        TensorRemap remap = hybrid ? hybrid_remap(name, rows, cols, cfg) : TensorRemap{};
        const bool permute = cfg.arch == "llama" && cfg.rope_style == RopeStyle::NeoX &&
                             (name.find(".attn_q.") != std::string::npos || name.find(".attn_k.") != std::string::npos);
        if (permute) {
            TS_CHECK(rows % cfg.head_dim == 0, "tensor {}: {} rows are not whole heads of {}", name, rows, cfg.head_dim);
            for (int64_t r = 0; r < rows; ++r) remap.rows.push_back(permuted_row(r, cfg.head_dim));
        }
        w.add_tensor(name, out, shape, [&, parts, rows, cols, out, remap, name](const GgufWriter::Sink& sink) {
            const int64_t chunk = 64;
            std::vector<float> f(static_cast<size_t>(chunk * cols)), tmp(static_cast<size_t>(cols));
            std::vector<uint8_t> q(size_t(chunk) * dtype_row_bytes(out, cols));
            for (const Tensor& part : parts) {
                for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
                    const int64_t n = std::min(chunk, rows - r0);
                    for (int64_t r = 0; r < n; ++r) {
                        const int64_t from = remap.rows.empty() ? r0 + r : remap.rows[size_t(r0 + r)];
                        float* dst = f.data() + r * cols;
                        dequantize_row(part.dtype, part.row_ptr(from), remap.cols.empty() ? dst : tmp.data(), cols);
                        for (size_t c = 0; c < remap.cols.size(); ++c) dst[c] = tmp[size_t(remap.cols[c])];
                    }
                    quantize_tensor(out, f.data(), q.data(), n, cols);
                    sink(q.data(), size_t(n) * dtype_row_bytes(out, cols));
                }
            }
            if (opts.progress) opts.progress(name, ++done, total);
        });
    }
    w.write(out_path);
}

}  // namespace tessera

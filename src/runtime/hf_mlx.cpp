// MLX affine-quantized checkpoints (mlx-community): a module's `weight` is u32-packed codes
// [.., out, in·bits/32] (element e at bits bits·(e % (32/bits)) of word e / (32/bits)), with
// `scales` and `biases` [.., out, in/group]; w = scale·q + bias. config.json's "quantization"
// gives group_size and bits, with per-module overrides (router gates often 8-bit).
// For now the weights are expanded to f32 at load (exact; 8x the 4-bit size in memory) — a
// native affine-int4 kernel comes with the kernel pack.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/status.h"
#include "formats/hf_config.h"
#include "formats/quants.h"
#include "runtime/hf_source.h"

namespace tessera {

void HfSource::dequantize_mlx(const HfConfig& hc) {
    const nlohmann::json& q = hc.raw()["quantization"];
    TS_CHECK(q.is_object(), "{}: config.json quantization is not an object", dir_);
    const int64_t def_group = q.value("group_size", int64_t(64)), def_bits = q.value("bits", int64_t(4));
    TS_CHECK(q.value("mode", std::string("affine")) == "affine", "{}: MLX quantization mode '{}' is not supported",
             dir_, q.value("mode", std::string()));
    size_t expanded = 0;
    for (auto& [gguf_name, file_name] : std::map<std::string, std::string>(map_)) {
        const std::string suffix = ".weight";
        if (file_name.size() <= suffix.size() || file_name.compare(file_name.size() - suffix.size(), suffix.size(), suffix))
            continue;
        const std::string module = file_name.substr(0, file_name.size() - suffix.size());
        if (!ckpt_.has(module + ".scales")) continue;
        int64_t group = def_group, bits = def_bits;
        if (q.contains(module) && q[module].is_object()) {
            group = q[module].value("group_size", group);
            bits = q[module].value("bits", bits);
        }
        TS_CHECK(bits == 2 || bits == 4 || bits == 8, "{}: {}: {}-bit MLX weights are not supported", dir_, module, bits);
        const Tensor w = ckpt_.tensor(file_name), s = ckpt_.tensor(module + ".scales"),
                     b = ckpt_.tensor(module + ".biases");
        TS_CHECK(w.dtype == DType::U32, "{}: {}: quantized weight must be u32, got {}", dir_, file_name,
                 dtype_name(w.dtype));
        const int64_t per_word = 32 / bits, in = w.cols() * per_word, rows = w.rows();
        TS_CHECK(group > 0 && in % group == 0 && s.cols() == in / group && b.cols() == s.cols() && s.rows() == rows &&
                     b.rows() == rows,
                 "{}: {}: weight {} with scales {} / biases {} do not fit {}-bit groups of {}", dir_, module,
                 w.shape_str(), s.shape_str(), b.shape_str(), bits, group);
        std::vector<int64_t> shape(w.shape.begin(), w.shape.begin() + w.ndim);
        shape.back() = in;
        const std::string name = gguf_name;
        Tensor out = derive(name, DType::F32, shape);
        std::vector<float> sc(size_t(s.cols())), bi(size_t(b.cols()));
        const uint32_t mask = (1u << bits) - 1;
        for (int64_t r = 0; r < rows; ++r) {
            dequantize_row(s.dtype, s.row_ptr(r), sc.data(), s.cols());
            dequantize_row(b.dtype, b.row_ptr(r), bi.data(), b.cols());
            const auto* words = static_cast<const uint32_t*>(w.row_ptr(r));
            float* dst = out.ptr<float>() + r * in;
            for (int64_t e = 0; e < in; ++e) {
                const uint32_t code = (words[e / per_word] >> (bits * (e % per_word))) & mask;
                dst[e] = sc[size_t(e / group)] * float(code) + bi[size_t(e / group)];
            }
        }
        expanded += out.nbytes();
    }
    TS_LOG_INFO("{}: MLX quantized weights expanded to f32 at load ({:.1f} MiB)", dir_, double(expanded) / (1 << 20));
}

}  // namespace tessera

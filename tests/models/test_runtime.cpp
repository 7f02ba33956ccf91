// Runtime pieces without a model: the paged KV pool, batch planning, HF -> GGUF names, rope
// frequency scaling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/half.h"
#include "core/status.h"
#include "formats/hf_config.h"
#include "models/model.h"
#include "models/model_config.h"
#include "runtime/hf_names.h"
#include "runtime/hf_source.h"
#include "runtime/kv_cache.h"
#include "kernels/backend.h"
#include "models/layers/moe.h"
#include "models/layers/stacked_linear.h"
#include "runtime/weight_store.h"

using namespace tessera;

namespace {
KvCacheShape small_shape(int64_t blocks) {
    KvCacheShape s;
    s.n_layers = 2;
    s.n_blocks = blocks;
    s.block_size = 4;
    s.n_kv_heads = 2;
    s.head_dim = 8;
    return s;
}
}  // namespace

TEST(KvCache, AllocatesReleasesAndRefusesBeyondThePool) {
    KvCache c(small_shape(5));
    EXPECT_EQ(c.shape().bytes(), size_t(2 * 2 * 5 * 4 * 2 * 8 * 4));
    SeqBlocks s;
    s.reserve(c, 9);  // 9 tokens of 4 per block -> 3 blocks
    EXPECT_EQ(s.blocks.size(), 3u);
    EXPECT_EQ(c.free_blocks(), 2);
    s.n_tokens = 9;
    s.reserve(c, 3);  // 12 tokens still fit in 3 blocks
    EXPECT_EQ(s.blocks.size(), 3u);
    SeqBlocks t;
    EXPECT_THROW(t.reserve(c, 13), Error);  // 4 blocks needed, 2 free
    EXPECT_EQ(c.free_blocks(), 2) << "a failed reservation takes nothing";
    s.release(c);
    EXPECT_EQ(c.free_blocks(), 5);
    // Layers and K/V are distinct regions of the pool.
    EXPECT_NE(c.k(0).data, c.k(1).data);
    EXPECT_NE(c.k(1).data, c.v(0).data);
    EXPECT_EQ(static_cast<char*>(c.v(1).data) + c.v(1).nbytes(),
              static_cast<char*>(c.k(0).data) + c.shape().bytes());
}

TEST(BatchBuilder, PlansPositionsSlotsAndTables) {
    KvCache c(small_shape(8));
    SeqBlocks a, b;
    a.reserve(c, 6);
    a.n_tokens = 5;  // 5 tokens already cached, one more to add
    b.reserve(c, 3);
    BatchBuilder bb{4};
    const int32_t ta[] = {7};
    const int32_t tb[] = {1, 2, 3};
    bb.add(a, ta, 1, 1);
    bb.add(b, tb, 3, 2);
    const Batch batch = bb.finish();
    EXPECT_EQ(batch.tokens, (std::vector<int32_t>{7, 1, 2, 3}));
    EXPECT_EQ(batch.positions, (std::vector<int32_t>{5, 0, 1, 2}));
    EXPECT_EQ(batch.q_start, (std::vector<int32_t>{0, 1, 4}));
    EXPECT_EQ(batch.kv_len, (std::vector<int32_t>{6, 3}));
    EXPECT_EQ(batch.logit_rows, (std::vector<int32_t>{0, 1, 2, 3}));
    EXPECT_EQ(batch.max_blocks, 2);
    // a's position 5 lives in its second block, row 1.
    EXPECT_EQ(batch.slots[0], a.blocks[1] * 4 + 1);
    EXPECT_EQ(batch.slots[3], b.blocks[0] * 4 + 2);
    EXPECT_EQ(batch.block_table[0], a.blocks[0]);
    EXPECT_EQ(batch.block_table[1], a.blocks[1]);
    EXPECT_EQ(batch.block_table[2], b.blocks[0]);
    EXPECT_EQ(a.n_tokens, 6);
    EXPECT_EQ(b.n_tokens, 3);
}

TEST(HfNames, MapsDenseNamesAndRejectsOthers) {
    EXPECT_EQ(hf_to_gguf_name("model.embed_tokens.weight", "qwen3"), "token_embd.weight");
    EXPECT_EQ(hf_to_gguf_name("lm_head.weight", "qwen3"), "output.weight");
    EXPECT_EQ(hf_to_gguf_name("model.norm.weight", "qwen3"), "output_norm.weight");
    EXPECT_EQ(hf_to_gguf_name("model.layers.12.self_attn.k_norm.weight", "qwen3"), "blk.12.attn_k_norm.weight");
    EXPECT_EQ(hf_to_gguf_name("model.layers.0.post_attention_layernorm.weight", "qwen3"), "blk.0.ffn_norm.weight");
    EXPECT_EQ(hf_to_gguf_name("model.layers.3.self_attn.v_proj.bias", "qwen3"), "blk.3.attn_v.bias");
    EXPECT_FALSE(hf_to_gguf_name("model.layers.x.self_attn.q_proj.weight", "qwen3"));
    EXPECT_FALSE(hf_to_gguf_name("model.layers.1.self_attn.rotary_emb.inv_freq", "qwen3"));
    EXPECT_FALSE(hf_to_gguf_name("model.layers..mlp.up_proj.weight", "qwen3"));
    // Hybrids: their own names, post-attention norm, per-expert tensors.
    EXPECT_EQ(hf_to_gguf_name("model.layers.0.linear_attn.in_proj_qkv.weight", "qwen35"), "blk.0.attn_qkv.weight");
    EXPECT_EQ(hf_to_gguf_name("model.layers.2.post_attention_layernorm.weight", "qwen35moe"),
              "blk.2.post_attention_norm.weight");
    EXPECT_EQ(hf_to_gguf_name("model.layers.1.mlp.experts.17.down_proj.weight", "qwen3next"),
              "blk.1.ffn_down_exps.17.weight");
    EXPECT_EQ(hf_to_gguf_name("model.layers.1.mlp.experts.gate_up_proj", "qwen35moe"), "blk.1.ffn_gate_up_exps.weight");
    EXPECT_FALSE(hf_to_gguf_name("model.layers.1.mlp.experts.x.down_proj.weight", "qwen35moe"));
    EXPECT_FALSE(hf_to_gguf_name("model.layers.1.linear_attn.in_proj_qkv.weight", "qwen3"));
}

TEST(Rope, Llama3ScalingBands) {
    // theta 500000, 128 dims, factor 8, low 1, high 4, original context 8192 (Llama 3.1):
    // wavelengths above 8192 are divided by 8, below 2048 kept, in between interpolated.
    auto f = rope_default_inv_freq(128, 500000.f);
    const auto base = f;
    rope_apply_llama3(f, 8.f, 1.f, 4.f, 8192);
    for (size_t i = 0; i < f.size(); ++i) {
        const double wl = 2 * M_PI / base[i];
        if (wl < 2048) {
            EXPECT_FLOAT_EQ(f[i], base[i]);
        }
        if (wl > 8192) {
            EXPECT_FLOAT_EQ(f[i], base[i] / 8);
        }
        if (wl >= 2048 && wl <= 8192) {
            const double smooth = (8192 / wl - 1) / 3;
            EXPECT_NEAR(f[i], (1 - smooth) * base[i] / 8 + smooth * base[i], 1e-6 * base[i]);
            EXPECT_LE(f[i], base[i]);
            EXPECT_GE(f[i], base[i] / 8);
        }
    }
    EXPECT_FLOAT_EQ(base[0], 1.f);
    EXPECT_NEAR(base[1], std::pow(500000.0, -2.0 / 128), 1e-7);
}

// A checkpoint's sizes are bounded before anything is sized from them (fuzz_model_config: a GGUF
// claiming a hidden size of 1.8 billion had the reader allocate its rope table, 1.8 GB).
TEST(ModelConfigCheck, SizesNoModelHasAreErrors) {
    auto error_of = [](nlohmann::json j) -> std::string {
        try {
            hf_model_config(HfConfig::from_json(j, "bad.json"));
        } catch (const Error& e) {
            return e.what();
        }
        return "<no error>";
    };
    const nlohmann::json ok = {{"model_type", "qwen3"},   {"architectures", {"Qwen3ForCausalLM"}},
                               {"vocab_size", 64},        {"hidden_size", 32},
                               {"num_hidden_layers", 2},  {"num_attention_heads", 4},
                               {"num_key_value_heads", 2}, {"head_dim", 8},
                               {"intermediate_size", 64}, {"max_position_embeddings", 128}};
    EXPECT_EQ(error_of(ok), "<no error>");
    auto with = [&](const char* key, nlohmann::json v) {
        nlohmann::json j = ok;
        j[key] = std::move(v);
        return error_of(j);
    };
    EXPECT_NE(with("hidden_size", int64_t{1778384904}).find("hidden size = 1778384904 is outside"), std::string::npos);
    EXPECT_NE(with("num_hidden_layers", int64_t{1} << 40).find("layers"), std::string::npos);
    EXPECT_NE(with("head_dim", 100000).find("head dim"), std::string::npos);
    EXPECT_NE(with("vocab_size", int64_t{1} << 30).find("vocabulary size"), std::string::npos);
    EXPECT_NE(with("intermediate_size", int64_t{1} << 30).find("feed-forward size"), std::string::npos);
    EXPECT_NE(with("max_position_embeddings", -1).find("context length"), std::string::npos);
    EXPECT_NE(with("partial_rotary_factor", 1e300).find("partial_rotary_factor"), std::string::npos);

    // A hybrid's Gated DeltaNet and MoE sizes (the fixture's config, one field changed at a time).
    std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/qwen35moe_tiny/config.json");
    const nlohmann::json moe = nlohmann::json::parse(in);
    EXPECT_EQ(error_of(moe), "<no error>");
    auto text_with = [&](const char* key, nlohmann::json v) {
        nlohmann::json j = moe;
        j["text_config"][key] = std::move(v);
        return error_of(j);
    };
    EXPECT_NE(text_with("linear_num_key_heads", 0).find("linear attention sizes invalid"), std::string::npos);
    EXPECT_NE(text_with("linear_conv_kernel_dim", 0).find("linear attention sizes invalid"), std::string::npos);
    EXPECT_NE(text_with("num_experts_per_tok", 0).find("MoE sizes invalid"), std::string::npos);
    EXPECT_NE(text_with("num_experts_per_tok", 1000).find("experts a token"), std::string::npos);
}

TEST(HfSource, HybridCheckpointInLlamaCppConventions) {
    // qwen35moe_tiny is saved like the released multimodal checkpoints: model.language_model.*,
    // a vision tower, nested text_config, fused experts and one MTP layer.
    HfSource src(std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/qwen35moe_tiny");
    const ModelConfig& c = src.config();
    EXPECT_EQ(c.arch, "qwen35moe");
    EXPECT_EQ(c.mtp_layers, 1);
    EXPECT_EQ(c.n_attention_layers(), 2);
    EXPECT_TRUE(c.is_attention_layer(3) && c.is_attention_layer(7) && !c.is_attention_layer(0));
    EXPECT_TRUE(src.has("mtp.fc.weight")) << "MTP weights are kept for speculative decoding";
    EXPECT_TRUE(src.has("blk.0.ssm_a"));
    EXPECT_FALSE(src.has("blk.0.ssm_a_log"));
    for (const auto& n : src.names()) EXPECT_EQ(n.find("visual"), std::string::npos) << n;
    // ssm_a = -exp(A_log) < 0; the zero-centred norm weights carry their +1 (near 1, not 0).
    const Tensor a = src.get("blk.0.ssm_a");
    for (int64_t i = 0; i < a.numel(); ++i) EXPECT_LT(a.ptr<float>()[i], 0.f);
    const Tensor n = src.get("blk.0.attn_norm.weight");
    double mean = 0;
    for (int64_t i = 0; i < n.numel(); ++i) mean += n.ptr<float>()[i] / double(n.numel());
    EXPECT_NEAR(mean, 1.0, 0.3);
    check_shape(src.get("blk.0.ssm_conv1d.weight"), {2 * c.gdn_k_heads * c.gdn_dk + c.gdn_v_heads * c.gdn_dv, 4},
                "conv");
}

namespace {
// Named host tensors (what a checkpoint would map), for WeightStore without a file.
class MapSource final : public TensorSource {
public:
    void add(const std::string& name, DType dtype, int64_t rows, int64_t cols, uint8_t first) {
        auto& b = bytes_[name];
        b.resize(size_t(rows) * dtype_row_bytes(dtype, cols));
        for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(first + i);
        tensors_[name] = Tensor(b.data(), dtype, {rows, cols});
    }
    bool has(const std::string& name) const override { return tensors_.count(name) > 0; }
    Tensor get(const std::string& name) const override {
        TS_CHECK(has(name), "map: no tensor {}", name);
        return tensors_.at(name);
    }
    std::vector<std::string> names() const override { return {}; }
    std::string describe() const override { return "map"; }
    const std::vector<uint8_t>& bytes(const std::string& name) const { return bytes_.at(name); }
    // f32 or f16 values v(r, c).
    template <typename F>
    void add_values(const std::string& name, DType dtype, int64_t rows, int64_t cols, F v) {
        add(name, dtype, rows, cols, 0);
        auto& b = bytes_[name];
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) {
                const float f = v(r, c);
                if (dtype == DType::F32) std::memcpy(b.data() + size_t(r * cols + c) * 4, &f, 4);
                else {
                    const uint16_t h = f32_to_f16(f);
                    std::memcpy(b.data() + size_t(r * cols + c) * 2, &h, 2);
                }
            }
    }

private:
    std::map<std::string, std::vector<uint8_t>> bytes_;
    std::map<std::string, Tensor> tensors_;
};
}  // namespace

// stack_rows: the pieces' rows byte for byte in order (whole tensors and picked rows, a quantized
// dtype's blocks intact); empty when dtypes differ; shape and row errors name the tensor.
TEST(WeightStore, StackRowsFusesProjections) {
    MapSource src;
    const int64_t K = 64;  // two q8_0 blocks a row: 68 bytes
    src.add("a", DType::Q8_0, 3, K, 0);
    src.add("b", DType::Q8_0, 4, K, 100);
    src.add("c", DType::F16, 2, K, 7);
    WeightStore w(src);
    const size_t rb = dtype_row_bytes(DType::Q8_0, K);
    const Tensor t = w.stack_rows({{"a", 3, {}}, {"b", 2, {3, 0}}}, K);
    ASSERT_EQ(t.dtype, DType::Q8_0);
    ASSERT_EQ(t.rows(), 5);
    ASSERT_EQ(t.cols(), K);
    auto row = [&](const std::string& n, int64_t r) { return src.bytes(n).data() + size_t(r) * rb; };
    const uint8_t* want[5] = {row("a", 0), row("a", 1), row("a", 2), row("b", 3), row("b", 0)};
    for (int64_t r = 0; r < 5; ++r)
        EXPECT_EQ(std::memcmp(t.row_ptr(r), want[r], rb), 0) << "row " << r;
    EXPECT_TRUE(w.stack_rows({{"a", 3, {}}, {"c", 2, {}}}, K).empty());  // q8_0 next to f16: apart
    EXPECT_THROW(w.stack_rows({{"a", 2, {}}}, K), Error);                // a is [3, K]
    EXPECT_THROW(w.stack_rows({{"b", 1, {4}}}, K), Error);               // row 4 of 4
    EXPECT_THROW(w.stack_rows({{"b", 2, {1}}}, K), Error);               // 1 row picked, 2 wanted
    EXPECT_THROW(w.stack_rows({{"a", 3, {}}}, 32), Error);               // columns
    EXPECT_THROW(w.stack_rows({{"zz", 1, {}}}, K), Error);               // no such tensor
}

// MoeBlock: the shared expert runs as expert E (router | shared gate stacked, one more slot a
// token) where its shape and dtypes match the routed experts', apart otherwise (a gate of another
// dtype, another width) — y = Σ_j w_j · expert_j(x) + σ(x·g_s) · shared(x) every way, against
// the formula evaluated here in double.
TEST(MoeBlock, SharedExpertAsExpertOrApartGivesTheFormula) {
    const int64_t H = 8, E = 5, I = 6, T = 3;
    const int k = 2;
    auto val = [](int seed) {
        return [seed](int64_t r, int64_t c) { return 0.5f * std::sin(0.7f * float(r) + 1.3f * float(c) + float(seed)); };
    };
    auto silu = [](double v) { return v / (1.0 + std::exp(-v)); };
    struct Case {
        const char* name;
        DType gate_dtype;
        int64_t S;
        bool fused;
    };
    for (const Case cs : {Case{"fused", DType::F32, I, true}, Case{"gate in f16", DType::F16, I, false},
                          Case{"wider shared expert", DType::F32, 10, false}}) {
        SCOPED_TRACE(cs.name);
        const int64_t S = cs.S;
        MapSource src;
        src.add_values("blk.0.ffn_gate_inp.weight", DType::F32, E, H, val(1));
        for (int64_t e = 0; e < E; ++e) {
            src.add_values("blk.0.ffn_gate_exps." + std::to_string(e) + ".weight", DType::F32, I, H, val(10 + int(e)));
            src.add_values("blk.0.ffn_up_exps." + std::to_string(e) + ".weight", DType::F32, I, H, val(20 + int(e)));
            src.add_values("blk.0.ffn_down_exps." + std::to_string(e) + ".weight", DType::F32, H, I, val(30 + int(e)));
        }
        src.add_values("blk.0.ffn_gate_shexp.weight", DType::F32, S, H, val(40));
        src.add_values("blk.0.ffn_up_shexp.weight", DType::F32, S, H, val(41));
        src.add_values("blk.0.ffn_down_shexp.weight", DType::F32, H, S, val(42));
        // exact in f16: multiples of 1/64 in (-1, 1)
        auto g_s = [](int64_t, int64_t c) { return float(int(c * 13 % 17) - 8) / 64.f; };
        src.add_values("blk.0.ffn_gate_inp_shexp.weight", cs.gate_dtype, 1, H, g_s);
        ModelConfig c;
        c.hidden = H;
        c.n_experts = E;
        c.n_experts_used = k;
        c.expert_ffn = I;
        c.shared_expert_ffn = S;
        c.norm_topk = true;
        auto be = make_cpu_backend();
        WeightStore w(src, be.get());
        const MoeBlock m = MoeBlock::load(w, c, 0);
        EXPECT_EQ(m.shared_is_expert, cs.fused);
        EXPECT_EQ(m.experts.n_experts(), cs.fused ? E + 1 : E);
        EXPECT_EQ(m.shared.empty(), cs.fused);

        std::vector<float> x(size_t(T * H)), y(size_t(T * H), NAN);
        for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.37f * float(i));
        Arena arena("moe test", 1 << 20);
        m.forward(*be, arena, c, Tensor(x.data(), DType::F32, {T, H}), Tensor(y.data(), DType::F32, {T, H}));

        for (int64_t t = 0; t < T; ++t) {
            const float* xt = &x[size_t(t * H)];
            auto dot = [&](auto f, int64_t r, int64_t n, const float* v) {
                double s = 0;
                for (int64_t i = 0; i < n; ++i) s += double(f(r, i)) * v[i];
                return s;
            };
            // the expert's output: down(silu(gate x) ⊙ up x)
            auto ffn = [&](auto fg, auto fu, auto fd, int64_t F, std::vector<double>& out) {
                std::vector<float> a(static_cast<size_t>(F));
                for (int64_t i = 0; i < F; ++i) a[size_t(i)] = float(silu(dot(fg, i, H, xt)) * dot(fu, i, H, xt));
                out.assign(size_t(H), 0.0);
                for (int64_t h = 0; h < H; ++h) out[size_t(h)] = dot(fd, h, F, a.data());
            };
            std::vector<double> p(static_cast<size_t>(E));
            double mx = -1e30, sum = 0;
            for (int64_t e = 0; e < E; ++e) mx = std::max(mx, p[size_t(e)] = dot(val(1), e, H, xt));
            for (auto& v : p) sum += v = std::exp(v - mx);
            std::vector<int64_t> order(static_cast<size_t>(E));
            for (int64_t e = 0; e < E; ++e) order[size_t(e)] = e;
            std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[size_t(a)] > p[size_t(b)]; });
            const double top = p[size_t(order[0])] + p[size_t(order[1])];
            std::vector<double> want(size_t(H), 0.0), o;
            for (int j = 0; j < k; ++j) {
                const int e = int(order[size_t(j)]);
                ffn(val(10 + e), val(20 + e), val(30 + e), I, o);
                for (int64_t h = 0; h < H; ++h) want[size_t(h)] += p[size_t(e)] / top * o[size_t(h)];
            }
            ffn(val(40), val(41), val(42), S, o);
            const double gate = 1.0 / (1.0 + std::exp(-dot(g_s, 0, H, xt)));
            for (int64_t h = 0; h < H; ++h) {
                want[size_t(h)] += gate * o[size_t(h)];
                EXPECT_NEAR(y[size_t(t * H + h)], want[size_t(h)], 1e-5 + 1e-5 * std::fabs(want[size_t(h)]))
                    << "t " << t << " h " << h;
            }
        }
    }
}

// StackedLinear: one matmul over the stacked rows where the dtypes agree, one per piece into its
// column band otherwise — the same y either way (and the same as the separate matmuls), written
// through a strided y without touching the columns around it.
TEST(StackedLinear, StackedOrApartGiveTheSeparateProducts) {
    const int64_t K = 8, T = 3;
    auto wa = [](int64_t r, int64_t c) { return 0.25f * float((r * 3 + c) % 7) - 0.5f; };
    auto wb = [](int64_t r, int64_t c) { return 0.125f * float((r + 2 * c) % 5) - 0.25f; };
    MapSource src;
    src.add_values("a", DType::F32, 3, K, wa);
    src.add_values("b32", DType::F32, 2, K, wb);
    src.add_values("b16", DType::F16, 2, K, wb);  // exact in f16
    WeightStore w(src);
    auto be = make_cpu_backend();
    std::vector<float> x(size_t(T * K));
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 5) - 2);
    const Tensor xt(x.data(), DType::F32, {T, K});
    for (const char* b : {"b32", "b16"}) {
        SCOPED_TRACE(b);
        const StackedLinear s = StackedLinear::load(w, {{"a", 3, {}}, {b, 2, {1, 0}}}, K);
        EXPECT_EQ(s.rows, 5);
        EXPECT_EQ(s.stacked.empty(), std::string(b) == "b16");
        const int64_t ld = 9;  // y: columns 2..6 of a [T, 9] buffer
        std::vector<float> y(size_t(T * ld), -7.f);
        Tensor yt(y.data() + 2, DType::F32, {T, 5});
        yt.stride[0] = ld * 4;
        s.apply(*be, yt, xt);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t j = 0; j < ld; ++j) {
                float want = -7.f;
                if (j >= 2 && j < 7) {
                    const int64_t n = j - 2;
                    want = 0;
                    for (int64_t c = 0; c < K; ++c)
                        want += x[size_t(t * K + c)] * (n < 3 ? wa(n, c) : wb(n == 3 ? 1 : 0, c));
                }
                EXPECT_FLOAT_EQ(y[size_t(t * ld + j)], want) << t << ", " << j;
            }
    }
}

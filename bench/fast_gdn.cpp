// bench_fast_gdn: the fast Gated DeltaNet kernels (kernels/cuda/fast_gdn.h) at the flagship's shape
// (16 key / 32 value heads × 128, conv K 4) on device buffers: the recurrence alone at 1 token
// (batch 1, 8, 64; hot = one state slot every call, as llama.cpp's test-backend-ops measures it;
// cold = slots in turn, 64+ MiB of state, as 30 GDN layers read theirs), the fused decode step
// at batch 1/8/64, and the chunked WY prefill (and the recurrent form, for scale) of one sequence
// of 1024 / 4096 tokens. CUDA events on one stream, median of --runs after --warmup calls; state
// bytes moved (read + write) next to the 4.3 TB/s copy bandwidth; llama.cpp's 2.54 / 639 µs.
// --reps N times N back-to-back calls per sample (µs per call printed), --graph N of them captured
// in one CUDA graph (launch gaps and host time hidden, as in the engine's decode graphs). Every
// decode-step kernel (gdn_decode_variant's choice marked *); prefills of 1024 / 4096 / 16384 tokens
// and batches of 4 × 1024, 8 × 512, 16 × 256, every chunked variant (split: wy_carry + wy_out;
// f16x3: wy_prep16 + wy_state16 on f16 tiles); the prefill's conv1d + SiLU (and q / k norms) at
// 2,048 and 8,192 tokens, reference and fast.
//   bench_fast_gdn [--runs 50] [--warmup 10] [--reps 1] [--graph] [--filter TEXT]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "cuda_timer.h"
#include "kernel_args.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_gdn.h"
#include "kernels/cuda/fast_matmul.h"
#include "kernels/cuda/ref_gdn.h"
#include "kernels/cuda/ref_norm.h"
#include "kernels/cuda/stream.h"

using namespace tessera;
using namespace tessera::cuda;

namespace {

constexpr int64_t nk = 16, nv = 32, dk = 128, dv = 128, Kc = 4, C = 2 * nk * dk + nv * dv, HV = nv * dv;
constexpr double kCopyBw = 4.3e12;
constexpr double kStateBytes = double(nv * dk * dv) * 4;  // one sequence's recurrent state (2 MiB)
constexpr double kTf32Peak = 495e12;  // H200 dense TF32 tensor FLOP/s
// The chunked form's matrix products per 64-token chunk and value head (K·Kᵀ, Q·Kᵀ, W, U, P·Vn:
// 64 × 64 × d; W·S, Q·S, Kᵀ·Vn: 64 × dk × dv), 2 FLOP a multiply-add; 3×TF32 issues each thrice.
constexpr double kChunkFlops = 2.0 * (4 * 64 * 64 * dk + 64 * 64 * dv + 3 * 64 * dk * dv);

struct Args {
    int runs = 50, warmup = 10, reps = 1;
    bool graph = false, stamps = false;
    std::string filter;
    std::vector<int64_t> lens = {1024, 2048, 4096, 16384};  // one sequence's chunked prefills (--lens)
};

using Timer = bench::CudaTimer;

DeviceBuffer random_buffer(size_t n, float lo, float hi, uint64_t seed) {
    std::vector<float> h(n);
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (auto& x : h) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x = lo + (hi - lo) * float(s >> 40) / float(1 << 24);
    }
    DeviceBuffer b(n * sizeof(float));
    b.upload(h.data(), b.size());
    return b;
}
DeviceBuffer ints(const std::vector<int32_t>& v) {
    DeviceBuffer b(v.size() * sizeof(int32_t));
    b.upload(v.data(), b.size());
    return b;
}

// q, k rows l2-normed (q scaled) as the delta rule expects them: [T, C] = q | k | v.
DeviceBuffer qkv_buffer(int64_t T, uint64_t seed) {
    std::vector<float> h(size_t(T * C));
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;
    for (auto& x : h) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x = -1.f + 2.f * float(s >> 40) / float(1 << 24);
    }
    for (int64_t t = 0; t < T; ++t)
        for (int64_t hh = 0; hh < 2 * nk; ++hh) {
            float* x = h.data() + t * C + hh * dk;
            double ss = 0;
            for (int64_t i = 0; i < dk; ++i) ss += double(x[i]) * x[i];
            const float f = float(1.0 / std::sqrt(ss) / (hh < nk ? std::sqrt(double(dk)) : 1.0));
            for (int64_t i = 0; i < dk; ++i) x[i] *= f;
        }
    DeviceBuffer b(h.size() * sizeof(float));
    b.upload(h.data(), b.size());
    return b;
}

void row(const std::string& what, int64_t B, int64_t T, double sec, double bytes, const std::string& note) {
    std::printf("| %-34s | %3lld | %5lld | %9.2f | %6.2f | %5.1f%% | %s\n", what.c_str(), (long long)B, (long long)T,
                sec * 1e6, bytes > 0 ? bytes / sec / 1e12 : 0.0, bytes > 0 ? 100.0 * bytes / sec / kCopyBw : 0.0,
                note.c_str());
    std::fflush(stdout);
}

// Median seconds per call of call(i) (i: the call's index), --reps calls per sample, in a CUDA
// graph with --graph.
template <typename F>
double time_calls(const Args& a, Timer& timer, F&& call) {
    return timer.per_call(a.warmup, a.runs, a.reps, a.graph, call);
}

// The delta rule over B sequences of T tokens each, in `mode`; `slots` state slots used in turn.
void bench_rule(const Args& a, Stream& stream, Timer& timer, GdnMode mode, int64_t B, int64_t T, int slots,
                const std::string& note, fast::GdnChunkVariant variant = fast::GdnChunkVariant::Auto) {
    const std::string what =
        std::string("delta rule ") +
        (mode == GdnMode::Chunked ? std::string("chunked w") + std::to_string(fast::gdn_chunk_state_warps(variant)) +
                                        (fast::gdn_chunk_split(variant) ? " split" : "") +
                                        (fast::gdn_chunk_vec_loads(variant) ? " vec16" : "") +
                                        (variant == fast::GdnChunkVariant::F16x3 ? " f16x3" : "") +
                                        (variant == fast::GdnChunkVariant::F16x3Wg ? " f16x3 wgmma" : "") +
                                        (variant == fast::GdnChunkVariant::F16x3Rt ? " f16x3 rt" : "") +
                                        (variant == fast::GdnChunkVariant::F16x3Rt2 ? " f16x3 rt2" : "") +
                                        (variant == fast::GdnChunkVariant::F16Rt ? " f16 rt" : "") +
                                        (variant == fast::GdnChunkVariant::F16RtSeq ? " f16 rt seq" : "") +
                                        (variant == fast::GdnChunkVariant::F16RtLean ? " f16 rt lean" : "") +
                                        (variant == fast::GdnChunkVariant::F16RtLean1 ? " f16 rt lean1" : "") +
                                        (variant == fast::GdnChunkVariant::F16RtLean2 ? " f16 rt lean2" : "") +
                                        (variant == fast::GdnChunkVariant::F16RtSched ? " f16 rt sched" : "") +
                                        (variant == fast::GdnChunkVariant::F16RtSched16 ? " f16 rt sched16" : "") +
                                        (variant == fast::GdnChunkVariant::F16RtSolo1 ? " f16 rt solo1" : "") +
                                        (variant == fast::GdnChunkVariant::F16RtSolo2 ? " f16 rt solo2" : "") +
                                        (variant == fast::GdnChunkVariant::F16RtStay ? " f16 rt stay" : "") +
                                        (variant == fast::GdnChunkVariant::F16RtU16 ? " f16 rt u16" : "") +
                                        (variant == fast::GdnChunkVariant::Auto ? "*" : "")
                                  : std::string("recurrent")) +
        (slots > 1 ? " cold" : " hot");
    if (!a.filter.empty() && (what + " T=" + std::to_string(T)).find(a.filter) == std::string::npos) return;
    const int64_t N = B * T;
    DeviceBuffer qkv = qkv_buffer(N, 1), g = random_buffer(size_t(N * nv), -2.f, -0.01f, 2),
                 beta = random_buffer(size_t(N * nv), 0.f, 1.f, 3),
                 state = random_buffer(size_t(slots * B) * size_t(nv * dk * dv), -0.5f, 0.5f, 4);
    DeviceBuffer o(size_t(N * HV) * sizeof(float));
    GdnParams p;
    p.n_k_heads = int(nk);
    p.n_v_heads = int(nv);
    p.mode = mode;
    DeviceBuffer scratch(
        size_t(std::max<int64_t>(1, fast::gated_delta_rule_scratch_floats(N, nv, dk, dv, p, variant))) * 4);
    std::vector<int32_t> q_start(size_t(B) + 1);
    for (int64_t s = 0; s <= B; ++s) q_start[size_t(s)] = int32_t(s * T);
    const DeviceBuffer qs = ints(q_start);
    std::vector<DeviceBuffer> slot_bufs;
    for (int i = 0; i < slots; ++i) {
        std::vector<int32_t> sl(static_cast<size_t>(B));
        for (int64_t s = 0; s < B; ++s) sl[size_t(s)] = int32_t(i * B + s);
        slot_bufs.push_back(ints(sl));
    }
    const float* base = qkv.as<float>();
    const fast::HeadsIn q{base, C, dk}, k{base + nk * dk, C, dk}, v{base + 2 * nk * dk, C, dv};
    auto run = [&](DeviceBuffer& out, DeviceBuffer& st, int call, fast::GdnChunkVariant var) {
        const SeqPlan plan{int(B), qs.as<int32_t>(), slot_bufs[size_t(call % slots)].as<int32_t>()};
        fast::gated_delta_rule(out.as<float>(), HV, dv, q, k, v, g.as<float>(), nv, beta.as<float>(), nv, N, dk, dv,
                               st.as<float>(), nv * dk * dv, slots * B, plan, p, scratch.as<float>(), T, stream, var);
    };
    const double sec = time_calls(a, timer, [&](int call) { run(o, state, call, variant); });
    std::string n = note;
    if (mode == GdnMode::Chunked &&
        (variant == fast::GdnChunkVariant::F16Rt || variant == fast::GdnChunkVariant::F16RtSched ||
         variant == fast::GdnChunkVariant::F16RtU16)) {
        // Its accuracy class next to F16x3Rt's (f32-class) on the same inputs from the same state:
        // max |diff| / max(1, max |F16x3Rt|) of o and of the state after one call (F16RtU16's U in f16
        // beside F16RtSched's in f32: session 53).
        auto once = [&](fast::GdnChunkVariant var, std::vector<float>* o_h, std::vector<float>* st_h) {
            DeviceBuffer st = random_buffer(size_t(slots * B) * size_t(nv * dk * dv), -0.5f, 0.5f, 4);
            DeviceBuffer out(size_t(N * HV) * sizeof(float));
            run(out, st, 0, var);
            stream.synchronize();
            o_h->resize(size_t(N * HV));
            st_h->resize(st.size() / sizeof(float));
            out.download(o_h->data(), out.size());
            st.download(st_h->data(), st.size());
        };
        std::vector<float> o1, s1, o3, s3;
        once(variant, &o1, &s1);
        once(fast::GdnChunkVariant::F16x3Rt, &o3, &s3);
        auto rel = [](const std::vector<float>& x, const std::vector<float>& ref) {
            double norm = 1, worst = 0;
            for (size_t i = 0; i < ref.size(); ++i) {
                norm = std::max(norm, double(std::fabs(ref[i])));
                worst = std::max(worst, std::isnan(x[i]) ? INFINITY : std::fabs(double(x[i]) - double(ref[i])));
            }
            return worst / norm;
        };
        char buf[96];
        std::snprintf(buf, sizeof buf, "vs f16x3 rt: o %.2e, state %.2e; ", rel(o1, o3), rel(s1, s3));
        n = buf + n;
    }
    if (mode == GdnMode::Chunked) {  // tensor work: useful TFLOP/s, and 3×TF32's issued share of the peak
        const double flops = kChunkFlops * double(nv) * double(B) * double((T + 63) / 64);
        char buf[96];
        std::snprintf(buf, sizeof buf, "%.1f TFLOP/s (3xTF32 %.0f%% of peak)%s", flops / sec / 1e12,
                      100.0 * 3 * flops / sec / kTf32Peak, n.empty() ? "" : "; ");
        n = std::string(buf).append(n);
    }
    row(what, B, T, sec, T == 1 ? 2 * kStateBytes * double(B) : 0, n);
}

const char* const kDecodeNames[] = {"auto", "cluster/key head", "cols32", "cols16", "head256", "head512", "split"};
static_assert(std::size(kDecodeNames) == fast::kGdnDecodeVariants);

// --stamps: the stamped step's timeline (fast::GdnDecodeStamp), launches reps/4 … 3·reps/4 of the
// last graph run. Times in ns from W, the first block's return from pdl::wait in that launch (the
// kernel before it done): each step's mean and latest block; then the clock64 cycles between
// steps (mean over blocks), and the launch period and the last block's end → the next W.
void print_stamps(const std::string& what, DeviceBuffer& buf, int reps, int64_t blocks) {
    constexpr int P = fast::kGdnDecodeStamps;
    std::vector<unsigned long long> h(size_t(reps * blocks * P * 2));
    buf.download(h.data(), h.size() * sizeof(h[0]));
    auto gt = [&](int r, int64_t b, int i) { return double(h[size_t(((r * blocks + b) * P + i) * 2)]); };
    auto ck = [&](int r, int64_t b, int i) { return double(h[size_t(((r * blocks + b) * P + i) * 2 + 1)]); };
    const char* names[P] = {"entry",      "slot read",  "taps asked", "pre-wait issued", "waited",
                            "inputs landed", "conv done", "norms summed", "state sums",   "o^2 barrier passed",
                            "sum o^2",    "stores issued", "end"};
    std::vector<double> mean(P, 0), late(P, 0), cyc(P, 0);
    double period = 0, gap = 0;
    int n = 0;
    for (int r = std::max(1, reps / 4); r < (3 * reps) / 4; ++r, ++n) {
        double w = 1e300, w_prev = 1e300, end_prev = 0;
        for (int64_t b = 0; b < blocks; ++b) {
            w = std::min(w, gt(r, b, fast::kStampWaited));
            w_prev = std::min(w_prev, gt(r - 1, b, fast::kStampWaited));
            end_prev = std::max(end_prev, gt(r - 1, b, P - 1));
        }
        period += w - w_prev;
        gap += w - end_prev;
        for (int i = 0; i < P; ++i) {
            double m = 0, l = -1e300, c = 0;
            for (int64_t b = 0; b < blocks; ++b) {
                m += gt(r, b, i) - w;
                l = std::max(l, gt(r, b, i) - w);
                c += i > 0 ? ck(r, b, i) - ck(r, b, i - 1) : 0;
            }
            mean[size_t(i)] += m / double(blocks);
            late[size_t(i)] += l;
            cyc[size_t(i)] += c / double(blocks);
        }
    }
    std::printf("\nstamps of %s (%lld blocks, launches %d..%d; ns from the first block's pdl::wait return W)\n",
                what.c_str(), (long long)blocks, std::max(1, reps / 4), (3 * reps) / 4 - 1);
    std::printf("| step | mean ns | latest block ns | cycles since the step before (mean) |\n|---|---:|---:|---:|\n");
    for (int i = 0; i < P; ++i)
        std::printf("| %s | %.0f | %.0f | %.0f |\n", names[i], mean[size_t(i)] / n, late[size_t(i)] / n,
                    cyc[size_t(i)] / n);
    std::printf("launch period (W to the next W) %.0f ns; the last block's end to the next W %.0f ns\n\n", period / n,
                gap / n);
}

// With the layer's out-projection (H 2048 × nv·dv, Int4 g32 in tiles, random) and the residual
// add + RMSNorm after the step: its GEMV, or fused into the step (GdnDecodeArgs::out_w; nk parts).
enum class OutProj { None, Gemv, Fused };
constexpr int64_t kHidden = 2048;

void bench_decode(const Args& a, Stream& stream, Timer& timer, int64_t B, int slots, fast::GdnDecodeVariant variant,
                  const std::string& note, OutProj out = OutProj::None) {
    const bool chosen = variant == fast::gdn_decode_variant(B, nk, dv);
    const char* out_name = out == OutProj::Gemv    ? " + out gemv + norm"
                           : out == OutProj::Fused ? " + out fused + norm"
                                                   : "";
    const std::string what = std::string("decode step ") + kDecodeNames[int(variant)] + (chosen ? "*" : "") + out_name +
                             (slots > 1 ? " cold" : " hot");
    if (!a.filter.empty() && what.find(a.filter) == std::string::npos) return;
    const int64_t n_slots = slots * B;
    DeviceBuffer mixed = random_buffer(size_t(B * C), -1.f, 1.f, 5), z = random_buffer(size_t(B * HV), -1.f, 1.f, 6),
                 b = random_buffer(size_t(B * nv), -2.f, 2.f, 7), aa = random_buffer(size_t(B * nv), -2.f, 2.f, 8),
                 conv_w = random_buffer(size_t(C * Kc), -0.5f, 0.5f, 9),
                 conv_state = random_buffer(size_t(n_slots * (Kc - 1) * C), -1.f, 1.f, 10),
                 nea = random_buffer(size_t(nv), -2.f, -0.1f, 11), dtb = random_buffer(size_t(nv), -1.f, 1.f, 12),
                 state = random_buffer(size_t(n_slots) * size_t(nv * dk * dv), -0.5f, 0.5f, 13),
                 norm = random_buffer(size_t(dv), 0.5f, 1.5f, 14);
    DeviceBuffer y(size_t(B * HV) * sizeof(float));
    std::vector<DeviceBuffer> slot_bufs;
    for (int i = 0; i < slots; ++i) {
        std::vector<int32_t> sl(static_cast<size_t>(B));
        for (int64_t s = 0; s < B; ++s) sl[size_t(s)] = int32_t(i * B + s);
        slot_bufs.push_back(ints(sl));
    }
    fast::GdnDecodeArgs d;
    d.n_seqs = int(B);
    d.nk = nk;
    d.nv = nv;
    d.dk = dk;
    d.dv = dv;
    d.mixed = mixed.as<float>();
    d.mixed_s = C;
    d.z = z.as<float>();
    d.z_s = HV;
    d.b = b.as<float>();
    d.b_s = nv;
    d.a = aa.as<float>();
    d.a_s = nv;
    d.conv_w = conv_w.as<float>();
    d.conv_k = Kc;
    d.conv_state = conv_state.as<float>();
    d.conv_slot_stride = (Kc - 1) * C;
    d.neg_exp_a = nea.as<float>();
    d.dt_bias = dtb.as<float>();
    d.state = state.as<float>();
    d.state_slot_stride = nv * dk * dv;
    d.n_slots = n_slots;
    d.norm_w = norm.as<float>();
    d.y = y.as<float>();
    d.y_s = HV;
    d.variant = int(variant);
    const int64_t parts = out == OutProj::Fused ? nk : 1;
    std::vector<uint8_t> codes(size_t(kHidden * HV / 2));
    std::vector<uint16_t> scales(size_t(kHidden * HV / 32));
    uint32_t r = 12345;
    for (auto& c : codes) c = uint8_t((r = r * 1664525u + 1013904223u) >> 24);
    for (auto& s : scales) s = f32_to_f16(0.001f * float((r = r * 1664525u + 1013904223u) >> 24));
    // One copy of W a state slot set: the cold rows read W from HBM too, as a model's layers do.
    std::vector<DeviceBuffer> w_codes, w_scales;
    for (int i = 0; i < (out == OutProj::None ? 0 : slots); ++i) {
        w_codes.emplace_back(codes.size());
        w_scales.emplace_back(scales.size() * 2);
        w_codes.back().upload(codes.data(), codes.size());
        w_scales.back().upload(scales.data(), scales.size() * 2);
    }
    DeviceBuffer delta(size_t(parts * B * kHidden) * sizeof(float));
    DeviceBuffer x_res = random_buffer(size_t(B * kHidden), -1.f, 1.f, 15),
                 h = random_buffer(size_t(B * kHidden), -1.f, 1.f, 16),
                 post = random_buffer(size_t(kHidden), 0.5f, 1.5f, 17);
    PackedMatrix w;
    w.n = kHidden, w.k = HV, w.group = 32, w.tiles = true;
    if (out == OutProj::Fused) {
        d.out_parts = delta.as<float>();
        d.out_part_s = B * kHidden;
        d.out_row_s = kHidden;
    }
    const double sec = time_calls(a, timer, [&](int call) {
        d.slot = slot_bufs[size_t(call % slots)].as<int32_t>();
        if (out != OutProj::None) {
            w.codes = w_codes[size_t(call % slots)].as<uint8_t>();
            w.scales = w_scales[size_t(call % slots)].as<uint16_t>();
        }
        if (out == OutProj::Fused) d.out_w = w;
        fast::gdn_decode_step(d, stream);
        if (out == OutProj::Gemv) fast::gemv_packed(delta.as<float>(), kHidden, y.as<float>(), HV, B, w, stream);
        if (out != OutProj::None)
            ref::add_rms_norm(x_res.as<float>(), kHidden, delta.as<float>(), kHidden, h.as<float>(), kHidden,
                              post.as<float>(), B, kHidden, 1e-6f, stream, int(parts), B * kHidden);
    });
    const double bytes = double(B) * (2 * kStateBytes + double(2 * (Kc - 1) * C + C + HV * 2) * 4);
    row(what, B, 1, sec, bytes, note);
    const bool stamped = variant == fast::GdnDecodeVariant::Head256 || variant == fast::GdnDecodeVariant::HeadSplit;
    if (!a.stamps || !stamped || out == OutProj::Fused) return;
    // The same graph once more with the stamped kernel: where a step's time goes.
    const int64_t blocks = B * nv * (variant == fast::GdnDecodeVariant::HeadSplit ? 4 : 1);
    const int reps = std::max(a.reps, 8);
    DeviceBuffer st(size_t(reps * blocks * fast::kGdnDecodeStamps * 2) * sizeof(unsigned long long));
    d.stamps = st.as<unsigned long long>();
    Args one = a;
    one.graph = true, one.reps = reps, one.runs = 3, one.warmup = 1;
    time_calls(one, timer, [&](int call) {
        d.slot = slot_bufs[size_t(call % slots)].as<int32_t>();
        d.stamp_launch = call;
        if (out == OutProj::Gemv) {
            w.codes = w_codes[size_t(call % slots)].as<uint8_t>();
            w.scales = w_scales[size_t(call % slots)].as<uint16_t>();
        }
        fast::gdn_decode_step(d, stream);
        if (out == OutProj::Gemv) fast::gemv_packed(delta.as<float>(), kHidden, y.as<float>(), HV, B, w, stream);
        if (out != OutProj::None)
            ref::add_rms_norm(x_res.as<float>(), kHidden, delta.as<float>(), kHidden, h.as<float>(), kHidden,
                              post.as<float>(), B, kHidden, 1e-6f, stream, 1, B * kHidden);
    });
    d.stamps = nullptr;
    stream.synchronize();
    print_stamps(what, st, reps, blocks);
}

}  // namespace

// The prefill's conv1d + SiLU over one sequence of T tokens × the flagship's 8,192 channels (x in a
// row of the layer's stacked projection, 12,352 + 64 floats), the reference kernel (then its two
// l2_norm launches on q and k) against the fast one alone and with the norms fused. Bytes: x read,
// y written (the norms' extra passes are what fusing removes, not counted).
void bench_conv(const Args& a, Stream& stream, Timer& timer, int64_t T) {
    const int64_t xs = C + HV + 2 * nv, n_slots = 2;
    DeviceBuffer x = random_buffer(size_t(T * xs), -2.f, 2.f, 21), y(size_t(T * C) * sizeof(float));
    DeviceBuffer w = random_buffer(size_t(C * Kc), -0.6f, 0.6f, 22);
    DeviceBuffer st = random_buffer(size_t(n_slots * (Kc - 1) * C), -1.f, 1.f, 23);
    DeviceBuffer qs = ints({0, int32_t(T)}), slot = ints({1});
    const SeqPlan plan{1, qs.as<int32_t>(), slot.as<int32_t>()};
    const double bytes = 2.0 * double(T * C) * 4;
    const float q_scale = 1.0f / std::sqrt(float(dk));
    const fast::ConvNorm qk{2 * nk, dk, nk, 1e-6f, q_scale};
    struct Case {
        const char* what;
        std::function<void()> call;
    };
    const Case cases[] = {
        {"conv1d_silu ref", [&] {
             ref::conv1d_silu(y.as<float>(), C, x.as<float>(), xs, T, C, w.as<float>(), Kc, st.as<float>(),
                              (Kc - 1) * C, n_slots, plan, stream.get());
         }},
        {"conv1d_silu ref + 2 l2_norm", [&] {
             ref::conv1d_silu(y.as<float>(), C, x.as<float>(), xs, T, C, w.as<float>(), Kc, st.as<float>(),
                              (Kc - 1) * C, n_slots, plan, stream.get());
             ref::l2_norm(y.as<float>(), C, dk, T, nk, dk, 1e-6f, q_scale, stream.get());
             ref::l2_norm(y.as<float>() + nk * dk, C, dk, T, nk, dk, 1e-6f, 1.f, stream.get());
         }},
        {"conv1d_silu fast", [&] {
             fast::conv1d_silu(y.as<float>(), C, x.as<float>(), xs, T, C, w.as<float>(), Kc, st.as<float>(),
                               (Kc - 1) * C, n_slots, plan, fast::ConvNorm{}, stream.get());
         }},
        {"conv1d_silu fast + q/k norms", [&] {
             fast::conv1d_silu(y.as<float>(), C, x.as<float>(), xs, T, C, w.as<float>(), Kc, st.as<float>(),
                               (Kc - 1) * C, n_slots, plan, qk, stream.get());
         }},
    };
    for (const Case& c : cases) {
        if (!a.filter.empty() && (std::string(c.what) + " T=" + std::to_string(T)).find(a.filter) == std::string::npos)
            continue;
        row(c.what, 1, T, timer.per_call(a.warmup, a.runs, a.reps, a.graph, [&](int) { c.call(); }), bytes,
            "x read + y written; the reference's l2_norm passes extra");
    }
}

int main(int argc, char** argv) {
    try {
        Args a;
        const char* usage =
            "bench_fast_gdn: fast Gated DeltaNet kernels (kernels/cuda/fast_gdn.h), 16/32 heads x 128\n"
            "  --runs N        timed calls, median (default 50); --warmup N (default 10)\n"
            "  --reps N        back-to-back calls per timed sample (default 1)\n"
            "  --graph         the --reps calls captured in one CUDA graph\n"
            "  --filter TEXT   only cases whose label contains TEXT\n"
            "  --lens LIST     one sequence's chunked prefill lengths (default 1024,2048,4096,16384)\n"
            "  --stamps        the decode step's timeline (Head256 / HeadSplit at one sequence)\n";
        bench::KernelArgs args(usage);
        args.count("--runs", a.runs, 1).count("--warmup", a.warmup, 0).count("--reps", a.reps, 1);
        args.flag("--graph", a.graph).flag("--stamps", a.stamps).ints("--lens", a.lens);
        if (!args.text("--filter", a.filter).parse(argc, argv)) return 0;
        cudaDeviceProp p{};
        TS_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
        std::printf("bench_fast_gdn on %s (%d SMs); runs %d, warm-up %d, median; TB/s of state (+ activations) read "
                    "and written, %% of %.1f TB/s\n\n",
                    p.name, p.multiProcessorCount, a.runs, a.warmup, kCopyBw / 1e12);
        std::printf("| %-34s | %3s | %5s | %9s | %6s | %6s | %s\n", "kernel", "B", "T", "median us", "TB/s", "% bw",
                    "note");
        Stream stream;
        Timer timer(stream.get());
        // 32 slots × 2 MiB = 64 MiB > the 50 MB L2: each call reads its state from HBM.
        for (int64_t B : {1, 8, 64}) {
            const int cold = int(std::max<int64_t>(2, 32 / B));
            bench_rule(a, stream, timer, GdnMode::Recurrent, B, 1, 1, B == 1 ? "llama.cpp 2.54 us; target <= 2" : "");
            bench_rule(a, stream, timer, GdnMode::Recurrent, B, 1, cold, "");
        }
        for (int64_t B : {1, 8, 64}) {
            const int cold = int(std::max<int64_t>(2, 32 / B));
            for (int v = 1; v < fast::kGdnDecodeVariants; ++v) {
                const auto var = fast::GdnDecodeVariant(v);
                bench_decode(a, stream, timer, B, 1, var, B == 1 ? "conv+gates+l2+rule+norm; target <= 4 us" : "");
                bench_decode(a, stream, timer, B, cold, var, "");
            }
            if (B == 1)  // the out-projection after HeadSplit, or in it
                for (OutProj o : {OutProj::Gemv, OutProj::Fused}) {
                    bench_decode(a, stream, timer, B, 1, fast::GdnDecodeVariant::HeadSplit, "", o);
                    bench_decode(a, stream, timer, B, cold, fast::GdnDecodeVariant::HeadSplit, "", o);
                }
        }
        for (int64_t T : {2048, 8192}) bench_conv(a, stream, timer, T);
        using V = fast::GdnChunkVariant;
        const V chunk_variants[] = {V::Auto,  V::StateWarps8, V::Vec16,
                                    V::Split, V::SplitWarps8, V::SplitVec16, V::F16x3, V::F16x3Wg, V::F16x3Rt,
                                    V::F16x3Rt2, V::F16Rt, V::F16RtSeq, V::F16RtLean, V::F16RtLean1, V::F16RtLean2,
                                    V::F16RtSched, V::F16RtSched16, V::F16RtSolo1, V::F16RtSolo2, V::F16RtStay,
                                    V::F16RtU16};
        for (int64_t T : a.lens) {
            for (V v : chunk_variants)
                bench_rule(a, stream, timer, GdnMode::Chunked, 1, T, 1,
                           T == 1024 ? "llama.cpp 639 us; target <= 60" : "per token flat: T/1024 x the 1024 figure",
                           v);
            if (T <= 4096) bench_rule(a, stream, timer, GdnMode::Recurrent, 1, T, 1, "token by token, for scale");
        }
        // Batches of prefills: more independent chains for the serial state pass.
        for (const auto& [B, T] : {std::pair<int64_t, int64_t>{4, 1024}, std::pair<int64_t, int64_t>{8, 512},
                                   std::pair<int64_t, int64_t>{16, 256}})
            for (V v : chunk_variants) bench_rule(a, stream, timer, GdnMode::Chunked, B, T, 1, "", v);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_fast_gdn: %s\n", e.what());
        return 1;
    }
}

// CudaBackend's declaration, shared by its implementation files (cuda_backend.cpp: memory and
// weights; cuda_backend_ops.cpp: the ops; cuda_backend_attention.cpp: the attention and KV-cache
// ops).
#pragma once
#include <array>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cublas_handle.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/packed_weight.h"
#include "kernels/cuda/pinned_memory.h"
#include "kernels/cuda/stream.h"

namespace tessera::cuda {

namespace fast {
struct ConvNorm;  // fast_gdn.h
}

class CudaBackend final : public Backend {
public:
    CudaBackend(int device, CudaKernels kernels);
    ~CudaBackend() override;

    Device device() const override { return Device::CUDA; }
    std::string name() const override { return kernels_ == CudaKernels::Fast ? "cuda-fast" : "cuda-reference"; }

    MemoryResource& memory() override { return mem_; }
    void copy_in(void* dst, const void* host_src, size_t bytes) override;
    void copy_out(void* host_dst, const void* src, size_t bytes) override;
    void copy(void* dst, const void* src, size_t bytes) override;
    void zero(void* dst, size_t bytes) override;
    void synchronize() override { stream_.synchronize(); }
    void copy_out_queued(void* host_dst, const void* src, size_t bytes) override;
    uint64_t mark() override;
    void wait_mark(uint64_t m) override;
    Tensor place_weight(const Tensor& host, WeightUse use) override;
    std::vector<Tensor> place_weights(const std::vector<Tensor>& hosts, WeightUse use) override;
    bool device_memory(int64_t* free_bytes, int64_t* total_bytes) override;
    MemoryResource& staging_memory() override { return pinned_; }
    std::unique_ptr<Recording> record(const std::function<void()>& body) override;  // cuda_graph.cpp
    uint64_t internal_epoch() const override { return epoch_; }
    cudaStream_t stream() const { return stream_.get(); }

    void matmul(const Tensor& y, const Tensor& x, const Tensor& w) override;
    void embed(const Tensor& y, const Tensor& table, const int32_t* ids) override;
    void rms_norm(const Tensor& y, const Tensor& x, const Tensor& w, float eps) override;
    void add_rms_norm(const Tensor& x, const Tensor& y, const Tensor& delta, const Tensor& w, float eps) override;
    void rope(const Tensor& x, const int32_t* pos, const RopeParams& p) override;
    void swiglu(const Tensor& y, const Tensor& gate, const Tensor& up) override;
    void add(const Tensor& y, const Tensor& a, const Tensor& b) override;
    void add_bias(const Tensor& y, const Tensor& bias) override;
    void kv_store(const Tensor& k_cache, const Tensor& v_cache, const Tensor& k, const Tensor& v,
                  const int32_t* slot) override;
    void qk_norm_rope_store(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                            const Tensor& k_norm, float eps, const int32_t* pos, const RopeParams& rp,
                            const Tensor& k_cache, const Tensor& v_cache, const int32_t* slot) override;
    void attention_gated(const Tensor& out, const Tensor& q, const Tensor& gate, const Tensor& k_cache,
                         const Tensor& v_cache, const AttnPlan& plan, float scale) override;
    void attention(const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                   const AttnPlan& plan, float scale) override;
    void softmax(const Tensor& x) override;
    void argmax(const Tensor& x, int32_t* out) override;
    void top_k(const Tensor& x, int k, float* values, int32_t* ids) override;  // fast_topk.h, both modes
    void edit_logits(const Tensor& x, const LogitEdit* edits, int64_t n) override;
    void sample(const Tensor& x, const SampleRow* rows, int32_t* ids) override;  // fast_sample.h, both modes
    void sigmoid_mul(const Tensor& y, const Tensor& x, const Tensor& gate) override;
    void l2_norm(const Tensor& x, float eps, float scale) override;
    void rms_norm_gated(const Tensor& y, const Tensor& x, const Tensor& z, const Tensor& w, float eps) override;
    void conv1d_silu(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& conv_state,
                     const SeqPlan& plan) override;
    void conv1d_silu_qk_norm(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& conv_state,
                             const SeqPlan& plan, int64_t n_qk, int64_t dim, float eps, float q_scale) override;
    void gdn_gates(const Tensor& beta, const Tensor& g, const Tensor& b, const Tensor& a, const Tensor& neg_exp_a,
                   const Tensor& dt_bias) override;
    void gated_delta_rule(const Tensor& o, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                          const Tensor& beta, const Tensor& state, const SeqPlan& plan, const GdnParams& p) override;
    bool fuses_gdn_decode(const GdnParams& p, int64_t dk, int64_t dv, int64_t conv_k) const override;
    void gdn_decode_step(const Tensor& y, const Tensor& mixed, const Tensor& z, const Tensor& b, const Tensor& a,
                         const Tensor& conv_w, const Tensor& conv_state, const Tensor& neg_exp_a,
                         const Tensor& dt_bias, const Tensor& rec_state, const Tensor& norm_w, float eps,
                         const SeqPlan& plan, const GdnParams& p, const Tensor* w_out,
                         const Tensor* out_parts) override;
    int gdn_decode_out_parts(const GdnParams& p, int64_t dk, int64_t dv, int64_t conv_k, int64_t n_seqs,
                             const Tensor& w_out) const override;
    MoeLimits moe_limits() const override;
    void moe_topk(const Tensor& logits, const MoeRouting& r, int32_t* ids, float* weights) override;
    void moe_experts(const Tensor& y, const Tensor& x, const MoeWeights& w, const int32_t* ids, const float* weights,
                     int k) override;

private:
    // Scratch device memory that grows (between uses) to the largest request; one per purpose.
    void* scratch(int slot, size_t bytes);
    // Device memory that is zero when first handed out (and whenever it grows) and that its users
    // leave zero after each use: the fused decode attention merge's counters (fast::AttnMerge).
    void* zeroed_scratch(size_t bytes);
    const float* rope_freqs(const RopeParams& p, int rot_dims);
    // attention (and attention_gated, gate non-null) on the kernel pack where it takes the
    // shapes; false: the caller runs the reference kernel.
    bool attention_fast(const Tensor& out, const Tensor& q, const Tensor* gate, const Tensor& k_cache,
                        const Tensor& v_cache, const AttnPlan& plan, float scale);
    const void* const* expert_pointers(const std::vector<Tensor>& experts);
    // A device array [E] of the experts' packed Int4 descriptors (fast mode), or null when any
    // expert is not packed Int4 (then moe_experts takes the reference path).
    const PackedMatrix* expert_descriptors(const std::vector<Tensor>& experts);
    // The packed form of a placed weight (fast mode), or null when w was not packed.
    const PackedMatrix* packed_of(const Tensor& w) const;
    void conv1d_silu_norm(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& conv_state,
                          const SeqPlan& plan, const fast::ConvNorm& norm);  // cuda_backend_ops.cpp
    bool fast_gdn() const;  // fast mode unless TESSERA_FAST_GDN=0 (cuda_backend_ops.cpp)
    Tensor place_packed(const Tensor& host, WeightUse use);        // cuda_backend.cpp
    // host repacked for the fast kernels (in 16-row tiles where they fit and the use takes them).
    PackedHost packed_host(const Tensor& host, WeightUse use) const;
    // p's codes, scales and biases (null: none) copied to those device addresses; its descriptor.
    PackedMatrix upload_packed(const PackedHost& p, uint8_t* codes, uint8_t* scales, uint8_t* biases);
    void matmul_packed(const Tensor& y, const Tensor& x, const PackedMatrix& w);  // cuda_backend_ops.cpp

    int device_;
    CudaKernels kernels_;
    CudaMemory mem_;
    PinnedMemory pinned_;
    uint64_t epoch_ = 0;  // bumped when scratch is reallocated (recordings read the old addresses)
    Stream stream_;
    // mark(): events recorded in turn; a mark's event re-recorded by a later mark only makes
    // wait_mark wait for a later point, which is still after the op it was asked about.
    std::array<std::unique_ptr<Event>, 4> marks_;
    uint64_t next_mark_ = 1;
    bool small_copies_ = true;  // TESSERA_SMALL_COPIES: page-locked ↔ device copies ≤ 64 KiB by a kernel
    CublasHandle cublas_;
    std::deque<DeviceBuffer> weights_;          // placed weights, alive as long as the backend
    std::map<std::string, DeviceBuffer> rope_;  // inverse frequencies per RopeParams
    std::map<const void*, DeviceBuffer> experts_;  // device arrays of expert weight pointers
    std::map<const void*, DeviceBuffer> expert_descs_;  // device arrays of packed expert descriptors
    std::map<const void*, fast::MoeTiling> moe_checked_;  // expert sets whose descriptors were checked
    const int32_t* routed_ids_ = nullptr;  // ids of the last moe_topk, if its last launch was fast::moe_route
    fast::MoeRouteAhead routed_logits_;    // what that launch ranked, where on the logits (else logits null)
    std::vector<DeviceBuffer> scratch_;
    DeviceBuffer zeroed_;  // zeroed_scratch
    DeviceBuffer edits_;  // edit_logits' copy of the host edits (never read by a recording)
    DeviceBuffer sample_rows_;  // sample's copy of the host row parameters (likewise)
    // Packed weights by the data pointer of the Tensor place_weight returned for them (which
    // keeps the source dtype and shape; its bytes are the packed codes, scales and biases).
    std::unordered_map<const void*, PackedMatrix> packed_;
    // A bf16 copy of packed non-expert matrices (not vocabulary-sized ones) made at load, by its
    // codes pointer, which the many-token cuBLAS path reads instead of dequantising the packed
    // matrix into scratch on each call (2 bytes a weight more device memory; 8K prefill on the
    // flagship 21,278 → 22,373 tok/s, 2.4 GB). TESSERA_PREFILL_BF16_WEIGHTS (read at
    // construction): auto (the default) copies while all copies stay within 1/16 of the device's
    // memory, 1 copies every such matrix, 0 none; no copies in reference mode or with
    // TESSERA_PREFILL_GEMM=packed (nothing would read them).
    int64_t bf16_budget_ = 0, bf16_bytes_ = 0;
    // Int4 matrices (experts too) stored in 16-row tiles (packed_weight.h): TESSERA_PACKED_TILES=1
    // (the default) or 0 (row-major, the A/B switch), read at construction.
    bool tiles_ = true;
    std::unordered_map<const void*, DeviceBuffer> bf16_;
    int64_t weight_bytes_ = 0;
};

}  // namespace tessera::cuda

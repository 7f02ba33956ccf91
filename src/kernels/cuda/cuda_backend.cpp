// CudaBackend: device selection, memory (copies, scratch) and weight placement. Matrices are
// dequantized to bf16 on the device (f32 ones stay f32, so fp32 checkpoints keep fp32 accuracy),
// except in fast mode, where Q4_0 / Q4_K / Q8_0 / Q6_K matrices are repacked on the host
// (kernels/packed_repack.h) and uploaded once; vectors are uploaded as f32.
#include "kernels/cuda/cuda_backend.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "core/memlog.h"
#include "core/status.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/small_copy.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/fast_embed.h"
#include "kernels/cuda/ref_dequant.h"
#include "kernels/packed_repack.h"

namespace tessera {

CudaKernels parse_cuda_kernels(const char* value) {
    if (!value || !*value || std::strcmp(value, "fast") == 0) return CudaKernels::Fast;
    if (std::strcmp(value, "reference") == 0) return CudaKernels::Reference;
    fail(ErrorKind::Invalid, "TESSERA_KERNELS={}: expected fast (the default) or reference", value);
}

const char* cuda_kernels_name(CudaKernels k) { return k == CudaKernels::Fast ? "fast" : "reference"; }

std::unique_ptr<Backend> make_cuda_backend(int device, CudaKernels kernels) {
    std::string why;
    const int n = cuda::device_count(&why);
    if (n == 0) fail(ErrorKind::Unsupported, "--device cuda: no CUDA device ({})", why);
    TS_CHECK(device >= 0 && device < n, "CUDA device {} does not exist ({} found)", device, n);
    return std::make_unique<cuda::CudaBackend>(device, kernels);
}

std::unique_ptr<Backend> make_cuda_backend(int device) {
    return make_cuda_backend(device, parse_cuda_kernels(std::getenv("TESSERA_KERNELS")));
}

void* cuda_backend_stream(Backend& b) {
    auto* c = dynamic_cast<cuda::CudaBackend*>(&b);
    return c ? static_cast<void*>(c->stream()) : nullptr;
}

namespace cuda {

namespace {
int set_device(int d) {
    TS_CUDA_CHECK(cudaSetDevice(d));
    return d;
}
}  // namespace

CudaBackend::CudaBackend(int device, CudaKernels kernels)
    : device_(set_device(device)), kernels_(kernels), stream_(), cublas_(stream_.get()) {
    const char* v = std::getenv("TESSERA_PREFILL_BF16_WEIGHTS");
    const std::string mode = v ? v : "";
    TS_CHECK(mode.empty() || mode == "auto" || mode == "0" || mode == "1",
             "TESSERA_PREFILL_BF16_WEIGHTS={}: expected auto (the default), 0 or 1", mode);
    const char* g = std::getenv("TESSERA_PREFILL_GEMM");
    const bool read = kernels_ == CudaKernels::Fast && !(g && std::strcmp(g, "packed") == 0);
    size_t free_bytes = 0, total_bytes = 0;
    if (read && mode != "0" && mode != "1") TS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    bf16_budget_ = !read || mode == "0" ? 0 : mode == "1" ? INT64_MAX : int64_t(total_bytes / 16);
    const char* t = std::getenv("TESSERA_PACKED_TILES");
    const std::string tiles = t ? t : "";
    TS_CHECK(tiles.empty() || tiles == "0" || tiles == "1", "TESSERA_PACKED_TILES={}: expected 1 (the default) or 0",
             tiles);
    tiles_ = tiles != "0";
    const char* c = std::getenv("TESSERA_SMALL_COPIES");
    const std::string copies = c ? c : "";
    TS_CHECK(copies.empty() || copies == "kernel" || copies == "dma",
             "TESSERA_SMALL_COPIES={}: expected kernel (the default) or dma", copies);
    small_copies_ = copies != "dma";
}

CudaBackend::~CudaBackend() {
    cudaStreamSynchronize(stream_.get());  // nothing queued may outlive the buffers
}

void CudaBackend::copy_in(void* dst, const void* host_src, size_t bytes) {
    if (!bytes) return;
    if (small_copies_ && bytes <= kSmallCopyMax)
        if (const void* src = pinned_.device_view(host_src, bytes)) return small_copy(dst, src, bytes, stream_.get());
    // From pageable memory cudaMemcpyAsync returns once the source has been staged, so the caller
    // may reuse host_src at once; the copy stays ordered with the stream's kernels.
    TS_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_.get()));
}

void CudaBackend::copy_out(void* host_dst, const void* src, size_t bytes) {
    if (!bytes) return;
    TS_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_.get()));
    stream_.synchronize();
}

void CudaBackend::copy_out_queued(void* host_dst, const void* src, size_t bytes) {
    if (!bytes) return;
    if (small_copies_ && bytes <= kSmallCopyMax)
        if (void* dst = pinned_.device_view(host_dst, bytes)) return small_copy(dst, src, bytes, stream_.get());
    TS_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_.get()));
}

uint64_t CudaBackend::mark() {
    auto& e = marks_[next_mark_ % marks_.size()];
    if (!e) e = std::make_unique<Event>();
    e->record(stream_.get());
    return next_mark_++;
}

void CudaBackend::wait_mark(uint64_t m) {
    TS_CHECK(m < next_mark_, "wait_mark: mark {} was never made (the next is {})", m, next_mark_);
    if (m == 0) return;
    marks_[m % marks_.size()]->synchronize();
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
    if (bytes) TS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_.get()));
}

void CudaBackend::zero(void* dst, size_t bytes) {
    if (bytes) TS_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_.get()));
}

bool CudaBackend::device_memory(int64_t* free_bytes, int64_t* total_bytes) {
    size_t f = 0, t = 0;
    TS_CUDA_CHECK(cudaMemGetInfo(&f, &t));
    *free_bytes = int64_t(f);
    *total_bytes = int64_t(t);
    return true;
}

void* CudaBackend::scratch(int slot, size_t bytes) {
    if (scratch_.size() <= size_t(slot)) scratch_.resize(size_t(slot) + 1);
    DeviceBuffer& b = scratch_[size_t(slot)];
    if (b.size() < bytes) {
        stream_.synchronize();  // queued work may still read the old buffer
        b = DeviceBuffer(std::max(bytes, 2 * b.size()));
        ++epoch_;  // recordings made before read the freed buffer
        int64_t total = 0;
        for (const DeviceBuffer& x : scratch_) total += int64_t(x.size());
        MemLog::global().peak("device_scratch", total);
    }
    return b.data();
}

void* CudaBackend::zeroed_scratch(size_t bytes) {
    if (zeroed_.size() < bytes) {
        stream_.synchronize();  // queued work may still read the old buffer
        zeroed_ = DeviceBuffer(std::max(bytes, std::max<size_t>(2 * zeroed_.size(), 4096)));
        // Zero before any use (stream order).
        TS_CUDA_CHECK(cudaMemsetAsync(zeroed_.data(), 0, zeroed_.size(), stream_.get()));
        ++epoch_;  // recordings made before read the freed buffer
    }
    return zeroed_.data();
}

Tensor CudaBackend::place_weight(const Tensor& host, WeightUse use) {
    if (host.empty()) return host;
    TS_CHECK(host.device == Device::CPU, "place_weight: {} is not in host memory", host.describe());
    // Fast mode packs quantized matrices; expert slices only as Int4 with H and I multiples of 32
    // (what the fast MoE reads), others stay bf16 for the reference MoE.
    if (kernels_ == CudaKernels::Fast && host.ndim == 2 && cuda::can_repack(host.dtype) &&
        (use == WeightUse::Matrix || (use == WeightUse::Expert && packed_kind_of(host.dtype) == PackedKind::Int4 &&
                                      host.rows() % 32 == 0 && host.cols() % 32 == 0)))
        return place_packed(host, use);
    const int64_t rows = host.rows(), cols = host.cols();
    const size_t rb = host.row_bytes(), bytes = size_t(rows) * rb;
    std::vector<uint8_t> packed;  // rows gathered when the view is strided
    const void* src = host.data;
    if (!host.is_contiguous()) {
        packed.resize(bytes);
        for (int64_t r = 0; r < rows; ++r) std::memcpy(packed.data() + size_t(r) * rb, host.row_ptr(r), rb);
        src = packed.data();
    }
    if (use == WeightUse::Vector || host.dtype == DType::F32 || host.dtype == DType::BF16) {
        TS_CHECK(use != WeightUse::Vector || host.dtype == DType::F32, "place_weight: vector {} must be f32",
                 host.describe());
        DeviceBuffer& b = weights_.emplace_back(bytes);
        copy_in(b.data(), src, bytes);  // ordered on the stream (DeviceBuffer::upload is not)
        weight_bytes_ += int64_t(bytes);
        MemLog::global().set("weights_device", weight_bytes_);
        return Tensor::contiguous(b.data(), host.dtype, host.shape.data(), host.ndim, Device::CUDA);
    }
    TS_CHECK(ref::can_dequantize_to_bf16(host.dtype), "place_weight: cannot dequantize {} on the device",
             host.describe());
    DeviceBuffer raw(bytes);
    copy_in(raw.data(), src, bytes);
    DeviceBuffer& b = weights_.emplace_back(size_t(rows * cols) * 2);
    ref::dequantize_to_bf16(b.as<uint16_t>(), raw.data(), host.dtype, rows, cols, stream_.get());
    stream_.synchronize();  // before `raw` is freed
    weight_bytes_ += int64_t(b.size());
    MemLog::global().set("weights_device", weight_bytes_);
    return Tensor::contiguous(b.data(), DType::BF16, host.shape.data(), host.ndim, Device::CUDA);
}

namespace {
size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
}  // namespace

PackedMatrix CudaBackend::upload_packed(const PackedHost& p, uint8_t* codes, uint8_t* scales, uint8_t* biases) {
    copy_in(codes, p.codes.data(), p.codes.size());
    copy_in(scales, p.scales.data(), p.scales.size() * 2);
    if (biases) copy_in(biases, p.biases.data(), p.biases.size() * 2);
    PackedMatrix m;
    m.kind = p.kind;
    m.n = p.n;
    m.k = p.k;
    m.group = p.group;
    m.codes = codes;
    m.scales = reinterpret_cast<const uint16_t*>(scales);
    m.biases = reinterpret_cast<const uint16_t*>(biases);
    m.tiles = p.tiles;
    return m;
}

PackedHost CudaBackend::packed_host(const Tensor& host, WeightUse use) const {
    PackedHost p = with_context(fmt::format("place_weight {}", host.describe()), [&] { return repack(host); });
    // Int4 matrices in 16-row tiles where they fit (packed_weight.h): the decode GEMV and the MoE
    // kernels read two 512-byte runs a warp load instead of 16 runs of 64 bytes (experts too since
    // session 19; TESSERA_PACKED_TILES=0 keeps every matrix row-major, for A/B).
    if (tiles_ && (use == WeightUse::Matrix || use == WeightUse::Expert) && packed_tiles_fit(p.kind, p.n, p.k, p.group))
        tile_packed(p);
    return p;
}

Tensor CudaBackend::place_packed(const Tensor& host, WeightUse use) {
    const PackedHost p = packed_host(host, use);
    // One buffer: codes, then scales, then biases, each 256-byte aligned.
    const size_t code_bytes = p.codes.size(), scale_bytes = p.scales.size() * 2, bias_bytes = p.biases.size() * 2;
    const size_t scale_at = align_up(code_bytes, 256), bias_at = align_up(scale_at + scale_bytes, 256);
    DeviceBuffer& b = weights_.emplace_back(std::max<size_t>(bias_at + bias_bytes, 1));
    auto* base = b.as<uint8_t>();
    const PackedMatrix m = upload_packed(p, base, base + scale_at, bias_bytes ? base + bias_at : nullptr);
    packed_[b.data()] = m;
    weight_bytes_ += int64_t(b.size());
    // The prefill's cuBLAS operand, made once — not for vocabulary-sized tables (the embedding,
    // lm_head: a prefill multiplies only the rows whose logits it wants).
    constexpr int64_t kBf16CopyMaxRows = 65536;
    const int64_t copy_bytes = m.n * m.k * 2;
    if (use == WeightUse::Matrix && m.n <= kBf16CopyMaxRows && copy_bytes <= bf16_budget_ - bf16_bytes_) {
        DeviceBuffer& c = bf16_.emplace(m.codes, DeviceBuffer(size_t(copy_bytes))).first->second;
        fast::dequant_rows_bf16(c.as<uint16_t>(), m.k, m, m.n, stream_.get());
        weight_bytes_ += copy_bytes;
        bf16_bytes_ += copy_bytes;
    }
    MemLog::global().set("weights_device", weight_bytes_);
    return Tensor::contiguous(b.data(), host.dtype, host.shape.data(), host.ndim, Device::CUDA);
}

std::vector<Tensor> CudaBackend::place_weights(const std::vector<Tensor>& hosts, WeightUse use) {
    // Experts the fast MoE reads (Int4, one shape and dtype) in one stack: every expert's codes one
    // after another, then every expert's scales, then biases — one tensor map describes each part
    // (fast_moe_wgmma_tma.cu, MoeTiling). Anything else: one at a time.
    const Tensor& h0 = hosts.empty() ? Tensor{} : hosts[0];
    bool stack = kernels_ == CudaKernels::Fast && use == WeightUse::Expert && hosts.size() > 1 && h0.ndim == 2 &&
                 cuda::can_repack(h0.dtype) && packed_kind_of(h0.dtype) == PackedKind::Int4 && h0.rows() % 32 == 0 &&
                 h0.cols() % 32 == 0;
    for (const Tensor& h : hosts)
        stack = stack && h.device == Device::CPU && h.ndim == 2 && h.dtype == h0.dtype && h.rows() == h0.rows() &&
                h.cols() == h0.cols();
    if (!stack) return Backend::place_weights(hosts, use);
    std::vector<PackedHost> ps;
    ps.reserve(hosts.size());
    for (const Tensor& h : hosts) ps.push_back(packed_host(h, use));
    const PackedHost& p0 = ps[0];
    for (const PackedHost& p : ps)
        if (p.kind != p0.kind || p.n != p0.n || p.k != p0.k || p.group != p0.group || p.tiles != p0.tiles ||
            p.codes.size() != p0.codes.size() || p.scales.size() != p0.scales.size() ||
            p.biases.size() != p0.biases.size())
            return Backend::place_weights(hosts, use);  // not one form (cannot happen for one dtype and shape)
    const size_t E = ps.size(), code_bytes = p0.codes.size(), scale_bytes = p0.scales.size() * 2,
                 bias_bytes = p0.biases.size() * 2;
    const size_t scale_at = align_up(E * code_bytes, 256), bias_at = align_up(scale_at + E * scale_bytes, 256);
    DeviceBuffer& b = weights_.emplace_back(std::max<size_t>(bias_at + E * bias_bytes, 1));
    auto* base = b.as<uint8_t>();
    std::vector<Tensor> placed;
    for (size_t e = 0; e < E; ++e) {
        uint8_t* codes = base + e * code_bytes;
        packed_[codes] = upload_packed(ps[e], codes, base + scale_at + e * scale_bytes,
                                       bias_bytes ? base + bias_at + e * bias_bytes : nullptr);
        placed.push_back(Tensor::contiguous(codes, hosts[e].dtype, hosts[e].shape.data(), hosts[e].ndim, Device::CUDA));
    }
    weight_bytes_ += int64_t(b.size());
    MemLog::global().set("weights_device", weight_bytes_);
    return placed;
}

const PackedMatrix* CudaBackend::packed_of(const Tensor& w) const {
    if (packed_.empty() || !dtype_info(w.dtype).quantized) return nullptr;
    const auto it = packed_.find(w.data);
    return it == packed_.end() ? nullptr : &it->second;
}

const float* CudaBackend::rope_freqs(const RopeParams& p, int rot_dims) {
    const std::string key = fmt::format("{}/{}/{}/{}/{}/{}/{}/{}/{}", rot_dims, p.theta, p.llama3_factor,
                                        p.llama3_low_freq_factor, p.llama3_high_freq_factor, p.llama3_original_ctx,
                                        p.linear_factor, static_cast<const void*>(p.inv_freq), int(p.style));
    auto it = rope_.find(key);
    if (it == rope_.end()) {
        RopeParams q = p;
        q.rot_dims = rot_dims;
        std::vector<float> f(size_t(rot_dims / 2));
        rope_inv_freq(q, f.data());
        DeviceBuffer b(f.size() * sizeof(float));
        copy_in(b.data(), f.data(), f.size() * sizeof(float));
        it = rope_.emplace(key, std::move(b)).first;
    }
    return it->second.as<float>();
}

const void* const* CudaBackend::expert_pointers(const std::vector<Tensor>& experts) {
    TS_CHECK(!experts.empty(), "moe_experts: no experts");
    const void* key = experts.data();
    auto it = experts_.find(key);
    if (it == experts_.end()) {
        std::vector<const void*> ptrs;
        for (const Tensor& t : experts) {
            TS_CHECK(t.device == Device::CUDA && t.is_contiguous() && t.dtype == experts[0].dtype,
                     "moe_experts: expert weights must be placed, contiguous and of one dtype (got {})", t.describe());
            ptrs.push_back(t.data);
        }
        DeviceBuffer b(ptrs.size() * sizeof(void*));
        copy_in(b.data(), ptrs.data(), ptrs.size() * sizeof(void*));
        it = experts_.emplace(key, std::move(b)).first;
    }
    return static_cast<const void* const*>(it->second.data());
}

}  // namespace cuda
}  // namespace tessera

namespace tessera::cuda {

const PackedMatrix* CudaBackend::expert_descriptors(const std::vector<Tensor>& experts) {
    if (experts.empty()) return nullptr;
    const void* key = experts.data();
    auto it = expert_descs_.find(key);
    if (it == expert_descs_.end()) {
        std::vector<PackedMatrix> descs;
        for (const Tensor& t : experts) {
            const PackedMatrix* m = packed_of(t);
            if (!m || m->kind != PackedKind::Int4) {
                descs.clear();
                break;
            }
            descs.push_back(*m);
        }
        DeviceBuffer b(descs.size() * sizeof(PackedMatrix));  // empty: not packed (remembered too)
        if (!descs.empty()) copy_in(b.data(), descs.data(), b.size());  // staged: descs may go
        it = expert_descs_.emplace(key, std::move(b)).first;
    }
    return it->second.size() ? static_cast<const PackedMatrix*>(it->second.data()) : nullptr;
}

}  // namespace tessera::cuda

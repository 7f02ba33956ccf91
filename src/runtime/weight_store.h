// WeightStore: the model's view of its weights. Matrices stay as they are in the file (any
// dtype, mmapped); small vectors the ops want in f32 (norm weights, biases) are converted once
// and owned here. Every getter hands its result to the backend's place_weight (identity on the
// CPU; a copy into device memory on CUDA), so models hold tensors their backend's ops can use.
#pragma once
#include <deque>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "runtime/tensor_source.h"

namespace tessera {

class WeightStore {
public:
    // be: where the weights go (null: used where they are, host memory).
    explicit WeightStore(const TensorSource& src, Backend* be = nullptr) : src_(src), be_(be) {}

    // A host tensor (e.g. a slice of a stacked expert tensor) placed for the backend.
    Tensor place(const Tensor& host, WeightUse use) const { return be_ ? be_->place_weight(host, use) : host; }
    // Host tensors of one shape and dtype (an MoE layer's experts, one matrix each) placed as a set
    // (Backend::place_weights: a device backend may stack them).
    std::vector<Tensor> place_all(const std::vector<Tensor>& hosts, WeightUse use) const {
        return be_ ? be_->place_weights(hosts, use) : hosts;
    }

    // A weight matrix [rows, cols] in its file dtype (shape checked; error names the tensor).
    Tensor matrix(const std::string& name, int64_t rows, int64_t cols) const;
    // Rows `rows` (in that order) of the matrix `name` [*, cols], copied once in its own dtype
    // (repacking at load, e.g. regrouping a fused projection): stack_rows of one piece.
    Tensor gather_rows(const std::string& name, const std::vector<int64_t>& rows, int64_t cols);
    // Several matrices that read the same x stacked by rows into one [Σ rows, cols] (a fused
    // projection: one matmul, one launch, instead of one each), copied once in their dtype.
    // Piece i is rows `pick` of tensor `name` (all its rows when pick is empty; then it must be
    // [rows, cols]). Empty when the pieces' dtypes differ: the caller keeps them apart.
    struct RowPiece {
        std::string name;
        int64_t rows = 0;
        std::vector<int64_t> pick;
    };
    Tensor stack_rows(const std::vector<RowPiece>& pieces, int64_t cols);
    // A matrix [rows, cols] in f32 (converted once if the file has f16/bf16).
    Tensor matrix_f32(const std::string& name, int64_t rows, int64_t cols);
    // A vector [n] in f32 (converted from f16/bf16 if needed).
    Tensor vector_f32(const std::string& name, int64_t n);
    // Same, or an empty Tensor if the checkpoint has no such tensor.
    Tensor optional_vector_f32(const std::string& name, int64_t n);
    // A copy of vector_f32 with `add` added to every element (norms stored as w where the model uses 1+w).
    Tensor vector_f32_plus(const std::string& name, int64_t n, float add);

    const TensorSource& source() const { return src_; }
    Backend* backend() const { return be_; }
    size_t owned_bytes() const;

private:
    Tensor host_vector_f32(const std::string& name, int64_t n);
    // Places the matrix in the last owned_raw_ buffer; drops that host copy when the backend
    // copied it elsewhere (device memory).
    Tensor place_raw(DType dtype, int64_t rows, int64_t cols);

    const TensorSource& src_;
    Backend* be_ = nullptr;
    std::deque<std::vector<float>> owned_;
    std::deque<std::vector<uint8_t>> owned_raw_;
};

// Converts n elements of an f32/f16/bf16 buffer to f32; throws for other dtypes.
void convert_to_f32(DType dtype, const void* src, float* dst, int64_t n);

}  // namespace tessera

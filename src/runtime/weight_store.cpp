#include "runtime/weight_store.h"

#include <cstring>

#include "core/status.h"
#include "formats/quants.h"

namespace tessera {

void convert_to_f32(DType dtype, const void* src, float* dst, int64_t n) {
    if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
        fail(ErrorKind::Unsupported, "cannot convert {} to f32 here", dtype_name(dtype));
    dequantize_row(dtype, src, dst, n);
}

Tensor WeightStore::matrix(const std::string& name, int64_t rows, int64_t cols) const {
    return place(src_.get(name, {rows, cols}), WeightUse::Matrix);
}

Tensor WeightStore::gather_rows(const std::string& name, const std::vector<int64_t>& rows, int64_t cols) {
    TS_CHECK(!rows.empty(), "{}: tensor {}: no rows to gather", src_.describe(), name);
    return stack_rows({{name, int64_t(rows.size()), rows}}, cols);  // one piece: one dtype
}

Tensor WeightStore::stack_rows(const std::vector<RowPiece>& pieces, int64_t cols) {
    TS_CHECK(!pieces.empty(), "stack_rows: no pieces");
    std::vector<Tensor> ts;
    int64_t total = 0;
    for (const RowPiece& p : pieces) {
        const Tensor t = p.pick.empty() ? src_.get(p.name, {p.rows, cols}) : src_.get(p.name);
        TS_CHECK(t.ndim == 2 && t.cols() == cols, "{}: tensor {}: expected [*, {}] got {}", src_.describe(), p.name,
                 cols, t.shape_str());
        TS_CHECK(p.pick.empty() || int64_t(p.pick.size()) == p.rows, "stack_rows: {} rows of {} picked, {} wanted",
                 p.pick.size(), p.name, p.rows);
        if (!ts.empty() && t.dtype != ts.front().dtype) return Tensor();  // kept apart
        ts.push_back(t);
        total += p.rows;
    }
    const size_t rb = ts.front().row_bytes();
    auto& buf = owned_raw_.emplace_back(size_t(total) * rb);
    uint8_t* at = buf.data();
    for (size_t i = 0; i < pieces.size(); ++i)
        for (int64_t r = 0; r < pieces[i].rows; ++r, at += rb) {
            const int64_t src_row = pieces[i].pick.empty() ? r : pieces[i].pick[size_t(r)];
            TS_CHECK(src_row >= 0 && src_row < ts[i].rows(), "{}: tensor {}: row {} of {}", src_.describe(),
                     pieces[i].name, src_row, ts[i].rows());
            std::memcpy(at, ts[i].row_ptr(src_row), rb);
        }
    return place_raw(ts.front().dtype, total, cols);
}

Tensor WeightStore::place_raw(DType dtype, int64_t rows, int64_t cols) {
    std::vector<uint8_t>& buf = owned_raw_.back();
    const Tensor placed = place(Tensor(buf.data(), dtype, {rows, cols}), WeightUse::Matrix);
    if (placed.data != buf.data()) owned_raw_.pop_back();  // the backend holds its own copy
    return placed;
}

Tensor WeightStore::matrix_f32(const std::string& name, int64_t rows, int64_t cols) {
    const Tensor t = src_.get(name, {rows, cols});
    if (t.dtype == DType::F32 && t.is_contiguous()) return place(t, WeightUse::Vector);
    auto& buf = owned_.emplace_back(size_t(rows * cols));
    with_context(src_.describe() + ": tensor " + name, [&] {
        for (int64_t r = 0; r < rows; ++r) convert_to_f32(t.dtype, t.row_ptr(r), buf.data() + r * cols, cols);
    });
    return place(Tensor(buf.data(), DType::F32, {rows, cols}), WeightUse::Vector);
}

Tensor WeightStore::vector_f32(const std::string& name, int64_t n) {
    return place(host_vector_f32(name, n), WeightUse::Vector);
}

Tensor WeightStore::host_vector_f32(const std::string& name, int64_t n) {
    Tensor t = src_.get(name);
    TS_CHECK(t.numel() == n && t.ndim >= 1 && t.dim(-1) == n, "{}: tensor {}: expected [{}] got {}", src_.describe(),
             name, n, t.shape_str());
    auto& buf = owned_.emplace_back(size_t(n));
    with_context(src_.describe() + ": tensor " + name, [&] { convert_to_f32(t.dtype, t.data, buf.data(), n); });
    return Tensor(buf.data(), DType::F32, {n});
}

Tensor WeightStore::optional_vector_f32(const std::string& name, int64_t n) {
    return src_.has(name) ? vector_f32(name, n) : Tensor();
}

Tensor WeightStore::vector_f32_plus(const std::string& name, int64_t n, float add) {
    Tensor t = host_vector_f32(name, n);
    float* p = t.ptr<float>();
    for (int64_t i = 0; i < n; ++i) p[i] += add;
    return place(t, WeightUse::Vector);
}

size_t WeightStore::owned_bytes() const {
    size_t b = 0;
    for (const auto& v : owned_) b += v.size() * sizeof(float);
    for (const auto& v : owned_raw_) b += v.size();
    return b;
}

}  // namespace tessera

#pragma once
// out_prod: dst [M, N, B2, B3] (f32) with dst[i0, i1, i2, i3] = sum over k of
// a[i0, k, i2 / (B2 / a.ne2), i3 / (B3 / a.ne3)] * b[i1, k, i2, i3], a f32 or quantized
// (rows dequantized as core's dequantize_row_* does), b f32. Summed in double over k in
// order and rounded once. The threads split dst's rows; each row is computed a chunk of
// row_chunk values at a time (whole blocks of every type), a's rows read through a stack
// buffer.

#include <backplane/backends/cpu/kernels/common.hpp>

#include <algorithm>

namespace backplane::cpu::kernels {

namespace detail {
/// Values [c, c + n) of row (i1, i2, i3) of dst: n <= row_chunk, c a multiple of it.
inline void out_prod_chunk(const tensor& a, const tensor& b, tensor& dst, i64 c, i64 n, i64 i1, i64 i2, i64 i3) noexcept {
    const i64 a2 = i2 / (dst.ne[2] / a.ne[2]), a3 = i3 / (dst.ne[3] / a.ne[3]);
    double acc[row_chunk] = {};
    float row[row_chunk];
    for (i64 k = 0; k < a.ne[1]; ++k) {
        read_row_f32(a.type, row_ptr(a, k, a2, a3), a.nb[0], c, n, row);
        const double bk = load<float>(row_ptr(b, k, i2, i3) + static_cast<std::size_t>(i1) * b.nb[0]);
        for (i64 j = 0; j < n; ++j) acc[j] += static_cast<double>(row[j]) * bk;
    }
    std::byte* out = row_ptr(dst, i1, i2, i3);
    for (i64 j = 0; j < n; ++j) store<float>(out + static_cast<std::size_t>(c + j) * dst.nb[0], static_cast<float>(acc[j]));
}
} // namespace detail

template <class = void>
inline void out_prod(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& b = *dst.src[1];
    const auto [q0, q1] = split_work(dst.nrows(), p);
    for (i64 q = q0; q < q1; ++q) {
        const auto [i1, i2, i3] = row_of(q, dst.ne);
        for (i64 c = 0; c < dst.ne[0]; c += row_chunk)
            detail::out_prod_chunk(a, b, dst, c, std::min(row_chunk, dst.ne[0] - c), i1, i2, i3);
    }
}

} // namespace backplane::cpu::kernels

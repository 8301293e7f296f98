#pragma once
// The ops that read weights: mul_mat, mul_mat_id and get_rows.
//
// mul_mat: a [K, M, A2, A3] (f32, f16, bf16, q8_0, q4_0), b [K, N, B2, B3] (f32, f16,
// bf16) -> dst f32 [M, N, B2, B3], dst[m, n] = sum_k a[k, m] * b[k, n]. a is broadcast
// over dims 2 and 3 as in ggml: matrix (i2, i3) of b meets matrix (i2 / (B2 / A2),
// i3 / (B3 / A3)) of a (consecutive heads share one, as grouped-query attention wants).
// K is walked in chunks: the chunk of b's column is converted once and reused for every
// row of a, a's rows are dequantized chunk by chunk; products are summed in f32 with
// eight partial sums per chunk and the chunk sums added into dst, which keeps the error
// well below ggml's thresholds without a scratch buffer.
//
// mul_mat_id: mul_mat with a matrix per column picked by an expert id (mixture of experts).
//
// get_rows: rows of a picked by i32 indices, converted to f32 (i32 rows copied as i32).

#include <backplane/backends/cpu/kernels/common.hpp>

#include <algorithm>

namespace backplane::cpu::kernels {

namespace detail {

/// f32 dot product of n values with eight interleaved partial sums.
inline float dot_f32(const float* x, const float* y, i64 n) noexcept {
    float s[8] = {};
    i64 k = 0;
    for (; k + 8 <= n; k += 8)
        for (int j = 0; j < 8; ++j)
            s[j] += x[k + j] * y[k + j];
    for (int j = 0; k < n; ++k, ++j)
        s[j] += x[k] * y[k];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

} // namespace detail

namespace detail {

/// Column pd of a result (M values of stride dnb0) = matrix (a2, a3) of a, transposed,
/// times column pb of b (K values of stride bnb0, of b_type), in chunks of K.
inline void mat_vec_column(const tensor& a, i64 a2, i64 a3, elem_type b_type, const std::byte* pb, std::size_t bnb0,
                           std::byte* pd, std::size_t dnb0, i64 M) noexcept {
    constexpr i64 chunk = row_chunk; // whole blocks of a quantized a
    float bcol[chunk];
    float arow[chunk];
    const i64 K = a.ne[0];
    auto out = [&](i64 m) { return pd + static_cast<std::size_t>(m) * dnb0; };
    for (i64 m = 0; m < M; ++m)
        store<float>(out(m), 0.0f);
    for (i64 k0 = 0; k0 < K; k0 += chunk) {
        const i64 len = std::min(chunk, K - k0);
        read_row_f32(b_type, pb, bnb0, k0, len, bcol);
        for (i64 m = 0; m < M; ++m) {
            read_row_f32(a.type, row_ptr(a, m, a2, a3), a.nb[0], k0, len, arow);
            store<float>(out(m), load<float>(out(m)) + dot_f32(arow, bcol, len));
        }
    }
}

} // namespace detail

/// mul_mat (see the header comment).
template <class = void>
inline void mul_mat(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& b = *dst.src[1];
    if (dst.nelements() == 0)
        return;
    const i64 r2 = b.ne[2] / a.ne[2];
    const i64 r3 = b.ne[3] / a.ne[3];
    const auto [q0, q1] = split_work(dst.nrows(), p);
    for (i64 q = q0; q < q1; ++q) {
        const auto [n, i2, i3] = row_of(q, dst.ne);
        detail::mat_vec_column(a, i2 / r2, i3 / r3, b.type, row_ptr(b, n, i2, i3), b.nb[0], row_ptr(dst, n, i2, i3),
                               dst.nb[0], dst.ne[0]);
    }
}

/// mul_mat_id: as [K, M, n_expert], b [K, B1, n_tokens], ids i32 [n_used, n_tokens] ->
/// dst f32 [M, n_used, n_tokens]; column (s, t) of dst is expert ids[s, t]'s matrix,
/// transposed, times column (s % B1, t) of b. An expert id outside [0, n_expert) is never
/// read: its column is written as zeros and the kernel returns false so that the backend
/// reports errc::out_of_range.
template <class = void>
inline bool mul_mat_id(const compute_params& p, tensor& dst) noexcept {
    const tensor& as = *dst.src[0];
    const tensor& b = *dst.src[1];
    const tensor& ids = *dst.src[2];
    bool all_valid = true;
    const auto [q0, q1] = split_work(dst.nrows(), p);
    for (i64 q = q0; q < q1; ++q) {
        const auto [s, t, i3] = row_of(q, dst.ne);
        const i64 e = load_i32(static_cast<const std::byte*>(ids.data) + static_cast<std::size_t>(s) * ids.nb[0] +
                               static_cast<std::size_t>(t) * ids.nb[1]);
        std::byte* pd = row_ptr(dst, s, t, i3);
        if (e < 0 || e >= as.ne[2]) {
            all_valid = false;
            for (i64 m = 0; m < dst.ne[0]; ++m) store<float>(pd + static_cast<std::size_t>(m) * dst.nb[0], 0.0f);
            continue;
        }
        detail::mat_vec_column(as, e, 0, b.type, row_ptr(b, s % b.ne[1], t, 0), b.nb[0], pd, dst.nb[0], dst.ne[0]);
    }
    return all_valid;
}

/// get_rows: a [E, R, A2, A3], idx i32 [N, A2, A3] -> dst [E, N, A2, A3]; dst row
/// (n, j, k) is row idx[n, j, k] of matrix (j, k) of a. An index outside [0, R) is never
/// read: its row is written as zeros and the kernel returns false so that the backend
/// reports errc::out_of_range.
template <class = void>
inline bool get_rows(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& idx = *dst.src[1];
    if (dst.nelements() == 0)
        return true;
    const i64 E = a.ne[0];
    const bool ints = a.type == elem_type::i32;
    constexpr i64 chunk = row_chunk;
    float buf[chunk];

    bool all_valid = true;
    const auto [q0, q1] = split_work(dst.nrows(), p);
    for (i64 q = q0; q < q1; ++q) {
        const auto [n, j, k] = row_of(q, dst.ne);
        const i64 r = load_i32(
            static_cast<const std::byte*>(idx.data) + static_cast<std::size_t>(n) * idx.nb[0] +
            static_cast<std::size_t>(j) * idx.nb[1] + static_cast<std::size_t>(k) * idx.nb[2]);
        std::byte* pd = row_ptr(dst, n, j, k);
        const bool valid = r >= 0 && r < a.ne[1];
        all_valid = all_valid && valid;
        if (ints) {
            const std::byte* pa = valid ? row_ptr(a, r, j, k) : nullptr;
            for (i64 i0 = 0; i0 < E; ++i0)
                store_i32(pd + static_cast<std::size_t>(i0) * dst.nb[0],
                          valid ? load_i32(pa + static_cast<std::size_t>(i0) * a.nb[0]) : 0);
            continue;
        }
        for (i64 c0 = 0; c0 < E; c0 += chunk) {
            const i64 len = std::min(chunk, E - c0);
            if (valid)
                read_row_f32(a.type, row_ptr(a, r, j, k), a.nb[0], c0, len, buf);
            else
                std::fill_n(buf, len, 0.0f);
            for (i64 i = 0; i < len; ++i)
                store<float>(pd + static_cast<std::size_t>(c0 + i) * dst.nb[0], buf[i]);
        }
    }
    return all_valid;
}

} // namespace backplane::cpu::kernels

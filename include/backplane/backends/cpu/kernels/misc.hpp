#pragma once
// repeat, repeat_back, cumsum, tri, diag, timestep_embedding, count_equal and acc
// (core/acc_view.hpp's view). repeat, tri and diag
// copy their values as bits (any type they take is exact) and write zeros elsewhere;
// repeat_back sums in double and rounds once; cumsum adds in f32 from the left, and
// timestep_embedding computes in f32, as ggml. The threads split dst's rows.

#include <backplane/backends/cpu/kernels/common.hpp>
#include <backplane/core/acc_view.hpp>
#include <backplane/core/tri_type.hpp>

#include <cmath>
#include <cstring>

namespace backplane::cpu::kernels {

namespace detail {

/// Address of element (i0, i1, i2, i3) of t.
[[nodiscard]] inline const std::byte* element_ptr(const tensor& t, i64 i0, i64 i1, i64 i2, i64 i3) noexcept {
    return row_ptr(t, i1, i2, i3) + static_cast<std::size_t>(i0) * t.nb[0];
}

/// For thread p's rows of dst, each element (i0, i1, i2, i3): copies the bits of the
/// element of a that source(i0, i1, i2, i3) points at, or zero where it gives null.
template <class F> void copy_or_zero(const compute_params& p, tensor& dst, F&& source) noexcept {
    const std::size_t ts = type_size(dst.type);
    const auto [q0, q1] = split_work(dst.nrows(), p);
    for (i64 q = q0; q < q1; ++q) {
        const auto [i1, i2, i3] = row_of(q, dst.ne);
        std::byte* out = row_ptr(dst, i1, i2, i3);
        for (i64 i0 = 0; i0 < dst.ne[0]; ++i0) {
            std::byte* o = out + static_cast<std::size_t>(i0) * dst.nb[0];
            if (const std::byte* in = source(i0, i1, i2, i3))
                std::memcpy(o, in, ts);
            else
                std::memset(o, 0, ts); // +0.0 in every float type
        }
    }
}

} // namespace detail

/// repeat: element i of dst is a's element i mod a.ne.
template <class = void>
inline void repeat(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    detail::copy_or_zero(p, dst, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        return detail::element_ptr(a, i0 % a.ne[0], i1 % a.ne[1], i2 % a.ne[2], i3 % a.ne[3]);
    });
}

/// tri: a's element where tri_keeps(type, i0, i1), else 0.
template <class = void>
inline void tri(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const std::int32_t type = dst.param<std::int32_t>(0);
    detail::copy_or_zero(p, dst, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        return tri_keeps(type, i0, i1) ? detail::element_ptr(a, i0, i1, i2, i3) : nullptr;
    });
}

/// diag: a's element i0 of row (0, i2, i3) on the diagonal i0 == i1, else 0.
template <class = void>
inline void diag(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    detail::copy_or_zero(p, dst, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        return i0 == i1 ? detail::element_ptr(a, i0, 0, i2, i3) : nullptr;
    });
}

/// repeat_back: element i of dst (f32) is the sum of a's elements j with j mod dst.ne ==
/// i, in double.
template <class = void>
inline void repeat_back(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const auto [q0, q1] = split_work(dst.nrows(), p);
    for (i64 q = q0; q < q1; ++q) {
        const auto [i1, i2, i3] = row_of(q, dst.ne);
        for (i64 i0 = 0; i0 < dst.ne[0]; ++i0) {
            double sum = 0.0;
            for (i64 j3 = i3; j3 < a.ne[3]; j3 += dst.ne[3])
                for (i64 j2 = i2; j2 < a.ne[2]; j2 += dst.ne[2])
                    for (i64 j1 = i1; j1 < a.ne[1]; j1 += dst.ne[1])
                        for (i64 j0 = i0; j0 < a.ne[0]; j0 += dst.ne[0])
                            sum += load<float>(detail::element_ptr(a, j0, j1, j2, j3));
            store<float>(row_ptr(dst, i1, i2, i3) + static_cast<std::size_t>(i0) * dst.nb[0], static_cast<float>(sum));
        }
    }
}

/// cumsum: y[i] = y[i - 1] + x[i] along each row, in f32 (y[0] = x[0]).
template <class = void>
inline void cumsum(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const auto [q0, q1] = split_work(dst.nrows(), p);
    for (i64 q = q0; q < q1; ++q) {
        const auto [i1, i2, i3] = row_of(q, dst.ne);
        const std::byte* in = row_ptr(a, i1, i2, i3);
        std::byte* out = row_ptr(dst, i1, i2, i3);
        float sum = 0.0f;
        for (i64 i0 = 0; i0 < dst.ne[0]; ++i0) {
            const float x = load<float>(in + static_cast<std::size_t>(i0) * a.nb[0]);
            sum = i0 == 0 ? x : sum + x;
            store<float>(out + static_cast<std::size_t>(i0) * dst.nb[0], sum);
        }
    }
}

/// count_equal: the number of positions where a and b (i32) are equal, as one i64. One
/// thread counts (split_units is 1).
template <class = void>
inline void count_equal(const compute_params& p, tensor& dst) noexcept {
    if (p.ith != 0) return;
    const tensor& a = *dst.src[0];
    const tensor& b = *dst.src[1];
    std::int64_t n = 0;
    for (i64 q = 0; q < a.nrows(); ++q) {
        const auto [i1, i2, i3] = row_of(q, a.ne);
        for (i64 i0 = 0; i0 < a.ne[0]; ++i0)
            n += load_i32(detail::element_ptr(a, i0, i1, i2, i3)) == load_i32(detail::element_ptr(b, i0, i1, i2, i3));
    }
    std::memcpy(dst.data, &n, sizeof n);
}

/// acc: dst (a's shape, contiguous) = a, plus b's element j where dst's byte position lies
/// in acc's view at element j (core/acc_view.hpp). Each element of dst is written after
/// its one read of a, so dst may be a's memory.
template <class = void>
inline void acc(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& b = *dst.src[1];
    const acc_view view = acc_view_of(dst);
    const bool any = b.nelements() > 0;
    const auto [q0, q1] = split_work(dst.nrows(), p);
    for (i64 q = q0; q < q1; ++q) {
        const auto [i1, i2, i3] = row_of(q, dst.ne);
        for (i64 i0 = 0; i0 < dst.ne[0]; ++i0) {
            const i64 at = static_cast<i64>(row_offset(a, i1, i2, i3)) + i0 * 4; // a is contiguous
            float v = load<float>(detail::element_ptr(a, i0, i1, i2, i3));
            i64 j[4] = {};
            if (any && acc_source(view, b.ne.data(), at, j)) v += load<float>(detail::element_ptr(b, j[0], j[1], j[2], j[3]));
            store<float>(row_ptr(dst, i1, i2, i3) + static_cast<std::size_t>(i0) * dst.nb[0], v);
        }
    }
}

/// timestep_embedding: row i of dst (f32 [dim, N]) for timestep t = a[i]: cos(t * f_j)
/// at j and sin(t * f_j) at j + dim / 2 for j < dim / 2, f_j = exp(-log(max_period) * j /
/// (dim / 2)), each step in f32 as ggml; an odd dim's last value 0.
template <class = void>
inline void timestep_embedding(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const std::int32_t half = dst.param<std::int32_t>(0) / 2;
    const float log_period = std::log(static_cast<float>(dst.param<std::int32_t>(1)));
    const auto [q0, q1] = split_work(dst.nrows(), p);
    for (i64 i = q0; i < q1; ++i) {
        const float t = load<float>(detail::element_ptr(a, i, 0, 0, 0));
        std::byte* out = row_ptr(dst, i, 0, 0);
        auto at = [&](i64 j) { return out + static_cast<std::size_t>(j) * dst.nb[0]; };
        for (std::int32_t j = 0; j < half; ++j) {
            const float arg = t * std::exp(-log_period * static_cast<float>(j) / static_cast<float>(half));
            store<float>(at(j), std::cos(arg));
            store<float>(at(j + half), std::sin(arg));
        }
        if (dst.ne[0] % 2 != 0) store<float>(at(dst.ne[0] - 1), 0.0f);
    }
}

} // namespace backplane::cpu::kernels

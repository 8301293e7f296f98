#pragma once
// rope: rotary position embedding of a [head_dim, n_head, n_tokens, ne3] (f32 or f16)
// with i32 positions pos[n_tokens]. Pair i (0 <= i < n_dims / 2) of a row of token t is
// rotated by theta = pos[t] * freq_scale * freq_base^(-2i / n_dims): normal mode pairs
// (x[2i], x[2i + 1]), neox mode (x[i], x[i + n_dims / 2]); values past n_dims are copied.
//
// The angle and its sine and cosine are computed in double: positions reach tens of
// thousands of radians, where an f32 angle (ggml's) is already off by ~1e-3.
// In place: dst may share a's memory with a's layout; each pair is read before written.

#include <backplane/backends/cpu/kernels/common.hpp>

#include <cmath>

namespace backplane::cpu::kernels {

namespace detail {

template <class T> void rope_rows(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& pos = *dst.src[1];
    const i64 ne0 = a.ne[0];
    const i64 n_dims = dst.param<std::int32_t>(0);
    const bool neox = dst.param<std::int32_t>(1) == static_cast<std::int32_t>(rope_mode::neox);
    const double freq_base = dst.param<float>(2);
    const double freq_scale = dst.param<float>(3);
    const i64 half = n_dims / 2;

    const auto [r0, r1] = split_work(a.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, a.ne);
        const std::byte* pa = row_ptr(a, i1, i2, i3);
        std::byte* pd = row_ptr(dst, i1, i2, i3);
        const double position = load_i32(static_cast<const std::byte*>(pos.data) +
                                         static_cast<std::size_t>(i2) * pos.nb[0]);
        for (i64 i = 0; i < half; ++i) {
            const double theta =
                position * freq_scale *
                std::pow(freq_base, -2.0 * static_cast<double>(i) / static_cast<double>(n_dims));
            const auto c = static_cast<float>(std::cos(theta));
            const auto s = static_cast<float>(std::sin(theta));
            const i64 j0 = neox ? i : 2 * i;
            const i64 j1 = neox ? i + half : 2 * i + 1;
            const float x0 = load<T>(pa + static_cast<std::size_t>(j0) * a.nb[0]);
            const float x1 = load<T>(pa + static_cast<std::size_t>(j1) * a.nb[0]);
            store<T>(pd + static_cast<std::size_t>(j0) * dst.nb[0], x0 * c - x1 * s);
            store<T>(pd + static_cast<std::size_t>(j1) * dst.nb[0], x0 * s + x1 * c);
        }
        for (i64 i = n_dims; i < ne0; ++i)
            store<T>(pd + static_cast<std::size_t>(i) * dst.nb[0],
                     load<T>(pa + static_cast<std::size_t>(i) * a.nb[0]));
    }
}

} // namespace detail

template <class = void>
inline void rope(const compute_params& p, tensor& dst) noexcept {
    if (dst.nelements() == 0)
        return;
    if (dst.src[0]->type == elem_type::f16)
        detail::rope_rows<f16_t>(p, dst);
    else
        detail::rope_rows<float>(p, dst);
}

} // namespace backplane::cpu::kernels

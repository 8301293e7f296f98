#pragma once
// rope: rotary position embedding of a [head_dim, n_head, n_tokens, ne3] (f32 or f16)
// with i32 positions (n_tokens of them, 4 * n_tokens in the M-RoPE modes) and optional
// f32 frequency factors: ggml's rope_ext and rope_multi, every mode (normal, neox, mrope,
// vision, imrope), YaRN included. The formulas are core/rope_functions.hpp's.
//
// The angle and its sine and cosine are computed in double: positions reach tens of
// thousands of radians, where an f32 angle (ggml's) is already off by ~1e-3.
// In place: dst may share a's memory with a's layout; each pair is read before written.
// The angles depend on the token alone, so a thread computes them once per token for all
// its heads (rows of one token are consecutive in the split).

#include <backplane/backends/cpu/kernels/common.hpp>
#include <backplane/core/rope_functions.hpp>

#include <cmath>

namespace backplane::cpu::kernels {

namespace detail {

/// Rows [r0, r1) of a (dims 1-3 flattened, dim 1 fastest).
template <class T> void rope_rows(tensor& dst, i64 r0, i64 r1) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& pos = *dst.src[1];
    const tensor* ff = dst.src[2];
    const rope_fn::params c = rope_fn::params_of(dst);
    const i64 ne0 = a.ne[0];
    const int pairs = rope_fn::n_pairs(c);
    const auto position = [&](i64 i2, int stream) {
        const i64 i = i2 + stream * a.ne[2];
        return static_cast<double>(load_i32(static_cast<const std::byte*>(pos.data) + static_cast<std::size_t>(i) * pos.nb[0]));
    };

    // pair k's cosine and sine for token i2 (they depend on nothing else): computed once
    // per token for all its heads, where the pairs fit
    const auto angle = [&](i64 i2, int k, float& cs, float& sn) {
        int exponent = 0;
        const int stream = rope_fn::stream_of(c, k, exponent);
        const double f = ff ? load<float>(static_cast<const std::byte*>(ff->data) + static_cast<std::size_t>(k) * ff->nb[0]) : 1.0;
        double cd = 0.0, sd = 0.0;
        rope_fn::cos_sin(c, position(i2, stream), k, exponent, f, cd, sd);
        cs = static_cast<float>(cd);
        sn = static_cast<float>(sd);
    };
    constexpr int cached_pairs = 256;
    float cache[2 * cached_pairs];
    const bool cached = pairs <= cached_pairs;
    i64 cached_i2 = -1;

    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, a.ne);
        const std::byte* pa = row_ptr(a, i1, i2, i3);
        std::byte* pd = row_ptr(dst, i1, i2, i3);
        if (cached && i2 != cached_i2) {
            for (int k = 0; k < pairs; ++k) angle(i2, k, cache[2 * k], cache[2 * k + 1]);
            cached_i2 = i2;
        }
        for (int k = 0; k < pairs; ++k) {
            float cs = 0.0f, sn = 0.0f;
            if (cached) {
                cs = cache[2 * k];
                sn = cache[2 * k + 1];
            } else {
                angle(i2, k, cs, sn);
            }
            int j0 = 0, j1 = 0;
            rope_fn::pair_of(c, k, j0, j1);
            const float x0 = load<T>(pa + static_cast<std::size_t>(j0) * a.nb[0]);
            const float x1 = load<T>(pa + static_cast<std::size_t>(j1) * a.nb[0]);
            store<T>(pd + static_cast<std::size_t>(j0) * dst.nb[0], x0 * cs - x1 * sn);
            store<T>(pd + static_cast<std::size_t>(j1) * dst.nb[0], x0 * sn + x1 * cs);
        }
        for (i64 i = rope_fn::rotated_end(c); i < ne0; ++i)
            store<T>(pd + static_cast<std::size_t>(i) * dst.nb[0],
                     load<T>(pa + static_cast<std::size_t>(i) * a.nb[0]));
    }
}

} // namespace detail

/// Rows [r0, r1) of the node (its source's rows: dims 1-3 flattened, dim 1 fastest).
template <class = void>
inline void rope_range(tensor& dst, i64 r0, i64 r1) noexcept {
    if (dst.nelements() == 0)
        return;
    if (dst.src[0]->type == elem_type::f16)
        detail::rope_rows<f16_t>(dst, r0, r1);
    else
        detail::rope_rows<float>(dst, r0, r1);
}

template <class = void>
inline void rope(const compute_params& p, tensor& dst) noexcept {
    const auto [r0, r1] = split_work(dst.src[0]->nrows(), p);
    rope_range(dst, r0, r1);
}

} // namespace backplane::cpu::kernels

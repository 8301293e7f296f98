#pragma once
// pad and arange. pad: element i of dst is element i - lp of src[0] where that lies
// inside it (or, circular, (i - lp) mod ne), else 0; values are copied as bits (the same
// type), so any float type is exact. arange: dst[i] = start + step * i in f32. The
// threads split dst's rows.

#include <backplane/backends/cpu/kernels/common.hpp>

#include <algorithm>
#include <cstring>

namespace backplane::cpu::kernels {

namespace detail {

/// Source index of dst index i along a dimension of extent n with lp leading pads, or -1
/// for a pad (never, when circular).
[[nodiscard]] constexpr i64 padded_source(i64 i, i64 lp, i64 n, bool circular) noexcept {
    const i64 j = i - lp;
    if (circular) return ((j % n) + n) % n;
    return j >= 0 && j < n ? j : -1;
}

} // namespace detail

template <class = void>
inline void pad(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const bool circular = dst.param<std::int32_t>(8) != 0;
    const std::size_t ts = type_size(dst.type);
    std::array<i64, max_dims> lp{};
    for (std::size_t d = 0; d < max_dims; ++d) lp[d] = dst.param<std::int32_t>(2 * d);
    const auto [q0, q1] = split_work(dst.nrows(), p);
    for (i64 q = q0; q < q1; ++q) {
        const auto [i1, i2, i3] = row_of(q, dst.ne);
        const i64 j1 = detail::padded_source(i1, lp[1], a.ne[1], circular);
        const i64 j2 = detail::padded_source(i2, lp[2], a.ne[2], circular);
        const i64 j3 = detail::padded_source(i3, lp[3], a.ne[3], circular);
        std::byte* out = row_ptr(dst, i1, i2, i3);
        const std::byte* in = j1 >= 0 && j2 >= 0 && j3 >= 0 ? row_ptr(a, j1, j2, j3) : nullptr;
        for (i64 i0 = 0; i0 < dst.ne[0]; ++i0) {
            std::byte* o = out + static_cast<std::size_t>(i0) * dst.nb[0];
            const i64 j0 = in != nullptr ? detail::padded_source(i0, lp[0], a.ne[0], circular) : -1;
            if (j0 >= 0)
                std::memcpy(o, in + static_cast<std::size_t>(j0) * a.nb[0], ts);
            else
                std::memset(o, 0, ts); // +0.0 in every float type
        }
    }
}

template <class = void>
inline void arange(const compute_params& p, tensor& dst) noexcept {
    const float start = dst.param<float>(0);
    const float step = dst.param<float>(2);
    const auto [i0, i1] = split_work(dst.ne[0], p);
    for (i64 i = i0; i < i1; ++i) {
        const volatile float scaled = step * static_cast<float>(i); // rounded on its own: no fused multiply-add
        store<float>(static_cast<std::byte*>(dst.data) + static_cast<std::size_t>(i) * dst.nb[0], start + scaled);
    }
}

} // namespace backplane::cpu::kernels

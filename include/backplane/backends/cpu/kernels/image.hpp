#pragma once
// pool_1d and pool_2d (core/ops/image.hpp): each result element from a window over its
// source's dimensions 0 and 1 (pool_1d's window has one row), in f32 and in ggml's order
// (the window's rows, then the cells of a row), padding cells skipped. upscale: each
// result element from its source plane by core/interpolate.hpp's formulas. remap
// (pad_reflect_1d, roll): each result element a source element's bits, its index mapped
// dimension by dimension (core/index_maps.hpp). window (win_part, win_unpart, get_rel_pos): each
// result row a source row's bits (core/image_params.hpp's window_source_row), or zeros
// past the source's edge. The threads split dst's rows.

#include <backplane/backends/cpu/kernels/common.hpp>
#include <backplane/core/image_params.hpp>
#include <backplane/core/index_maps.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

namespace backplane::cpu::kernels {

namespace detail {

/// The pooled value of the window whose first cell is (x0, y0) (either may lie in the
/// padding) in plane (i2, i3) of a, whose elements are T.
template <float_storage T>
[[nodiscard]] inline float pooled(const tensor& a, const pool_window& w, i64 x0, i64 y0, i64 i2, i64 i3) noexcept {
    const bool max = w.op == pool_op::max;
    float acc = max ? std::numeric_limits<float>::lowest() : 0.0f;
    i64 inside = 0;
    for (i64 y = std::max<i64>(y0, 0); y < std::min<i64>(y0 + w.k1, a.ne[1]); ++y) {
        const std::byte* row = row_ptr(a, y, i2, i3);
        for (i64 x = std::max<i64>(x0, 0); x < std::min<i64>(x0 + w.k0, a.ne[0]); ++x) {
            const float v = load<T>(row + static_cast<std::size_t>(x) * a.nb[0]);
            acc = max ? (v < acc ? acc : v) : acc + v; // max keeps a NaN that comes last, as ggml's std::max(v, acc)
            ++inside;
        }
    }
    if (max) return acc;
    if (w.avg_over_inside) return inside > 0 ? acc / static_cast<float>(inside) : 0.0f;
    return acc / static_cast<float>(i64{w.k0} * w.k1);
}

} // namespace detail

template <class = void>
inline void pool(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const pool_window w = pool_window_of(dst);
    const work_range work = split_work(dst.nrows(), p);
    const i64 r0 = work.begin, r1 = work.end; // not a structured binding: lambdas below use them
    visit_float(a.type, [&]<class T>() {
        for (i64 r = r0; r < r1; ++r) {
            const auto [i1, i2, i3] = row_of(r, dst.ne);
            std::byte* out = row_ptr(dst, i1, i2, i3);
            const i64 y0 = i1 * w.s1 - w.p1; // pool_1d: row i1 of a
            for (i64 i0 = 0; i0 < dst.ne[0]; ++i0)
                store<float>(out + static_cast<std::size_t>(i0) * dst.nb[0],
                             detail::pooled<T>(a, w, i0 * w.s0 - w.p0, y0, i2, i3));
        }
    });
}

template <class = void>
inline void upscale(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const interpolation m = interpolation_of(dst);
    const work_range work = split_work(dst.nrows(), p);
    const i64 r0 = work.begin, r1 = work.end;
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        const std::byte* plane = row_ptr(a, 0, interp::nearest(i2, m.sf[2], a.ne[2]), interp::nearest(i3, m.sf[3], a.ne[3]));
        const auto at = [&](i64 x, i64 y) {
            return load<float>(plane + static_cast<std::size_t>(x) * a.nb[0] + static_cast<std::size_t>(y) * a.nb[1]);
        };
        std::byte* out = row_ptr(dst, i1, i2, i3);
        for (i64 i0 = 0; i0 < dst.ne[0]; ++i0)
            store<float>(out + static_cast<std::size_t>(i0) * dst.nb[0], interp::sample(m, at, i0, i1, a.ne[0], a.ne[1]));
    }
}

template <class = void>
inline void remap(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const bool reflect = dst.op == op_kind::pad_reflect_1d;
    std::array<i64, max_dims> shift{};
    for (std::size_t d = 0; d < max_dims && !reflect; ++d) shift[d] = dst.param<std::int32_t>(d);
    const std::size_t ts = type_size(dst.type);
    const work_range work = split_work(dst.nrows(), p);
    const i64 r0 = work.begin, r1 = work.end; // not a structured binding: lambdas below use them
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        const std::byte* in = row_ptr(a, rolled_index(i1, shift[1], a.ne[1]), rolled_index(i2, shift[2], a.ne[2]),
                                      rolled_index(i3, shift[3], a.ne[3]));
        std::byte* out = row_ptr(dst, i1, i2, i3);
        for (i64 i0 = 0; i0 < dst.ne[0]; ++i0) {
            const i64 j0 = reflect ? reflected_index(i0, dst.param<std::int32_t>(0), a.ne[0]) : rolled_index(i0, shift[0], a.ne[0]);
            std::memcpy(out + static_cast<std::size_t>(i0) * dst.nb[0], in + static_cast<std::size_t>(j0) * a.nb[0], ts);
        }
    }
}

/// win_part, win_unpart, get_rel_pos: rows copied as bits (any layouts), zeros where a row lies past
/// the source's edge.
template <class = void>
inline void window(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const std::size_t ts = type_size(dst.type);
    const auto [r0, r1] = split_work(dst.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        std::byte* out = row_ptr(dst, i1, i2, i3);
        i64 j[3] = {};
        const bool inside = window_source_row(dst, i1, i2, i3, j);
        const std::byte* in = inside ? row_ptr(a, j[0], j[1], j[2]) : nullptr;
        for (i64 i0 = 0; i0 < dst.ne[0]; ++i0) {
            std::byte* o = out + static_cast<std::size_t>(i0) * dst.nb[0];
            if (in != nullptr)
                std::memcpy(o, in + static_cast<std::size_t>(i0) * a.nb[0], ts);
            else
                std::memset(o, 0, ts);
        }
    }
}

} // namespace backplane::cpu::kernels

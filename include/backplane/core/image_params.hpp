#pragma once
// The parameters of the image and sequence layout ops (pool_1d, pool_2d, upscale) as their nodes
// hold them in op_params, read in this one place by the op's rule, every backend's kernel
// and the tests. The builders and their semantics: core/ops/image.hpp. The functions that
// read a node are templates on its type: op_traits.hpp includes this header for the rules,
// and tensor.hpp includes op_traits.hpp.

#include <backplane/core/interpolate.hpp>
#include <backplane/core/op_kind.hpp>

#include <cstddef>
#include <cstdint>

namespace backplane {

/// What a pooling window computes (ggml's ggml_op_pool, with its values).
enum class pool_op : std::int32_t { max = 0, avg = 1 };

/// A pooling window over dimensions 0 and 1 of its source; pool_1d's is k1 = s1 = 1,
/// p1 = 0 (dimension 0 alone).
struct pool_window {
    pool_op op = pool_op::max;
    std::int32_t k0 = 1, k1 = 1; ///< kernel extents
    std::int32_t s0 = 1, s1 = 1; ///< strides
    std::int32_t p0 = 0, p1 = 0; ///< padding cells before (and after) the source
    /// avg divides by the cells inside the source (pool_1d), not by k0 * k1 (pool_2d,
    /// whose padding cells count as zeros)
    bool avg_over_inside = false;
};

/// The extent of a pooled dimension of extent n, (n + 2p - k) / s + 1; 0 when the kernel
/// does not fit the padded source or a parameter is out of range.
constexpr std::int64_t pool_extent(std::int64_t n, std::int32_t k, std::int32_t s, std::int32_t p) noexcept {
    const std::int64_t padded = n + 2 * std::int64_t{p};
    if (k <= 0 || s <= 0 || p < 0 || padded < k) return 0;
    return (padded - k) / s + 1;
}

/// The window of a pool_1d node (op, k0, s0, p0) or a pool_2d node (op, k0, k1, s0, s1,
/// p0, p1).
template <class Tensor>
pool_window pool_window_of(const Tensor& t) noexcept {
    const auto param = [&](std::size_t i) { return t.template param<std::int32_t>(i); };
    const auto op = static_cast<pool_op>(param(0));
    if (t.op == op_kind::pool_1d)
        return {op, param(1), 1, param(2), 1, param(3), 0, true};
    return {op, param(1), param(2), param(3), param(4), param(5), param(6), false};
}

/// The interpolation of an upscale node (op param: the mode and its flags): ggml's scale
/// factors ne / a.ne in f32, (ne - 1) / (a.ne - 1) in dimensions 0 and 1 with aligned
/// corners where both extents exceed 1, and its pixel offset.
template <class Tensor>
interpolation interpolation_of(const Tensor& t) noexcept {
    const Tensor& a = *t.src[0];
    const auto flags = static_cast<std::uint32_t>(t.template param<std::int32_t>(0));
    interpolation m;
    m.mode = static_cast<scale_mode>(flags & 0xffu);
    m.antialias = (flags & scale_antialias) != 0;
    for (std::size_t i = 0; i < t.ne.size(); ++i) m.sf[i] = static_cast<float>(t.ne[i]) / static_cast<float>(a.ne[i]);
    if ((flags & scale_align_corners) != 0) {
        m.offset = 0.0f;
        for (std::size_t i = 0; i < 2; ++i)
            if (t.ne[i] > 1 && a.ne[i] > 1)
                m.sf[i] = static_cast<float>(t.ne[i] - 1) / static_cast<float>(a.ne[i] - 1);
    }
    return m;
}

/// The op_params slots of win_part (npx, npy, w: the windows across and down, their
/// side) and win_unpart (w), in ggml's order.
namespace window_slot {
inline constexpr std::size_t npx = 0, npy = 1, part_w = 2, unpart_w = 0;
} // namespace window_slot

/// Windows of side w across an extent n, the last one padded (ggml's (n + (w - n mod w)
/// mod w) / w). w must be positive.
constexpr std::int64_t windows_across(std::int64_t n, std::int64_t w) noexcept { return (n + w - 1) / w; }

/// The row (j1, j2, j3) of src[0] whose elements row (i1, i2, i3) of window op t's result
/// copies (dimension 0, the channels, is kept): false where the result's row lies past
/// the source's edge (win_part's padding, zeros).
///   win_part    window i3 = py npx + px, row (i1, i2) of it: the source's (px w + i1, py w + i2, 0)
///   win_unpart  row (i1, i2): window (i2 / w) npx + i1 / w's row (i1 mod w, i2 mod w)
///   get_rel_pos row (k, q) of [c, kh, qh]: the source's row kh - 1 - k + q
template <class Node>
bool window_source_row(const Node& t, std::int64_t i1, std::int64_t i2, std::int64_t i3, std::int64_t (&j)[3]) noexcept {
    const Node& a = *t.src[0];
    if (t.op == op_kind::win_part) {
        const std::int64_t npx = t.template param<std::int32_t>(window_slot::npx);
        const std::int64_t w = t.template param<std::int32_t>(window_slot::part_w);
        j[0] = (i3 % npx) * w + i1;
        j[1] = (i3 / npx) * w + i2;
        j[2] = 0;
        return j[0] < a.ne[1] && j[1] < a.ne[2];
    }
    if (t.op == op_kind::get_rel_pos) {
        j[0] = t.ne[1] - 1 - i1 + i2;
        j[1] = j[2] = 0;
        return true;
    }
    // win_unpart
    const std::int64_t w = t.template param<std::int32_t>(window_slot::unpart_w);
    const std::int64_t npx = windows_across(t.ne[1], w);
    j[0] = i1 % w;
    j[1] = i2 % w;
    j[2] = (i2 / w) * npx + i1 / w;
    return true;
}

} // namespace backplane

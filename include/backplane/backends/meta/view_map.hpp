#pragma once
// The split state of a view (view, reshape, permute, transpose), from its geometry.
//
// A view is described relative to its root (the contiguous tensor whose memory it
// reads) by extents, byte strides and a byte offset. With the root split along axis k,
// every dimension j of the view is classified by its stride s against the root's stride
// U along k and the span B = U * extent of a whole k block:
//
//   s >= B       outer: walks whole k blocks (rescaled to the local block size)
//   U <= s < B   indexing: walks k in steps of s / U indices
//   s < U        inner: within one index of k, unless its span reaches past U, when it
//                merges dimension k into itself (a reshape that flattens k with the
//                dimensions below it)
//
// The view is split along the indexing dimension with the largest step (the others
// must fit inside one step), or along the merging dimension; it must cover whole
// segments of the root's split, every device's range a whole number of steps. Then each
// device's piece is the same view of its local root with the indexing extent cut to its
// range and the strides of outer dimensions rescaled: no copy. A view of a mirrored or
// partial root is the same view on every device.

#include <backplane/backends/meta/split.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace backplane::meta {

/// One device's view geometry, relative to its local root.
struct local_view {
    std::array<std::int64_t, max_dims> ne{};
    std::array<std::size_t, max_dims> nb{};
    std::size_t offs = 0;
};

struct view_mapping {
    split_state state;
    std::vector<local_view> local; ///< one per device
};

/// Maps view `v` (ne, nb, view_offs relative to `root`) of a root in state `rs` over n
/// devices. The root must be contiguous. Fails (not_supported) with the reason when the
/// view does not line up with the split.
inline result<view_mapping> map_view(const tensor& root, const split_state& rs, const tensor& v, int n) {
    view_mapping m;
    const local_view same{v.ne, v.nb, v.view_offs};
    if (!rs.is_split()) {
        m.state = rs;
        m.local.assign(static_cast<std::size_t>(n), same);
        return m;
    }
    const auto fail = [&](const std::string& why) -> result<view_mapping> {
        return status(errc::not_supported, std::string(to_string(v.op)) + " " + backplane::detail::describe(&v) +
                                               " of " + backplane::detail::describe(&root) + " (" + rs.to_string() +
                                               "): " + why);
    };
    if (!root.is_contiguous()) return fail("the root is not contiguous");
    const auto k = static_cast<std::size_t>(rs.axis());
    const std::int64_t q = k == 0 ? block_size(root.type) : 1; // elements per index unit along k
    const std::size_t U = root.nb[k];                           // bytes per unit
    const std::int64_t E = root.ne[k] / q;                      // units along k
    const std::size_t B = U * static_cast<std::size_t>(E);      // bytes of a whole k block
    const std::size_t offs = v.view_offs;
    const std::int64_t i_k0 = static_cast<std::int64_t>((offs / U) % static_cast<std::size_t>(E));
    const std::size_t inner_off = offs % U;
    const std::size_t outer = offs / B;

    int merging = -1, star = -1;
    std::int64_t c_star = 0;
    std::vector<int> indexing;
    for (int j = 0; j < max_dims; ++j) {
        const auto ju = static_cast<std::size_t>(j);
        if (v.ne[ju] <= 1) continue;
        const std::size_t s = v.nb[ju];
        if (s >= B) {
            if (s % B != 0) return fail("dimension " + std::to_string(j) + " steps across split blocks unevenly");
        } else if (s >= U) {
            if (s % U != 0) return fail("dimension " + std::to_string(j) + " steps across split indices unevenly");
            indexing.push_back(j);
            const auto c = static_cast<std::int64_t>(s / U);
            if (c > c_star) {
                c_star = c;
                star = j;
            }
        } else if (s * static_cast<std::size_t>(v.ne[ju]) > U) {
            if (merging >= 0 || s * static_cast<std::size_t>(v.ne[ju]) != B || U % s != 0)
                return fail("dimension " + std::to_string(j) + " runs across the split dimension partly");
            merging = j;
        }
    }

    m.local.assign(static_cast<std::size_t>(n), same);
    const auto rescale_outer = [&](local_view& lv, std::size_t B_d) {
        for (std::size_t j = 0; j < max_dims; ++j)
            if (v.nb[j] >= B) lv.nb[j] = v.nb[j] / B * B_d;
    };
    if (merging >= 0) {
        if (!indexing.empty()) return fail("it both flattens and walks the split dimension");
        if (i_k0 != 0 || inner_off != 0) return fail("it flattens the split dimension from an offset");
        const auto per_unit = static_cast<std::int64_t>(U / v.nb[static_cast<std::size_t>(merging)]);
        auto st = rs.rescaled(merging, per_unit, q);
        if (!st) return fail("the split cuts the flattened dimension unevenly");
        m.state = std::move(*st);
        for (int d = 0; d < n; ++d) {
            local_view& lv = m.local[static_cast<std::size_t>(d)];
            const auto units_d = rs.local_extent(d) / q;
            const std::size_t B_d = U * static_cast<std::size_t>(units_d);
            lv.ne[static_cast<std::size_t>(merging)] = units_d * per_unit;
            rescale_outer(lv, B_d);
            lv.offs = outer * B_d;
        }
        return m;
    }
    if (star < 0) return fail("it holds a single index of the split dimension");
    for (int j : indexing)
        if (j != star && (v.nb[static_cast<std::size_t>(j)] / U) * static_cast<std::size_t>(v.ne[static_cast<std::size_t>(j)]) >
                             static_cast<std::size_t>(c_star))
            return fail("two of its dimensions walk the split dimension");
    // the window of k it covers must be whole segments
    const std::int64_t w0 = i_k0, w1 = i_k0 + c_star * v.ne[static_cast<std::size_t>(star)];
    int a = -1, b = -1;
    for (int s = 0; s <= rs.n_segments(); ++s) {
        const std::int64_t at = (s == rs.n_segments() ? rs.extent() : rs.segment_start(s)) / q;
        if (at == w0) a = s;
        if (at == w1) b = s;
    }
    if (a < 0 || b <= a)
        return fail("it covers indices [" + std::to_string(w0 * q) + ", " + std::to_string(w1 * q) +
                    ") of the split dimension, not whole segments");
    for (int s = a; s < b; ++s)
        for (int d = 0; d < n; ++d)
            if ((rs.size(s, d) / q) % c_star != 0)
                return fail("a device's range is not a whole number of the view's steps of " +
                            std::to_string(c_star * q));
    auto st = rs.segments(a, b, star).rescaled(star, 1, c_star * q);
    if (!st) return fail("the split cuts the view's steps");
    m.state = std::move(*st);
    for (int d = 0; d < n; ++d) {
        local_view& lv = m.local[static_cast<std::size_t>(d)];
        const std::size_t B_d = U * static_cast<std::size_t>(rs.local_extent(d) / q);
        std::int64_t units = 0;
        for (int s = a; s < b; ++s) units += rs.size(s, d) / q;
        lv.ne[static_cast<std::size_t>(star)] = units / c_star;
        rescale_outer(lv, B_d);
        lv.offs = outer * B_d + static_cast<std::size_t>(rs.local_start(a, d) / q) * U + inner_off;
    }
    return m;
}

} // namespace backplane::meta

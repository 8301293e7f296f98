#pragma once
// Tensors laid out rather than computed from values: pad (a tensor framed by zeros, or
// wrapped around) and arange (a sequence).

#include <backplane/core/ops/node.hpp>

#include <array>
#include <cmath>
#include <cstdint>

namespace backplane {

/// The pads of pad_ext: lp[i] elements before and rp[i] after a's extent in dimension i.
struct pad_widths {
    std::array<int, max_dims> lp{};
    std::array<int, max_dims> rp{};
};

/// a with lp[i] elements before and rp[i] after it in each dimension i, as ggml's
/// pad_ext: the result has a's type and extents a.ne[i] + lp[i] + rp[i]; element i is
/// a's element i - lp where that lies inside a, else 0, or with `circular`, a's element
/// (i - lp) mod a.ne (ggml's pad_ext_circular). f32, f16 or bf16 (ggml computes f32
/// only); a in any layout. Op params: lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3, circular.
inline tensor* pad_ext(context& ctx, tensor* a, const pad_widths& w, bool circular = false) {
    detail::require_tensor("pad", "a", a);
    std::array<std::int64_t, max_dims> ne = a->ne;
    for (std::size_t i = 0; i < max_dims; ++i) ne[i] += std::int64_t{w.lp[i]} + w.rp[i];
    tensor node = detail::proposed(op_kind::pad, a->type, ne, {a});
    for (std::size_t i = 0; i < max_dims; ++i) {
        node.set_param(2 * i, static_cast<std::int32_t>(w.lp[i]));
        node.set_param(2 * i + 1, static_cast<std::int32_t>(w.rp[i]));
    }
    node.set_param(8, static_cast<std::int32_t>(circular ? 1 : 0));
    return detail::make_node(ctx, node, {{"a", a}});
}

/// a with p0 .. p3 zeros after it in each dimension, as ggml's pad.
inline tensor* pad(context& ctx, tensor* a, int p0, int p1 = 0, int p2 = 0, int p3 = 0) {
    return pad_ext(ctx, a, {.lp = {}, .rp = {p0, p1, p2, p3}});
}

/// f32 [n]: start, start + step, ... below stop, as ggml's arange: n = ceil((stop -
/// start) / step) computed in f32, value i = start + step * i in f32 (one rounding each
/// for the product and the sum, no fused multiply-add). Needs stop > start and step > 0.
inline tensor* arange(context& ctx, float start, float stop, float step) {
    const float n = std::ceil((stop - start) / step);
    const auto steps = std::isfinite(n) && n > 0.0f && n < 9.0e18f ? static_cast<std::int64_t>(n) : 0;
    tensor node = detail::proposed(op_kind::arange, elem_type::f32, {steps, 1, 1, 1}, {});
    node.set_param(0, start);
    node.set_param(1, stop);
    node.set_param(2, step);
    return detail::make_node(ctx, node, {});
}

} // namespace backplane

#pragma once
// pool_1d and pool_2d (pool.comp), upscale (interpolate.comp), pad_reflect_1d and roll
// (remap.comp, whose p.offs.w says which, p.prm their parameters). The pooling window and
// the scale factors travel in the push constants' b_ne and b_nb, which a node of one
// source leaves free (see the shaders). One invocation per destination element; any
// strides and offsets.
//
//   op                 source  variant          needs
//   pool_1d, pool_2d   f32     pool_f32         -
//   pool_1d, pool_2d   f16     pool_f16         16-bit storage
//   upscale            f32     interpolate_f32  -
//   pad_reflect_1d,    f32     remap_32         -
//   roll               f16,    remap_16         16-bit storage
//                      bf16
//   win_part           f32     win_part_f32     - (window.comp; prm.x npx, prm.y w)
//   win_unpart         f32     win_unpart_f32   -
//   get_rel_pos        f16     get_rel_pos_f16  16-bit storage

#include <backplane/backends/vulkan/ops/common.hpp>
#include <backplane/core/image_params.hpp>

namespace backplane::vulkan::detail {

inline bool plan_pool(const tensor& t, const features& f, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    if (a == nullptr || t.type != elem_type::f32) return false;
    switch (a->type) {
    case elem_type::f32: d.shader = "pool_f32"; break;
    case elem_type::f16:
        if (!f.storage16) return false;
        d.shader = "pool_f16";
        break;
    default: return false;
    }
    const pool_window w = pool_window_of(t);
    const auto u = [](std::int32_t v) { return static_cast<std::uint32_t>(v); };
    d.pc = shapes_of(t);
    d.pc.b_ne = {u(w.k0), u(w.k1), u(w.s0), u(w.s1)};
    d.pc.b_nb = {u(w.p0), u(w.p1), w.op == pool_op::max ? 0u : 1u, w.avg_over_inside ? 1u : 0u};
    d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 128);
    return true;
}

inline bool plan_upscale(const tensor& t, const features&, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    if (a == nullptr || a->type != elem_type::f32 || t.type != elem_type::f32) return false;
    const interpolation m = interpolation_of(t);
    d.shader = "interpolate_f32";
    d.pc = shapes_of(t);
    d.pc.b_nb = {float_bits(m.sf[0]), float_bits(m.sf[1]), float_bits(m.sf[2]), float_bits(m.sf[3])};
    d.pc.prm = {static_cast<std::uint32_t>(m.mode), m.antialias ? 1u : 0u, float_bits(m.offset), 0u};
    d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 128);
    return true;
}

inline bool plan_remap(const tensor& t, const features& f, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    if (a == nullptr || a->type != t.type || !pick_bits_variant(t.type, f, "remap_32", "remap_16", d)) return false;
    d.pc = shapes_of(t);
    for (std::size_t i = 0; i < max_dims; ++i) d.pc.prm[i] = static_cast<std::uint32_t>(t.param<std::int32_t>(i));
    d.pc.offs[3] = t.op == op_kind::roll ? 1u : 0u;
    d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 128);
    return true;
}

/// win_part and win_unpart (window.comp): prm.x the windows across, prm.y their side;
/// get_rel_pos: no parameter (its kh is the result's ne1).
inline bool plan_window(const tensor& t, const features& f, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    if (t.op == op_kind::get_rel_pos) {
        if (a == nullptr || a->type != elem_type::f16 || t.type != elem_type::f16 || !f.storage16) return false;
        d.shader = "get_rel_pos_f16";
        d.pc = shapes_of(t);
        d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 128);
        return true;
    }
    if (a == nullptr || a->type != elem_type::f32 || t.type != elem_type::f32) return false;
    const bool part = t.op == op_kind::win_part;
    const std::int32_t w = t.param<std::int32_t>(part ? window_slot::part_w : window_slot::unpart_w);
    const std::int64_t npx = part ? t.param<std::int32_t>(window_slot::npx) : windows_across(t.ne[1], w);
    d.shader = part ? "win_part_f32" : "win_unpart_f32";
    d.pc = shapes_of(t);
    d.pc.prm = {static_cast<std::uint32_t>(npx), static_cast<std::uint32_t>(w), 0, 0};
    d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 128);
    return true;
}

} // namespace backplane::vulkan::detail

#pragma once
// pad and arange (layout.comp). pad copies values as bits, so f16 and bf16 share a
// variant; its leading pads travel in the push constants' prm, circular in offs.w (the
// trailing pads follow from the extents). One invocation per destination element; any
// strides and offsets.
//
//   op       type        variant     needs
//   pad      f32         pad_32      -
//   pad      f16, bf16   pad_16      16-bit storage
//   arange   f32         arange_f32  -

#include <backplane/backends/vulkan/ops/common.hpp>

namespace backplane::vulkan::detail {

inline bool plan_pad(const tensor& t, const features& f, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    if (a == nullptr || a->type != t.type || !pick_bits_variant(t.type, f, "pad_32", "pad_16", d)) return false;
    d.pc = shapes_of(t);
    for (std::size_t i = 0; i < max_dims; ++i) d.pc.prm[i] = static_cast<std::uint32_t>(t.param<std::int32_t>(2 * i));
    d.pc.offs[3] = t.param<std::int32_t>(8) != 0 ? 1u : 0u;
    d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 128);
    return true;
}

inline bool plan_arange(const tensor& t, const features&, dispatch& d) noexcept {
    if (t.type != elem_type::f32) return false;
    d.shader = "arange_f32";
    d.pc = shapes_of(t);
    d.pc.prm[0] = float_bits(t.param<float>(0));
    d.pc.prm[1] = float_bits(t.param<float>(2));
    d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 128);
    return true;
}

} // namespace backplane::vulkan::detail

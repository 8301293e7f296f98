#pragma once
// glu (glu.comp): gated linear units of every function, fused and split forms. One
// invocation per destination element; any row strides and offsets (rows have unit
// stride, the op's rule).
//
//   a, b, dst   variant    needs
//   f32         glu_f32    -
//   f16         glu_f16    16-bit storage
//   bf16        glu_bf16   16-bit storage

#include <backplane/backends/vulkan/ops/common.hpp>
#include <backplane/core/glu_functions.hpp>

namespace backplane::vulkan::detail {

inline bool plan_glu(const tensor& t, const features& f, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    const tensor* b = t.src[1];
    if (a == nullptr || a->type != t.type || (b != nullptr && b->type != t.type)) return false;
    const std::int32_t fn = t.param<std::int32_t>(0);
    if (fn < 0 || fn >= glu_op_count) return false;
    switch (t.type) {
    case elem_type::f32: d.shader = "glu_f32"; break;
    case elem_type::f16: d.shader = f.storage16 ? "glu_f16" : ""; break;
    case elem_type::bf16: d.shader = f.storage16 ? "glu_bf16" : ""; break;
    default: return false;
    }
    if (d.shader.empty()) return false;
    d.pc = shapes_of(t);
    const glu_fn::halves h = glu_fn::halves_of(t);
    d.pc.offs[3] = static_cast<std::uint32_t>(fn) + (b != nullptr ? 256u : 0u);
    d.pc.prm[0] = static_cast<std::uint32_t>(h.x0); // x in a's rows
    d.pc.prm[1] = static_cast<std::uint32_t>(h.g0); // g in its rows
    d.pc.prm[2] = float_bits(t.param<float>(2));
    d.pc.prm[3] = float_bits(t.param<float>(3));
    d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 256);
    return true;
}

} // namespace backplane::vulkan::detail

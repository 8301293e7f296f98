#pragma once
// concat (concat.comp): a and b joined along dimension param<int32>(0), every operand of
// one type, copied as bits. One invocation per destination element (per binding unit of
// a quantized row, whose blocks are contiguous: dimension 0 is described to the shader
// in units, 16-bit words or mxfp4's bytes); any strides and offsets.
//
//   type                                   variant     needs
//   f32, i32                               concat_32   -
//   f16, bf16, every quantized type but    concat_16   16-bit storage
//     mxfp4 (q8_0, q4_0, q4_1, q5_0, q5_1,
//     iq4_nl, q2_K ... q6_K, q8_K)
//   mxfp4 (17-byte blocks)                 concat_8    8-bit storage
//   i64                                    (none: left to the CPU)

#include <backplane/backends/vulkan/ops/common.hpp>

namespace backplane::vulkan::detail {

inline bool plan_concat(const tensor& t, const features& f, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    const tensor* b = t.src[1];
    if (a == nullptr || b == nullptr || a->type != t.type || b->type != t.type) return false;
    const std::int32_t dim = t.param<std::int32_t>(0);
    if (dim < 0 || dim >= max_dims) return false;
    switch (t.type) {
    case elem_type::f32:
    case elem_type::i32: d.shader = "concat_32"; break;
    case elem_type::i64: return false;
    default:
        if (!storable(t.type, f)) return false;
        d.shader = binding_unit(t.type) == 1 ? "concat_8" : "concat_16";
        break;
    }
    d.pc = shapes_of(t);
    d.pc.prm[0] = static_cast<std::uint32_t>(dim);
    std::uint64_t items = static_cast<std::uint64_t>(t.nelements());
    if (is_quantized(t.type)) { // dimension 0 in units: a row's blocks are contiguous
        const auto units = static_cast<std::uint32_t>(type_size(t.type) / binding_unit(t.type));
        const auto values = static_cast<std::uint32_t>(block_size(t.type));
        for (auto* shape : {&d.pc.ne, &d.pc.a_ne, &d.pc.b_ne}) (*shape)[0] = (*shape)[0] / values * units;
        for (auto* stride : {&d.pc.nb, &d.pc.a_nb, &d.pc.b_nb}) (*stride)[0] = 1;
        items = items / values * units;
    }
    d.groups = groups_for(items, 128);
    return true;
}

} // namespace backplane::vulkan::detail

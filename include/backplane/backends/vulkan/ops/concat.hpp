#pragma once
// concat (concat.comp): a and b joined along dimension param<int32>(0), every operand of
// one type, copied as bits. One invocation per destination element (per 16-bit word of a
// quantized row, whose blocks are contiguous: dimension 0 is described to the shader in
// words); any strides and offsets.
//
//   type                     variant     needs
//   f32, i32                 concat_32   -
//   f16, bf16, q8_0, q4_0    concat_16   16-bit storage
//   i64                      (none: left to the CPU)

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
    case elem_type::f16:
    case elem_type::bf16:
    case elem_type::q8_0:
    case elem_type::q4_0:
        if (!f.storage16) return false;
        d.shader = "concat_16";
        break;
    default: return false;
    }
    d.pc = shapes_of(t);
    d.pc.prm[0] = static_cast<std::uint32_t>(dim);
    std::uint64_t items = static_cast<std::uint64_t>(t.nelements());
    if (is_quantized(t.type)) { // dimension 0 in 16-bit words: a row's blocks are contiguous
        const auto words = static_cast<std::uint32_t>(type_size(t.type) / 2);
        for (auto* shape : {&d.pc.ne, &d.pc.a_ne, &d.pc.b_ne}) (*shape)[0] = (*shape)[0] / 32 * words;
        for (auto* stride : {&d.pc.nb, &d.pc.a_nb, &d.pc.b_nb}) (*stride)[0] = 1;
        items = items / 32 * words;
    }
    d.groups = groups_for(items, 128);
    return true;
}

} // namespace backplane::vulkan::detail

#pragma once
// repeat, repeat_back, cumsum, tri, diag, timestep_embedding and out_prod (misc.comp).
// repeat copies values as bits, so f16 and bf16 share a variant (as do f32 and i32);
// tri's type travels in prm.x, timestep_embedding's dim / 2 and log(max_period) in prm.x
// and prm.y. One invocation per destination element (cumsum: per row); any strides and
// offsets.
//
//   op                               type            variant          needs
//   repeat                           f32, i32        repeat_32        -
//   repeat                           f16, bf16       repeat_16        16-bit storage
//   repeat_back, cumsum, tri, diag,  f32             <op>_f32         -
//   timestep_embedding
//   out_prod                         f32 a and b     out_prod_f32     - (quantized a: refused)
//   count_equal                      i32 a and b     count_equal_i32  - (one workgroup)
//   acc                              f32             acc_f32          -

#include <backplane/backends/vulkan/ops/common.hpp>
#include <backplane/core/acc_view.hpp>

#include <cmath>

namespace backplane::vulkan::detail {

namespace misc_detail {
/// The variant of op for type t, or empty.
inline std::string_view shader_of(op_kind op, elem_type t, const features& f) noexcept {
    if (op == op_kind::count_equal) return t == elem_type::i32 ? "count_equal_i32" : std::string_view{};
    if (op == op_kind::repeat) {
        if (t == elem_type::f32 || t == elem_type::i32) return "repeat_32";
        return (t == elem_type::f16 || t == elem_type::bf16) && f.storage16 ? "repeat_16" : std::string_view{};
    }
    if (t != elem_type::f32) return {};
    switch (op) {
    case op_kind::repeat_back: return "repeat_back_f32";
    case op_kind::cumsum: return "cumsum_f32";
    case op_kind::tri: return "tri_f32";
    case op_kind::diag: return "diag_f32";
    case op_kind::timestep_embedding: return "timestep_embedding_f32";
    case op_kind::out_prod: return "out_prod_f32";
    case op_kind::acc: return "acc_f32";
    default: return {};
    }
}
} // namespace misc_detail

inline bool plan_misc(const tensor& t, const features& f, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    if (a == nullptr || (a->type != t.type && t.op != op_kind::count_equal)) return false;
    d.shader = misc_detail::shader_of(t.op, a->type, f);
    if (d.shader.empty()) return false;
    d.pc = shapes_of(t);
    d.pc.prm[0] = static_cast<std::uint32_t>(t.param<std::int32_t>(0)); // tri's type
    if (t.op == op_kind::timestep_embedding) {
        d.pc.prm[0] = static_cast<std::uint32_t>(t.param<std::int32_t>(0) / 2);
        d.pc.prm[1] = float_bits(std::log(static_cast<float>(t.param<std::int32_t>(1)))); // as the CPU's f32 log
    }
    if (t.op == op_kind::acc) { // the view: nb1, nb2, nb3, offset in bytes
        const acc_view v = acc_view_of(t);
        d.pc.prm = {static_cast<std::uint32_t>(v.nb[1]), static_cast<std::uint32_t>(v.nb[2]),
                    static_cast<std::uint32_t>(v.nb[3]), static_cast<std::uint32_t>(v.offset)};
    }
    const std::int64_t items = t.op == op_kind::cumsum ? t.nrows() : t.nelements();
    d.groups = t.op == op_kind::count_equal ? std::array<std::uint32_t, 3>{1, 1, 1}
                                            : groups_for(static_cast<std::uint64_t>(items), 128);
    return true;
}

} // namespace backplane::vulkan::detail

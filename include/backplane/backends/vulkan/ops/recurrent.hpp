#pragma once
// ssm_conv, ssm_scan, gated_linear_attn, rwkv_wkv6 and rwkv_wkv7 (recurrent.comp), f32.
//
//   op                 variant                 needs
//   ssm_conv           ssm_conv_f32            - (any strides and offsets)
//   ssm_scan           ssm_scan_f32            B, C and the result contiguous (s, dt, A are,
//                                              by the rule)
//   gated_linear_attn  gated_linear_attn_f32   - (every operand contiguous, by the rule)
//   rwkv_wkv6          rwkv_wkv6_f32           -
//   rwkv_wkv7          rwkv_wkv7_f32           -
//
// The linear-attention ops read every source as contiguous (their offsets past source 2
// take a_nb.x, b_nb.x, a_nb.y, b_nb.y), source 0's extents [S, H, T] from a_ne, n_seqs
// from prm.x and gated_linear_attn's scale from prm.y; one invocation per (value channel,
// head, sequence).
//
// ssm_scan has seven sources, so the offsets of sources 3 to 6 take a_nb.x, a_nb.y, b_nb.x
// and b_nb.y (common.hpp offset_word): its shader reads s as contiguous and x by its
// packed dims 0 and 1 and its dims 2 and 3 strides (b_nb.z, b_nb.w); n_group, A's ne0 and
// x's elements travel in prm.x, prm.y and prm.z. One invocation per (i, head, sequence)
// (ssm_scan) or per destination element (ssm_conv).

#include <backplane/backends/vulkan/ops/common.hpp>

namespace backplane::vulkan::detail {

inline bool plan_recurrent(const tensor& t, const features&, dispatch& d) noexcept {
    if (t.type != elem_type::f32) return false;
    d.pc = shapes_of(t);
    if (t.op == op_kind::ssm_conv) {
        d.shader = "ssm_conv_f32";
        d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 128);
        return true;
    }
    if (t.op == op_kind::gated_linear_attn || t.op == op_kind::rwkv_wkv6 || t.op == op_kind::rwkv_wkv7) {
        if (!t.is_contiguous()) return false;
        const std::size_t n = t.op == op_kind::gated_linear_attn ? 5 : t.op == op_kind::rwkv_wkv6 ? 6 : 7;
        const tensor& k = *t.src[t.op == op_kind::rwkv_wkv7 ? 2 : 0];
        const std::int64_t n_seqs = t.src[n - 1]->ne[1];
        d.shader = t.op == op_kind::gated_linear_attn ? "gated_linear_attn_f32" : t.op == op_kind::rwkv_wkv6 ? "rwkv_wkv6_f32" : "rwkv_wkv7_f32";
        d.pc.prm[0] = static_cast<std::uint32_t>(n_seqs);
        d.pc.prm[1] = t.op == op_kind::gated_linear_attn ? float_bits(t.param<float>(0)) : 0u;
        d.groups = groups_for(static_cast<std::uint64_t>(k.ne[0] * k.ne[1] * n_seqs), 128);
        return true;
    }
    if (t.op != op_kind::ssm_scan) return false;
    const tensor& x = *t.src[1];
    if (!t.src[4]->is_contiguous() || !t.src[5]->is_contiguous() || !t.is_contiguous()) return false;
    d.shader = "ssm_scan_f32";
    d.pc.prm[0] = static_cast<std::uint32_t>(t.src[4]->ne[1]);
    d.pc.prm[1] = static_cast<std::uint32_t>(t.src[3]->ne[0]);
    d.pc.prm[2] = static_cast<std::uint32_t>(x.nelements());
    d.groups = groups_for(static_cast<std::uint64_t>(x.ne[0] * x.ne[1] * x.ne[3]), 128);
    return true;
}

} // namespace backplane::vulkan::detail

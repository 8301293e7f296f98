#pragma once
// Row-wise ops (a row is dimension 0 of source 0): sum_rows, mean, sum and argmax
// (reduce.comp), norm, rms_norm, l2_norm and group_norm (norm.comp), soft_max
// (soft_max.comp). One workgroup per row (groups_per_item; the shaders find their row with
// group_id()), its invocations striding along the row and combining partial results in
// shared memory; sum is one workgroup striding over the whole tensor, group_norm one per
// group of channels of each sample.
//
//   op                 result   source 0            mask (source 1)
//   sum_rows, mean     f32      f32, f16*, bf16*
//   sum                = a      f32, f16*, bf16*
//   argmax             i32      f32, f16*, bf16*
//   norm, rms_norm     f32      f32                 (rms_norm_mul's stand-in: f32 w)
//   l2_norm,
//   group_norm         f32      f32
//   soft_max           f32      f32                 none, f32, f16*  (ALiBi; f32 sinks, source 2)
//   (*: needs 16-bit storage)
//
// Every source and destination may have any strides and offsets.

#include <backplane/backends/vulkan/ops/common.hpp>
#include <backplane/core/alibi.hpp>
#include <backplane/core/channel_groups.hpp>

#include <algorithm>

namespace backplane::vulkan::detail {

namespace rows_detail {

/// Every row shader is compiled for workgroups of 64 invocations (within what Vulkan
/// guarantees everywhere: 128 invocations, 16 KiB of shared memory) and of `wide` ones;
/// a shader keeps at most 8 bytes of shared memory per invocation.
inline constexpr std::uint32_t wide = 256;

/// Whether rows of ne0 elements, `rows` of them, get the wide workgroups: long rows
/// always (each invocation still has several elements), medium rows when there are few
/// enough that 64-invocation workgroups would leave the device mostly idle.
constexpr bool use_wide(std::int64_t ne0, std::int64_t rows, const features& f) noexcept {
    if (f.max_invocations < wide || f.shared_memory < 8 * wide) return false;
    return ne0 >= 1024 || (ne0 > 128 && rows <= 1024);
}

/// The variant names per source type: {f32, f16, bf16} x {64 invocations, wide}.
struct by_type {
    std::string_view f32[2], f16[2], bf16[2];
};
inline constexpr by_type sum_rows_shaders{{"sum_rows_f32_64", "sum_rows_f32_256"},
                                          {"sum_rows_f16_64", "sum_rows_f16_256"},
                                          {"sum_rows_bf16_64", "sum_rows_bf16_256"}};
inline constexpr by_type mean_shaders{{"mean_f32_64", "mean_f32_256"},
                                      {"mean_f16_64", "mean_f16_256"},
                                      {"mean_bf16_64", "mean_bf16_256"}};
inline constexpr by_type sum_shaders{{"sum_f32_64", "sum_f32_256"}, {"sum_f16_64", "sum_f16_256"}, {"sum_bf16_64", "sum_bf16_256"}};
inline constexpr by_type argmax_shaders{{"argmax_f32_64", "argmax_f32_256"},
                                        {"argmax_f16_64", "argmax_f16_256"},
                                        {"argmax_bf16_64", "argmax_bf16_256"}};
/// soft_max without a mask, with an f32 mask, with an f16 mask; {64 invocations, wide} each.
inline constexpr std::string_view soft_max_shaders[3][2] = {{"soft_max_f32_64", "soft_max_f32_256"},
                                                            {"soft_max_f32_mask_f32_64", "soft_max_f32_mask_f32_256"},
                                                            {"soft_max_f32_mask_f16_64", "soft_max_f32_mask_f16_256"}};

/// The variant for source type t from `names`, or empty (a 16-bit type without 16-bit
/// storage, or another type).
inline std::string_view pick(const by_type& names, elem_type t, bool w, const features& f) noexcept {
    switch (t) {
    case elem_type::f32: return names.f32[w];
    case elem_type::f16: return f.storage16 ? names.f16[w] : std::string_view{};
    case elem_type::bf16: return f.storage16 ? names.bf16[w] : std::string_view{};
    default: return {};
    }
}

/// soft_max's ALiBi terms (prm.y m0, prm.z m1, prm.w n_head_log2, 0 without ALiBi) and
/// its sinks' stride (ne.x, 0 without sinks; their offset is offs.w, the backend's).
inline void soft_max_constants(const tensor& t, push_constants& pc) noexcept {
    const float max_bias = t.param<float>(1);
    if (t.src[1] != nullptr && max_bias > 0.0f) {
        const alibi::terms terms = alibi::terms_of(max_bias, static_cast<int>(t.src[0]->ne[2]));
        pc.prm[1] = float_bits(terms.m0);
        pc.prm[2] = float_bits(terms.m1);
        pc.prm[3] = terms.n_head_log2;
    } else {
        pc.prm[3] = 0;
    }
    const tensor* sinks = t.src[2];
    pc.ne[0] = sinks == nullptr ? 0 : std::max<std::uint32_t>(1, static_cast<std::uint32_t>(sinks->nb[0] / sizeof(float)));
}

/// group_norm: one workgroup per (group, sample) (prm.y channels per group, prm.z
/// groups holding channels), wide for groups of many values.
inline bool plan_group_norm(const tensor& t, const features& f, dispatch& d) noexcept {
    const tensor& a = *t.src[0];
    if (t.type != elem_type::f32 || a.type != elem_type::f32) return false;
    const channel_groups groups = channel_groups_of(a.ne[2], t.param<std::int32_t>(0));
    const std::uint64_t units = static_cast<std::uint64_t>(groups.count * a.ne[3]);
    d.shader = use_wide(a.ne[0] * a.ne[1] * groups.size, static_cast<std::int64_t>(units), f) ? "group_norm_f32_256"
                                                                                                : "group_norm_f32_64";
    d.pc = shapes_of(t);
    d.pc.prm[0] = float_bits(t.param<float>(1));
    d.pc.prm[1] = static_cast<std::uint32_t>(groups.size);
    d.pc.prm[2] = static_cast<std::uint32_t>(groups.count);
    d.groups = groups_per_item(units);
    return true;
}

} // namespace rows_detail

inline bool plan_rows(const tensor& t, const features& f, dispatch& d) noexcept {
    using namespace rows_detail;
    const tensor* a = t.src[0];
    if (a == nullptr) return false;
    const std::int64_t rows = a->ne[1] * a->ne[2] * a->ne[3];
    const bool w = use_wide(a->ne[0], rows, f);
    d.shader = {};
    switch (t.op) {
    case op_kind::sum_rows:
        if (t.type == elem_type::f32) d.shader = pick(sum_rows_shaders, a->type, w, f);
        break;
    case op_kind::mean:
        if (t.type == elem_type::f32) d.shader = pick(mean_shaders, a->type, w, f);
        break;
    case op_kind::sum: // one workgroup for everything: wide wherever the device has them
        if (t.type == a->type) d.shader = pick(sum_shaders, a->type, use_wide(wide, 1, f), f);
        break;
    case op_kind::argmax:
        if (t.type == elem_type::i32) d.shader = pick(argmax_shaders, a->type, w, f);
        break;
    case op_kind::norm:
        if (t.type == elem_type::f32 && a->type == elem_type::f32) d.shader = w ? "norm_f32_256" : "norm_f32_64";
        break;
    case op_kind::l2_norm:
        if (t.type == elem_type::f32 && a->type == elem_type::f32) d.shader = w ? "l2_norm_f32_256" : "l2_norm_f32_64";
        break;
    case op_kind::group_norm: return plan_group_norm(t, f, d);
    case op_kind::rms_norm: // with source 1: the fused rms_norm_mul's stand-in (ops/fused.hpp)
        if (t.type != elem_type::f32 || a->type != elem_type::f32) break;
        if (t.src[1] == nullptr) d.shader = w ? "rms_norm_f32_256" : "rms_norm_f32_64";
        else if (t.src[1]->type == elem_type::f32) d.shader = w ? "rms_norm_mul_f32_256" : "rms_norm_mul_f32_64";
        break;
    case op_kind::soft_max: {
        if (t.type != elem_type::f32 || a->type != elem_type::f32) break;
        const tensor* mask = t.src[1];
        if (mask == nullptr) d.shader = soft_max_shaders[0][w];
        else if (mask->type == elem_type::f32) d.shader = soft_max_shaders[1][w];
        else if (mask->type == elem_type::f16 && f.storage16) d.shader = soft_max_shaders[2][w];
        break;
    }
    default: break;
    }
    if (d.shader.empty()) return false;
    d.pc = shapes_of(t);
    if (t.op == op_kind::norm || t.op == op_kind::rms_norm || t.op == op_kind::l2_norm || t.op == op_kind::soft_max)
        d.pc.prm[0] = float_bits(t.param<float>(0)); // eps, or soft_max's scale
    if (t.op == op_kind::soft_max) soft_max_constants(t, d.pc);
    d.groups = groups_per_item(t.op == op_kind::sum ? 1u : static_cast<std::uint64_t>(rows));
    return true;
}

} // namespace backplane::vulkan::detail

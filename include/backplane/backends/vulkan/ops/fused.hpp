#pragma once
// The fused groups (core/fusion.hpp) on Vulkan: each becomes one dispatch of a node that
// stands in for the group (glu_pair: two, the gate product on its own first). A stand-in
// is a tensor with the group's result memory, the group's operands as sources and the
// parameters of the shader that computes it:
//
//   rms_norm_mul         rms_norm of x with w as source 1 (norm.comp, MUL)
//   soft_max_scale_mask  soft_max of x with the mask and scale (soft_max.comp as it is)
//   mul_mat_add          mul_mat with the bias as source 2, epilogue 1 (mul_mat.comp)
//   glu_pair             mul_mat of the up weights with the gate product as source 2,
//                        epilogue 2: silu(gate) * up, swiglu only (mul_mat.comp)
//   rope_set_rows        rope of k into the cache rows of idx, source 3 (rope.comp,
//                        SET_ROWS)
//
// accepts() says which groups fuse on a device (the rest run node by node); stand_in()
// builds the stand-in, plan_fused() its dispatch.

#include <backplane/backends/vulkan/ops/mul_mat.hpp>
#include <backplane/backends/vulkan/ops/rope.hpp>
#include <backplane/backends/vulkan/ops/rows.hpp>
#include <backplane/core/fusion.hpp>

namespace backplane::vulkan::detail {

namespace fused_detail {

/// t is one contiguous f32 row (a bias the mul_mat epilogue reads at its element m).
inline bool f32_row(const tensor& t) noexcept {
    return t.type == elem_type::f32 && t.nb[0] == sizeof(float) && t.ne[1] == 1 && t.ne[2] == 1 && t.ne[3] == 1;
}

/// The result of a soft_max group, and its x, mask and scale.
struct soft_max_parts {
    tensor* result = nullptr;
    tensor* x = nullptr;
    tensor* mask = nullptr;
    float scale = 1.0f;
};
inline soft_max_parts soft_max_of(const fused_group& g) noexcept {
    soft_max_parts o;
    o.x = g.parts[0]->src[0];
    for (tensor* t : g.parts) {
        if (t == nullptr) break;
        if (t->op == op_kind::scale) o.scale = t->param<float>(0);
        if (t->op == op_kind::add) o.mask = t->src[1];
        o.result = t;
    }
    return o;
}

/// A stand-in with `result`'s memory, type and shape, computed as op from `srcs`.
inline void become(tensor& t, const tensor& result, op_kind op, std::initializer_list<tensor*> srcs) {
    t = result;
    t.op = op;
    t.src = {};
    std::size_t j = 0;
    for (tensor* s : srcs) t.src[j++] = s;
}

} // namespace fused_detail

/// The groups this device computes fused.
inline bool accepts(const fused_group& g, const features& f) noexcept {
    const auto& p = g.parts;
    switch (g.kind) {
    case fusion::rms_norm_mul: return true; // f32 rows, any strides (core's match)
    case fusion::soft_max_scale_mask: {
        const auto o = fused_detail::soft_max_of(g);
        return o.x->type == elem_type::f32 &&
               (o.mask == nullptr || o.mask->type == elem_type::f32 || (o.mask->type == elem_type::f16 && f.storage16));
    }
    case fusion::mul_mat_add: {
        const tensor* bias = p[1]->src[0] == p[0] ? p[1]->src[1] : p[1]->src[0];
        dispatch d;
        return fused_detail::f32_row(*bias) && p[1]->nb == p[0]->nb && plan_mul_mat(*p[0], f, d);
    }
    case fusion::glu_pair: {
        dispatch d;
        return p[2]->param<std::int32_t>(0) == static_cast<std::int32_t>(glu_op::swiglu) && p[2]->nb == p[0]->nb &&
               p[1]->nb == p[0]->nb && plan_mul_mat(*p[1], f, d);
    }
    case fusion::rope_set_rows: {
        const tensor& r = *p[0];
        const tensor& s = *p[1];
        const tensor& a = *r.src[0];
        const tensor& idx = *s.src[1];
        const tensor& cache = *s.src[2];
        const auto mode = static_cast<rope_mode>(r.param<std::int32_t>(1));
        dispatch d;
        return (mode == rope_mode::normal || mode == rope_mode::neox) && a.type == elem_type::f32 &&
               a.nb[0] == sizeof(float) && idx.type == elem_type::i32 && idx.ne[1] == 1 && idx.ne[2] == 1 &&
               (cache.type == elem_type::f32 || (cache.type == elem_type::f16 && f.storage16)) &&
               cache.nb[0] == type_size(cache.type) && s.nb == cache.nb && plan_rope(r, f, d);
    }
    }
    return false;
}

/// The stand-in of group g, in t (see the file comment).
inline void stand_in(const fused_group& g, tensor& t) {
    using fused_detail::become;
    tensor* const* p = g.parts.data();
    switch (g.kind) {
    case fusion::rms_norm_mul:
        become(t, *p[1], op_kind::rms_norm, {p[0]->src[0], p[1]->src[0] == p[0] ? p[1]->src[1] : p[1]->src[0]});
        t.op_params = p[0]->op_params; // eps
        return;
    case fusion::soft_max_scale_mask: {
        const auto o = fused_detail::soft_max_of(g);
        become(t, *o.result, op_kind::soft_max, {o.x, o.mask});
        t.set_param(0, o.scale);
        t.set_param(1, 0.0f);
        return;
    }
    case fusion::mul_mat_add:
        become(t, *p[1], op_kind::mul_mat,
               {p[0]->src[0], p[0]->src[1], p[1]->src[0] == p[0] ? p[1]->src[1] : p[1]->src[0]});
        return;
    case fusion::glu_pair: become(t, *p[2], op_kind::mul_mat, {p[1]->src[0], p[1]->src[1], p[0]}); return;
    case fusion::rope_set_rows:
        become(t, *p[1], op_kind::rope, {p[0]->src[0], p[0]->src[1], p[0]->src[2], p[1]->src[1]});
        t.op_params = p[0]->op_params;
        return;
    }
}

/// The dispatch of group g's stand-in t (accepts(g, f) holds).
inline bool plan_fused(const fused_group& g, const tensor& t, const features& f, dispatch& d) noexcept {
    switch (g.kind) {
    case fusion::rms_norm_mul:
    case fusion::soft_max_scale_mask: return plan_rows(t, f, d);
    case fusion::mul_mat_add:
    case fusion::glu_pair:
        if (!plan_mul_mat(t, f, d)) return false;
        d.pc.prm[2] = g.kind == fusion::mul_mat_add ? 1u : 2u;
        return true;
    case fusion::rope_set_rows: {
        const tensor& r = *g.parts[0];
        const tensor& idx = *t.src[3];
        if (!plan_rope(r, f, d)) return false;
        d.shader = t.type == elem_type::f16 ? "rope_set_rows_f16" : "rope_set_rows_f32";
        const std::size_t unit = binding_unit(t.type);
        d.pc.nb = {1, static_cast<std::uint32_t>(r.ne[0]), 0, 0};
        d.pc.b_nb[1] = static_cast<std::uint32_t>(idx.nb[0] / sizeof(std::int32_t));
        d.pc.b_nb[2] = static_cast<std::uint32_t>(t.nb[1] / unit);
        d.pc.b_nb[3] = static_cast<std::uint32_t>(t.ne[1]);
        return true;
    }
    }
    return false;
}

} // namespace backplane::vulkan::detail

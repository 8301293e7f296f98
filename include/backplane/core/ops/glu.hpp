#pragma once
// Gated linear units (ggml's GGML_OP_GLU): y = act(x) * g, per row, for the functions of
// glu_op (core/tensor.hpp). Their formulas are core/glu_functions.hpp's, built on the
// activations of core/unary_functions.hpp.
//
// Two forms, as ggml's:
//  - fused, glu(a, fn, swapped): each row of a holds x and g side by side. The result is
//    [a.ne0 / 2, a.ne1, a.ne2, a.ne3]; with nc = a.ne0 / 2, x = a[0, nc) and g = a[nc,
//    2nc), or the other way round when swapped. For an odd a.ne0 the last element of
//    each row is not read (ggml's integer division).
//  - split, glu_split(a, b, fn): x = a, g = b, of a's type and shape; the result has a's
//    shape. It may be computed in place over a.
// The result has a's type: f32, f16 or bf16, computed in f32 and rounded once. a and b
// have contiguous rows (ggml_is_contiguous_1); their other strides are free.
//
// Where this differs from ggml's CPU backend:
//  - geglu and geglu_quick compute gelu and gelu_quick in f32, as the unary gelu and
//    gelu_quick do here; ggml looks them up in f16 tables indexed by f16(x) (a relative
//    difference of up to about 1e-3; gelu also clamps x <= -10 to 0 and x >= 10 to x,
//    which the f32 formula gives within an ulp).
//  - swiglu_oai is defined for f16 and bf16 too (ggml's CPU: f32 only).
//  - the split form with swapped set is refused (ggml ignores swapped there).

#include <backplane/core/ops/node.hpp>

namespace backplane {

namespace detail {
inline tensor* glu_node(context& ctx, tensor* a, tensor* b, glu_op fn, bool swapped, float alpha = 0.0f,
                        float limit = 0.0f) {
    require_tensor("glu", "a", a);
    if (b != nullptr) require_tensor("glu", "b", b);
    auto ne = a->ne;
    if (b == nullptr) ne[0] = a->ne[0] / 2;
    tensor node = proposed(op_kind::glu, a->type, ne, {a, b});
    node.set_param(0, static_cast<std::int32_t>(fn));
    node.set_param(1, static_cast<std::int32_t>(swapped ? 1 : 0));
    node.set_param(2, alpha);
    node.set_param(3, limit);
    if (b == nullptr) return make_node(ctx, node, {{"a", a}});
    return make_node(ctx, node, {{"a", a}, {"b", b}});
}
} // namespace detail

/// act(x) * g with x and g the halves of each row of a (swapped: g first); the result is
/// [a.ne0 / 2, a.ne1, a.ne2, a.ne3]. As ggml's, it leaves swiglu_oai's alpha and limit
/// 0: swiglu_oai() sets them.
inline tensor* glu(context& ctx, tensor* a, glu_op fn, bool swapped = false) {
    return detail::glu_node(ctx, a, nullptr, fn, swapped);
}
/// act(a) * b, b of a's type and shape.
inline tensor* glu_split(context& ctx, tensor* a, tensor* b, glu_op fn) {
    detail::require_tensor("glu", "b", b);
    return detail::glu_node(ctx, a, b, fn, false);
}

/// relu(x) * g
inline tensor* reglu(context& ctx, tensor* a) { return glu(ctx, a, glu_op::reglu); }
inline tensor* reglu_swapped(context& ctx, tensor* a) { return glu(ctx, a, glu_op::reglu, true); }
/// gelu(x) * g (tanh approximation, in f32)
inline tensor* geglu(context& ctx, tensor* a) { return glu(ctx, a, glu_op::geglu); }
inline tensor* geglu_swapped(context& ctx, tensor* a) { return glu(ctx, a, glu_op::geglu, true); }
/// silu(x) * g
inline tensor* swiglu(context& ctx, tensor* a) { return glu(ctx, a, glu_op::swiglu); }
inline tensor* swiglu_swapped(context& ctx, tensor* a) { return glu(ctx, a, glu_op::swiglu, true); }
/// gelu_erf(x) * g
inline tensor* geglu_erf(context& ctx, tensor* a) { return glu(ctx, a, glu_op::geglu_erf); }
inline tensor* geglu_erf_swapped(context& ctx, tensor* a) { return glu(ctx, a, glu_op::geglu_erf, true); }
/// gelu_quick(x) * g (in f32)
inline tensor* geglu_quick(context& ctx, tensor* a) { return glu(ctx, a, glu_op::geglu_quick); }
inline tensor* geglu_quick_swapped(context& ctx, tensor* a) { return glu(ctx, a, glu_op::geglu_quick, true); }

inline tensor* reglu_split(context& ctx, tensor* a, tensor* b) { return glu_split(ctx, a, b, glu_op::reglu); }
inline tensor* geglu_split(context& ctx, tensor* a, tensor* b) { return glu_split(ctx, a, b, glu_op::geglu); }
inline tensor* swiglu_split(context& ctx, tensor* a, tensor* b) { return glu_split(ctx, a, b, glu_op::swiglu); }
inline tensor* geglu_erf_split(context& ctx, tensor* a, tensor* b) { return glu_split(ctx, a, b, glu_op::geglu_erf); }
inline tensor* geglu_quick_split(context& ctx, tensor* a, tensor* b) {
    return glu_split(ctx, a, b, glu_op::geglu_quick);
}

/// OpenAI's clamped swiglu: with x' = min(x, limit) and g' = clamp(g, -limit, limit),
/// x' * sigmoid(alpha x') * (g' + 1). b null: the fused form (x the first half of each
/// row of a, never swapped); else the split form (x = a, g = b).
inline tensor* swiglu_oai(context& ctx, tensor* a, tensor* b, float alpha, float limit) {
    return detail::glu_node(ctx, a, b, glu_op::swiglu_oai, false, alpha, limit);
}

} // namespace backplane

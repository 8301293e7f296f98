#pragma once
// Row-wise ops: sum_rows, argmax, norm, rms_norm, soft_max. A "row" is dimension 0.

#include <backplane/core/ops/node.hpp>

#include <cmath>
#include <string>

namespace backplane {

/// Sum of each row: result f32 [1, ne1, ne2, ne3].
inline tensor* sum_rows(context& ctx, tensor* a) {
    detail::require_tensor("sum_rows", "a", a);
    return detail::make_node(ctx, detail::proposed(op_kind::sum_rows, elem_type::f32, {1, a->ne[1], a->ne[2], a->ne[3]}, {a}),
                             {{"a", a}});
}

/// Index of the largest value of each row (the last one on ties, as ggml): result i32
/// [ne1, ne2, ne3].
inline tensor* argmax(context& ctx, tensor* a) {
    detail::require_tensor("argmax", "a", a);
    return detail::make_node(ctx, detail::proposed(op_kind::argmax, elem_type::i32, {a->ne[1], a->ne[2], a->ne[3], 1}, {a}),
                             {{"a", a}});
}

namespace detail {
inline tensor* row_norm(context& ctx, op_kind op, tensor* a, float eps) {
    require_tensor(to_string(op), "a", a);
    tensor node = proposed(op, a->type, a->ne, {a});
    node.set_param(0, eps);
    return make_node(ctx, node, {{"a", a}});
}
} // namespace detail

/// Each row scaled to unit root mean square: x / sqrt(mean(x^2) + eps).
inline tensor* rms_norm(context& ctx, tensor* a, float eps = 1e-6f) {
    return detail::row_norm(ctx, op_kind::rms_norm, a, eps);
}
/// Each row shifted to zero mean and scaled to unit variance: (x - mean) / sqrt(var + eps).
inline tensor* norm(context& ctx, tensor* a, float eps = 1e-5f) { return detail::row_norm(ctx, op_kind::norm, a, eps); }

/// ggml_soft_max_ext: softmax(a * scale + slope * mask) along rows of f32 a [n_kv, n_rows,
/// n_head, ne3]; the result is f32 of a's shape. The mask (optional, f32 or f16) has a's
/// row length and at least a's rows in dim 1 (row i1 of a reads mask row i1; extra rows
/// are ignored), and is broadcast over dims 2 and 3 (plane (i2 % mask.ne2, i3 % mask.ne3)).
/// max_bias > 0 (ALiBi, needs a mask) gives head h = i2 of n_head = a.ne2 the slope
/// m0^(h+1) for h < n_head_log2, else m1^(2(h - n_head_log2) + 1), with n_head_log2 the
/// largest power of two not above n_head, m0 = 2^(-max_bias / n_head_log2), m1 =
/// 2^(-max_bias / 2 / n_head_log2) (core/alibi.hpp); otherwise the slope is 1. Sinks
/// (soft_max_add_sinks) add probability mass to each row without an output column.
///
/// Difference from ggml: a row whose every logit is -inf (masked everywhere) and that has
/// no sink is all zeros, where ggml's is NaN.
inline tensor* soft_max_ext(context& ctx, tensor* a, tensor* mask, float scale, float max_bias) {
    detail::require_tensor("soft_max", "a", a);
    tensor node = detail::proposed(op_kind::soft_max, a->type, a->ne, {a, mask});
    node.set_param(0, scale);
    node.set_param(1, max_bias);
    return detail::make_node(ctx, node, {{"a", a}, {"mask", mask}});
}

/// soft_max_ext with the defaults of ggml_soft_max (no mask, scale 1, no ALiBi).
inline tensor* soft_max(context& ctx, tensor* a, tensor* mask = nullptr, float scale = 1.0f, float max_bias = 0.0f) {
    return soft_max_ext(ctx, a, mask, scale, max_bias);
}

/// ggml_soft_max_add_sinks: sets the attention sinks of soft_max node `node` (its source 2),
/// an f32 vector of one value per head (a.ne2), and returns the node. With sinks, row (i1,
/// h, i3) takes M = max(max of its logits, sinks[h]) and adds exp(sinks[h] - M) to the
/// sum it divides by; a fully masked row is then all zeros. A node that has sinks already
/// is refused; nothing changes when the sinks are refused.
inline tensor* soft_max_add_sinks(tensor* node, tensor* sinks) {
    detail::require_tensor("soft_max_add_sinks", "node", node);
    detail::require_tensor("soft_max_add_sinks", "sinks", sinks);
    if (node->op != op_kind::soft_max) detail::op_error("soft_max_add_sinks", "the node is not a soft_max", {{"node", node}});
    if (node->src[2] != nullptr) detail::op_error("soft_max_add_sinks", "the node has sinks already", {{"node", node}});
    tensor proposal = *node;
    proposal.src[2] = sinks;
    detail::require_defined(proposal, {{"a", node->src[0]}, {"mask", node->src[1]}, {"sinks", sinks}});
    node->src[2] = sinks;
    return node;
}

} // namespace backplane

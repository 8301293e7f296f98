#pragma once
// Row-wise ops and reductions: sum_rows, sum, mean, argmax, argsort, top_k, soft_max. A
// "row" is dimension 0. The norms are in ops/norm.hpp.

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

/// The sum of every element of a (f32, f16, bf16; any layout): one element of a's type,
/// shape [1, 1, 1, 1]. As ggml's sum, but accumulated in double for every type (ggml: f32
/// in double, f16 in f32) and rounded once to a's type. Empty a: 0. The CPU and CUDA sum
/// in double; Vulkan in f32 (docs/backends/vulkan.md).
inline tensor* sum(context& ctx, tensor* a) {
    detail::require_tensor("sum", "a", a);
    return detail::make_node(ctx, detail::proposed(op_kind::sum, a->type, {1, 1, 1, 1}, {a}), {{"a", a}});
}

/// The mean of each row: result f32 [1, ne1, ne2, ne3], the row's sum (in double) rounded
/// to f32 and divided by ne0 in f32, as ggml's mean. ggml takes f32 only; f16 and bf16
/// rows are also accepted here (widened exactly). Rows must not be empty.
inline tensor* mean(context& ctx, tensor* a) {
    detail::require_tensor("mean", "a", a);
    return detail::make_node(ctx, detail::proposed(op_kind::mean, elem_type::f32, {1, a->ne[1], a->ne[2], a->ne[3]}, {a}),
                             {{"a", a}});
}

/// The indices (i32, a's shape) that sort each row of a (f32, f16, bf16) in `order`, as
/// ggml's argsort. ggml's sort is not stable; this one is: equal values keep ascending
/// index order in both orders, so the result is defined (one of the orders ggml may give).
/// NaNs (which leave ggml's result unspecified) count as larger than +inf, equal to each
/// other: last in ascending order, first in descending order. -0 and +0 are equal.
inline tensor* argsort(context& ctx, tensor* a, sort_order order = sort_order::asc) {
    detail::require_tensor("argsort", "a", a);
    tensor node = detail::proposed(op_kind::argsort, elem_type::i32, a->ne, {a});
    node.set_param(0, static_cast<std::int32_t>(order));
    return detail::make_node(ctx, node, {{"a", a}});
}

/// The indices of the k largest values of each row of a (f32, f16, bf16): result i32
/// [k, ne1, ne2, ne3], 1 <= k <= ne0. The set is ggml's top_k's (the first k of a
/// descending argsort); ggml leaves their order open (it swaps the first two on purpose),
/// here it is defined: descending value, equal values by ascending index, NaNs first (as
/// argsort with sort_order::desc).
inline tensor* top_k(context& ctx, tensor* a, std::int64_t k) {
    detail::require_tensor("top_k", "a", a);
    return detail::make_node(ctx, detail::proposed(op_kind::top_k, elem_type::i32, {k, a->ne[1], a->ne[2], a->ne[3]}, {a}),
                             {{"a", a}});
}

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

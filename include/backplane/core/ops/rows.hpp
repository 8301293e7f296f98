#pragma once
// Row-wise ops and reductions: sum_rows, sum, mean, argmax, argsort, top_k, norm,
// rms_norm, soft_max. A "row" is dimension 0.

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

/// softmax(a * scale + mask) along rows. The mask (f32 or f16, optional) has a's row
/// length, at least a's number of rows in dim 1, and is broadcast over dims 2 and 3.
inline tensor* soft_max(context& ctx, tensor* a, tensor* mask = nullptr, float scale = 1.0f) {
    detail::require_tensor("soft_max", "a", a);
    tensor node = detail::proposed(op_kind::soft_max, a->type, a->ne, {a, mask});
    node.set_param(0, scale);
    return detail::make_node(ctx, node, {{"a", a}, {"mask", mask}});
}

} // namespace backplane

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

/// softmax(a * scale + mask) along rows. The mask (f32 or f16, optional) has a's row
/// length, at least a's number of rows in dim 1, and is broadcast over dims 2 and 3.
inline tensor* soft_max(context& ctx, tensor* a, tensor* mask = nullptr, float scale = 1.0f) {
    detail::require_tensor("soft_max", "a", a);
    tensor node = detail::proposed(op_kind::soft_max, a->type, a->ne, {a, mask});
    node.set_param(0, scale);
    return detail::make_node(ctx, node, {{"a", a}, {"mask", mask}});
}

} // namespace backplane

#pragma once
// Row-wise ops: sum_rows, argmax, norm, rms_norm, soft_max. A "row" is dimension 0.

#include <backplane/core/context.hpp>
#include <backplane/core/detail/describe.hpp>

#include <cmath>
#include <string>

namespace backplane {

/// Sum of each row: result f32 [1, ne1, ne2, ne3].
inline tensor* sum_rows(context& ctx, tensor* a) {
    detail::require_tensor("sum_rows", "a", a);
    if (!detail::is_float_type(a->type)) detail::op_error("sum_rows", "operand must be f32, f16 or bf16", {{"a", a}});
    tensor* r = ctx.new_result(elem_type::f32, {1, a->ne[1], a->ne[2], a->ne[3]});
    r->op = op_kind::sum_rows;
    r->src[0] = a;
    return r;
}

/// Index of the largest value of each row (the first one on ties): result i32 [ne1, ne2, ne3].
inline tensor* argmax(context& ctx, tensor* a) {
    detail::require_tensor("argmax", "a", a);
    if (!detail::is_float_type(a->type)) detail::op_error("argmax", "operand must be f32, f16 or bf16", {{"a", a}});
    if (a->ne[0] == 0) detail::op_error("argmax", "rows are empty", {{"a", a}});
    tensor* r = ctx.new_result(elem_type::i32, {a->ne[1], a->ne[2], a->ne[3], 1});
    r->op = op_kind::argmax;
    r->src[0] = a;
    return r;
}

namespace detail {
inline tensor* row_norm(context& ctx, op_kind op, tensor* a, float eps) {
    const auto name = to_string(op);
    require_tensor(name, "a", a);
    if (a->type != elem_type::f32) op_error(name, "operand must be f32", {{"a", a}});
    if (!(eps >= 0.0f) || !std::isfinite(eps))
        op_error(name, "eps must be finite and non-negative, got " + std::to_string(eps), {{"a", a}});
    tensor* r = ctx.new_result(a->type, a->ne);
    r->op = op;
    r->src[0] = a;
    r->set_param(0, eps);
    return r;
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
    if (a->type != elem_type::f32) detail::op_error("soft_max", "operand must be f32", {{"a", a}, {"mask", mask}});
    if (!std::isfinite(scale)) detail::op_error("soft_max", "scale must be finite", {{"a", a}, {"mask", mask}});
    if (mask != nullptr) {
        if (mask->type != elem_type::f32 && mask->type != elem_type::f16)
            detail::op_error("soft_max", "mask must be f32 or f16", {{"a", a}, {"mask", mask}});
        if (mask->ne[0] != a->ne[0] || mask->ne[1] < a->ne[1] || mask->ne[2] <= 0 || mask->ne[3] <= 0 ||
            a->ne[2] % mask->ne[2] != 0 || a->ne[3] % mask->ne[3] != 0)
            detail::op_error("soft_max",
                             "mask must have a's row length, at least a's rows, and divide a's dims 2 and 3",
                             {{"a", a}, {"mask", mask}});
    }
    tensor* r = ctx.new_result(a->type, a->ne);
    r->op = op_kind::soft_max;
    r->src[0] = a;
    r->src[1] = mask;
    r->set_param(0, scale);
    return r;
}

} // namespace backplane

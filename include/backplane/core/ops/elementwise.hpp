#pragma once
// Element-wise ops: add, sub, mul, div with broadcasting of b over a (each of a's
// extents a multiple of b's, as ggml's repeat rule), add_id (a row of b per expert id),
// scale, concat, and the unary
// functions sqr, sqrt, silu, gelu, relu, neg and those of core/unary_functions.hpp
// (their formulas are there).

#include <backplane/core/ops/node.hpp>

#include <string>
#include <string_view>

namespace backplane {

namespace detail {
inline tensor* binary(context& ctx, op_kind op, tensor* a, tensor* b) {
    require_tensor(to_string(op), "a", a);
    require_tensor(to_string(op), "b", b);
    return make_node(ctx, proposed(op, a->type, a->ne, {a, b}), {{"a", a}, {"b", b}});
}

inline tensor* unary(context& ctx, op_kind op, tensor* a) {
    require_tensor(to_string(op), "a", a);
    return make_node(ctx, proposed(op, a->type, a->ne, {a}), {{"a", a}});
}
} // namespace detail

/// a + b, b broadcast to a's shape.
inline tensor* add(context& ctx, tensor* a, tensor* b) { return detail::binary(ctx, op_kind::add, a, b); }
/// The mixture-of-experts bias, as ggml's add_id: a f32 [ne0, n_used, n_tokens], b f32
/// [ne0, n_expert] (a row per expert), ids i32 [n_used, n_tokens] -> f32 [ne0, n_used,
/// n_tokens] with out[:, i1, i2] = a[:, i1, i2] + b[:, ids[i1, i2]]. An id outside
/// [0, n_expert) (ggml asserts) gives a row of zeros and an errc::out_of_range status of
/// the compute.
inline tensor* add_id(context& ctx, tensor* a, tensor* b, tensor* ids) {
    detail::require_tensor("add_id", "a", a);
    detail::require_tensor("add_id", "b", b);
    detail::require_tensor("add_id", "ids", ids);
    return detail::make_node(ctx, detail::proposed(op_kind::add_id, elem_type::f32, a->ne, {a, b, ids}),
                             {{"a", a}, {"b", b}, {"ids", ids}});
}
/// a - b, b broadcast to a's shape.
inline tensor* sub(context& ctx, tensor* a, tensor* b) { return detail::binary(ctx, op_kind::sub, a, b); }
/// a * b element-wise, b broadcast to a's shape.
inline tensor* mul(context& ctx, tensor* a, tensor* b) { return detail::binary(ctx, op_kind::mul, a, b); }
/// a / b element-wise, b broadcast to a's shape.
inline tensor* div(context& ctx, tensor* a, tensor* b) { return detail::binary(ctx, op_kind::div, a, b); }

/// a * s + bias.
inline tensor* scale(context& ctx, tensor* a, float s, float bias = 0.0f) {
    detail::require_tensor("scale", "a", a);
    tensor node = detail::proposed(op_kind::scale, a->type, a->ne, {a});
    node.set_param(0, s);
    node.set_param(1, bias);
    return detail::make_node(ctx, node, {{"a", a}});
}

inline tensor* sqr(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::sqr, a); }
inline tensor* sqrt(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::sqrt, a); }
/// x * sigmoid(x)
inline tensor* silu(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::silu, a); }
/// tanh approximation: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), as ggml's gelu
inline tensor* gelu(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::gelu, a); }
inline tensor* relu(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::relu, a); }
/// -x (ggml's neg)
inline tensor* neg(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::neg, a); }
inline tensor* abs(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::abs, a); }
/// 1, -1 or 0 by the sign of x (0 for NaN)
inline tensor* sgn(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::sgn, a); }
/// 1 for x > 0, else 0
inline tensor* step(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::step, a); }
inline tensor* tanh(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::tanh, a); }
inline tensor* sigmoid(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::sigmoid, a); }
inline tensor* exp(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::exp, a); }
inline tensor* log(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::log, a); }
inline tensor* sin(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::sin, a); }
inline tensor* cos(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::cos, a); }
/// x for x > 0, else e^x - 1
inline tensor* elu(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::elu, a); }
inline tensor* hardsigmoid(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::hardsigmoid, a); }
inline tensor* hardswish(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::hardswish, a); }
inline tensor* softplus(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::softplus, a); }
/// the exact gelu, 0.5x(1 + erf(x / sqrt 2))
inline tensor* gelu_erf(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::gelu_erf, a); }
/// x * sigmoid(1.702x)
inline tensor* gelu_quick(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::gelu_quick, a); }

/// max(x, 0) + negative_slope * min(x, 0) (ggml's leaky_relu; its in-place flag is the
/// graph allocator's choice here).
inline tensor* leaky_relu(context& ctx, tensor* a, float negative_slope) {
    detail::require_tensor("leaky_relu", "a", a);
    tensor node = detail::proposed(op_kind::leaky_relu, a->type, a->ne, {a});
    node.set_param(0, negative_slope);
    return detail::make_node(ctx, node, {{"a", a}});
}

/// max(min(x, max), min): NaN gives max. ggml's result is always a view of a, written in
/// place; this one is a new tensor, which the graph allocator may place over a.
inline tensor* clamp(context& ctx, tensor* a, float min, float max) {
    detail::require_tensor("clamp", "a", a);
    tensor node = detail::proposed(op_kind::clamp, a->type, a->ne, {a});
    node.set_param(0, min);
    node.set_param(1, max);
    return detail::make_node(ctx, node, {{"a", a}});
}

/// a and b joined along dimension `dim`; every other extent must agree.
inline tensor* concat(context& ctx, tensor* a, tensor* b, int dim) {
    detail::require_tensor("concat", "a", a);
    detail::require_tensor("concat", "b", b);
    auto ne = a->ne;
    if (dim >= 0 && dim < max_dims) ne[static_cast<std::size_t>(dim)] += b->ne[static_cast<std::size_t>(dim)];
    tensor node = detail::proposed(op_kind::concat, a->type, ne, {a, b});
    node.set_param(0, dim);
    return detail::make_node(ctx, node, {{"a", a}, {"b", b}});
}

} // namespace backplane

#pragma once
// Element-wise ops: add, sub, mul, div with broadcasting of b over a (each of a's
// extents a multiple of b's, as ggml's repeat rule), scale, concat, and the unary
// functions sqr, sqrt, silu, gelu, relu.

#include <backplane/core/context.hpp>
#include <backplane/core/detail/describe.hpp>

#include <string>
#include <string_view>

namespace backplane {

namespace detail {
inline tensor* binary(context& ctx, op_kind op, tensor* a, tensor* b) {
    const std::string_view name = to_string(op);
    require_tensor(name, "a", a);
    require_tensor(name, "b", b);
    if (!is_float_type(a->type) || !is_float_type(b->type))
        op_error(name, "operands must be f32, f16 or bf16", {{"a", a}, {"b", b}});
    if (!can_repeat(*b, *a))
        op_error(name, "cannot broadcast b to a's shape (each extent of a must be a multiple of b's)",
                 {{"a", a}, {"b", b}});
    tensor* r = ctx.new_result(a->type, a->ne);
    r->op = op;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

inline tensor* unary(context& ctx, op_kind op, tensor* a) {
    const std::string_view name = to_string(op);
    require_tensor(name, "a", a);
    if (!is_float_type(a->type)) op_error(name, "operand must be f32, f16 or bf16", {{"a", a}});
    tensor* r = ctx.new_result(a->type, a->ne);
    r->op = op;
    r->src[0] = a;
    return r;
}
} // namespace detail

/// a + b, b broadcast to a's shape.
inline tensor* add(context& ctx, tensor* a, tensor* b) { return detail::binary(ctx, op_kind::add, a, b); }
/// a - b, b broadcast to a's shape.
inline tensor* sub(context& ctx, tensor* a, tensor* b) { return detail::binary(ctx, op_kind::sub, a, b); }
/// a * b element-wise, b broadcast to a's shape.
inline tensor* mul(context& ctx, tensor* a, tensor* b) { return detail::binary(ctx, op_kind::mul, a, b); }
/// a / b element-wise, b broadcast to a's shape.
inline tensor* div(context& ctx, tensor* a, tensor* b) { return detail::binary(ctx, op_kind::div, a, b); }

/// a * s + bias.
inline tensor* scale(context& ctx, tensor* a, float s, float bias = 0.0f) {
    tensor* r = detail::unary(ctx, op_kind::scale, a);
    r->set_param(0, s);
    r->set_param(1, bias);
    return r;
}

inline tensor* sqr(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::sqr, a); }
inline tensor* sqrt(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::sqrt, a); }
/// x * sigmoid(x)
inline tensor* silu(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::silu, a); }
/// tanh approximation: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), as ggml's gelu
inline tensor* gelu(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::gelu, a); }
inline tensor* relu(context& ctx, tensor* a) { return detail::unary(ctx, op_kind::relu, a); }

/// a and b joined along dimension `dim`; every other extent must agree.
inline tensor* concat(context& ctx, tensor* a, tensor* b, int dim) {
    detail::require_tensor("concat", "a", a);
    detail::require_tensor("concat", "b", b);
    if (dim < 0 || dim >= max_dims)
        detail::op_error("concat", "dimension " + std::to_string(dim) + " is outside 0..3", {{"a", a}, {"b", b}});
    if (a->type != b->type) detail::op_error("concat", "a and b must have the same type", {{"a", a}, {"b", b}});
    if (is_quantized(a->type)) detail::op_error("concat", "quantized operands are not supported", {{"a", a}, {"b", b}});
    auto ne = a->ne;
    for (std::size_t i = 0; i < max_dims; ++i) {
        if (static_cast<int>(i) == dim) continue;
        if (a->ne[i] != b->ne[i])
            detail::op_error("concat",
                             "extents differ in dimension " + std::to_string(i) + " (joining along " +
                                 std::to_string(dim) + ")",
                             {{"a", a}, {"b", b}});
    }
    ne[static_cast<std::size_t>(dim)] += b->ne[static_cast<std::size_t>(dim)];
    tensor* r = ctx.new_result(a->type, ne);
    r->op = op_kind::concat;
    r->src[0] = a;
    r->src[1] = b;
    r->set_param(0, dim);
    return r;
}

} // namespace backplane

#pragma once
// Element-wise ops: add, sub, mul, div (b broadcast over a) in binary.comp; scale, sqr,
// sqrt, silu, gelu, relu, neg and the functions of core/unary_functions.hpp in
// unary.comp. f32. One invocation per destination element.

#include <backplane/backends/vulkan/ops/common.hpp>

namespace backplane::vulkan::detail {

inline bool plan_elementwise(const tensor& t, const features&, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    const tensor* b = t.src[1];
    if (a == nullptr || t.type != elem_type::f32 || a->type != elem_type::f32) return false;
    const bool b_f32 = b != nullptr && b->type == elem_type::f32;
    switch (t.op) {
    case op_kind::add: d.shader = b_f32 ? "add_f32" : ""; break;
    case op_kind::sub: d.shader = b_f32 ? "sub_f32" : ""; break;
    case op_kind::mul: d.shader = b_f32 ? "mul_f32" : ""; break;
    case op_kind::div: d.shader = b_f32 ? "div_f32" : ""; break;
    case op_kind::scale: d.shader = "scale_f32"; break;
    case op_kind::sqr: d.shader = "sqr_f32"; break;
    case op_kind::sqrt: d.shader = "sqrt_f32"; break;
    case op_kind::silu: d.shader = "silu_f32"; break;
    case op_kind::gelu: d.shader = "gelu_f32"; break;
    case op_kind::relu: d.shader = "relu_f32"; break;
    case op_kind::neg: d.shader = "neg_f32"; break;
    case op_kind::abs: d.shader = "abs_f32"; break;
    case op_kind::sgn: d.shader = "sgn_f32"; break;
    case op_kind::step: d.shader = "step_f32"; break;
    case op_kind::tanh: d.shader = "tanh_f32"; break;
    case op_kind::sigmoid: d.shader = "sigmoid_f32"; break;
    case op_kind::exp: d.shader = "exp_f32"; break;
    case op_kind::log: d.shader = "log_f32"; break;
    case op_kind::sin: d.shader = "sin_f32"; break;
    case op_kind::cos: d.shader = "cos_f32"; break;
    case op_kind::elu: d.shader = "elu_f32"; break;
    case op_kind::hardsigmoid: d.shader = "hardsigmoid_f32"; break;
    case op_kind::hardswish: d.shader = "hardswish_f32"; break;
    case op_kind::softplus: d.shader = "softplus_f32"; break;
    case op_kind::gelu_erf: d.shader = "gelu_erf_f32"; break;
    case op_kind::gelu_quick: d.shader = "gelu_quick_f32"; break;
    case op_kind::leaky_relu: d.shader = "leaky_relu_f32"; break;
    case op_kind::clamp: d.shader = "clamp_f32"; break;
    default: return false;
    }
    if (d.shader.empty()) return false;
    d.pc = shapes_of(t);
    if (t.op == op_kind::scale || t.op == op_kind::leaky_relu || t.op == op_kind::clamp) {
        d.pc.prm[0] = float_bits(t.param<float>(0));
        d.pc.prm[1] = t.op == op_kind::leaky_relu ? 0 : float_bits(t.param<float>(1));
    }
    d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 256);
    return true;
}

} // namespace backplane::vulkan::detail

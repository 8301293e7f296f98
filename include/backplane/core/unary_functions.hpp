#pragma once
// The formulas of the unary functions (ggml's GGML_OP_UNARY kinds, and its separate
// sin, cos, log, leaky_relu and clamp), in f32, written once for every backend whose
// kernels are C++: the CPU's reference kernel and the CUDA kernels call the same
// functors (each is callable on the host and, under nvcc, on the device). Vulkan's
// shaders write the same formulas in GLSL (backends/vulkan/shaders/activation.glsl and
// unary.comp). silu, gelu and relu are here for the gated units (core/glu_functions.hpp)
// and the CPU's unary kernel; CUDA's unary kernel keeps its own rounding-exact forms.
// The CPU's fast row kernels (backends/cpu/fast/rowwise.hpp) call these functors on
// contiguous f32 rows, and evaluate silu, gelu, gelu_quick, sigmoid, tanh and exp in
// SIMD vectors with the constants below (a change of formula here changes them there).
//
//   with_unary_function(node, f) calls f(fn) with the functor of node's op, built from
//   its parameters (leaky_relu's slope; clamp's min and max); false for an op that is
//   not one of these.
//
// Where this differs from ggml's CPU backend:
//  - gelu_quick is x * sigmoid(1.702 x) computed in f32; ggml's CPU looks it up in a
//    table indexed by f16(x), so it rounds the input to f16 first (a relative difference
//    of up to about 1e-3).
//  - clamp computes a new tensor (which the graph allocator may place over a); ggml's
//    result is always a view of a, written in place.

#include <backplane/core/detail/host_device.hpp>
#include <backplane/core/op_kind.hpp>
#include <backplane/core/tensor.hpp>

#include <cmath>

namespace backplane::unary_fn {

/// gelu's sqrt(2 / pi) and cubic coefficient, gelu_quick's sigmoid slope
inline constexpr float gelu_sqrt_2_over_pi = 0.79788456080286535588f;
inline constexpr float gelu_cubic = 0.044715f;
inline constexpr float gelu_quick_slope = 1.702f;

/// x * sigmoid(x)
struct silu_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return x / (1.0f + expf(-x)); }
};
/// ggml's tanh approximation, 0.5x(1 + tanh(u)) with u = sqrt(2/pi)(x + 0.044715x^3),
/// evaluated as x / (1 + exp(-2u)) (the same function): no cancellation for negative x.
struct gelu_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const {
        const float u = gelu_sqrt_2_over_pi * x * (1.0f + gelu_cubic * x * x);
        return x / (1.0f + expf(-2.0f * u));
    }
};
/// max(x, 0)
struct relu_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};

struct abs_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return fabsf(x); }
};
/// 1 for x > 0, -1 for x < 0, else 0 (NaN and both zeros give 0).
struct sgn_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f); }
};
struct step_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return x > 0.0f ? 1.0f : 0.0f; }
};
struct tanh_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return tanhf(x); }
};
struct sigmoid_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return 1.0f / (1.0f + expf(-x)); }
};
struct exp_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return expf(x); }
};
struct log_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return logf(x); }
};
struct sin_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return sinf(x); }
};
struct cos_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return cosf(x); }
};
struct elu_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return x > 0.0f ? x : expm1f(x); }
};
/// min(1, max(0, (x + 3) / 6))
struct hardsigmoid_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return fminf(1.0f, fmaxf(0.0f, (x + 3.0f) / 6.0f)); }
};
struct hardswish_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return x * fminf(1.0f, fmaxf(0.0f, (x + 3.0f) / 6.0f)); }
};
/// log(1 + e^x), x itself above 20
struct softplus_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return x > 20.0f ? x : logf(1.0f + expf(x)); }
};
/// 0.5 x (1 + erf(x / sqrt 2))
struct gelu_erf_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return 0.5f * x * (1.0f + erff(x * 0.70710678f)); }
};
/// x * sigmoid(1.702 x)
struct gelu_quick_fn {
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return x / (1.0f + expf(-gelu_quick_slope * x)); }
};
/// max(x, 0) + slope * min(x, 0)
struct leaky_relu_fn {
    float slope;
    BACKPLANE_HOST_DEVICE float operator()(float x) const { return (x > 0.0f ? x : 0.0f) + slope * (x < 0.0f ? x : 0.0f); }
};
/// max(min(x, hi), lo), as C's comparisons: NaN gives hi
struct clamp_fn {
    float lo, hi;
    BACKPLANE_HOST_DEVICE float operator()(float x) const {
        const float m = x < hi ? x : hi;
        return m > lo ? m : lo;
    }
};

/// Calls f with the functor of node's op; false (f not called) for another op.
template <class F>
bool with_unary_function(const tensor& node, F&& f) {
    switch (node.op) {
    case op_kind::abs: f(abs_fn{}); return true;
    case op_kind::sgn: f(sgn_fn{}); return true;
    case op_kind::step: f(step_fn{}); return true;
    case op_kind::tanh: f(tanh_fn{}); return true;
    case op_kind::sigmoid: f(sigmoid_fn{}); return true;
    case op_kind::exp: f(exp_fn{}); return true;
    case op_kind::log: f(log_fn{}); return true;
    case op_kind::sin: f(sin_fn{}); return true;
    case op_kind::cos: f(cos_fn{}); return true;
    case op_kind::elu: f(elu_fn{}); return true;
    case op_kind::hardsigmoid: f(hardsigmoid_fn{}); return true;
    case op_kind::hardswish: f(hardswish_fn{}); return true;
    case op_kind::softplus: f(softplus_fn{}); return true;
    case op_kind::gelu_erf: f(gelu_erf_fn{}); return true;
    case op_kind::gelu_quick: f(gelu_quick_fn{}); return true;
    case op_kind::leaky_relu: f(leaky_relu_fn{node.param<float>(0)}); return true;
    case op_kind::clamp: f(clamp_fn{node.param<float>(0), node.param<float>(1)}); return true;
    default: return false;
    }
}

} // namespace backplane::unary_fn

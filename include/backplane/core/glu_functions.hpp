#pragma once
// The formulas of the gated linear units (op_kind::glu, ggml's GGML_OP_GLU), in f32: y =
// act(x) * g with the activations of core/unary_functions.hpp, and swiglu_oai. Written
// once for the CPU's reference kernel and the CUDA kernel (each functor is callable on
// the host and, under nvcc, on the device); Vulkan's glu.comp writes them in GLSL with
// the activations of shaders/activation.glsl.
//
//   with_glu_function(node, f) calls f(fn) with the functor fn(x, g) of node's function
//   (param 0, glu_op), built from its parameters (swiglu_oai's alpha and limit); false
//   for a value outside glu_op. halves_of(node) says where x and g start in their rows.

#include <backplane/core/tensor.hpp>
#include <backplane/core/unary_functions.hpp>

#include <cstdint>

namespace backplane::glu_fn {

/// act(x) * g
template <class Act> struct gated {
    Act act;
    BACKPLANE_HOST_DEVICE float operator()(float x, float g) const { return act(x) * g; }
};

/// x' sigmoid(alpha x') (g' + 1), x' = min(x, limit), g' = clamp(g, -limit, limit), with
/// ggml's comparisons (std::min, std::clamp: a NaN x or g passes through).
struct swiglu_oai_fn {
    float alpha, limit;
    BACKPLANE_HOST_DEVICE float operator()(float x, float g) const {
        const float xc = limit < x ? limit : x;
        const float gc = g < -limit ? -limit : (limit < g ? limit : g);
        const float act = xc / (1.0f + expf(alpha * -xc));
        return act * (gc + 1.0f);
    }
};

/// Where x and g start in their rows, in elements: x in src[0]'s rows; g in src[1]'s
/// (the split form) or src[0]'s (fused: the half x is not, nc = node.ne[0] values each).
struct halves {
    std::int64_t x0, g0;
};
inline halves halves_of(const tensor& node) noexcept {
    if (node.src[1] != nullptr) return {0, 0};
    const std::int64_t nc = node.ne[0];
    return node.param<std::int32_t>(1) != 0 ? halves{nc, 0} : halves{0, nc};
}

/// Calls f with the functor of node's glu function; false (f not called) for a value
/// outside glu_op.
template <class F> bool with_glu_function(const tensor& node, F&& f) {
    switch (static_cast<glu_op>(node.param<std::int32_t>(0))) {
    case glu_op::reglu: f(gated<unary_fn::relu_fn>{}); return true;
    case glu_op::geglu: f(gated<unary_fn::gelu_fn>{}); return true;
    case glu_op::swiglu: f(gated<unary_fn::silu_fn>{}); return true;
    case glu_op::swiglu_oai: f(swiglu_oai_fn{node.param<float>(2), node.param<float>(3)}); return true;
    case glu_op::geglu_erf: f(gated<unary_fn::gelu_erf_fn>{}); return true;
    case glu_op::geglu_quick: f(gated<unary_fn::gelu_quick_fn>{}); return true;
    }
    return false;
}

} // namespace backplane::glu_fn

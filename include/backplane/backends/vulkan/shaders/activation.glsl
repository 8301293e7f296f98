// The activation functions in f32, written once for the shaders that apply them
// (unary.comp, glu.comp): the formulas of core/unary_functions.hpp. Functions only, no
// bindings or extensions, so any shader may include it.
//
// gelu: ggml's tanh approximation, written as x / (1 + exp(-2u)), u = sqrt(2/pi)(x +
// 0.044715x^3), as the CPU backend does. tanh from exp, which cannot overflow to inf/inf;
// erf (gelu_erf) by Abramowitz and Stegun 7.1.26 (error < 1.5e-7).
#ifndef BACKPLANE_ACTIVATION_GLSL
#define BACKPLANE_ACTIVATION_GLSL

float erf_as(float x) {
    const float t = 1.0 / (1.0 + 0.3275911 * abs(x));
    const float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
    return x < 0.0 ? -y : y;
}

float tanh_safe(float x) {
    if (abs(x) < 0.5) return tanh(x);
    const float y = 1.0 - 2.0 / (exp(2.0 * abs(x)) + 1.0);
    return x < 0.0 ? -y : y;
}

float act_relu(float x) { return max(x, 0.0); }
float act_silu(float x) { return x / (1.0 + exp(-x)); }
float act_gelu(float x) {
    const float u = 0.79788456080286535588 * x * (1.0 + 0.044715 * x * x);
    return x / (1.0 + exp(-2.0 * u));
}
float act_gelu_erf(float x) { return 0.5 * x * (1.0 + erf_as(x * 0.70710678)); }
float act_gelu_quick(float x) { return x / (1.0 + exp(-1.702 * x)); }

#endif

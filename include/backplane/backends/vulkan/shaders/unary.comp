#version 460
// scale / sqr / sqrt / silu / gelu / relu / neg, and the functions of
// core/unary_functions.hpp (the same formulas), of f32, element by element (any layout).
// scale: x * prm.x + prm.y (floats as bits); leaky_relu: slope prm.x; clamp: min prm.x,
// max prm.y. silu, gelu, relu, tanh, gelu_erf and gelu_quick: activation.glsl.
// variant: scale_f32 -DOP_SCALE
// variant: sqr_f32 -DOP_SQR
// variant: sqrt_f32 -DOP_SQRT
// variant: silu_f32 -DOP_SILU
// variant: gelu_f32 -DOP_GELU
// variant: relu_f32 -DOP_RELU
// variant: neg_f32 -DOP_NEG
// variant: abs_f32 -DOP_ABS
// variant: sgn_f32 -DOP_SGN
// variant: step_f32 -DOP_STEP
// variant: tanh_f32 -DOP_TANH
// variant: sigmoid_f32 -DOP_SIGMOID
// variant: exp_f32 -DOP_EXP
// variant: log_f32 -DOP_LOG
// variant: sin_f32 -DOP_SIN
// variant: cos_f32 -DOP_COS
// variant: elu_f32 -DOP_ELU
// variant: hardsigmoid_f32 -DOP_HARDSIGMOID
// variant: hardswish_f32 -DOP_HARDSWISH
// variant: softplus_f32 -DOP_SOFTPLUS
// variant: gelu_erf_f32 -DOP_GELU_ERF
// variant: gelu_quick_f32 -DOP_GELU_QUICK
// variant: leaky_relu_f32 -DOP_LEAKY_RELU
// variant: clamp_f32 -DOP_CLAMP
#include "common.glsl"
#include "activation.glsl"

layout(local_size_x = 256) in;

layout(binding = 0, std430) readonly buffer A { float a[]; };
layout(binding = 2, std430) writeonly buffer D { float d[]; };

void main() {
    const uint i = linear_id(256);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 c = coords(i, p.ne);
    const float x = a[p.offs.x + at(c, p.a_nb)];
#if defined(OP_SCALE)
    const float r = x * uintBitsToFloat(p.prm.x) + uintBitsToFloat(p.prm.y);
#elif defined(OP_SQR)
    const float r = x * x;
#elif defined(OP_SQRT)
    const float r = sqrt(x);
#elif defined(OP_SILU)
    const float r = act_silu(x);
#elif defined(OP_GELU)
    const float r = act_gelu(x);
#elif defined(OP_NEG)
    const float r = -x;
#elif defined(OP_ABS)
    const float r = abs(x);
#elif defined(OP_SGN)
    const float r = x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0);
#elif defined(OP_STEP)
    const float r = x > 0.0 ? 1.0 : 0.0;
#elif defined(OP_TANH)
    const float r = tanh_safe(x);
#elif defined(OP_SIGMOID)
    const float r = 1.0 / (1.0 + exp(-x));
#elif defined(OP_EXP)
    const float r = exp(x);
#elif defined(OP_LOG)
    const float r = log(x);
#elif defined(OP_SIN)
    const float r = sin(x);
#elif defined(OP_COS)
    const float r = cos(x);
#elif defined(OP_ELU)
    const float r = x > 0.0 ? x : exp(x) - 1.0;
#elif defined(OP_HARDSIGMOID)
    const float r = min(1.0, max(0.0, (x + 3.0) / 6.0));
#elif defined(OP_HARDSWISH)
    const float r = x * min(1.0, max(0.0, (x + 3.0) / 6.0));
#elif defined(OP_SOFTPLUS)
    const float r = x > 20.0 ? x : log(1.0 + exp(x));
#elif defined(OP_GELU_ERF)
    const float r = act_gelu_erf(x);
#elif defined(OP_GELU_QUICK)
    const float r = act_gelu_quick(x);
#elif defined(OP_LEAKY_RELU)
    const float r = max(x, 0.0) + uintBitsToFloat(p.prm.x) * min(x, 0.0);
#elif defined(OP_CLAMP)
    const float hi = uintBitsToFloat(p.prm.y);
    const float lo = uintBitsToFloat(p.prm.x);
    const float m = x < hi ? x : hi;
    const float r = m > lo ? m : lo;
#else
    const float r = act_relu(x);
#endif
    d[p.offs.z + at(c, p.nb)] = r;
}

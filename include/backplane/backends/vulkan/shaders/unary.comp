#version 460
// scale / sqr / sqrt / silu / gelu / relu / neg of f32, element by element (any layout).
// scale: x * prm.x + prm.y (floats as bits). gelu: ggml's tanh approximation, written
// as x / (1 + exp(-2u)), u = sqrt(2/pi)(x + 0.044715x^3), as the CPU backend does.
// variant: scale_f32 -DOP_SCALE
// variant: sqr_f32 -DOP_SQR
// variant: sqrt_f32 -DOP_SQRT
// variant: silu_f32 -DOP_SILU
// variant: gelu_f32 -DOP_GELU
// variant: relu_f32 -DOP_RELU
// variant: neg_f32 -DOP_NEG
#include "common.glsl"

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
    const float r = x / (1.0 + exp(-x));
#elif defined(OP_GELU)
    const float u = 0.79788456080286535588 * x * (1.0 + 0.044715 * x * x);
    const float r = x / (1.0 + exp(-2.0 * u));
#elif defined(OP_NEG)
    const float r = -x;
#else
    const float r = max(x, 0.0);
#endif
    d[p.offs.z + at(c, p.nb)] = r;
}

#version 460
// glu: gated linear units, d = act(x) * g per row (core/glu_functions.hpp; the
// activations of activation.glsl). Fused form: x and g are the halves of each row of a
// (source 0); split form: x from a, g from b (source 1). One invocation per destination
// element; rows of a and b have unit stride (the op's rule), other strides are free; in
// place (the split form, dst sharing a's memory and layout) too, each invocation reading
// its elements before writing its own. f16 and bf16 values are widened exactly, computed
// in f32 and rounded to nearest even once.
//
// Push constants: offs.w the function (glu_op: 0 reglu, 1 geglu, 2 swiglu, 3 swiglu_oai,
// 4 geglu_erf, 5 geglu_quick) plus 256 for the split form; prm.x the offset of x in a's
// rows, prm.y the offset of g in its rows (elements); prm.z alpha, prm.w limit
// (swiglu_oai, floats as bits).
//
//   variant    a, b, dst   needs
//   glu_f32    f32         -
//   glu_f16    f16         16-bit storage (no 16-bit arithmetic)
//   glu_bf16   bf16        16-bit storage
//
// variant: glu_f32 -DA_F32
// variant: glu_f16 -DA_F16
// variant: glu_bf16 -DA_BF16
#include "common.glsl"
#include "convert.glsl"
#include "activation.glsl"

#if defined(A_F16) || defined(A_BF16)
#extension GL_EXT_shader_16bit_storage : require
#define UNIT uint16_t
#else
#define UNIT uint
#endif

layout(local_size_x = 256) in;
layout(binding = 0, std430) readonly buffer A { UNIT a[]; };
layout(binding = 1, std430) readonly buffer B { UNIT b[]; };
layout(binding = 2, std430) writeonly buffer D { UNIT d[]; };

// Values travel through 32-bit registers (16-bit storage allows no 16-bit variables).
#if defined(A_F16)
#define WIDEN(v) uintBitsToFloat(f16_bits_to_f32(uint(v)))
#define NARROW(r) UNIT(f32_bits_to_f16(floatBitsToUint(r)))
#elif defined(A_BF16)
#define WIDEN(v) uintBitsToFloat(bf16_bits_to_f32(uint(v)))
#define NARROW(r) UNIT(f32_bits_to_bf16(floatBitsToUint(r)))
#else
#define WIDEN(v) uintBitsToFloat(v)
#define NARROW(r) floatBitsToUint(r)
#endif

float swiglu_oai(float x, float g, float alpha, float limit) {
    const float xc = limit < x ? limit : x;
    const float gc = g < -limit ? -limit : (limit < g ? limit : g);
    return xc / (1.0 + exp(alpha * -xc)) * (gc + 1.0);
}

void main() {
    const uint i = linear_id(256);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 c = coords(i, p.ne);
    const uint fn = p.offs.w & 255u;
    const bool split = p.offs.w >= 256u;
    const float x = WIDEN(a[p.offs.x + at(c, p.a_nb) + p.prm.x * p.a_nb.x]);
    const float g = split ? WIDEN(b[p.offs.y + at(c, p.b_nb) + p.prm.y * p.b_nb.x])
                          : WIDEN(a[p.offs.x + at(c, p.a_nb) + p.prm.y * p.a_nb.x]);
    float r;
    switch (fn) {
    case 0u: r = act_relu(x) * g; break;
    case 1u: r = act_gelu(x) * g; break;
    case 2u: r = act_silu(x) * g; break;
    case 3u: r = swiglu_oai(x, g, uintBitsToFloat(p.prm.z), uintBitsToFloat(p.prm.w)); break;
    case 4u: r = act_gelu_erf(x) * g; break;
    default: r = act_gelu_quick(x) * g; break;
    }
    d[p.offs.z + at(c, p.nb)] = NARROW(r);
}

#version 460
// im2col: the windows of the input b (source 1) one result row per output position, as
// core/conv_geometry.hpp describes them. The plan describes the 1-D form as a 2-D one of
// height 1, so the shader sees the result as [ic * kh * kw, ow, oh, n] (ne, nb) and b as
// [iw, ih, ic, n] (b_ne, b_nb); the kernel (source 0) is not read: a_ne.xy is its width
// and height, a_nb its stand-ins s0, s1, d0, d1, prm.xy the pads p0, p1. Element (k, x,
// y, i), k = (c * kh + ky) * kw + kx, is b's (x s0 + kx d0 - p0, y s1 + ky d1 - p1, c,
// i), or 0 in the padding. Values are moved as bits, widened (f16 -> f32) exactly or
// rounded (f32 -> f16) to nearest even as core's f32_to_f16. One invocation per result
// element; any strides and offsets.
//
//   variant          b     result  needs
//   im2col_f32_f32   f32   f32     -
//   im2col_f32_f16   f32   f16     16-bit storage
//   im2col_f16_f32   f16   f32     16-bit storage
//   im2col_f16_f16   f16   f16     16-bit storage
//
// variant: im2col_f32_f32
// variant: im2col_f32_f16 -DD_F16
// variant: im2col_f16_f32 -DB_F16
// variant: im2col_f16_f16 -DB_F16 -DD_F16
#include "common.glsl"
#include "convert.glsl"

#if defined(B_F16) || defined(D_F16)
#extension GL_EXT_shader_16bit_storage : require
#endif
#if defined(B_F16)
#define B_UNIT uint16_t
#else
#define B_UNIT uint
#endif
#if defined(D_F16)
#define D_UNIT uint16_t
#else
#define D_UNIT uint
#endif

layout(local_size_x = 128) in;
layout(binding = 1, std430) readonly buffer B { B_UNIT b[]; };
layout(binding = 2, std430) writeonly buffer D { D_UNIT d[]; };

// The bits of input value v (b's bits) in the result's type.
uint converted(uint v) {
#if defined(B_F16) && !defined(D_F16)
    return f16_bits_to_f32(v);
#elif !defined(B_F16) && defined(D_F16)
    return f32_bits_to_f16(v);
#else
    return v;
#endif
}

void main() {
    const uint i = linear_id(128);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 c = coords(i, p.ne); // (k, x, y, image)
    const uint kx = c.x % p.a_ne.x;
    const uint ky = (c.x / p.a_ne.x) % p.a_ne.y;
    const uint channel = c.x / (p.a_ne.x * p.a_ne.y);
    const int ix = int(c.y * p.a_nb.x + kx * p.a_nb.z) - int(p.prm.x);
    const int iy = int(c.z * p.a_nb.y + ky * p.a_nb.w) - int(p.prm.y);
    uint v = 0u; // +0.0 in both types
    if (ix >= 0 && ix < int(p.b_ne.x) && iy >= 0 && iy < int(p.b_ne.y))
        v = converted(uint(b[p.offs.y + at(uvec4(uint(ix), uint(iy), channel, c.w), p.b_nb)]));
    d[p.offs.z + at(c, p.nb)] = D_UNIT(v);
}

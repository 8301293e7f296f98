#version 460
// conv_transpose_1d and conv_transpose_2d: the kernel a (source 0) over the f32 input b
// (source 1) into f32, in the 2-D form core/conv_geometry.hpp describes (the plan gives
// the 1-D form height 1 and zero strides there): the result [ow, oh, oc, n] (ne, nb), a
// [kw, kh, oc, ic] (a_ne, a_nb), b [iw, ih, ic, n] (b_ne, b_nb), the strides prm.xy.
// Result (x, y, o, i) gathers, input row by input row and position by position
// (increasing, the CPU's order), the f32 sum over the channels c of a[x - ix s0, y - iy
// s1, o, c] * b[ix, iy, c, i] for the input positions whose taps reach (x, y); each
// product rounded on its own (no contraction); with an f16 kernel each input value is
// rounded to f16 first, as the CPU's. One invocation per result element; any strides and
// offsets.
//
//   variant               kernel  needs
//   conv_transpose_f32    f32     -
//   conv_transpose_f16    f16     16-bit storage (no 16-bit arithmetic)
//
// variant: conv_transpose_f32
// variant: conv_transpose_f16 -DK_F16
#include "common.glsl"
#include "convert.glsl"

#if defined(K_F16)
#extension GL_EXT_shader_16bit_storage : require
#define K_UNIT uint16_t
#else
#define K_UNIT uint
#endif

layout(local_size_x = 128) in;
layout(binding = 0, std430) readonly buffer A { K_UNIT a[]; };
layout(binding = 1, std430) readonly buffer B { float b[]; };
layout(binding = 2, std430) writeonly buffer D { float d[]; };

float kernel_value(uint u) {
#if defined(K_F16)
    return uintBitsToFloat(f16_bits_to_f32(u));
#else
    return uintBitsToFloat(u);
#endif
}

float input_value(float v) {
#if defined(K_F16)
    return uintBitsToFloat(f16_bits_to_f32(f32_bits_to_f16(floatBitsToUint(v))));
#else
    return v;
#endif
}

// The input positions along one dimension whose taps reach x: [first, last] (k taps,
// stride s, n positions); empty when first > last.
ivec2 reaching(uint x, uint k, uint s, uint n) {
    const int lo = int(x) - int(k) + 1;
    const int first = lo <= 0 ? 0 : (lo + int(s) - 1) / int(s);
    const int last = min(int(x / s), int(n) - 1);
    return ivec2(first, last);
}

void main() {
    const uint i = linear_id(128);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 c = coords(i, p.ne); // (x, y, o, image)
    const uint s0 = p.prm.x, s1 = p.prm.y;
    const ivec2 ry = reaching(c.y, p.a_ne.y, s1, p.b_ne.y);
    const ivec2 rx = reaching(c.x, p.a_ne.x, s0, p.b_ne.x);
    precise float sum = 0.0;
    for (int iy = ry.x; iy <= ry.y; ++iy)
        for (int ix = rx.x; ix <= rx.y; ++ix) {
            const uint kx = c.x - uint(ix) * s0, ky = c.y - uint(iy) * s1;
            precise float dot = 0.0;
            for (uint ch = 0u; ch < p.a_ne.w; ++ch) {
                const float v = input_value(b[p.offs.y + at(uvec4(uint(ix), uint(iy), ch, c.w), p.b_nb)]);
                const float k = kernel_value(uint(a[p.offs.x + at(uvec4(kx, ky, c.z, ch), p.a_nb)]));
                precise float product = k * v;
                dot += product;
            }
            sum += dot;
        }
    d[p.offs.z + at(c, p.nb)] = sum;
}

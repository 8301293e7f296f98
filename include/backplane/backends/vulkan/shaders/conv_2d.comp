#version 460
// conv_2d (ggml's conv_2d_direct): the kernel a (source 0) [kw, kh, ic, oc] over the f32
// input b (source 1) [iw, ih, ic, n] into f32 [ow, oh, oc, n]. Result (x, y, o, i) sums
// a[kx, ky, c, o] * b[x s0 + kx d0 - p0, y s1 + ky d1 - p1, c, i] over the taps inside b,
// in f32, in the CPU's order (channel, kernel row, kernel column), each product rounded on
// its own (no contraction); with an f16 kernel each input value is rounded to f16 first,
// as the CPU's. One invocation per result element; any strides and offsets.
//
// Push constants: the window in prm (s0, s1, p0, p1), offs.w (d0) and a_ne.w (d1; the
// kernel's output channels are the result's ne.z).
//
//   variant       kernel  needs
//   conv_2d_f32   f32     -
//   conv_2d_f16   f16     16-bit storage (no 16-bit arithmetic)
//
// variant: conv_2d_f32
// variant: conv_2d_f16 -DK_F16
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

// Kernel value u (its bits) as f32.
float kernel_value(uint u) {
#if defined(K_F16)
    return uintBitsToFloat(f16_bits_to_f32(u));
#else
    return uintBitsToFloat(u);
#endif
}

// Input value v as the product reads it: rounded to the kernel's type.
float input_value(float v) {
#if defined(K_F16)
    return uintBitsToFloat(f16_bits_to_f32(f32_bits_to_f16(floatBitsToUint(v))));
#else
    return v;
#endif
}

void main() {
    const uint i = linear_id(128);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 c = coords(i, p.ne); // (x, y, o, image)
    const int x0 = int(c.x * p.prm.x) - int(p.prm.z);
    const int y0 = int(c.y * p.prm.y) - int(p.prm.w);
    const uint d0 = p.offs.w, d1 = p.a_ne.w;
    precise float sum = 0.0;
    for (uint ch = 0u; ch < p.a_ne.z; ++ch)
        for (uint ky = 0u; ky < p.a_ne.y; ++ky) {
            const int iy = y0 + int(ky * d1);
            if (iy < 0 || iy >= int(p.b_ne.y)) continue;
            for (uint kx = 0u; kx < p.a_ne.x; ++kx) {
                const int ix = x0 + int(kx * d0);
                if (ix < 0 || ix >= int(p.b_ne.x)) continue;
                const float v = input_value(b[p.offs.y + at(uvec4(uint(ix), uint(iy), ch, c.w), p.b_nb)]);
                const float k = kernel_value(uint(a[p.offs.x + at(uvec4(kx, ky, ch, c.z), p.a_nb)]));
                precise float product = k * v;
                sum += product;
            }
        }
    d[p.offs.z + at(c, p.nb)] = sum;
}

#version 460
// conv_2d_dw (ggml's conv_2d_dw_direct): the f32 kernel a (source 0) [kw, kh, 1, c] over
// the f32 input b (source 1) [iw, ih, c, n] into f32 [ow, oh, c, n], each channel by its
// own kernel plane. Result (x, y, ch, i) sums a[kx, ky, 0, ch] * b[x s0 + kx d0 - p0, y s1
// + ky d1 - p1, ch, i] over the taps inside b, in f32, kernel row by kernel row (the
// CPU's order), each product rounded on its own (no contraction). Any strides and
// offsets: the channel-last layout (ggml's CWHN: the result's strides as the input's) is
// one of them. One invocation per result element.
//
// Push constants: the window in prm (s0, s1, p0, p1), offs.w (d0) and a_ne.z (d1; the
// kernel's dimension 2 has extent 1 and is never indexed).
#include "common.glsl"

layout(local_size_x = 128) in;
layout(binding = 0, std430) readonly buffer A { float a[]; };
layout(binding = 1, std430) readonly buffer B { float b[]; };
layout(binding = 2, std430) writeonly buffer D { float d[]; };

void main() {
    const uint i = linear_id(128);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 c = coords(i, p.ne); // (x, y, channel, image)
    const int x0 = int(c.x * p.prm.x) - int(p.prm.z);
    const int y0 = int(c.y * p.prm.y) - int(p.prm.w);
    const uint d0 = p.offs.w, d1 = p.a_ne.z;
    precise float sum = 0.0;
    for (uint ky = 0u; ky < p.a_ne.y; ++ky) {
        const int iy = y0 + int(ky * d1);
        if (iy < 0 || iy >= int(p.b_ne.y)) continue;
        for (uint kx = 0u; kx < p.a_ne.x; ++kx) {
            const int ix = x0 + int(kx * d0);
            if (ix < 0 || ix >= int(p.b_ne.x)) continue;
            const float v = b[p.offs.y + at(uvec4(uint(ix), uint(iy), c.z, c.w), p.b_nb)];
            const float k = a[p.offs.x + at(uvec4(kx, ky, 0u, c.z), p.a_nb)];
            precise float product = k * v;
            sum += product;
        }
    }
    d[p.offs.z + at(c, p.nb)] = sum;
}

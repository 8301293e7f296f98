#version 460
// pool_1d and pool_2d: element c of dst (f32) is the max or the average of the window
// whose first cell is (c.x s0 - p0, c.y s1 - p1) in plane (c.z, c.w) of a (source 0),
// k0 cells along dimension 0 and k1 along dimension 1 (pool_1d: k1 = s1 = 1, p1 = 0).
// Cells outside a (the padding) are skipped; max starts at -FLT_MAX, avg divides the f32
// sum by the cells inside a (pool_1d; 0 for none) or by k0 k1 (pool_2d). The sum runs in
// the CPU's order: the window's rows, then the cells of a row.
//   b_ne  k0, k1, s0, s1
//   b_nb  p0, p1, the pooling (0 max, 1 avg), avg over the cells inside a (1) or k0 k1 (0)
// One invocation per destination element; any strides and offsets.
//
//   pool_f32  a f32
//   pool_f16  a f16 (needs 16-bit storage)
//
// variant: pool_f32 -DA_F32
// variant: pool_f16 -DA_F16
#include "common.glsl"
#include "convert.glsl"

#if defined(A_F16)
#extension GL_EXT_shader_16bit_storage : require
layout(binding = 0, std430) readonly buffer A { uint16_t a[]; };
float load_a(uint i) { return uintBitsToFloat(f16_bits_to_f32(uint(a[i]))); }
#else
layout(binding = 0, std430) readonly buffer A { float a[]; };
float load_a(uint i) { return a[i]; }
#endif
layout(binding = 2, std430) writeonly buffer D { float d[]; };

layout(local_size_x = 128) in;

void main() {
    const uint i = linear_id(128);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 c = coords(i, p.ne);
    const int x0 = int(c.x * p.b_ne.z) - int(p.b_nb.x);
    const int y0 = int(c.y * p.b_ne.w) - int(p.b_nb.y);
    const int x1 = min(x0 + int(p.b_ne.x), int(p.a_ne.x));
    const int y1 = min(y0 + int(p.b_ne.y), int(p.a_ne.y));
    const bool is_max = p.b_nb.z == 0u;
    precise float acc = is_max ? uintBitsToFloat(0xff7fffffu) : 0.0; // -FLT_MAX
    uint inside = 0u;
    for (int y = max(y0, 0); y < y1; ++y) {
        const uint row = p.offs.x + uint(y) * p.a_nb.y + c.z * p.a_nb.z + c.w * p.a_nb.w;
        for (int x = max(x0, 0); x < x1; ++x) {
            const float v = load_a(row + uint(x) * p.a_nb.x);
            acc = is_max ? (v < acc ? acc : v) : acc + v;
            ++inside;
        }
    }
    if (!is_max) acc = p.b_nb.w != 0u ? (inside > 0u ? acc / float(inside) : 0.0) : acc / float(p.b_ne.x * p.b_ne.y);
    d[p.offs.z + at(c, p.nb)] = acc;
}

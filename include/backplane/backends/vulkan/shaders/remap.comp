#version 460
// pad_reflect_1d and roll: element c of dst is element j of a (source 0, dst's type),
// each coordinate of j from c's own (core/index_maps.hpp):
//   p.offs.w = 0  pad_reflect_1d: j.x = c.x - p0, reflected at a's ends (-1 -> 1,
//                 a_ne.x -> a_ne.x - 2); p0 is p.prm.x; the other coordinates are c's
//   p.offs.w = 1  roll: j = (c - shift) mod a_ne, the shifts p.prm as ints
// Elements are copied as bits. One invocation per destination element; any strides and
// offsets.
//
//   remap_32   f32
//   remap_16   f16, bf16 (needs 16-bit storage)
//
// variant: remap_32 -DUNIT32
// variant: remap_16 -DUNIT16
#include "common.glsl"

#if defined(UNIT16)
#extension GL_EXT_shader_16bit_storage : require
#define UNIT uint16_t
#else
#define UNIT uint
#endif

layout(local_size_x = 128) in;
layout(binding = 0, std430) readonly buffer A { UNIT a[]; };
layout(binding = 2, std430) writeonly buffer D { UNIT d[]; };

uint reflected(uint i, int p0, uint n) {
    const int j = int(i) - p0;
    return uint(j < 0 ? -j : j >= int(n) ? 2 * (int(n) - 1) - j : j);
}

uint rolled(uint i, int shift, uint n) {
    const int j = (int(i) - shift) % int(n);
    return uint(j < 0 ? j + int(n) : j);
}

void main() {
    const uint i = linear_id(128);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 c = coords(i, p.ne);
    const ivec4 prm = ivec4(p.prm);
    uvec4 j;
    if (p.offs.w == 0u)
        j = uvec4(reflected(c.x, prm.x, p.a_ne.x), c.yzw);
    else
        j = uvec4(rolled(c.x, prm.x, p.a_ne.x), rolled(c.y, prm.y, p.a_ne.y), rolled(c.z, prm.z, p.a_ne.z),
                  rolled(c.w, prm.w, p.a_ne.w));
    d[p.offs.z + at(c, p.nb)] = a[p.offs.x + at(j, p.a_nb)];
}

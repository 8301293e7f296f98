#version 460
// pad and arange.
//
// pad: element c of dst is element c - lp of a (source 0, dst's type) where that lies
// inside a, else 0; with p.offs.w = 1 (circular), element (c - lp) mod a_ne. lp, the
// leading pads, is p.prm (as uints); the trailing ones follow from the extents. Elements
// are copied as bits. One invocation per destination element; any strides and offsets.
//
// arange: d[i] = start + step * i in f32, start and step the bits of p.prm.x and p.prm.y
// (the product rounded on its own: no contraction).
//
//   pad_32      f32
//   pad_16      f16, bf16 (needs 16-bit storage)
//   arange_f32  f32
//
// variant: pad_32 -DPAD -DUNIT32
// variant: pad_16 -DPAD -DUNIT16
// variant: arange_f32 -DARANGE -DUNIT32
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

// The source index of dst index i along a dimension of extent n with lp leading pads, or
// -1 for a pad.
int padded_source(uint i, uint lp, uint n, bool circular) {
    const int j = int(i) - int(lp);
    if (circular) return ((j % int(n)) + int(n)) % int(n);
    return j >= 0 && j < int(n) ? j : -1;
}

void main() {
    const uint i = linear_id(128);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
#if defined(PAD)
    const uvec4 c = coords(i, p.ne);
    const bool circular = p.offs.w != 0u;
    const ivec4 j = ivec4(padded_source(c.x, p.prm.x, p.a_ne.x, circular), padded_source(c.y, p.prm.y, p.a_ne.y, circular),
                          padded_source(c.z, p.prm.z, p.a_ne.z, circular), padded_source(c.w, p.prm.w, p.a_ne.w, circular));
    uint v = 0u; // +0.0 in every float type; values travel through 32-bit registers
    if (all(greaterThanEqual(j, ivec4(0)))) v = uint(a[p.offs.x + at(uvec4(j), p.a_nb)]);
    d[p.offs.z + at(c, p.nb)] = UNIT(v);
#else
    precise float scaled = uintBitsToFloat(p.prm.y) * float(i);
    precise float v = uintBitsToFloat(p.prm.x) + scaled;
    d[p.offs.z + i * p.nb.x] = floatBitsToUint(v);
#endif
}

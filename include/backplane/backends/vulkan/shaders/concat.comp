#version 460
// concat: dst = a and b (source 0 and source 1, of dst's type) joined along dimension
// prm.x: element c of dst comes from a while c[dim] < a_ne[dim], else from b at c with
// c[dim] - a_ne[dim]. Elements are copied as bits (exact for every type). One invocation
// per destination element; every operand may have any strides and offsets.
//
//   concat_32   f32, i32
//   concat_16   f16, bf16, and the quantized types but mxfp4 in 16-bit words (needs
//               16-bit storage)
//   concat_8    mxfp4 in bytes (its 17-byte blocks are not 2-byte aligned; needs 8-bit
//               storage)
// (A quantized type's rows are described in units, not values: ops/concat.hpp.)
//
// variant: concat_32 -DUNIT32
// variant: concat_16 -DUNIT16
// variant: concat_8 -DUNIT8
#include "common.glsl"

#if defined(UNIT16)
#extension GL_EXT_shader_16bit_storage : require
#define UNIT uint16_t
#elif defined(UNIT8)
#extension GL_EXT_shader_8bit_storage : require
#define UNIT uint8_t
#else
#define UNIT uint
#endif
// Values travel through 32-bit registers (16-bit storage allows no 16-bit variables).

layout(local_size_x = 128) in;
layout(binding = 0, std430) readonly buffer A { UNIT a[]; };
layout(binding = 1, std430) readonly buffer B { UNIT b[]; };
layout(binding = 2, std430) writeonly buffer D { UNIT d[]; };

void main() {
    const uint i = linear_id(128);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 c = coords(i, p.ne);
    const uint dim = p.prm.x;
    const uint split = p.a_ne[dim];
    uint v;
    if (c[dim] < split) {
        v = uint(a[p.offs.x + at(c, p.a_nb)]);
    } else {
        uvec4 cb = c;
        cb[dim] -= split;
        v = uint(b[p.offs.y + at(cb, p.b_nb)]);
    }
    d[p.offs.z + at(c, p.nb)] = UNIT(v);
}

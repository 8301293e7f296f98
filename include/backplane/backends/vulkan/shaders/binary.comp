#version 460
// add / sub / mul / div of f32: dst = a (op) b, b broadcast to a's shape (its extents
// divide a's). One invocation per destination element.
// variant: add_f32 -DOP_ADD
// variant: sub_f32 -DOP_SUB
// variant: mul_f32 -DOP_MUL
// variant: div_f32 -DOP_DIV
#include "common.glsl"

layout(local_size_x = 256) in;
layout(binding = 0, std430) readonly buffer A { float a[]; };
layout(binding = 1, std430) readonly buffer B { float b[]; };
layout(binding = 2, std430) writeonly buffer D { float d[]; };

void main() {
    const uint i = linear_id(256);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 c = coords(i, p.ne);
    const float x = a[p.offs.x + at(c, p.a_nb)];
    const float y = b[p.offs.y + at(c % p.b_ne, p.b_nb)];
#if defined(OP_ADD)
    const float r = x + y;
#elif defined(OP_SUB)
    const float r = x - y;
#elif defined(OP_MUL)
    const float r = x * y;
#else
    const float r = x / y;
#endif
    d[p.offs.z + at(c, p.nb)] = r;
}

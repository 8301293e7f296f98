#version 460
// dup / cont / cpy of f32 into f32: destination element i (in its own shape's order)
// is source element i (in the source's shape's order); the shapes may differ, the
// element counts are equal.
// variant: cpy_f32_f32
#include "common.glsl"

layout(local_size_x = 256) in;
layout(binding = 0, std430) readonly buffer A { float a[]; };
layout(binding = 2, std430) writeonly buffer D { float d[]; };

void main() {
    const uint i = linear_id(256);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    d[p.offs.z + at(coords(i, p.ne), p.nb)] = a[p.offs.x + at(coords(i, p.a_ne), p.a_nb)];
}

#version 460
// add_id: dst [ne0, n_used, n_tokens] (f32) with dst[i0, i1, i2] = a[i0, i1, i2] +
// b[i0, ids[i1, i2]]: a (source 0, f32) [ne0, n_used, n_tokens], b (source 1, f32)
// [ne0, n_expert], ids (source 2, i32, binding 4 at offset offs.w, strides prm.x and
// prm.y) [n_used, n_tokens]. One invocation per destination element; any strides and
// offsets.
//
// An id outside [0, n_expert) reads nothing: its whole row of dst is written with zeros
// (as the CPU's kernel writes it) and the row's first invocation raises ERROR_INDEX in the
// stream's error word (binding 3), which synchronize() reports as errc::out_of_range.
// variant: add_id_f32
#include "common.glsl"

layout(local_size_x = 256) in;
layout(binding = 0, std430) readonly buffer A { float a[]; };
layout(binding = 1, std430) readonly buffer B { float b[]; };
layout(binding = 2, std430) writeonly buffer D { float d[]; };
layout(binding = 3, std430) buffer E { uint error_word; };
layout(binding = 4, std430) readonly buffer I { int ids[]; };

void main() {
    const uint i = linear_id(256);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 c = coords(i, p.ne);
    const int e = ids[p.offs.w + c.y * p.prm.x + c.z * p.prm.y];
    float v = 0.0;
    if (e >= 0 && uint(e) < p.b_ne.y)
        v = a[p.offs.x + at(c, p.a_nb)] + b[p.offs.y + c.x * p.b_nb.x + uint(e) * p.b_nb.y];
    else if (c.x == 0u)
        atomicOr(error_word, ERROR_INDEX);
    d[p.offs.z + at(c, p.nb)] = v;
}

#version 460
// The window ops, which move values (as bits) between a (source 0) and the result:
//   win_part     a [ch, w0, h0, 1] -> [ch, w, w, npx * npy]: window (px, py) = ix / npx
//                split as i3 = py npx + px; element (e, x, y, i3) is a's (e, px w + x, py
//                w + y), or 0 past a's edge. prm.x = npx, prm.y = w.
//   win_unpart   a [ch, w, w, np] -> [ch, w0, h0, 1]: element (e, x, y) is a's (e, x mod
//                w, y mod w, (y / w) npx + x / w). prm.x = npx, prm.y = w.
//   get_rel_pos  a [ch, 2 qh - 1] f16 -> f16 [ch, kh, qh]: element (e, k, q) is a's (e, kh
//                - 1 - k + q). 16-bit storage.
// One invocation per result element; any strides and offsets.
//
// variant: win_part_f32 -DWIN_PART
// variant: win_unpart_f32 -DWIN_UNPART
// variant: get_rel_pos_f16 -DREL_POS
#include "common.glsl"

#if defined(REL_POS)
#extension GL_EXT_shader_16bit_storage : require
#define UNIT uint16_t
#else
#define UNIT uint
#endif

layout(local_size_x = 128) in;
layout(binding = 0, std430) readonly buffer A { UNIT a[]; };
layout(binding = 2, std430) writeonly buffer D { UNIT d[]; };

void main() {
    const uint i = linear_id(128);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 c = coords(i, p.ne);
#if defined(WIN_PART)
    const uint npx = p.prm.x, w = p.prm.y;
    const uint sx = (c.w % npx) * w + c.y, sy = (c.w / npx) * w + c.z;
    uint v = 0u; // +0.0
    if (sx < p.a_ne.y && sy < p.a_ne.z) v = uint(a[p.offs.x + at(uvec4(c.x, sx, sy, 0u), p.a_nb)]);
#elif defined(WIN_UNPART)
    const uint npx = p.prm.x, w = p.prm.y;
    const uint v = uint(a[p.offs.x + at(uvec4(c.x, c.y % w, c.z % w, (c.z / w) * npx + c.y / w), p.a_nb)]);
#else
    const uint v = uint(a[p.offs.x + at(uvec4(c.x, p.ne.y - 1u - c.y + c.z, 0u, 0u), p.a_nb)]);
#endif
    d[p.offs.z + at(c, p.nb)] = UNIT(v); // 16-bit values as stored (only 16-bit storage)
}

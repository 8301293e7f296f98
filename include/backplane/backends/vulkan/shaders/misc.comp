#version 460
// repeat, tri and diag: element c of dst is an element of a (source 0, dst's type) copied
// as bits, or 0: repeat's c mod a_ne; tri's c where the triangle prm.x (tri_type) keeps
// column c.x of row c.y; diag's (c.x, 0, c.z, c.w) on the diagonal c.x == c.y.
// repeat_back: element c of dst (f32) is the sum, in f32, of a's elements c + k * ne.
// cumsum: each row's running sums, added from the left in f32 as the CPU; one invocation
// per row. timestep_embedding: row i of dst for timestep a[i]: cos(a[i] * f_j) at j,
// sin(a[i] * f_j) at j + half, f_j = exp(-prm.y * j / half) (prm.x = half = dim / 2,
// prm.y the bits of log(max_period) as the host's f32 log gives it), 0 past 2 half.
// out_prod: dst[c] = sum over k of a[c.x, k, c.z / (ne.z / a_ne.z), c.w / (ne.w / a_ne.w)]
// * b[c.y, k, c.z, c.w] in f32 (source 1 b). Every op but cumsum: one invocation per
// destination element; any strides and offsets.
//
//   repeat_32        f32, i32
//   repeat_16        f16, bf16 (needs 16-bit storage)
//   tri_f32, diag_f32, repeat_back_f32, cumsum_f32, timestep_embedding_f32, out_prod_f32   f32
//
// variant: repeat_32 -DREPEAT -DUNIT32
// variant: repeat_16 -DREPEAT -DUNIT16
// variant: tri_f32 -DTRI
// variant: diag_f32 -DDIAG
// variant: repeat_back_f32 -DREPEAT_BACK
// variant: cumsum_f32 -DCUMSUM
// variant: timestep_embedding_f32 -DTIMESTEP
// variant: out_prod_f32 -DOUT_PROD
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
#if defined(OUT_PROD)
layout(binding = 1, std430) readonly buffer B { float b[]; };
#endif

float a_at(uvec4 c) { return uintBitsToFloat(uint(a[p.offs.x + at(c, p.a_nb)])); }

#if defined(CUMSUM)
void main() {
    const uint row = linear_id(128);
    if (row >= p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 r = coords(row, uvec4(1u, p.ne.y, p.ne.z, p.ne.w));
    float sum = 0.0;
    for (uint i0 = 0u; i0 < p.ne.x; ++i0) {
        const float x = a_at(uvec4(i0, r.y, r.z, r.w));
        sum = i0 == 0u ? x : sum + x;
        d[p.offs.z + at(uvec4(i0, r.y, r.z, r.w), p.nb)] = floatBitsToUint(sum);
    }
}
#else
// True when tri of type `type` keeps column i0 of row i1 (core/tri_type.hpp).
bool tri_keeps(uint type, uint i0, uint i1) {
    if (type == 0u) return i0 >= i1;
    if (type == 1u) return i0 > i1;
    if (type == 2u) return i0 <= i1;
    return i0 < i1;
}

void main() {
    const uint i = linear_id(128);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 c = coords(i, p.ne);
    uint v = 0u; // +0.0 in every float type; values travel through 32-bit registers
#if defined(REPEAT)
    v = uint(a[p.offs.x + at(c % p.a_ne, p.a_nb)]);
#elif defined(TRI)
    if (tri_keeps(p.prm.x, c.x, c.y)) v = a[p.offs.x + at(c, p.a_nb)];
#elif defined(DIAG)
    if (c.x == c.y) v = a[p.offs.x + at(uvec4(c.x, 0u, c.z, c.w), p.a_nb)];
#elif defined(REPEAT_BACK)
    float sum = 0.0;
    for (uint j3 = c.w; j3 < p.a_ne.w; j3 += p.ne.w)
        for (uint j2 = c.z; j2 < p.a_ne.z; j2 += p.ne.z)
            for (uint j1 = c.y; j1 < p.a_ne.y; j1 += p.ne.y)
                for (uint j0 = c.x; j0 < p.a_ne.x; j0 += p.ne.x) sum += a_at(uvec4(j0, j1, j2, j3));
    v = floatBitsToUint(sum);
#elif defined(TIMESTEP)
    const uint half_dim = p.prm.x;
    const float t = a_at(uvec4(c.y, 0u, 0u, 0u));
    const uint j = c.x < half_dim ? c.x : c.x - half_dim;
    precise float arg = t * exp(-uintBitsToFloat(p.prm.y) * float(j) / float(half_dim));
    if (c.x < half_dim) v = floatBitsToUint(cos(arg));
    else if (c.x < 2u * half_dim) v = floatBitsToUint(sin(arg));
#elif defined(OUT_PROD)
    const uvec4 ca = uvec4(c.x, 0u, c.z / (p.ne.z / p.a_ne.z), c.w / (p.ne.w / p.a_ne.w));
    float sum = 0.0;
    for (uint k = 0u; k < p.a_ne.y; ++k)
        sum += a_at(uvec4(ca.x, k, ca.z, ca.w)) * b[p.offs.y + at(uvec4(c.y, k, c.z, c.w), p.b_nb)];
    v = floatBitsToUint(sum);
#endif
    d[p.offs.z + at(c, p.nb)] = UNIT(v);
}
#endif

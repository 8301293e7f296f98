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
// * b[c.y, k, c.z, c.w] in f32 (source 1 b). count_equal: one workgroup counts the
// positions where a and b (i32) are equal and writes an i64 (two words, low first). acc:
// a[c] (a contiguous, its element c at byte 4 at(c, a_nb)) plus b's element j where that
// byte lies in the view (prm: nb1, nb2, nb3, offset in bytes; core/acc_view.hpp). Every op
// but cumsum and count_equal: one invocation per destination element; any strides and
// offsets.
//
//   repeat_32        f32, i32
//   repeat_16        f16, bf16 (needs 16-bit storage)
//   tri_f32, diag_f32, repeat_back_f32, cumsum_f32, timestep_embedding_f32, out_prod_f32,
//   acc_f32          f32
//   count_equal_i32  i32 -> i64
//
// variant: repeat_32 -DREPEAT -DUNIT32
// variant: repeat_16 -DREPEAT -DUNIT16
// variant: tri_f32 -DTRI
// variant: diag_f32 -DDIAG
// variant: repeat_back_f32 -DREPEAT_BACK
// variant: cumsum_f32 -DCUMSUM
// variant: timestep_embedding_f32 -DTIMESTEP
// variant: out_prod_f32 -DOUT_PROD
// variant: count_equal_i32 -DCOUNT_EQUAL
// variant: acc_f32 -DACC
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
#if defined(OUT_PROD) || defined(ACC)
layout(binding = 1, std430) readonly buffer B { float b[]; };
#elif defined(COUNT_EQUAL)
layout(binding = 1, std430) readonly buffer B { uint b[]; };
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
#elif defined(COUNT_EQUAL)
shared uint s_count[128];

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint n = p.a_ne.x * p.a_ne.y * p.a_ne.z * p.a_ne.w;
    uint count = 0u;
    for (uint e = tid; e < n; e += 128u) {
        const uvec4 c = coords(e, p.a_ne);
        if (a[p.offs.x + at(c, p.a_nb)] == b[p.offs.y + at(c, p.b_nb)]) ++count;
    }
    s_count[tid] = count;
    barrier();
    for (uint k = 64u; k > 0u; k >>= 1) {
        if (tid < k) s_count[tid] += s_count[tid + k];
        barrier();
    }
    if (tid == 0u) {
        d[p.offs.z] = s_count[0];
        d[p.offs.z + 1u] = 0u; // counts stay below 2^32 (32-bit extents)
    }
}
#else
#if defined(ACC)
// True when byte `at` of the destination lies in acc's view at b's element j (as
// core/acc_view.hpp's acc_source).
bool acc_source(uint at, out uvec4 j) {
    j = uvec4(0u);
    if (at < p.prm.w) return false;
    uint rel = at - p.prm.w;
    const uvec4 nb = uvec4(4u, p.prm.x, p.prm.y, p.prm.z);
    uvec4 span;
    span.y = 4u * p.b_ne.x;
    span.z = span.y + (p.b_ne.y - 1u) * nb.y;
    span.w = span.z + (p.b_ne.z - 1u) * nb.z;
    for (int k = 3; k >= 1; --k) {
        const uint jk = p.b_ne[k] > 1u ? rel / nb[k] : 0u;
        if (jk >= p.b_ne[k]) return false;
        rel -= jk * nb[k];
        if (rel >= span[k]) return false; // in a gap between the view's rows
        j[k] = jk;
    }
    j.x = rel / 4u;
    return j.x < p.b_ne.x;
}
#endif

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
#elif defined(ACC)
    float x = a_at(c);
    uvec4 j;
    if (acc_source(4u * at(c, p.a_nb), j)) x += b[p.offs.y + at(j, p.b_nb)];
    v = floatBitsToUint(x);
#endif
    d[p.offs.z + at(c, p.nb)] = UNIT(v);
}
#endif

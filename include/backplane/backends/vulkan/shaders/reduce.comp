#version 460
// sum_rows, mean, sum and argmax of f32, f16 or bf16 rows (a row is dimension 0 of
// source 0; any strides). One workgroup of WG invocations per row: invocation k takes
// elements k, k + WG, k + 2 WG, ... (adjacent invocations read adjacent elements), then
// the WG partial results meet in a tree in shared memory.
//   sum_rows  f32 [1, ne1, ne2, ne3]: the row's sum, in f32 with every addition's
//             rounding error kept (two_sum) and added back at the end: close to the
//             CPU's sum in double.
//   mean      f32 [1, ne1, ne2, ne3]: that sum divided by ne0 in f32, as ggml.
//   sum       one element of a's type: the sum of every element of a, one workgroup
//             striding over all of them (dimension 0 fastest), summed as sum_rows.
//   argmax    i32 [ne1, ne2, ne3] (the row's coordinates sit in the result's dims 0, 1,
//             2): the index of the row's last maximum, as ggml. Exact, as the CPU
//             backend: a value at or above the best so far replaces it, so NaNs never
//             win and a row of NaNs gives 0; partials meet by (larger value, then
//             larger index), which keeps the last maximum.
// 16-bit sources (f16, bf16) need 16-bit storage. WG is a power of two.
// variant: sum_rows_f32_64 -DOP_SUM -DA_F32 -DWG=64
// variant: sum_rows_f32_256 -DOP_SUM -DA_F32 -DWG=256
// variant: sum_rows_f16_64 -DOP_SUM -DA_F16 -DWG=64
// variant: sum_rows_f16_256 -DOP_SUM -DA_F16 -DWG=256
// variant: sum_rows_bf16_64 -DOP_SUM -DA_BF16 -DWG=64
// variant: sum_rows_bf16_256 -DOP_SUM -DA_BF16 -DWG=256
// variant: mean_f32_64 -DOP_MEAN -DA_F32 -DWG=64
// variant: mean_f32_256 -DOP_MEAN -DA_F32 -DWG=256
// variant: mean_f16_64 -DOP_MEAN -DA_F16 -DWG=64
// variant: mean_f16_256 -DOP_MEAN -DA_F16 -DWG=256
// variant: mean_bf16_64 -DOP_MEAN -DA_BF16 -DWG=64
// variant: mean_bf16_256 -DOP_MEAN -DA_BF16 -DWG=256
// variant: sum_f32_64 -DOP_TOTAL -DA_F32 -DWG=64
// variant: sum_f32_256 -DOP_TOTAL -DA_F32 -DWG=256
// variant: sum_f16_64 -DOP_TOTAL -DA_F16 -DWG=64
// variant: sum_f16_256 -DOP_TOTAL -DA_F16 -DWG=256
// variant: sum_bf16_64 -DOP_TOTAL -DA_BF16 -DWG=64
// variant: sum_bf16_256 -DOP_TOTAL -DA_BF16 -DWG=256
// variant: argmax_f32_64 -DOP_ARGMAX -DA_F32 -DWG=64
// variant: argmax_f32_256 -DOP_ARGMAX -DA_F32 -DWG=256
// variant: argmax_f16_64 -DOP_ARGMAX -DA_F16 -DWG=64
// variant: argmax_f16_256 -DOP_ARGMAX -DA_F16 -DWG=256
// variant: argmax_bf16_64 -DOP_ARGMAX -DA_BF16 -DWG=64
// variant: argmax_bf16_256 -DOP_ARGMAX -DA_BF16 -DWG=256
#include "common.glsl"
#include "convert.glsl"

layout(local_size_x = WG) in;

#if defined(A_F32)
layout(binding = 0, std430) readonly buffer A { float a[]; };
float load_a(uint i) { return a[i]; }
#elif defined(A_F16)
#extension GL_EXT_shader_16bit_storage : require
layout(binding = 0, std430) readonly buffer A { float16_t a[]; };
float load_a(uint i) { return float(a[i]); }
#else
#extension GL_EXT_shader_16bit_storage : require
layout(binding = 0, std430) readonly buffer A { uint16_t a[]; };
float load_a(uint i) { return uintBitsToFloat(bf16_bits_to_f32(uint(a[i]))); }
#endif

#if defined(OP_ARGMAX)
layout(binding = 2, std430) writeonly buffer D { int d[]; };
shared float s_val[WG];
shared uint s_idx[WG];
#else
#if defined(OP_TOTAL) && defined(A_F16)
layout(binding = 2, std430) writeonly buffer D { uint16_t d[]; };
void store_d(uint i, float x) { d[i] = uint16_t(f32_bits_to_f16(floatBitsToUint(x))); }
#elif defined(OP_TOTAL) && defined(A_BF16)
layout(binding = 2, std430) writeonly buffer D { uint16_t d[]; };
void store_d(uint i, float x) { d[i] = uint16_t(f32_bits_to_bf16(floatBitsToUint(x))); }
#else
layout(binding = 2, std430) writeonly buffer D { float d[]; };
void store_d(uint i, float x) { d[i] = x; }
#endif
shared float s_sum[WG];
shared float s_err[WG];

// The compensated sum acc (value, accumulated rounding error) plus x.
vec2 add_kept(vec2 acc, float x) {
    const vec2 t = two_sum(acc.x, x);
    return vec2(t.x, acc.y + t.y);
}

// The workgroup's total of every invocation's compensated sum (in every invocation).
float group_total(vec2 acc) {
    const uint tid = gl_LocalInvocationID.x;
    s_sum[tid] = acc.x;
    s_err[tid] = acc.y;
    barrier();
    for (uint k = WG / 2; k > 0; k >>= 1) {
        if (tid < k) {
            const vec2 t = two_sum(s_sum[tid], s_sum[tid + k]);
            s_sum[tid] = t.x;
            s_err[tid] += s_err[tid + k] + t.y;
        }
        barrier();
    }
    return s_sum[0] + s_err[0];
}
#endif

#if defined(OP_TOTAL)
void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint n = p.a_ne.x * p.a_ne.y * p.a_ne.z * p.a_ne.w;
    vec2 acc = vec2(0.0);
    for (uint i = tid; i < n; i += WG) acc = add_kept(acc, load_a(p.offs.x + at(coords(i, p.a_ne), p.a_nb)));
    const float total = group_total(acc);
    if (tid == 0) store_d(p.offs.z, total);
}
#else
void main() {
    const uint row = group_id();
    if (row >= p.a_ne.y * p.a_ne.z * p.a_ne.w) return; // the whole workgroup leaves
    const uint i1 = row % p.a_ne.y;
    const uint i2 = (row / p.a_ne.y) % p.a_ne.z;
    const uint i3 = row / (p.a_ne.y * p.a_ne.z);
    const uint base = p.offs.x + i1 * p.a_nb.y + i2 * p.a_nb.z + i3 * p.a_nb.w;
    const uint ne0 = p.a_ne.x;
    const uint tid = gl_LocalInvocationID.x;

#if !defined(OP_ARGMAX)
    vec2 acc = vec2(0.0);
    for (uint i = tid; i < ne0; i += WG) acc = add_kept(acc, load_a(base + i * p.a_nb.x));
    const float total = group_total(acc);
#if defined(OP_MEAN)
    const float result = total / float(ne0);
#else
    const float result = total;
#endif
    if (tid == 0) store_d(p.offs.z + i1 * p.nb.y + i2 * p.nb.z + i3 * p.nb.w, result);
#else
    float best = uintBitsToFloat(0xff800000u); // -inf
    uint best_i = 0;
    for (uint i = tid; i < ne0; i += WG) {
        const float v = load_a(base + i * p.a_nb.x);
        if (v >= best) {
            best = v;
            best_i = i;
        }
    }
    s_val[tid] = best;
    s_idx[tid] = best_i;
    barrier();
    for (uint k = WG / 2; k > 0; k >>= 1) {
        if (tid < k) {
            const float v = s_val[tid + k];
            const uint vi = s_idx[tid + k];
            if (v > s_val[tid] || (v == s_val[tid] && vi > s_idx[tid])) {
                s_val[tid] = v;
                s_idx[tid] = vi;
            }
        }
        barrier();
    }
    if (tid == 0) d[p.offs.z + i1 * p.nb.x + i2 * p.nb.y + i3 * p.nb.z] = int(s_idx[0]);
#endif
}
#endif

#version 460
// soft_max of f32 rows: softmax(a * scale + slope * mask) along dimension 0. The optional
// mask (source 1, f32 or f16; f16 needs 16-bit storage) has a's row length: row (i1, i2,
// i3) of a takes mask row (i1, i2 % mask ne2, i3 % mask ne3). ALiBi's slope of head i2
// is alibi.glsl's (core/alibi.hpp), 1 without ALiBi. The optional sinks (source 2, f32, one per head) join each row's
// maximum and add exp(sink - max) to its sum. A row whose logits are all -inf (masked
// everywhere) and that has no sink is all zeros, not NaN. Any strides; the destination
// may be source 0's own memory with its layout.
//
// Push constants: prm.x scale, prm.y m0, prm.z m1 (float bits), prm.w n_head_log2 (0:
// no ALiBi); ne.x the sinks' stride (binding units; 0: no sinks), offs.w their offset
// (the destination's extents are a's, read from a_ne).
//
// One workgroup of WG invocations per row, each taking the elements k, k + WG, ...: a
// pass for the row's maximum, one for the sum of exp(logit - max) (in f32), one that
// writes exp(logit - max) / sum. The logits are recomputed in every pass rather than
// stored, so each element is written by the invocation that read it last, after every
// read of the row: in place is safe. WG is a power of two.
// variant: soft_max_f32_64 -DWG=64
// variant: soft_max_f32_256 -DWG=256
// variant: soft_max_f32_mask_f32_64 -DMASK_F32 -DWG=64
// variant: soft_max_f32_mask_f32_256 -DMASK_F32 -DWG=256
// variant: soft_max_f32_mask_f16_64 -DMASK_F16 -DWG=64
// variant: soft_max_f32_mask_f16_256 -DMASK_F16 -DWG=256
#include "common.glsl"
#include "alibi.glsl"

layout(local_size_x = WG) in;
layout(binding = 0, std430) readonly buffer A { float a[]; };
#if defined(MASK_F32)
layout(binding = 1, std430) readonly buffer M { float m[]; };
#elif defined(MASK_F16)
#extension GL_EXT_shader_16bit_storage : require
layout(binding = 1, std430) readonly buffer M { float16_t m[]; };
#endif
layout(binding = 2, std430) writeonly buffer D { float d[]; };
layout(binding = 4, std430) readonly buffer S { float sinks[]; };

#define NEG_INF uintBitsToFloat(0xff800000u)

shared float s_red[WG];

// The maximum (sum, when !is_max) of every invocation's v (all of the workgroup must
// call it).
float workgroup_reduce(float v, bool is_max) {
    const uint tid = gl_LocalInvocationID.x;
    s_red[tid] = v;
    barrier();
    for (uint k = WG / 2; k > 0; k >>= 1) {
        if (tid < k) s_red[tid] = is_max ? max(s_red[tid], s_red[tid + k]) : s_red[tid] + s_red[tid + k];
        barrier();
    }
    const float r = s_red[0];
    barrier(); // s_red may be reused
    return r;
}

uint src;  // row start in a
uint mrow; // row start in the mask

float slope; // ALiBi's, of the row's head

float logit(uint i) {
    float v = a[src + i * p.a_nb.x] * uintBitsToFloat(p.prm.x);
#if defined(MASK_F32) || defined(MASK_F16)
    precise float biased = slope * float(m[mrow + i * p.b_nb.x]);
    v += biased;
#endif
    return v;
}

void main() {
    const uint row = group_id();
    if (row >= p.a_ne.y * p.a_ne.z * p.a_ne.w) return; // the whole workgroup leaves
    const uint i1 = row % p.a_ne.y;
    const uint i2 = (row / p.a_ne.y) % p.a_ne.z;
    const uint i3 = row / (p.a_ne.y * p.a_ne.z);
    src = p.offs.x + i1 * p.a_nb.y + i2 * p.a_nb.z + i3 * p.a_nb.w;
#if defined(MASK_F32) || defined(MASK_F16)
    mrow = p.offs.y + i1 * p.b_nb.y + (i2 % p.b_ne.z) * p.b_nb.z + (i3 % p.b_ne.w) * p.b_nb.w;
#endif
    const uint dst = p.offs.z + i1 * p.nb.y + i2 * p.nb.z + i3 * p.nb.w;
    const uint ne0 = p.a_ne.x;
    const uint tid = gl_LocalInvocationID.x;
    slope = alibi_slope(i2, uintBitsToFloat(p.prm.y), uintBitsToFloat(p.prm.z), p.prm.w);
    const bool has_sink = p.ne.x != 0u;
    const float sink = has_sink ? sinks[p.offs.w + i2 * p.ne.x] : NEG_INF;

    float mx = NEG_INF;
    for (uint i = tid; i < ne0; i += WG) mx = max(mx, logit(i));
    mx = max(workgroup_reduce(mx, true), sink);
    if (mx == NEG_INF) { // every position masked, no sink: no mass anywhere
        for (uint i = tid; i < ne0; i += WG) d[dst + i * p.nb.x] = 0.0;
        return;
    }
    float sum = 0.0;
    for (uint i = tid; i < ne0; i += WG) {
        const float l = logit(i);
        sum += l == NEG_INF ? 0.0 : exp(l - mx);
    }
    sum = workgroup_reduce(sum, false);
    if (has_sink) sum += exp(sink - mx);
    const float inv = 1.0 / sum;
    for (uint i = tid; i < ne0; i += WG) {
        const float l = logit(i);
        d[dst + i * p.nb.x] = l == NEG_INF ? 0.0 : exp(l - mx) * inv;
    }
}

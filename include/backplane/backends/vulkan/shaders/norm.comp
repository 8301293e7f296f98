#version 460
// norm, rms_norm and l2_norm of f32 rows (a row is dimension 0), and group_norm of f32
// groups of channels (source and destination with any strides, the destination possibly
// source 0's own memory with its layout).
//   norm        (x - mean) / sqrt(var + eps), the variance in a second pass over the row
//               as the CPU backend computes it (sum of (x - mean)^2, not E[x^2] - mean^2)
//   rms_norm    x / sqrt(mean(x^2) + eps)
//   l2_norm     x / max(sqrt(sum(x^2)), eps)
//   group_norm  norm's formula over all values of a group of channels [c0, c1) of one
//               sample i3: prm.y channels per group, prm.z groups holding channels
//               (core/channel_groups.hpp); one workgroup per (group, sample)
// eps: prm.x (float bits). One workgroup of WG invocations per row (or group), each taking
// the elements k, k + WG, ... and summing in f32; the partial sums meet in a tree in
// shared memory. Every element is written by the invocation that read it last, after
// every read of the row, so in place is safe. WG is a power of two.
// variant: norm_f32_64 -DOP_NORM -DWG=64
// variant: norm_f32_256 -DOP_NORM -DWG=256
// variant: rms_norm_f32_64 -DWG=64
// variant: rms_norm_f32_256 -DWG=256
// variant: l2_norm_f32_64 -DOP_L2 -DWG=64
// variant: l2_norm_f32_256 -DOP_L2 -DWG=256
// variant: group_norm_f32_64 -DGROUP -DWG=64
// variant: group_norm_f32_256 -DGROUP -DWG=256
// MUL (the fused rms_norm_mul of core/fusion.hpp): each result times w (source 1, f32,
// broadcast over the rows: w's row i1 % b_ne.y, i2 % b_ne.z, i3 % b_ne.w), as mul would.
// variant: rms_norm_mul_f32_64 -DWG=64 -DMUL
// variant: rms_norm_mul_f32_256 -DWG=256 -DMUL
#include "common.glsl"

layout(local_size_x = WG) in;
layout(binding = 0, std430) readonly buffer A { float a[]; };
layout(binding = 2, std430) writeonly buffer D { float d[]; };
#if defined(MUL)
layout(binding = 1, std430) readonly buffer W { float w[]; };
#endif

shared float s_sum[WG];

// The sum of every invocation's v (all of the workgroup must call it).
float workgroup_sum(float v) {
    const uint tid = gl_LocalInvocationID.x;
    s_sum[tid] = v;
    barrier();
    for (uint k = WG / 2; k > 0; k >>= 1) {
        if (tid < k) s_sum[tid] += s_sum[tid + k];
        barrier();
    }
    const float r = s_sum[0];
    barrier(); // s_sum may be reused
    return r;
}

#if defined(GROUP)
// The binding index of element e (dimension 0 fastest) of the channels from c0 of sample i3,
// in a tensor of strides nb at offset off.
uint group_element(uint e, uint c0, uint i3, uvec4 nb, uint off) {
    const uint r = e / p.a_ne.x;
    return off + (e % p.a_ne.x) * nb.x + (r % p.a_ne.y) * nb.y + (c0 + r / p.a_ne.y) * nb.z + i3 * nb.w;
}

void main() {
    const uint unit = group_id();
    if (unit >= p.prm.z * p.a_ne.w) return; // the whole workgroup leaves
    const uint c0 = (unit % p.prm.z) * p.prm.y;
    const uint i3 = unit / p.prm.z;
    const uint n = p.a_ne.x * p.a_ne.y * (min(c0 + p.prm.y, p.a_ne.z) - c0);
    const uint tid = gl_LocalInvocationID.x;
    const float eps = uintBitsToFloat(p.prm.x);

    float sum = 0.0;
    for (uint e = tid; e < n; e += WG) sum += a[group_element(e, c0, i3, p.a_nb, p.offs.x)];
    const float mean = workgroup_sum(sum) / float(n);
    float sum2 = 0.0;
    for (uint e = tid; e < n; e += WG) {
        const float v = a[group_element(e, c0, i3, p.a_nb, p.offs.x)] - mean;
        sum2 += v * v;
    }
    const float inv = 1.0 / sqrt(workgroup_sum(sum2) / float(n) + eps);
    for (uint e = tid; e < n; e += WG)
        d[group_element(e, c0, i3, p.nb, p.offs.z)] = (a[group_element(e, c0, i3, p.a_nb, p.offs.x)] - mean) * inv;
}
#else
void main() {
    const uint row = group_id();
    if (row >= p.a_ne.y * p.a_ne.z * p.a_ne.w) return; // the whole workgroup leaves
    const uint i1 = row % p.a_ne.y;
    const uint i2 = (row / p.a_ne.y) % p.a_ne.z;
    const uint i3 = row / (p.a_ne.y * p.a_ne.z);
    const uint src = p.offs.x + i1 * p.a_nb.y + i2 * p.a_nb.z + i3 * p.a_nb.w;
    const uint dst = p.offs.z + i1 * p.nb.y + i2 * p.nb.z + i3 * p.nb.w;
    const uint ne0 = p.a_ne.x;
    const uint tid = gl_LocalInvocationID.x;
    const float eps = uintBitsToFloat(p.prm.x);

    float mean = 0.0;
#if defined(OP_NORM)
    float sum = 0.0;
    for (uint i = tid; i < ne0; i += WG) sum += a[src + i * p.a_nb.x];
    mean = workgroup_sum(sum) / float(ne0);
#endif
    float sum2 = 0.0;
    for (uint i = tid; i < ne0; i += WG) {
        const float v = a[src + i * p.a_nb.x] - mean;
        sum2 += v * v;
    }
#if defined(OP_L2)
    const float inv = 1.0 / max(sqrt(workgroup_sum(sum2)), eps);
#else
    const float inv = 1.0 / sqrt(workgroup_sum(sum2) / float(ne0) + eps);
#endif
#if defined(MUL)
    const uint wr = p.offs.y + (i1 % p.b_ne.y) * p.b_nb.y + (i2 % p.b_ne.z) * p.b_nb.z + (i3 % p.b_ne.w) * p.b_nb.w;
    for (uint i = tid; i < ne0; i += WG) {
        precise float v = (a[src + i * p.a_nb.x] - mean) * inv; // rounded as rms_norm's result
        d[dst + i * p.nb.x] = v * w[wr + i * p.b_nb.x];
    }
#else
    for (uint i = tid; i < ne0; i += WG) d[dst + i * p.nb.x] = (a[src + i * p.a_nb.x] - mean) * inv;
#endif
}
#endif

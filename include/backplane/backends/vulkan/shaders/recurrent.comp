#version 460
// The recurrences of state-space models, f32, in the CPU reference kernels' order of
// operations (backends/cpu/kernels/recurrent.hpp).
//
// ssm_conv: dst[i, t, k] = sum over j < b_ne.x (d_conv) of a[t + j, i, k] * b[j, i]: sx
// (source 0) and c (source 1) in any strides and offsets. One invocation per destination
// element.
//
// ssm_scan: s (source 0: [d_state, head_dim, n_head, n_rs], a_ne), x (source 1:
// [head_dim, n_head, n_t, n_s], b_ne, its dims 2 and 3 strided by b_nb.z and b_nb.w), dt
// (source 2, binding 4, offset offs.w), A (source 3, binding 5, offset a_nb.x), B and C
// (sources 4 and 5, bindings 6 and 7, offsets b_nb.x and a_nb.y), ids (source 6, binding 8,
// offset b_nb.y): every source but x contiguous, x's dims 0 and 1 packed (ops/common.hpp
// offset_word: sources 3 to 6 take those words). prm.x: n_group, prm.y: A's ne0 (1 or
// d_state), prm.z: x's elements (where the states start in dst). One invocation per
// (i, head, sequence) runs the tokens in order and keeps its states in dst. A state id
// outside [0, n_rs) reads nothing: zeros, and ERROR_INDEX in the error word.
//
// variant: ssm_conv_f32 -DSSM_CONV
// variant: ssm_scan_f32 -DSSM_SCAN
#include "common.glsl"

layout(local_size_x = 128) in;
layout(binding = 0, std430) readonly buffer A0 { float a[]; };
layout(binding = 1, std430) readonly buffer B0 { float b[]; };
layout(binding = 2, std430) buffer D { float d[]; };
layout(binding = 3, std430) buffer E { uint error_word; };
#if defined(SSM_SCAN)
layout(binding = 4, std430) readonly buffer S2 { float src2[]; };
layout(binding = 5, std430) readonly buffer S3 { float src3[]; };
layout(binding = 6, std430) readonly buffer S4 { float src4[]; };
layout(binding = 7, std430) readonly buffer S5 { float src5[]; };
layout(binding = 8, std430) readonly buffer S6 { int src6[]; };
#endif

#if defined(SSM_CONV)
void main() {
    const uint e = linear_id(128);
    if (e >= p.ne.x * p.ne.y * p.ne.z) return;
    const uvec4 c = coords(e, p.ne); // (channel, token, sequence)
    precise float sum = 0.0;
    for (uint j = 0u; j < p.b_ne.x; ++j)
        sum += a[p.offs.x + (c.y + j) * p.a_nb.x + c.x * p.a_nb.y + c.z * p.a_nb.z] * b[p.offs.y + j * p.b_nb.x + c.x * p.b_nb.y];
    d[p.offs.z + at(c, p.nb)] = sum;
}
#elif defined(SSM_SCAN)
float softplus_f32(float x) {
    precise float e1 = 1.0 + exp(x);
    return x > 20.0 ? x : log(e1);
}

void main() {
    const uint d_state = p.a_ne.x, head_dim = p.b_ne.x, n_head = p.b_ne.y, n_t = p.b_ne.z, n_s = p.b_ne.w;
    const uint u = linear_id(128);
    if (u >= head_dim * n_head * n_s) return;
    const uint i = u % head_dim, h = (u / head_dim) % n_head, k = u / (head_dim * n_head);
    const uint n_group = p.prm.x, g = h / (n_head / n_group);
    const bool per_state = p.prm.y != 1u;
    const uint st = p.offs.z + p.prm.z + ((k * n_head + h) * head_dim + i) * d_state;
    const int id = src6[p.b_nb.y + k];
    if (id < 0 || uint(id) >= p.a_ne.w) {
        if (i == 0u) atomicOr(error_word, ERROR_INDEX);
        for (uint t = 0u; t < n_t; ++t) d[p.offs.z + ((k * n_t + t) * n_head + h) * head_dim + i] = 0.0;
        for (uint n = 0u; n < d_state; ++n) d[st + n] = 0.0;
        return;
    }
    const uint s0 = p.offs.x + ((uint(id) * n_head + h) * head_dim + i) * d_state;
    for (uint t = 0u; t < n_t; ++t) {
        const float dt = softplus_f32(src2[p.offs.w + (k * n_t + t) * n_head + h]);
        precise float dA = exp(dt * src3[p.a_nb.x + h * p.prm.y]);
        precise float x_dt = b[p.offs.y + i + h * head_dim + t * p.b_nb.z + k * p.b_nb.w] * dt;
        const uint bc = ((k * n_t + t) * n_group + g) * d_state;
        precise float sum = 0.0;
        for (uint n = 0u; n < d_state; ++n) {
            const float prev = t == 0u ? a[s0 + n] : d[st + n];
            precise float decay = per_state ? exp(dt * src3[p.a_nb.x + h * p.prm.y + n]) : dA;
            precise float state = prev * decay + src4[p.b_nb.x + bc + n] * x_dt;
            sum += state * src5[p.a_nb.y + bc + n];
            d[st + n] = state;
        }
        d[p.offs.z + ((k * n_t + t) * n_head + h) * head_dim + i] = sum;
    }
}
#endif

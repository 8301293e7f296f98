#version 460
// The recurrences of state-space and linear-attention models, f32, in the CPU reference kernels' order of
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
// gated_linear_attn (WHICH 0: k, v, q, g, state), rwkv_wkv6 (1: k, v, r, tf, td, state),
// rwkv_wkv7 (2: r, w, k, v, a, b, state): every source contiguous, sources 0 and 1 at
// bindings 0 and 1 (offsets offs.x, offs.y), sources 2 to 6 at bindings 4 to 8 (offsets
// offs.w, a_nb.x, b_nb.x, a_nb.y, b_nb.y); a_ne is source 0's [S, H, T], prm.x n_seqs,
// prm.y gated_linear_attn's scale. One invocation per (value channel, head, sequence) owns
// that channel's column (rwkv_wkv7: row) of the head's state and runs the tokens in order.
//
// variant: ssm_conv_f32 -DSSM_CONV
// variant: ssm_scan_f32 -DSSM_SCAN
// variant: gated_linear_attn_f32 -DLINEAR_ATTN -DWHICH=0
// variant: rwkv_wkv6_f32 -DLINEAR_ATTN -DWHICH=1
// variant: rwkv_wkv7_f32 -DLINEAR_ATTN -DWHICH=2
#include "common.glsl"

layout(local_size_x = 128) in;
layout(binding = 0, std430) readonly buffer A0 { float a[]; };
layout(binding = 1, std430) readonly buffer B0 { float b[]; };
layout(binding = 2, std430) buffer D { float d[]; };
layout(binding = 3, std430) buffer E { uint error_word; };
#if defined(SSM_SCAN) || defined(LINEAR_ATTN)
layout(binding = 4, std430) readonly buffer S2 { float src2[]; };
layout(binding = 5, std430) readonly buffer S3 { float src3[]; };
layout(binding = 6, std430) readonly buffer S4 { float src4[]; };
#endif
#if defined(SSM_SCAN) || (defined(LINEAR_ATTN) && WHICH > 0)
layout(binding = 7, std430) readonly buffer S5 { float src5[]; };
#endif
#if defined(SSM_SCAN)
layout(binding = 8, std430) readonly buffer S6 { int src6[]; };
#elif defined(LINEAR_ATTN) && WHICH == 2
layout(binding = 8, std430) readonly buffer S6 { float src6[]; };
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
#elif defined(LINEAR_ATTN)
// Element e of source j (2 to 6 here; sources 0 and 1 are a and b).
float src_at(uint j, uint e) {
    switch (j) {
    case 0u: return a[p.offs.x + e];
    case 1u: return b[p.offs.y + e];
    case 2u: return src2[p.offs.w + e];
    case 3u: return src3[p.a_nb.x + e];
    case 4u: return src4[p.b_nb.x + e];
#if WHICH > 0
    case 5u: return src5[p.a_nb.y + e];
#endif
#if WHICH == 2
    default: return src6[p.b_nb.y + e];
#else
    default: return 0.0;
#endif
    }
}

void main() {
    const uint S = p.a_ne.x, H = p.a_ne.y, T = p.a_ne.z, n_seqs = p.prm.x, per_seq = T / n_seqs;
    const uint u = linear_id(128);
    if (u >= S * H * n_seqs) return;
    const uint o = u % S, h = (u / S) % H, seq = u / (S * H);
    const uint state_src = WHICH == 0 ? 4u : WHICH == 1 ? 5u : 6u;
    const uint st = p.offs.z + S * H * T + (seq * H + h) * S * S; // this head's final state in d
    const uint st0 = (seq * H + h) * S * S;                       // and where it starts
    for (uint tt = 0u; tt < per_seq; ++tt) {
        const uint t = seq * per_seq + tt;
        const uint at = (t * H + h) * S;
        precise float sum = 0.0;
#if WHICH == 2
        precise float sa = 0.0;
        for (uint j = 0u; j < S; ++j) sa += src_at(4u, at + j) * (tt == 0u ? src_at(state_src, st0 + o * S + j) : d[st + o * S + j]);
        const float vo = src_at(3u, at + o);
        for (uint j = 0u; j < S; ++j) {
            const float prev = tt == 0u ? src_at(state_src, st0 + o * S + j) : d[st + o * S + j];
            precise float next = prev * src_at(1u, at + j) + vo * src_at(2u, at + j) + sa * src_at(5u, at + j);
            d[st + o * S + j] = next;
            sum += next * src_at(0u, at + j);
        }
#else
        const float vo = src_at(1u, at + o);
        for (uint i = 0u; i < S; ++i) {
            const float prev = tt == 0u ? src_at(state_src, st0 + i * S + o) : d[st + i * S + o];
            precise float kv = vo * src_at(0u, at + i);
#if WHICH == 1
            precise float bonus = kv * src_at(3u, h * S + i) + prev;
            sum += bonus * src_at(2u, at + i);
            precise float next = prev * src_at(4u, at + i) + kv;
#else
            precise float next = prev * src_at(3u, at + i) + kv;
            precise float q = src_at(2u, at + i) * uintBitsToFloat(p.prm.y);
            sum += next * q;
#endif
            d[st + i * S + o] = next;
        }
#endif
        d[p.offs.z + at + o] = sum;
    }
}
#endif

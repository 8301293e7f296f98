#version 460
// flash_attn_ext (core/ops/attention.hpp): for query row (iq, h, i3) of q (f32,
// source 0), out = sum_j exp(s_j - M) v_j / S over the positions j of k (source 1) and v
// (source 2) of key/value head h / (n_head / n_head_kv), with
//     s_j = softcap * tanh(scale' * dot(q, k_j)) (scale' = scale / softcap), or
//           scale * dot(q, k_j) without a softcap,
//     s_j += slope_h * mask[j, iq, h % mask ne2, i3 % mask ne3] (a position whose masked
//           term is -inf is skipped),
// M the maximum of the s_j (and of the sink), S the sum of exp(s_j - M) (plus
// exp(sink - M)): what the CPU reference computes (backends/cpu/kernels/attention.hpp), in
// f32, q not rounded to k's type. A row with no position left and no sink is zeros.
// k and v are f32, f16, bf16, q8_0 or q4_0 each (a type code per tensor), read through
// two views of their binding (floats, 16-bit words; quantized blocks are words, as in
// convert.glsl); the mask (source 3, binding 5) is f16 and contiguous; the sinks (source
// 4, binding 6) are f32, one per head. Rows of q, k and v are contiguous, their other
// strides free; the destination f32 [D_v, n_head, n_q, ne3] is contiguous.
//
// Push constants (ops/attention.hpp fills them; common.glsl has the fields):
//   a_ne    q's extents [D_k, n_q, n_head, ne3]; a_nb.yzw q's row strides; a_nb.x the
//           mask's offset (the backend's: source 3)
//   b_ne.y  n_kv, b_ne.z n_head_kv, b_ne.w k's ne3; b_nb.yzw k's row strides; b_nb.x the
//           sinks' offset (the backend's: source 4); b_ne.x the sinks' stride
//   ne.x    D_v; ne.yzw v's row strides
//   nb.xyz  the mask's ne1, ne2, ne3; nb.w: bits 0-3 k's type, 4-7 v's type (0 f32, 1 f16,
//           2 bf16, 3 q8_0, 4 q4_0), bit 8 a mask, bit 9 sinks, bit 10 ALiBi
//   offs    q, k, the destination, v (source 2)
//   prm     scale' (after the softcap's division), softcap (0: none), m0, m1 (ALiBi)
//
// One workgroup of WG invocations per query row. The positions are taken WG at a time:
// each invocation scores one (its dot product over D_k), the workgroup takes the chunk's
// maximum and rescales the running sum S and the accumulator (shared memory, D_v floats)
// when the maximum grows, the chunk's weights go to shared memory, and each invocation
// adds the weighted values into its own elements of the accumulator (d = tid, tid + WG,
// ...). Differs from the CPU only in the order of the additions.
// variant: flash_attn_64 -DWG=64
#include "common.glsl"
#include "alibi.glsl"
#include "convert.glsl"

#extension GL_EXT_shader_16bit_storage : require

// The most elements of a q row and of the accumulator (ops/attention.hpp refuses more).
#define MAX_D 1024u

layout(local_size_x = WG) in;
layout(binding = 0, std430) readonly buffer Q { float q[]; };
layout(binding = 1, std430) readonly buffer K32 { float k32[]; };
layout(binding = 1, std430) readonly buffer K16 { uint16_t k16[]; };
layout(binding = 2, std430) writeonly buffer D { float d[]; };
layout(binding = 4, std430) readonly buffer V32 { float v32[]; };
layout(binding = 4, std430) readonly buffer V16 { uint16_t v16[]; };
layout(binding = 5, std430) readonly buffer M { uint16_t m[]; };
layout(binding = 6, std430) readonly buffer S { float sinks[]; };

#define NEG_INF uintBitsToFloat(0xff800000u)
#define TYPE_F32 0u
#define TYPE_F16 1u
#define TYPE_BF16 2u
#define TYPE_Q8_0 3u

shared float s_q[MAX_D];
shared float s_acc[MAX_D];
shared float s_w[WG];
shared float s_red[WG];

// Element i of the row starting at `row` (binding units) of k or v: NAME(type, row, i).
#define ROW_VALUE(NAME, B32, B16)                                                               \
    float NAME(uint type, uint row, uint i) {                                                   \
        if (type == TYPE_F32) return B32[row + i];                                              \
        if (type == TYPE_F16) return uintBitsToFloat(f16_bits_to_f32(uint(B16[row + i])));      \
        if (type == TYPE_BF16) return uintBitsToFloat(bf16_bits_to_f32(uint(B16[row + i])));    \
        const uint base = row + (i / 32u) * (type == TYPE_Q8_0 ? 17u : 9u);                     \
        const float scale_d = uintBitsToFloat(f16_bits_to_f32(uint(B16[base])));                \
        const uint j = i % 32u;                                                                 \
        const uint k = type == TYPE_Q8_0 ? j : q4_0_byte_of_value(j);                           \
        const uint byte_ = block_byte_in_word(uint(B16[block_word_of_byte(base, k)]), k);       \
        return type == TYPE_Q8_0 ? q8_0_value(scale_d, byte_) : q4_0_value(scale_d, byte_, j); \
    }
ROW_VALUE(k_value, k32, k16)
ROW_VALUE(v_value, v32, v16)

// The maximum (sum, when !is_max) of every invocation's v (all of the workgroup call it).
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

// tanh through exp, saturating (no inf / inf for large |x|)
float tanh_of(float x) {
    const float e = exp(-2.0 * abs(x));
    return sign(x) * ((1.0 - e) / (1.0 + e));
}

// The score of position j before the mask: scale' * dot(q, k_j), softcapped.
float score(uint krow, uint dk, uint k_type) {
    float dot_ = 0.0;
    for (uint i = 0; i < dk; ++i) dot_ += s_q[i] * k_value(k_type, krow, i);
    const float s = dot_ * uintBitsToFloat(p.prm.x);
    const float softcap = uintBitsToFloat(p.prm.y);
    return softcap != 0.0 ? softcap * tanh_of(s) : s;
}

void main() {
    const uint n_q = p.a_ne.y, n_head = p.a_ne.z;
    const uint item = group_id();
    if (item >= n_q * n_head * p.a_ne.w) return; // the whole workgroup leaves
    const uint iq = item % n_q, h = (item / n_q) % n_head, i3 = item / (n_q * n_head);
    const uint tid = gl_LocalInvocationID.x;
    const uint dk = p.a_ne.x, dv = p.ne.x, n_kv = p.b_ne.y;
    const uint hk = h / (n_head / p.b_ne.z);
    const uint flags = p.nb.w;
    const uint k_type = flags & 15u, v_type = (flags >> 4) & 15u;
    const bool has_mask = (flags & 256u) != 0u, has_sinks = (flags & 512u) != 0u;

    const uint qrow = p.offs.x + iq * p.a_nb.y + h * p.a_nb.z + i3 * p.a_nb.w;
    for (uint i = tid; i < dk; i += WG) s_q[i] = q[qrow + i];
    for (uint i = tid; i < dv; i += WG) s_acc[i] = 0.0;
    // the mask is contiguous: [n_kv, ne1, ne2, ne3]
    const uint mrow = p.a_nb.x + n_kv * (iq + p.nb.x * ((h % p.nb.y) + p.nb.y * (i3 % p.nb.z)));
    const uint n_head_log2 = (flags & 1024u) != 0u ? 1u << findMSB(n_head) : 0u;
    const float slope = alibi_slope(h, uintBitsToFloat(p.prm.z), uintBitsToFloat(p.prm.w), n_head_log2);
    const uint kbase = p.offs.y + hk * p.b_nb.z + i3 * p.b_nb.w;
    const uint vbase = p.offs.w + hk * p.ne.z + i3 * p.ne.w;
    barrier();

    float mx = NEG_INF, sum = 0.0;
    for (uint c0 = 0; c0 < n_kv; c0 += WG) {
        const uint j = c0 + tid;
        float s = NEG_INF;
        if (j < n_kv) {
            const float mv = has_mask ? slope * uintBitsToFloat(f16_bits_to_f32(uint(m[mrow + j]))) : 0.0;
            if (mv != NEG_INF) s = score(kbase + j * p.b_nb.y, dk, k_type) + mv;
        }
        const float cm = workgroup_reduce(s, true);
        if (cm == NEG_INF) continue; // every position of the chunk masked (the same for all)
        const float mn = max(mx, cm);
        const float ms = mx == NEG_INF ? 0.0 : exp(mx - mn);
        const float w = s == NEG_INF ? 0.0 : exp(s - mn);
        s_w[tid] = w;
        sum = sum * ms + workgroup_reduce(w, false); // (its barriers publish s_w)
        mx = mn;
        const uint n = min(n_kv - c0, WG);
        for (uint i = tid; i < dv; i += WG) {
            float acc = s_acc[i] * ms;
            for (uint jj = 0; jj < n; ++jj) {
                const float wj = s_w[jj];
                if (wj != 0.0) acc += wj * v_value(v_type, vbase + (c0 + jj) * p.ne.y, i);
            }
            s_acc[i] = acc;
        }
        barrier(); // s_w is rewritten by the next chunk
    }
    if (has_sinks) { // the sink's mass, without a value
        const float sink = sinks[p.b_nb.x + h * p.b_ne.x];
        if (sink > mx) {
            const float ms = mx == NEG_INF ? 0.0 : exp(mx - sink);
            for (uint i = tid; i < dv; i += WG) s_acc[i] *= ms;
            sum = sum * ms + 1.0;
        } else {
            sum += exp(sink - mx);
        }
    }
    const float inv = sum == 0.0 ? 0.0 : 1.0 / sum;
    const uint drow = p.offs.z + dv * (h + n_head * (iq + n_q * i3));
    for (uint i = tid; i < dv; i += WG) d[drow + i] = s_acc[i] * inv;
}

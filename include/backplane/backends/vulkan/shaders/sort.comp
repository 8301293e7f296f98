#version 460
// argsort and top_k of f32, f16 or bf16 rows (a row is dimension 0 of source 0; any
// strides). One workgroup of WG invocations per row: the row's (value, index) pairs are
// loaded into shared memory, padded to a power of two, and put in order by a bitonic
// sort; the first ne0 indices of the destination's row are written (i32, same row
// coordinates): all of them for argsort, k for top_k.
//
// The order is core/sort_order.hpp's, a total order on (value, index), so the result is
// the CPU's exactly: values ascending (prm.x == 0) or descending (prm.x == 1; top_k),
// equal values by ascending index, NaNs above +inf and equal to each other, -0 == +0.
// Padding entries (index >= ne0) come after every real one.
//
// A row holds at most N values (N * 8 bytes of shared memory); the planner refuses
// longer rows (ops/sort.hpp). 16-bit sources need 16-bit storage.
// variant: sort_f32_1024 -DA_F32 -DN=1024
// variant: sort_f16_1024 -DA_F16 -DN=1024
// variant: sort_bf16_1024 -DA_BF16 -DN=1024
// variant: sort_f32_4096 -DA_F32 -DN=4096
// variant: sort_f16_4096 -DA_F16 -DN=4096
// variant: sort_bf16_4096 -DA_BF16 -DN=4096
#include "common.glsl"
#include "convert.glsl"

#define WG 128
layout(local_size_x = WG) in;

#if defined(A_F32)
layout(binding = 0, std430) readonly buffer A { float a[]; };
float load_a(uint i) { return a[i]; }
#elif defined(A_F16)
#extension GL_EXT_shader_16bit_storage : require
layout(binding = 0, std430) readonly buffer A { uint16_t a[]; };
float load_a(uint i) { return uintBitsToFloat(f16_bits_to_f32(uint(a[i]))); }
#else
#extension GL_EXT_shader_16bit_storage : require
layout(binding = 0, std430) readonly buffer A { uint16_t a[]; };
float load_a(uint i) { return uintBitsToFloat(bf16_bits_to_f32(uint(a[i]))); }
#endif

layout(binding = 2, std430) writeonly buffer D { int d[]; };

shared float s_val[N];
shared uint s_idx[N];

bool is_nan(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u; }

// True when entry (xv, xi) comes before entry (yv, yi), xi != yi (core/sort_order.hpp).
bool before(float xv, uint xi, float yv, uint yi, uint n, bool desc) {
    const bool x_pad = xi >= n, y_pad = yi >= n;
    if (x_pad || y_pad) return !x_pad || (y_pad && xi < yi);
    const bool x_nan = is_nan(xv), y_nan = is_nan(yv);
    if (x_nan || y_nan) {
        if (x_nan && y_nan) return xi < yi;
        return desc ? x_nan : y_nan; // a NaN is the largest value
    }
    if (xv != yv) return desc ? xv > yv : xv < yv;
    return xi < yi;
}

void main() {
    const uint row = group_id();
    if (row >= p.a_ne.y * p.a_ne.z * p.a_ne.w) return; // the whole workgroup leaves
    const uint i1 = row % p.a_ne.y;
    const uint i2 = (row / p.a_ne.y) % p.a_ne.z;
    const uint i3 = row / (p.a_ne.y * p.a_ne.z);
    const uint base = p.offs.x + i1 * p.a_nb.y + i2 * p.a_nb.z + i3 * p.a_nb.w;
    const uint n = p.a_ne.x;
    const bool desc = p.prm.x != 0u;
    const uint tid = gl_LocalInvocationID.x;

    uint np = 1u;
    while (np < n) np <<= 1;
    for (uint i = tid; i < np; i += WG) {
        s_val[i] = i < n ? load_a(base + i * p.a_nb.x) : 0.0;
        s_idx[i] = i;
    }
    barrier();
    // bitonic: blocks of k in alternating directions, merged by compare-exchange at
    // distance j; pair q is (i, i + j), i the q-th index whose bit j is clear
    for (uint k = 2u; k <= np; k <<= 1) {
        for (uint j = k >> 1; j > 0u; j >>= 1) {
            for (uint q = tid; q < np / 2u; q += WG) {
                const uint i = ((q & ~(j - 1u)) << 1) | (q & (j - 1u));
                const uint l = i + j;
                const bool up = (i & k) == 0u;
                const float vi = s_val[i], vl = s_val[l];
                const uint xi = s_idx[i], xl = s_idx[l];
                if (before(vl, xl, vi, xi, n, desc) == up) {
                    s_val[i] = vl;
                    s_val[l] = vi;
                    s_idx[i] = xl;
                    s_idx[l] = xi;
                }
            }
            barrier();
        }
    }
    const uint d_row = p.offs.z + i1 * p.nb.y + i2 * p.nb.z + i3 * p.nb.w;
    for (uint i = tid; i < p.ne.x; i += WG) d[d_row + i * p.nb.x] = int(s_idx[i]);
}

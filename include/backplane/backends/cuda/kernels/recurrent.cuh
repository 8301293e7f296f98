#pragma once
// ssm_conv, ssm_scan, gated_linear_attn, rwkv_wkv6 and rwkv_wkv7, as the CPU's reference
// kernels (backends/cpu/kernels/recurrent.hpp): f32 in the same order of operations. The
// linear-attention ops: one thread per (value channel, head, sequence), which owns that
// channel's column (row for rwkv_wkv7) of the head's state and runs the tokens in order. ssm_conv: one thread per result element, any
// strides. ssm_scan: one thread per (i, head, sequence), which runs the tokens in order and
// keeps its d_state states in the result (where the final states go); a sequence whose
// state id is outside s's states reads nothing, writes zeros and sets error_index in the
// stream's error word (launch_context::error_word), which synchronize() reports as
// errc::out_of_range.

#include <backplane/backends/cuda/kernels/common.cuh>

#include <cstdint>

namespace backplane::cuda::kernels {

namespace recurrent_detail {

__device__ __forceinline__ float f32_at(const tview& t, i64 i0, i64 i1, i64 i2, i64 i3) {
    return *reinterpret_cast<const float*>(t.row(i1, i2, i3) + i0 * t.nb[0]);
}

__device__ __forceinline__ float softplus_f32(float x) { return x > 20.0f ? x : logf(__fadd_rn(1.0f, expf(x))); }

__global__ void k_ssm_conv(tview d, tview sx, tview c) {
    const i64 n = d.nelements();
    const i64 d_conv = c.ne[0];
    for (i64 e = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += static_cast<i64>(gridDim.x) * blockDim.x) {
        const i64 i = e % d.ne[0], t = (e / d.ne[0]) % d.ne[1], k = e / (d.ne[0] * d.ne[1]);
        float sum = 0.0f;
        for (i64 j = 0; j < d_conv; ++j) sum = __fadd_rn(sum, __fmul_rn(f32_at(sx, t + j, i, k, 0), f32_at(c, j, i, 0, 0)));
        *reinterpret_cast<float*>(d.row(t, k, 0) + i * d.nb[0]) = sum;
    }
}

__global__ void k_ssm_scan(float* out, tview s, tview x, tview dt, tview A, tview B, tview C, tview ids,
                           std::uint32_t* error_word) {
    const i64 d_state = s.ne[0], head_dim = x.ne[0], n_head = x.ne[1], n_t = x.ne[2], n_s = x.ne[3];
    const i64 units = head_dim * n_head * n_s;
    const i64 per_group = n_head / B.ne[1];
    const bool per_state = A.ne[0] != 1;
    const i64 x_count = x.nelements();
    for (i64 u = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += static_cast<i64>(gridDim.x) * blockDim.x) {
        const i64 i = u % head_dim, h = (u / head_dim) % n_head, k = u / (head_dim * n_head), g = h / per_group;
        const i64 id = *reinterpret_cast<const std::int32_t*>(ids.data + k * ids.nb[0]);
        const bool valid = id >= 0 && id < s.ne[3];
        float* st = out + x_count + ((k * n_head + h) * head_dim + i) * d_state;
        if (!valid) {
            if (i == 0 && error_word != nullptr) atomicOr(error_word, detail::error_index);
            for (i64 t = 0; t < n_t; ++t) out[((k * n_t + t) * n_head + h) * head_dim + i] = 0.0f;
            for (i64 n = 0; n < d_state; ++n) st[n] = 0.0f;
            continue;
        }
        for (i64 t = 0; t < n_t; ++t) {
            const float d = softplus_f32(f32_at(dt, h, t, k, 0));
            const float dA = per_state ? 0.0f : expf(__fmul_rn(d, f32_at(A, 0, h, 0, 0)));
            const float x_dt = __fmul_rn(f32_at(x, i, h, t, k), d);
            float sum = 0.0f;
            for (i64 n = 0; n < d_state; ++n) {
                const float prev = t == 0 ? f32_at(s, n, i, h, id) : st[n];
                const float decay = per_state ? expf(__fmul_rn(d, f32_at(A, n, h, 0, 0))) : dA;
                const float state = __fadd_rn(__fmul_rn(prev, decay), __fmul_rn(f32_at(B, n, g, t, k), x_dt));
                sum = __fadd_rn(sum, __fmul_rn(state, f32_at(C, n, g, t, k)));
                st[n] = state;
            }
            out[((k * n_t + t) * n_head + h) * head_dim + i] = sum;
        }
    }
}

/// gated_linear_attn (which 0), rwkv_wkv6 (1), rwkv_wkv7 (2); src: the sources' data, all
/// contiguous f32.
struct linear_srcs {
    const float* p[7];
};

__global__ void k_linear_attention(float* y, linear_srcs in, int which, i64 S, i64 H, i64 T, i64 n_seqs, float scale) {
    const i64 units = S * H * n_seqs, per_seq = T / n_seqs;
    float* states = y + S * H * T;
    for (i64 u = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += static_cast<i64>(gridDim.x) * blockDim.x) {
        const i64 o = u % S, h = (u / S) % H, seq = u / (S * H);
        float* st = states + (seq * H + h) * S * S;
        const float* st0 = in.p[which == 0 ? 4 : which == 1 ? 5 : 6] + (seq * H + h) * S * S;
        for (i64 tt = 0; tt < per_seq; ++tt) {
            const i64 t = seq * per_seq + tt;
            const float* prev = tt == 0 ? st0 : st;
            const i64 at = (t * H + h) * S;
            float sum = 0.0f;
            if (which == 2) { // row o of the state
                const float *r = in.p[0] + at, *w = in.p[1] + at, *k = in.p[2] + at, *v = in.p[3] + at, *a = in.p[4] + at,
                            *b = in.p[5] + at;
                float sa = 0.0f;
                for (i64 j = 0; j < S; ++j) sa = __fadd_rn(sa, __fmul_rn(a[j], prev[o * S + j]));
                for (i64 j = 0; j < S; ++j) {
                    const float next = __fadd_rn(__fadd_rn(__fmul_rn(prev[o * S + j], w[j]), __fmul_rn(v[o], k[j])), __fmul_rn(sa, b[j]));
                    st[o * S + j] = next;
                    sum = __fadd_rn(sum, __fmul_rn(next, r[j]));
                }
            } else { // column o of the state
                const float *k = in.p[0] + at, *v = in.p[1] + at, *qr = in.p[2] + at, *g = in.p[which == 1 ? 4 : 3] + at;
                const float* tf = in.p[3] + h * S;
                for (i64 i = 0; i < S; ++i) {
                    const float kv = __fmul_rn(v[o], k[i]);
                    const float old = prev[i * S + o];
                    if (which == 1) {
                        sum = __fadd_rn(sum, __fmul_rn(__fadd_rn(__fmul_rn(kv, tf[i]), old), qr[i]));
                        st[i * S + o] = __fadd_rn(__fmul_rn(old, g[i]), kv);
                    } else {
                        const float next = __fadd_rn(__fmul_rn(old, g[i]), kv);
                        sum = __fadd_rn(sum, __fmul_rn(next, __fmul_rn(qr[i], scale)));
                        st[i * S + o] = next;
                    }
                }
            }
            y[at + o] = sum;
        }
    }
}

} // namespace recurrent_detail

/// ssm_conv, ssm_scan, gated_linear_attn, rwkv_wkv6, rwkv_wkv7 (kernel_table::launch), f32.
inline cudaError_t launch_recurrent(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace recurrent_detail;
    if (node.type != elem_type::f32) return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    switch (node.op) {
    case op_kind::ssm_conv: {
        const tview d = view_of(node);
        k_ssm_conv<<<blocks_for(d.nelements(), 256), 256, 0, ctx.stream>>>(d, view_of(*node.src[0]), view_of(*node.src[1]));
        return cudaGetLastError();
    }
    case op_kind::ssm_scan: {
        if (node.nb[0] != sizeof(float)) return cudaErrorInvalidValue; // the result is a new contiguous vector
        const tensor& x = *node.src[1];
        const i64 units = x.ne[0] * x.ne[1] * x.ne[3];
        k_ssm_scan<<<blocks_for(units, 128), 128, 0, ctx.stream>>>(
            static_cast<float*>(node.data), view_of(*node.src[0]), view_of(x), view_of(*node.src[2]), view_of(*node.src[3]),
            view_of(*node.src[4]), view_of(*node.src[5]), view_of(*node.src[6]), ctx.error_word);
        return cudaGetLastError();
    }
    case op_kind::gated_linear_attn:
    case op_kind::rwkv_wkv6:
    case op_kind::rwkv_wkv7: {
        const int which = node.op == op_kind::gated_linear_attn ? 0 : node.op == op_kind::rwkv_wkv6 ? 1 : 2;
        const int n = which == 0 ? 5 : which == 1 ? 6 : 7;
        linear_srcs in{};
        for (int j = 0; j < n; ++j) {
            const tensor* s = node.src[j];
            if (s == nullptr || s->type != elem_type::f32 || !s->is_contiguous()) return cudaErrorInvalidValue;
            in.p[j] = static_cast<const float*>(s->data);
        }
        if (!node.is_contiguous()) return cudaErrorInvalidValue;
        const tensor& k = *node.src[which == 2 ? 2 : 0];
        const i64 S = k.ne[0], H = k.ne[1], T = k.ne[2], n_seqs = node.src[n - 1]->ne[1];
        k_linear_attention<<<blocks_for(S * H * n_seqs, 128), 128, 0, ctx.stream>>>(
            static_cast<float*>(node.data), in, which, S, H, T, n_seqs, which == 0 ? node.param<float>(0) : 1.0f);
        return cudaGetLastError();
    }
    default: return cudaErrorNotSupported;
    }
}

} // namespace backplane::cuda::kernels

#pragma once
// ssm_conv and ssm_scan, as the CPU's reference kernels (backends/cpu/kernels/recurrent.hpp):
// f32 in the same order of operations. ssm_conv: one thread per result element, any
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

} // namespace recurrent_detail

/// ssm_conv and ssm_scan (kernel_table::launch), f32.
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
    default: return cudaErrorNotSupported;
    }
}

} // namespace backplane::cuda::kernels

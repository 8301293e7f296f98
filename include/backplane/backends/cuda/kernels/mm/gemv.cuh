#pragma once
// Float mat-vec (f32 / f16 / bf16 weights, N <= 8 columns of b as f32) and the generic
// kernel that computes any mul_mat.
//
// gemv: one warp per (row of a, batch matrix), all N columns at once, so the weights are
// read once; lanes stream the row in 16-byte loads (four in flight per lane) when the row
// is 16-byte aligned and packed, element by element otherwise; b's columns come through
// L1 (they are shared by every row). Accumulation in f32, then a warp sum.
//
// qgemv: the same for the quantized types of quants.hpp (all but q8_0 / q4_0): one warp
// per row, each lane dequantizing 32 values at a time (a block, or a 32-value slice of a
// K-quant super-block; quant::values32 reads its scales once) as core does, then
// multiplying them with b's f32 columns (in 16-byte loads where they are aligned).
//
// generic: one warp per output value, loads through tview (any type, any strides); the
// fallback for layouts no fast kernel takes (it needs no scratch).

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/mm/problem.cuh>

#include <type_traits>

namespace backplane::cuda::kernels::mm {

struct gemv_args {
    const char* a = nullptr;
    i64 a_nb0 = 0, a_nb1 = 0, a_nb2 = 0, a_nb3 = 0; ///< bytes
    const float* b = nullptr;
    i64 ldb = 0, sb2 = 0, sb3 = 0; ///< elements
    int b_vec = 0;                 ///< b's columns are 16-byte aligned
    i64 k = 0;
    mv_output out;
};

template <class T>
__device__ __forceinline__ float elem_to_float(const char* p);
template <>
__device__ __forceinline__ float elem_to_float<float>(const char* p) {
    return *reinterpret_cast<const float*>(p);
}
template <>
__device__ __forceinline__ float elem_to_float<__half>(const char* p) {
    return f16_bits_to_float(*reinterpret_cast<const std::uint16_t*>(p));
}
template <>
__device__ __forceinline__ float elem_to_float<__nv_bfloat16>(const char* p) {
    return bf16_bits_to_float(*reinterpret_cast<const std::uint16_t*>(p));
}

/// The 16 / sizeof(T) values of a 16-byte unit as floats.
template <class T>
__device__ __forceinline__ void unpack16(const uint4& v, float (&x)[16 / sizeof(T)]) {
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
    if constexpr (sizeof(T) == 4) {
#pragma unroll
        for (int i = 0; i < 4; ++i) x[i] = __uint_as_float(w[i]);
    } else if constexpr (std::is_same_v<T, __half>) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            x[2 * i] = f16_bits_to_float(static_cast<std::uint16_t>(w[i] & 0xffffu));
            x[2 * i + 1] = f16_bits_to_float(static_cast<std::uint16_t>(w[i] >> 16));
        }
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            x[2 * i] = __uint_as_float(w[i] << 16);
            x[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    }
}

template <class T, int NC>
__global__ void __launch_bounds__(128) gemv_kernel(const gemv_args p) {
    constexpr int V = 16 / static_cast<int>(sizeof(T)); // values per 16-byte unit
    constexpr int U = NC == 1 ? 4 : 2;                   // units in flight per lane
    const int lane = static_cast<int>(threadIdx.x & 31u);
    const i64 row_id = static_cast<i64>(blockIdx.x) * 4 + (threadIdx.x >> 5);
    if (row_id >= p.out.m) return;
    for (i64 z = blockIdx.y; z < p.out.batches; z += gridDim.y) {
        const i64 i2 = z % p.out.n2;
        const i64 i3 = z / p.out.n2;
        const char* row = p.a + row_id * p.a_nb1 + (i2 / p.out.r2) * p.a_nb2 + (i3 / p.out.r3) * p.a_nb3;
        const float* bz = p.b + i2 * p.sb2 + i3 * p.sb3;
        float acc[NC];
#pragma unroll
        for (int j = 0; j < NC; ++j) acc[j] = 0.0f;

        i64 k_done = 0;
        if (p.b_vec && p.a_nb0 == static_cast<i64>(sizeof(T)) && (reinterpret_cast<std::uintptr_t>(row) & 15u) == 0) {
            const i64 nv = p.k / V;
            const auto* av = reinterpret_cast<const uint4*>(row);
            for (i64 v0 = lane; v0 < nv; v0 += 32 * U) {
                uint4 w[U];
#pragma unroll
                for (int x = 0; x < U; ++x) {
                    const i64 v = v0 + 32 * x;
                    w[x] = v < nv ? __ldg(av + v) : make_uint4(0u, 0u, 0u, 0u);
                }
#pragma unroll
                for (int x = 0; x < U; ++x) {
                    const i64 v = v0 + 32 * x;
                    if (v >= nv) break;
                    float xv[V];
                    unpack16<T>(w[x], xv);
#pragma unroll
                    for (int j = 0; j < NC; ++j) {
                        if (j < p.out.ncols) {
                            const auto* bv = reinterpret_cast<const float4*>(bz + j * p.ldb + v * V);
#pragma unroll
                            for (int h = 0; h < V / 4; ++h) {
                                const float4 y = __ldg(bv + h);
                                acc[j] = fmaf(xv[4 * h], y.x, acc[j]);
                                acc[j] = fmaf(xv[4 * h + 1], y.y, acc[j]);
                                acc[j] = fmaf(xv[4 * h + 2], y.z, acc[j]);
                                acc[j] = fmaf(xv[4 * h + 3], y.w, acc[j]);
                            }
                        }
                    }
                }
            }
            k_done = nv * V;
        }
        for (i64 k = k_done + lane; k < p.k; k += 32) { // the tail, or rows not aligned / packed
            const float x = elem_to_float<T>(row + k * p.a_nb0);
#pragma unroll
            for (int j = 0; j < NC; ++j)
                if (j < p.out.ncols) acc[j] = fmaf(x, bz[j * p.ldb + k], acc[j]);
        }
        store_warp_sums<NC>(p.out, acc, row_id, i2, i3, lane);
    }
}

template <elem_type T, int NC>
__global__ void __launch_bounds__(128) qgemv_kernel(const gemv_args p) {
    constexpr int bv = quant::block_values(T);
    const int lane = static_cast<int>(threadIdx.x & 31u);
    const i64 row_id = static_cast<i64>(blockIdx.x) * 4 + (threadIdx.x >> 5);
    if (row_id >= p.out.m) return;
    const i64 slices = p.k / 32;
    for (i64 z = blockIdx.y; z < p.out.batches; z += gridDim.y) {
        const i64 i2 = z % p.out.n2;
        const i64 i3 = z / p.out.n2;
        const auto* row = reinterpret_cast<const unsigned char*>(p.a + row_id * p.a_nb1 + (i2 / p.out.r2) * p.a_nb2 +
                                                                 (i3 / p.out.r3) * p.a_nb3);
        const float* bz = p.b + i2 * p.sb2 + i3 * p.sb3;
        float acc[NC];
#pragma unroll
        for (int j = 0; j < NC; ++j) acc[j] = 0.0f;
        for (i64 c = lane; c < slices; c += 32) {
            float x[32];
            quant::values32<T>(row + (c * 32 / bv) * p.a_nb0, static_cast<int>((c * 32) % bv), x);
#pragma unroll
            for (int j = 0; j < NC; ++j) {
                if (j < p.out.ncols) {
                    const float* bc = bz + j * p.ldb + c * 32;
                    if (p.b_vec) { // 128-byte aligned: eight 16-byte loads
#pragma unroll
                        for (int h = 0; h < 8; ++h) {
                            const float4 y = __ldg(reinterpret_cast<const float4*>(bc) + h);
                            acc[j] = fmaf(x[4 * h], y.x, acc[j]);
                            acc[j] = fmaf(x[4 * h + 1], y.y, acc[j]);
                            acc[j] = fmaf(x[4 * h + 2], y.z, acc[j]);
                            acc[j] = fmaf(x[4 * h + 3], y.w, acc[j]);
                        }
                    } else {
#pragma unroll
                        for (int jj = 0; jj < 32; ++jj) acc[j] = fmaf(x[jj], __ldg(bc + jj), acc[j]);
                    }
                }
            }
        }
        store_warp_sums<NC>(p.out, acc, row_id, i2, i3, lane);
    }
}

template <class T>
inline cudaError_t launch_gemv_t(const gemv_args& p, cudaStream_t stream) noexcept {
    return launch_mv(&gemv_kernel<T, 1>, &gemv_kernel<T, 8>, p, stream);
}

/// Queues gemv for weights of type t (f32, f16, bf16, or a quantized type of quants.hpp),
/// p.out.ncols <= 8.
inline cudaError_t launch_gemv(elem_type t, const gemv_args& p, cudaStream_t stream) noexcept {
    switch (t) {
    case elem_type::f32: return launch_gemv_t<float>(p, stream);
    case elem_type::f16: return launch_gemv_t<__half>(p, stream);
    case elem_type::bf16: return launch_gemv_t<__nv_bfloat16>(p, stream);
    default:
        return quant::visit(
            t,
            [&](auto tag) -> cudaError_t {
                constexpr elem_type T = decltype(tag)::value;
                return launch_mv(&qgemv_kernel<T, 1>, &qgemv_kernel<T, 8>, p, stream);
            },
            cudaErrorNotSupported);
    }
}

/// c[m, n, i2, i3] = sum_k a[k, m, i2 / r2, i3 / r3] * b[k, n, i2, i3], one warp per value.
template <class = void>
__global__ void __launch_bounds__(256) generic_kernel(const tview a, const tview b, const tview c, const i64 r2, const i64 r3) {
    const int lane = static_cast<int>(threadIdx.x & 31u);
    const i64 total = c.nelements();
    const i64 w0 = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
    const i64 ws = (static_cast<i64>(gridDim.x) * blockDim.x) >> 5;
    for (i64 w = w0; w < total; w += ws) {
        const i64 m = w % c.ne[0];
        i64 rest = w / c.ne[0];
        const i64 n = rest % c.ne[1];
        rest /= c.ne[1];
        const i64 i2 = rest % c.ne[2];
        const i64 i3 = rest / c.ne[2];
        float s = 0.0f;
        for (i64 k = lane; k < a.ne[0]; k += 32) s = fmaf(load(a, k, m, i2 / r2, i3 / r3), load(b, k, n, i2, i3), s);
        s = warp_sum(s);
        if (lane == 0) store(c, m, n, i2, i3, s);
    }
}

inline cudaError_t launch_generic(const tensor& node, cudaStream_t stream) noexcept {
    const tview c = view_of(node);
    const tview a = view_of(*node.src[0]);
    const tview b = view_of(*node.src[1]);
    const i64 total = c.nelements();
    if (total == 0) return cudaSuccess;
    generic_kernel<void><<<blocks_for(total, 8), 256, 0, stream>>>(a, b, c, b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]);
    return cudaGetLastError();
}

} // namespace backplane::cuda::kernels::mm

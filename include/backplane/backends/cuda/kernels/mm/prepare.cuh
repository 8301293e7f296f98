#pragma once
// mul_mat operand preparation: copies into scratch in the layout a fast kernel reads.
//
// - convert: any f32 / f16 / bf16 tensor (any strides, transposed too) to packed rows of
//   f32, f16 or bf16 at a leading dimension ld (the GEMM operands, and b as f32 for the
//   mat-vec kernels). One element per thread; the thread order follows the source's
//   fastest dimension, so reads are coalesced even for a transposed b.
// - dequant: quantized rows to f16 (or f32) rows, one thread per 32 values (a block, or a
//   slice of a K-quant super-block) and 16-byte stores of them: q8_0 and q4_0 blocks read
//   with 2-byte loads (they are only 2-byte aligned), the other types by quant::value
//   (quants.hpp).
// - q8 image of b for the quantized mat-vec (qmv.cuh explains the layout): b quantized to
//   int8 per 32 values, placed at the byte positions the weights' values occupy.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/mm/problem.cuh>

#include <cstdint>
#include <type_traits>

namespace backplane::cuda::kernels::mm {

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
    return x;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
    return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

/// dst[r * ld + k] = src[k, r] for every value k of every row r (rows counted over dims
/// 1..3, dim 1 fastest). rows_fast: consecutive threads take consecutive rows.
template <class OutT>
__global__ void __launch_bounds__(256) convert_kernel(const tview src, OutT* dst, const i64 ld, const int rows_fast) {
    const i64 kn = src.ne[0];
    const i64 rows = src.nrows();
    const i64 total = kn * rows;
    const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
    for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
        const i64 k = rows_fast ? i / rows : i % kn;
        const i64 r = rows_fast ? i % rows : i / kn;
        const i64 i1 = r % src.ne[1];
        const i64 i23 = r / src.ne[1];
        dst[r * ld + k] = from_float<OutT>(load(src, k, i1, i23 % src.ne[2], i23 / src.ne[2]));
    }
}

/// Stores 32 values at p (16-byte aligned) with 16-byte stores.
__device__ __forceinline__ void store32(__half* p, const float (&v)[32]) {
    uint4* q = reinterpret_cast<uint4*>(p);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        unsigned w[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const unsigned lo = float_to_f16_bits(v[8 * i + 2 * j]);
            const unsigned hi = float_to_f16_bits(v[8 * i + 2 * j + 1]);
            w[j] = lo | (hi << 16);
        }
        q[i] = make_uint4(w[0], w[1], w[2], w[3]);
    }
}
__device__ __forceinline__ void store32(float* p, const float (&v)[32]) {
    float4* q = reinterpret_cast<float4*>(p);
#pragma unroll
    for (int i = 0; i < 8; ++i) q[i] = make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
}

/// Values j0 .. j0 + 31 of the block of quantized type T at blk (j0 a multiple of 32).
template <elem_type T>
__device__ __forceinline__ void dequant32(const unsigned char* blk, int j0, float (&v)[32]) {
    if constexpr (T == elem_type::q8_0 || T == elem_type::q4_0) { // d, then the codes
        const auto* h = reinterpret_cast<const std::uint16_t*>(blk);
        const float d = f16_bits_to_float(__ldg(h));
        if constexpr (T == elem_type::q4_0) {
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const unsigned u = __ldg(h + 1 + j);
                v[2 * j] = d * static_cast<float>(static_cast<int>(u & 0x0fu) - 8);
                v[2 * j + 16] = d * static_cast<float>(static_cast<int>((u >> 4) & 0x0fu) - 8);
                v[2 * j + 1] = d * static_cast<float>(static_cast<int>((u >> 8) & 0x0fu) - 8);
                v[2 * j + 17] = d * static_cast<float>(static_cast<int>((u >> 12) & 0x0fu) - 8);
            }
        } else {
#pragma unroll
            for (int j = 0; j < 16; ++j) {
                const unsigned u = __ldg(h + 1 + j);
                v[2 * j] = d * static_cast<float>(static_cast<signed char>(u & 0xffu));
                v[2 * j + 1] = d * static_cast<float>(static_cast<signed char>(u >> 8));
            }
        }
    } else {
        quant::values32<T>(blk, j0, v);
    }
}

/// Rows of quantized type T (rows packed) to rows of OutT at dst + r * ld, ld a multiple
/// of 8 and dst 16-byte aligned: one thread per 32 values.
template <elem_type T, class OutT>
__global__ void __launch_bounds__(256) dequant_kernel(const tview src, OutT* dst, const i64 ld) {
    constexpr int bv = quant::block_values(T), bb = quant::block_bytes(T);
    const i64 slices = src.ne[0] / 32;
    const i64 total = slices * src.nrows();
    const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
    for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
        const i64 c = i % slices;
        const i64 r = i / slices;
        const auto* blk = reinterpret_cast<const unsigned char*>(src.row(r)) + (c * 32 / bv) * bb;
        float v[32];
        dequant32<T>(blk, static_cast<int>((c * 32) % bv), v);
        store32(dst + r * ld + c * 32, v);
    }
}

/// b's int8 image for qmv: one warp per (column, block of 32 values). Column col is
/// (n, i2, i3) = (col % N, (col / N) % B2, col / (N * B2)). The image region must be
/// zeroed before (bytes the kernel does not write must read as 0).
template <class = void>
__global__ void __launch_bounds__(256) qmv_prepare_kernel(const tview b, const int q4, const int phase, const i64 nblk,
                                                          unsigned char* img, const i64 img_bytes_per_col,
                                                          float2* meta, const i64 cols) {
    const int lane = static_cast<int>(threadIdx.x & 31u);
    const i64 total = cols * nblk;
    const i64 w0 = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
    const i64 ws = (static_cast<i64>(gridDim.x) * blockDim.x) >> 5;
    for (i64 w = w0; w < total; w += ws) { // w is the same on the whole warp
        const i64 col = w / nblk;
        const i64 blk = w % nblk;
        const i64 n = col % b.ne[1];
        const i64 z = col / b.ne[1];
        const float x = load(b, blk * 32 + lane, n, z % b.ne[2], z / b.ne[2]);
        const float amax = warp_max(fabsf(x));
        const float d = amax / 127.0f;
        int q = d > 0.0f ? __float2int_rn(x / d) : 0;
        q = q > 127 ? 127 : (q < -127 ? -127 : q);
        const float qsum = warp_sum(static_cast<float>(q)); // exact: at most 32 * 127
        unsigned char* im = img + col * img_bytes_per_col;
        const auto byte = static_cast<unsigned char>(static_cast<signed char>(q));
        if (q4) {
            // value j (< 16) beside the low nibble of qs byte j, value j + 16 beside its high
            // nibble: two interleaved images, 16 bytes of each per 16-byte unit
            const i64 pos = phase + blk * 18 + 2 + (lane & 15);
            im[(pos >> 4) * 32 + (lane >> 4) * 16 + (pos & 15)] = byte;
        } else {
            im[phase + blk * 34 + 2 + lane] = byte;
        }
        if (lane == 0) meta[col * nblk + blk] = make_float2(d, 8.0f * d * qsum);
    }
}

/// Queues the conversion of src (float types) to packed OutT rows at dst, leading
/// dimension ld.
template <class OutT>
inline cudaError_t launch_convert(const tview& src, OutT* dst, i64 ld, cudaStream_t stream) noexcept {
    const i64 total = src.nelements();
    if (total == 0) return cudaSuccess;
    const int rows_fast = src.ne[0] > 1 && src.ne[1] > 1 && src.nb[0] > src.nb[1] ? 1 : 0;
    convert_kernel<OutT><<<blocks_for(total, 256), 256, 0, stream>>>(src, dst, ld, rows_fast);
    return cudaGetLastError();
}

/// Queues the dequantization of src (any quantized type) to OutT rows at dst, leading
/// dimension ld.
template <class OutT>
inline cudaError_t launch_dequant(const tview& src, OutT* dst, i64 ld, cudaStream_t stream) noexcept {
    const i64 total = (src.ne[0] / 32) * src.nrows();
    if (total == 0) return cudaSuccess;
    const auto launch = [&](auto tag) -> cudaError_t {
        dequant_kernel<decltype(tag)::value, OutT><<<blocks_for(total, 256), 256, 0, stream>>>(src, dst, ld);
        return cudaGetLastError();
    };
    switch (src.type) {
    case elem_type::q8_0: return launch(std::integral_constant<elem_type, elem_type::q8_0>{});
    case elem_type::q4_0: return launch(std::integral_constant<elem_type, elem_type::q4_0>{});
    default: return quant::visit(src.type, launch, cudaErrorNotSupported);
    }
}

/// src (any real type, any layout) to packed rows of type `to` (f32, f16 or bf16) at dst.
inline cudaError_t launch_stage(const tview& src, elem_type to, void* dst, i64 ld, cudaStream_t stream) noexcept {
    const bool quantized = is_quantized(src.type);
    switch (to) {
    case elem_type::f32:
        return quantized ? launch_dequant(src, static_cast<float*>(dst), ld, stream)
                     : launch_convert(src, static_cast<float*>(dst), ld, stream);
    case elem_type::f16:
        return quantized ? launch_dequant(src, static_cast<__half*>(dst), ld, stream)
                     : launch_convert(src, static_cast<__half*>(dst), ld, stream);
    case elem_type::bf16:
        if (!quantized) return launch_convert(src, static_cast<__nv_bfloat16*>(dst), ld, stream);
        return cudaErrorNotSupported; // never planned: quantized weights go to f16
    default: return cudaErrorNotSupported;
    }
}

} // namespace backplane::cuda::kernels::mm

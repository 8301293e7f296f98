#pragma once
// What every CUDA kernel family shares: tensors as kernel arguments, element loads and
// stores of every type, grid sizing, warp and block reductions.

#ifndef __CUDACC__
#error "backplane/backends/cuda/kernels/*.cuh are CUDA sources: include them only from a translation unit compiled by nvcc (linking backplane::cuda builds them for you)"
#endif

#include <backplane/backends/cuda/kernel_api.hpp>
#include <backplane/backends/cuda/kernels/quants.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace backplane::cuda::kernels {

using i64 = std::int64_t;

/// A tensor as a kernel sees it: its device address, extents and byte strides.
struct tview {
    char* data = nullptr;
    i64 ne[4] = {1, 1, 1, 1};
    i64 nb[4] = {0, 0, 0, 0};
    elem_type type = elem_type::f32;

    __host__ __device__ i64 nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    /// Rows (ne1 * ne2 * ne3).
    __host__ __device__ i64 nrows() const { return ne[1] * ne[2] * ne[3]; }
    /// The address of row (i1, i2, i3).
    __host__ __device__ char* row(i64 i1, i64 i2, i64 i3) const { return data + i1 * nb[1] + i2 * nb[2] + i3 * nb[3]; }
    /// The address of row r, counted over (i1, i2, i3) with i1 fastest.
    __host__ __device__ char* row(i64 r) const {
        const i64 i1 = r % ne[1];
        const i64 i23 = r / ne[1];
        return row(i1, i23 % ne[2], i23 / ne[2]);
    }
    /// Whether rows are packed (nb0 = element or block size) and the whole is contiguous.
    __host__ __device__ bool contiguous() const {
        const i64 qb = quant::block_bytes(type); // 0: not quantized
        const i64 bs = qb != 0 ? quant::block_values(type) : 1;
        const i64 ts = qb != 0 ? qb : type == elem_type::i64 ? 8 : type == elem_type::f32 || type == elem_type::i32 ? 4 : 2;
        return nb[0] == ts && nb[1] == nb[0] * (ne[0] / bs) && nb[2] == nb[1] * ne[1] && nb[3] == nb[2] * ne[2];
    }
};

inline tview view_of(const tensor& t) noexcept {
    tview v;
    v.data = static_cast<char*>(t.data);
    for (int i = 0; i < 4; ++i) {
        v.ne[i] = t.ne[static_cast<std::size_t>(i)];
        v.nb[i] = static_cast<i64>(t.nb[static_cast<std::size_t>(i)]);
    }
    v.type = t.type;
    return v;
}

// -- element access -----------------------------------------------------------------
// Quantized blocks as stored (core/types.hpp): q8_0 = f16 scale + 32 int8; q4_0 = f16
// scale + 16 bytes, byte j holding value j (low nibble) and value j + 16 (high nibble).
// Blocks are 2-byte aligned only: read them by bytes or 16-bit words. The other quantized
// types are read by quant::value (quants.hpp), byte by byte (mxfp4's blocks are 17 bytes).

__device__ __forceinline__ float f16_bits_to_float(std::uint16_t b) { return __half2float(__ushort_as_half(b)); }
__device__ __forceinline__ float bf16_bits_to_float(std::uint16_t b) { return __uint_as_float(static_cast<unsigned>(b) << 16); }

/// Value i0 of a row (the row's start address) of type t.
__device__ __forceinline__ float load_row(const char* row, elem_type t, i64 i0) {
    switch (t) {
    case elem_type::f32: return reinterpret_cast<const float*>(row)[i0];
    case elem_type::f16: return f16_bits_to_float(reinterpret_cast<const std::uint16_t*>(row)[i0]);
    case elem_type::bf16: return bf16_bits_to_float(reinterpret_cast<const std::uint16_t*>(row)[i0]);
    case elem_type::q8_0: {
        const char* b = row + (i0 / 32) * 34;
        const float d = f16_bits_to_float(*reinterpret_cast<const std::uint16_t*>(b));
        return d * static_cast<float>(static_cast<std::int8_t>(b[2 + i0 % 32]));
    }
    case elem_type::q4_0: {
        const char* b = row + (i0 / 32) * 18;
        const float d = f16_bits_to_float(*reinterpret_cast<const std::uint16_t*>(b));
        const int j = static_cast<int>(i0 % 32);
        const auto byte = static_cast<std::uint8_t>(b[2 + (j & 15)]);
        const int q = j < 16 ? (byte & 0x0f) : (byte >> 4);
        return d * static_cast<float>(q - 8);
    }
    case elem_type::i32: return static_cast<float>(reinterpret_cast<const std::int32_t*>(row)[i0]);
    default: return quant::row_value(t, reinterpret_cast<const unsigned char*>(row), i0);
    }
}

/// Element (i0, i1, i2, i3) of a non-quantized tensor, as float (nb0 may be any stride).
__device__ __forceinline__ float load(const tview& v, i64 i0, i64 i1, i64 i2, i64 i3) {
    const char* p = v.data + i0 * v.nb[0] + i1 * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3];
    switch (v.type) {
    case elem_type::f32: return *reinterpret_cast<const float*>(p);
    case elem_type::f16: return f16_bits_to_float(*reinterpret_cast<const std::uint16_t*>(p));
    case elem_type::bf16: return bf16_bits_to_float(*reinterpret_cast<const std::uint16_t*>(p));
    case elem_type::i32: return static_cast<float>(*reinterpret_cast<const std::int32_t*>(p));
    default: return load_row(v.data + i1 * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3], v.type, i0);
    }
}

/// float -> f16 / bf16 bits, rounding to nearest even (as the CPU's conversions do).
__device__ __forceinline__ std::uint16_t float_to_f16_bits(float x) { return __half_as_ushort(__float2half_rn(x)); }
__device__ __forceinline__ std::uint16_t float_to_bf16_bits(float x) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

/// Stores x at element (i0, i1, i2, i3) of a non-quantized tensor of a float type or i32.
__device__ __forceinline__ void store(const tview& v, i64 i0, i64 i1, i64 i2, i64 i3, float x) {
    char* p = v.data + i0 * v.nb[0] + i1 * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3];
    switch (v.type) {
    case elem_type::f32: *reinterpret_cast<float*>(p) = x; break;
    case elem_type::f16: *reinterpret_cast<std::uint16_t*>(p) = float_to_f16_bits(x); break;
    case elem_type::bf16: *reinterpret_cast<std::uint16_t*>(p) = float_to_bf16_bits(x); break;
    case elem_type::i32: *reinterpret_cast<std::int32_t*>(p) = static_cast<std::int32_t>(x); break;
    default: break; // quantized destinations are written block by block (copy.cuh)
    }
}

/// Linear index i (i0 fastest) to (i0, i1, i2, i3) over extents ne.
__device__ __forceinline__ void unravel(i64 i, const i64 (&ne)[4], i64& i0, i64& i1, i64& i2, i64& i3) {
    i0 = i % ne[0];
    i /= ne[0];
    i1 = i % ne[1];
    i /= ne[1];
    i2 = i % ne[2];
    i3 = i / ne[2];
}

// -- launch geometry ------------------------------------------------------------------

/// Blocks for n elements at `per_block` elements per block, capped so that a
/// grid-stride loop covers the rest (gridDim.x up to 2^31 - 1, but more is waste).
inline unsigned blocks_for(i64 n, int per_block) noexcept {
    const i64 b = (n + per_block - 1) / per_block;
    constexpr i64 cap = 65535LL * 32;
    return static_cast<unsigned>(b < 1 ? 1 : (b > cap ? cap : b));
}

// -- reductions -----------------------------------------------------------------------

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

/// The sum of x over the block (blockDim.x a multiple of 32, at most 1024); every
/// thread gets it. `shared` holds 32 floats.
__device__ __forceinline__ float block_sum(float x, float* shared) {
    x = warp_sum(x);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __syncthreads(); // shared may still be read by an earlier reduction
    if (lane == 0) shared[warp] = x;
    __syncthreads();
    x = lane < static_cast<int>(blockDim.x / 32) ? shared[lane] : 0.0f;
    return warp_sum(x);
}

__device__ __forceinline__ float block_max(float x, float* shared) {
    x = warp_max(x);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __syncthreads();
    if (lane == 0) shared[warp] = x;
    __syncthreads();
    x = lane < static_cast<int>(blockDim.x / 32) ? shared[lane] : -INFINITY;
    return warp_max(x);
}

} // namespace backplane::cuda::kernels

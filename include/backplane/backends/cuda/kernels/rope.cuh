#pragma once
// rope: rotary position embedding of a [head_dim, n_head, n_tokens, ne3] (f32 or f16)
// with i32 positions (n_tokens, or 4 * n_tokens in the M-RoPE modes) and optional f32
// frequency factors: ggml's rope_ext and rope_multi, every mode (normal, neox, mrope,
// vision, imrope), YaRN included, with core/rope_functions.hpp's formulas; values past
// the rotated ones are copied as bits.
//
// As the CPU reference (backends/cpu/kernels/rope.hpp), the angle, its sine and cosine
// are computed in double (positions reach thousands of radians, where an f32 angle is off
// by ~1e-3), then rounded to float; the rotation is x0 c - x1 s, x0 s + x1 c in f32
// without contraction. The angle depends on the pair and the token only, so a thread
// computes it once for a run of rows (heads) of that token.
// In place (dst sharing a's memory and layout): each thread reads a pair before writing
// it, and no two threads touch the same values.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/core/rope_functions.hpp>

#include <cstdint>

namespace backplane::cuda::kernels {

namespace rope_detail {

/// What a rope kernel needs besides its tensors.
struct rope_args {
    rope_fn::params c;
    i64 half = 0;       ///< the pairs of a row (rope_fn::n_pairs)
    i64 end = 0;        ///< the rotated values end here (rope_fn::rotated_end)
    i64 ncols = 0;      ///< half + (ne0 - end): pairs, then values copied
    i64 chunk = 1;      ///< rows (i1) per work item
    i64 nchunks = 1;    ///< ceil(ne1 / chunk)
    i64 items = 0;      ///< ncols * ne2 * ne3 * nchunks
};

template <elem_type T> __device__ __forceinline__ float ld(const char* p) {
    if constexpr (T == elem_type::f32)
        return *reinterpret_cast<const float*>(p);
    else
        return f16_bits_to_float(*reinterpret_cast<const std::uint16_t*>(p));
}

template <elem_type T> __device__ __forceinline__ void st(char* p, float x) {
    if constexpr (T == elem_type::f32)
        *reinterpret_cast<float*>(p) = x;
    else
        *reinterpret_cast<std::uint16_t*>(p) = float_to_f16_bits(x);
}

template <elem_type T> __device__ __forceinline__ void copy_bits(char* dst, const char* src) {
    if constexpr (T == elem_type::f32)
        *reinterpret_cast<std::uint32_t*>(dst) = *reinterpret_cast<const std::uint32_t*>(src);
    else
        *reinterpret_cast<std::uint16_t*>(dst) = *reinterpret_cast<const std::uint16_t*>(src);
}

/// Work item it = (col, i2, i3, chunk), col fastest: col < half rotates pair col of rows
/// i1 in [chunk * c.chunk, +c.chunk) of token i2, col >= half copies value end + col -
/// half of those rows. Adjacent threads take adjacent columns of the same rows.
template <elem_type T>
__global__ void __launch_bounds__(256) rope_kernel(tview a, tview pos, tview ff, tview d, rope_args c) {
    const i64 ne1 = a.ne[1], ne2 = a.ne[2], ne3 = a.ne[3];
    const i64 sa = a.nb[0], sd = d.nb[0];
    for (i64 it = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; it < c.items;
         it += static_cast<i64>(gridDim.x) * blockDim.x) {
        const i64 col = it % c.ncols;
        i64 t = it / c.ncols;
        const i64 i2 = t % ne2;
        t /= ne2;
        const i64 i3 = t % ne3;
        const i64 i1_begin = (t / ne3) * c.chunk;
        const i64 i1_end = i1_begin + c.chunk < ne1 ? i1_begin + c.chunk : ne1;
        if (col < c.half) {
            const int k = static_cast<int>(col);
            int exponent = 0;
            const int stream = rope_fn::stream_of(c.c, k, exponent);
            const double position =
                *reinterpret_cast<const std::int32_t*>(pos.data + (i2 + stream * ne2) * pos.nb[0]);
            const double f = ff.data ? *reinterpret_cast<const float*>(ff.data + col * ff.nb[0]) : 1.0;
            double c_theta, s_theta;
            rope_fn::cos_sin(c.c, position, k, exponent, f, c_theta, s_theta);
            const auto cs = static_cast<float>(c_theta);
            const auto sn = static_cast<float>(s_theta);
            int p0 = 0, p1 = 0;
            rope_fn::pair_of(c.c, k, p0, p1);
            const i64 j0 = p0, j1 = p1;
            for (i64 i1 = i1_begin; i1 < i1_end; ++i1) {
                const char* pa = a.row(i1, i2, i3);
                char* pd = d.row(i1, i2, i3);
                const float x0 = ld<T>(pa + j0 * sa);
                const float x1 = ld<T>(pa + j1 * sa);
                st<T>(pd + j0 * sd, __fsub_rn(__fmul_rn(x0, cs), __fmul_rn(x1, sn)));
                st<T>(pd + j1 * sd, __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, cs)));
            }
        } else {
            const i64 j = c.end + (col - c.half);
            for (i64 i1 = i1_begin; i1 < i1_end; ++i1) copy_bits<T>(d.row(i1, i2, i3) + j * sd, a.row(i1, i2, i3) + j * sa);
        }
    }
}

} // namespace rope_detail

/// rope, every mode, f32 and f16 (dst = a's type and shape), src[1] the i32 positions
/// indexed by a's dim 2 (and by stream in the M-RoPE modes), src[2] the optional f32
/// frequency factors; params: rope_fn::slot's. Any strides for a, the positions and dst.
inline cudaError_t launch_rope(const tensor& node, const detail::launch_context& ctx) noexcept {
    const tensor* src = node.src[0];
    const tensor* positions = node.src[1];
    if (src == nullptr || positions == nullptr) return cudaErrorInvalidValue;
    if (node.nelements() == 0) return cudaSuccess;
    const tview a = view_of(*src);
    const tview p = view_of(*positions);
    const tview d = view_of(node);
    if (a.type != d.type || p.type != elem_type::i32) return cudaErrorNotSupported;

    rope_detail::rope_args c;
    c.c = rope_fn::params_of(node);
    if (c.c.n_dims <= 0 || c.c.n_dims % 2 != 0 || c.c.n_dims > a.ne[0]) return cudaErrorInvalidValue;
    c.half = rope_fn::n_pairs(c.c);
    c.end = rope_fn::rotated_end(c.c);
    c.ncols = c.half + (a.ne[0] - c.end);
    const tview f = node.src[2] ? view_of(*node.src[2]) : tview{};

    // Rows per work item: all heads of a token share its angles, but keep enough items
    // to fill the device (~2048 threads per multiprocessor) and each item short.
    const i64 per_chunk = c.ncols * a.ne[2] * a.ne[3];
    const i64 target = static_cast<i64>(ctx.sm_count > 0 ? ctx.sm_count : 16) * 2048;
    const i64 ne1 = a.ne[1];
    i64 chunk = ne1 * per_chunk / target;
    if (chunk > 64) chunk = 64;
    if (chunk > ne1) chunk = ne1;
    if (chunk < 1) chunk = 1;
    c.chunk = chunk;
    c.nchunks = (ne1 + chunk - 1) / chunk;
    c.items = per_chunk * c.nchunks;

    constexpr int threads = 256;
    const unsigned blocks = blocks_for(c.items, threads);
    switch (a.type) {
    case elem_type::f32:
        rope_detail::rope_kernel<elem_type::f32><<<blocks, threads, 0, ctx.stream>>>(a, p, f, d, c);
        break;
    case elem_type::f16:
        rope_detail::rope_kernel<elem_type::f16><<<blocks, threads, 0, ctx.stream>>>(a, p, f, d, c);
        break;
    default: return cudaErrorNotSupported;
    }
    return cudaGetLastError();
}

} // namespace backplane::cuda::kernels

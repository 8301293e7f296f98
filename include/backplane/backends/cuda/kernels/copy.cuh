#pragma once
// dup, cont, cpy: destination element i (dim 0 fastest, in the destination's shape) is
// source element i (in the source's shape); the shapes may differ, the element counts
// are equal. Either side may have any byte strides; quantized rows are whole blocks
// (nb0 is the block stride). cpy writes node's memory, which is src[1]'s (node is a view
// of it with its extents and strides), as the CPU does.
//
// Conversions are core's (core/types.hpp):
//   - one type to itself: storage units (elements, or whole blocks of any quantized
//     type) copied as bits; both sides contiguous: one device-to-device cudaMemcpyAsync;
//   - f16 / bf16 widened exactly, f32 narrowed rounding to nearest even; quantized
//     values dequantized as core's dequantize_row_* (q8_0 / q4_0 as d * q in f32, the
//     other types by quant::value, quants.hpp), then stored as the destination's type;
//   - a q8_0 / q4_0 destination is quantized block by block, one warp per block, with
//     the operations of quantize_row_q8_0 / quantize_row_q4_0 in the same order,
//     correctly rounded (__fdiv_rn, __fmul_rn, __fadd_rn: no contraction into an FMA,
//     whatever the build's -prec-div or -fmad), so the blocks are the CPU's bit for bit
//     for finite values (unless the build flushes subnormals, --use_fast_math);
//   - a q4_1 / q5_0 / q5_1 / iq4_nl / mxfp4 / q2_K ... q6_K destination is quantized one
//     thread per block (32 values, 256 for the K-quants) by quant::quantize (quants.hpp),
//     core's quantize_row_* byte for byte (finite values); q8_K has no quantizer here.
//
// This header also holds the typed element access the other element-wise families
// (elementwise.cuh, concat.cuh, get_rows.cuh) share: namespace elem_io.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/core/op_traits.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace backplane::cuda::kernels {

namespace elem_io {

/// An element type as a template argument (run-time dispatch: visit_float).
template <elem_type T> using type_tag = std::integral_constant<elem_type, T>;

template <elem_type T> inline constexpr bool always_false = false;

template <elem_type T> inline constexpr bool is_quant = quant::block_bytes(T) != 0;

/// Values per storage unit (1, or a block's 32 or 256).
template <elem_type T> inline constexpr int unit_values = is_quant<T> ? quant::block_values(T) : 1;

/// Bytes per storage unit (element, or block).
template <elem_type T>
inline constexpr int unit_bytes = is_quant<T> ? quant::block_bytes(T) : T == elem_type::i64 ? 8 : T == elem_type::f32 || T == elem_type::i32 ? 4 : 2;

/// The element at p of a non-quantized type, as float.
template <elem_type T> __device__ __forceinline__ float ld(const char* p) {
    if constexpr (T == elem_type::f32)
        return *reinterpret_cast<const float*>(p);
    else if constexpr (T == elem_type::f16)
        return f16_bits_to_float(*reinterpret_cast<const std::uint16_t*>(p));
    else if constexpr (T == elem_type::bf16)
        return bf16_bits_to_float(*reinterpret_cast<const std::uint16_t*>(p));
    else if constexpr (T == elem_type::i32)
        return static_cast<float>(*reinterpret_cast<const std::int32_t*>(p));
    else
        static_assert(always_false<T>, "quantized values are read with ld_block");
}

/// Value j of the quantized block at blk, as core's dequantize_row_*: q8_0 / q4_0 here
/// (d * q), the other types by quant::value (quants.hpp).
/// The scale d is read only for those two: mxfp4's 17-byte blocks may start at any byte.
template <elem_type T> __device__ __forceinline__ float ld_block(const char* blk, int j) {
    if constexpr (T == elem_type::q8_0) {
        const float d = f16_bits_to_float(*reinterpret_cast<const std::uint16_t*>(blk));
        return __fmul_rn(d, static_cast<float>(reinterpret_cast<const std::int8_t*>(blk)[2 + j]));
    } else if constexpr (T == elem_type::q4_0) {
        const float d = f16_bits_to_float(*reinterpret_cast<const std::uint16_t*>(blk));
        const unsigned byte = reinterpret_cast<const std::uint8_t*>(blk)[2 + (j & 15)];
        const int q = static_cast<int>(j < 16 ? (byte & 0x0fu) : (byte >> 4));
        return __fmul_rn(d, static_cast<float>(q - 8));
    } else if constexpr (is_quant<T>) {
        return quant::value<T>(reinterpret_cast<const unsigned char*>(blk), j);
    } else {
        static_assert(always_false<T>, "not a quantized type");
    }
}

/// Value i0 of the row at `row` whose unit stride (element, or block) is nb0.
template <elem_type T> __device__ __forceinline__ float ld_row(const char* row, i64 nb0, i64 i0) {
    if constexpr (is_quant<T>)
        return ld_block<T>(row + (i0 / unit_values<T>) * nb0, static_cast<int>(i0 % unit_values<T>));
    else
        return ld<T>(row + i0 * nb0);
}

/// Stores x at p as f32, f16 or bf16 (rounding to nearest even).
template <elem_type T> __device__ __forceinline__ void st(char* p, float x) {
    if constexpr (T == elem_type::f32)
        *reinterpret_cast<float*>(p) = x;
    else if constexpr (T == elem_type::f16)
        *reinterpret_cast<std::uint16_t*>(p) = float_to_f16_bits(x);
    else if constexpr (T == elem_type::bf16)
        *reinterpret_cast<std::uint16_t*>(p) = float_to_bf16_bits(x);
    else
        static_assert(always_false<T>, "st stores f32, f16 or bf16");
}

__device__ __forceinline__ float half_bits_to_float(elem_type t, unsigned h) {
    return t == elem_type::f16 ? f16_bits_to_float(static_cast<std::uint16_t>(h)) : bf16_bits_to_float(static_cast<std::uint16_t>(h));
}

/// Four consecutive elements at p (aligned to 4 elements) as float.
template <elem_type T> __device__ __forceinline__ void ld4(const char* p, float (&x)[4]) {
    if constexpr (T == elem_type::f32) {
        const float4 v = *reinterpret_cast<const float4*>(p);
        x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
    } else if constexpr (T == elem_type::f16 || T == elem_type::bf16) {
        const uint2 v = *reinterpret_cast<const uint2*>(p);
        x[0] = half_bits_to_float(T, v.x & 0xffffu);
        x[1] = half_bits_to_float(T, v.x >> 16);
        x[2] = half_bits_to_float(T, v.y & 0xffffu);
        x[3] = half_bits_to_float(T, v.y >> 16);
    } else {
        static_assert(always_false<T>, "ld4 reads f32, f16 or bf16");
    }
}

/// Stores four consecutive elements at p (aligned to 4 elements).
template <elem_type T> __device__ __forceinline__ void st4(char* p, const float (&x)[4]) {
    if constexpr (T == elem_type::f32) {
        *reinterpret_cast<float4*>(p) = make_float4(x[0], x[1], x[2], x[3]);
    } else if constexpr (T == elem_type::f16 || T == elem_type::bf16) {
        auto h = [](float v) -> unsigned {
            return T == elem_type::f16 ? float_to_f16_bits(v) : float_to_bf16_bits(v);
        };
        *reinterpret_cast<uint2*>(p) = make_uint2(h(x[0]) | (h(x[1]) << 16), h(x[2]) | (h(x[3]) << 16));
    } else {
        static_assert(always_false<T>, "st4 stores f32, f16 or bf16");
    }
}

/// Calls f(type_tag<T>{}) for t among f32, f16, bf16; cudaErrorNotSupported otherwise.
template <class F> cudaError_t visit_float(elem_type t, F&& f) {
    switch (t) {
    case elem_type::f32: return f(type_tag<elem_type::f32>{});
    case elem_type::f16: return f(type_tag<elem_type::f16>{});
    case elem_type::bf16: return f(type_tag<elem_type::bf16>{});
    default: return cudaErrorNotSupported;
    }
}

/// As visit_float, with every quantized type too.
template <class F> cudaError_t visit_real(elem_type t, F&& f) {
    switch (t) {
    case elem_type::q8_0: return f(type_tag<elem_type::q8_0>{});
    case elem_type::q4_0: return f(type_tag<elem_type::q4_0>{});
    case elem_type::q4_1: return f(type_tag<elem_type::q4_1>{});
    case elem_type::q5_0: return f(type_tag<elem_type::q5_0>{});
    case elem_type::q5_1: return f(type_tag<elem_type::q5_1>{});
    case elem_type::iq4_nl: return f(type_tag<elem_type::iq4_nl>{});
    case elem_type::mxfp4: return f(type_tag<elem_type::mxfp4>{});
    case elem_type::q2_K: return f(type_tag<elem_type::q2_K>{});
    case elem_type::q3_K: return f(type_tag<elem_type::q3_K>{});
    case elem_type::q4_K: return f(type_tag<elem_type::q4_K>{});
    case elem_type::q5_K: return f(type_tag<elem_type::q5_K>{});
    case elem_type::q6_K: return f(type_tag<elem_type::q6_K>{});
    case elem_type::q8_K: return f(type_tag<elem_type::q8_K>{});
    case elem_type::iq4_xs: return f(type_tag<elem_type::iq4_xs>{});
    case elem_type::tq1_0: return f(type_tag<elem_type::tq1_0>{});
    case elem_type::tq2_0: return f(type_tag<elem_type::tq2_0>{});
    case elem_type::iq2_xxs: return f(type_tag<elem_type::iq2_xxs>{});
    case elem_type::iq2_xs: return f(type_tag<elem_type::iq2_xs>{});
    case elem_type::iq2_s: return f(type_tag<elem_type::iq2_s>{});
    case elem_type::iq3_xxs: return f(type_tag<elem_type::iq3_xxs>{});
    case elem_type::iq3_s: return f(type_tag<elem_type::iq3_s>{});
    case elem_type::iq1_s: return f(type_tag<elem_type::iq1_s>{});
    case elem_type::iq1_m: return f(type_tag<elem_type::iq1_m>{});
    default: return visit_float(t, static_cast<F&&>(f));
    }
}

/// Launch geometry of a loop over rows x values within a row: 256 threads, blockDim.x
/// the power of two covering a row up to 256 (short rows put several rows in a block),
/// gridDim.y at most 65535; the kernels stride over both.
struct rows_grid {
    dim3 grid;
    dim3 block;
};
inline rows_grid rows_geometry(i64 n0, i64 rows) noexcept {
    unsigned bx = 1;
    while (bx < 256 && static_cast<i64>(bx) < n0) bx <<= 1;
    const unsigned by = 256 / bx;
    const i64 gx = (n0 + bx - 1) / bx;
    const i64 gy = (rows + by - 1) / by;
    constexpr i64 cap_x = 65535LL * 32, cap_y = 65535;
    rows_grid g;
    g.block = dim3(bx, by, 1);
    g.grid = dim3(static_cast<unsigned>(gx < 1 ? 1 : gx > cap_x ? cap_x : gx),
                  static_cast<unsigned>(gy < 1 ? 1 : gy > cap_y ? cap_y : gy), 1);
    return g;
}

/// First value and stride of the row loop (y) and of the loop within a row (x).
__device__ __forceinline__ i64 row_first() { return static_cast<i64>(blockIdx.y) * blockDim.y + threadIdx.y; }
__device__ __forceinline__ i64 row_step() { return static_cast<i64>(gridDim.y) * blockDim.y; }
__device__ __forceinline__ i64 col_first() { return static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ i64 col_step() { return static_cast<i64>(gridDim.x) * blockDim.x; }

/// Row r (i1 fastest) of extents ne as (i1, i2, i3).
__device__ __forceinline__ void unravel_row(i64 r, const i64 (&ne)[4], i64& i1, i64& i2, i64& i3) {
    i1 = r % ne[1];
    r /= ne[1];
    i2 = r % ne[2];
    i3 = r / ne[2];
}

/// Whether the address is a multiple of `align` bytes.
inline bool aligned(const void* p, std::size_t align) noexcept {
    return reinterpret_cast<std::uintptr_t>(p) % align == 0;
}

} // namespace elem_io

namespace copy_detail {

using namespace elem_io;

/// How source positions follow from destination rows: the same coordinates (same
/// shape), the same linear row (same row length), or one unravel per unit.
enum class src_map : int { same_shape, same_row, linear };

__host__ __device__ inline src_map map_of(const tview& d, const tview& s) {
    if (s.ne[0] != d.ne[0]) return src_map::linear;
    return s.ne[1] == d.ne[1] && s.ne[2] == d.ne[2] ? src_map::same_shape : src_map::same_row;
}

/// One type to itself: storage units of B bytes (elements: 2, 4, 8; blocks: 17 to 292),
/// copied as bits (16-bit words, bytes where B is odd); bs is the values per unit (1, 32
/// or 256).
template <int B>
__global__ void k_copy_units(tview d, tview s, i64 bs) {
    const i64 n0 = d.ne[0] / bs;    // units per destination row
    const i64 sn0 = s.ne[0] / bs;   // per source row
    const i64 sne[4] = {sn0, s.ne[1], s.ne[2], s.ne[3]};
    const i64 rows = d.nrows();
    const src_map m = map_of(d, s);
    for (i64 r = row_first(); r < rows; r += row_step()) {
        i64 i1, i2, i3;
        unravel_row(r, d.ne, i1, i2, i3);
        char* pd = d.row(i1, i2, i3);
        const char* ps = m == src_map::same_shape ? s.row(i1, i2, i3) : m == src_map::same_row ? s.row(r) : nullptr;
        for (i64 u = col_first(); u < n0; u += col_step()) {
            const char* src;
            if (m == src_map::linear) {
                i64 j0, j1, j2, j3;
                unravel(r * n0 + u, sne, j0, j1, j2, j3);
                src = s.data + j0 * s.nb[0] + j1 * s.nb[1] + j2 * s.nb[2] + j3 * s.nb[3];
            } else {
                src = ps + u * s.nb[0];
            }
            char* dst = pd + u * d.nb[0];
            if constexpr (B == 4) {
                *reinterpret_cast<std::uint32_t*>(dst) = *reinterpret_cast<const std::uint32_t*>(src);
            } else if constexpr (B % 2 == 0) {
#pragma unroll 8
                for (int w = 0; w < B / 2; ++w)
                    reinterpret_cast<std::uint16_t*>(dst)[w] = reinterpret_cast<const std::uint16_t*>(src)[w];
            } else { // mxfp4: no alignment
#pragma unroll
                for (int w = 0; w < B; ++w) dst[w] = src[w];
            }
        }
    }
}

/// Conversion to a non-quantized float type D from S (any real type, S != D).
template <elem_type S, elem_type D>
__global__ void k_convert(tview d, tview s) {
    const i64 n0 = d.ne[0];
    const i64 rows = d.nrows();
    const src_map m = map_of(d, s);
    for (i64 r = row_first(); r < rows; r += row_step()) {
        i64 i1, i2, i3;
        unravel_row(r, d.ne, i1, i2, i3);
        char* pd = d.row(i1, i2, i3);
        const char* ps = m == src_map::same_shape ? s.row(i1, i2, i3) : m == src_map::same_row ? s.row(r) : nullptr;
        for (i64 i0 = col_first(); i0 < n0; i0 += col_step()) {
            float x;
            if (m == src_map::linear) {
                i64 j0, j1, j2, j3;
                unravel(r * n0 + i0, s.ne, j0, j1, j2, j3);
                x = ld_row<S>(s.row(j1, j2, j3), s.nb[0], j0);
            } else {
                x = ld_row<S>(ps, s.nb[0], i0);
            }
            st<D>(pd + i0 * d.nb[0], x);
        }
    }
}

/// Stores a block of 32 values of D (q8_0 or q4_0) at blk, lane j of a warp holding value
/// x_j (every lane of the warp calls it: it shuffles), computed as core's quantize_row_*.
template <elem_type D>
__device__ __forceinline__ void store_block_lane(float x, char* blk, int lane) {
    constexpr unsigned full = 0xffffffffu;
    unsigned byte; // this lane's quant byte (q8_0), or nibble (q4_0)
    float dd;      // the block's scale
    if constexpr (D == elem_type::q8_0) {
        // amax = fmax over |x| from 0: a NaN is passed over (fmaxf returns the other)
        float amax = fmaxf(0.0f, fabsf(x));
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(full, amax, o));
        dd = __fdiv_rn(amax, 127.0f);
        const float id = dd != 0.0f ? __fdiv_rn(1.0f, dd) : 0.0f;
        // nearbyint in the default rounding mode: to nearest, ties to even
        byte = static_cast<unsigned>(__float2int_rn(__fmul_rn(x, id))) & 0xffu;
    } else if constexpr (D == elem_type::q4_0) {
        // the first value of largest magnitude (strictly above 0; NaN never) maps to -8
        float a = fabsf(x);
        if (!(a > 0.0f)) a = 0.0f;
        int at = lane;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float oa = __shfl_xor_sync(full, a, o);
            const int oat = __shfl_xor_sync(full, at, o);
            if (oa > a || (oa == a && oat < at)) a = oa, at = oat;
        }
        const float xmax = __shfl_sync(full, x, at);
        const float vmax = a > 0.0f ? xmax : 0.0f;
        dd = __fdiv_rn(vmax, -8.0f);
        const float id = dd != 0.0f ? __fdiv_rn(1.0f, dd) : 0.0f;
        const float v = __fadd_rn(__fmul_rn(x, id), 8.5f);
        const int q = v < 15.0f ? __float2int_rz(v) : 15;
        const unsigned lo = static_cast<unsigned>(q) & 0xffu;
        const unsigned hi = __shfl_down_sync(full, lo, 16); // value lane + 16
        byte = (lo | (hi << 4)) & 0xffu;                    // meaningful on lanes 0..15
    } else {
        static_assert(always_false<D>, "store_block_lane writes q8_0 or q4_0");
    }
    const unsigned next = __shfl_down_sync(full, byte, 1);
    constexpr int nbytes = D == elem_type::q8_0 ? 32 : 16;
    if (lane % 2 == 0 && lane < nbytes)
        reinterpret_cast<std::uint16_t*>(blk + 2)[lane / 2] = static_cast<std::uint16_t>(byte | (next << 8));
    if (lane == 0) *reinterpret_cast<std::uint16_t*>(blk) = float_to_f16_bits(dd);
}

/// Quantization to D (q8_0 or q4_0) from S (any real type, S != D): one warp per
/// destination block, lane j holding value j, computed as core's quantize_row_*.
template <elem_type S, elem_type D>
__global__ void k_quantize(tview d, tview s) {
    const i64 nbx = d.ne[0] / 32; // blocks per destination row
    const i64 nblocks = nbx * d.nrows();
    const int lane = static_cast<int>(threadIdx.x % 32);
    const src_map m = map_of(d, s);
    // the loop is uniform over a warp: every lane takes part in the shuffles
    const i64 warp0 = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    const i64 warps = static_cast<i64>(gridDim.x) * blockDim.x / 32;
    for (i64 k = warp0; k < nblocks; k += warps) {
        const i64 ib = k % nbx;
        const i64 r = k / nbx;
        i64 i1, i2, i3;
        unravel_row(r, d.ne, i1, i2, i3);
        char* blk = d.row(i1, i2, i3) + ib * d.nb[0];
        const i64 i0 = ib * 32 + lane; // destination value; also the source's when rows agree
        float x;
        if (m == src_map::same_shape) {
            x = ld_row<S>(s.row(i1, i2, i3), s.nb[0], i0);
        } else if (m == src_map::same_row) {
            x = ld_row<S>(s.row(r), s.nb[0], i0);
        } else {
            i64 j0, j1, j2, j3;
            unravel(k * 32 + lane, s.ne, j0, j1, j2, j3);
            x = ld_row<S>(s.row(j1, j2, j3), s.nb[0], j0);
        }
        store_block_lane<D>(x, blk, lane);
    }
}

/// Quantization to D (quant::quantizable: q4_1 ... mxfp4, q2_K ... q6_K) from S (any real
/// type, S != D): one thread per destination block (32 or 256 values), quant::quantize<D>.
template <elem_type S, elem_type D>
__global__ void k_quantize_ext(tview d, tview s) {
    constexpr int bv = quant::block_values(D);
    const i64 nbx = d.ne[0] / bv; // blocks per destination row
    const i64 nblocks = nbx * d.nrows();
    const src_map m = map_of(d, s);
    const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
    for (i64 k = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; k < nblocks; k += stride) {
        const i64 ib = k % nbx;
        const i64 r = k / nbx;
        i64 i1, i2, i3;
        unravel_row(r, d.ne, i1, i2, i3);
        float x[bv];
        if (m == src_map::linear) {
            for (int j = 0; j < bv; ++j) {
                i64 j0, j1, j2, j3;
                unravel(k * bv + j, s.ne, j0, j1, j2, j3);
                x[j] = ld_row<S>(s.row(j1, j2, j3), s.nb[0], j0);
            }
        } else {
            const char* ps = m == src_map::same_shape ? s.row(i1, i2, i3) : s.row(r);
            for (int j = 0; j < bv; ++j) x[j] = ld_row<S>(ps, s.nb[0], ib * bv + j);
        }
        quant::quantize<D>(x, reinterpret_cast<unsigned char*>(d.row(i1, i2, i3) + ib * d.nb[0]));
    }
}

/// Calls f(type_tag<D>{}) for the quantized destination types quant::quantize writes;
/// cudaErrorNotSupported for any other.
template <class F> cudaError_t visit_quantizable(elem_type t, F&& f) {
    return visit_real(t, [&](auto tag) -> cudaError_t {
        if constexpr (quant::quantizable(decltype(tag)::value))
            return f(tag);
        else
            return cudaErrorNotSupported;
    });
}

inline cudaError_t launch_units(const tview& d, const tview& s, const detail::launch_context& ctx) noexcept {
    const i64 bs = is_quantized(d.type) ? quant::block_values(d.type) : 1;
    const rows_grid g = rows_geometry(d.ne[0] / bs, d.nrows());
    switch (type_size(d.type)) {
    case 2: k_copy_units<2><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 4: k_copy_units<4><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 8: k_copy_units<8><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 17: k_copy_units<17><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 18: k_copy_units<18><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 20: k_copy_units<20><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 22: k_copy_units<22><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 24: k_copy_units<24><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 34: k_copy_units<34><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 84: k_copy_units<84><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 110: k_copy_units<110><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 144: k_copy_units<144><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 176: k_copy_units<176><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 210: k_copy_units<210><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 292: k_copy_units<292><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 50: k_copy_units<50><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 54: k_copy_units<54><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 56: k_copy_units<56><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 66: k_copy_units<66><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 74: k_copy_units<74><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 82: k_copy_units<82><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 98: k_copy_units<98><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    case 136: k_copy_units<136><<<g.grid, g.block, 0, ctx.stream>>>(d, s, bs); break;
    default: return cudaErrorNotSupported;
    }
    return cudaGetLastError();
}

} // namespace copy_detail

/// dup / cont / cpy of node.src[0] into node (kernel_table::launch). Supported pairs:
/// every type into itself; any float or quantized type to f32 f16 bf16 q8_0 q4_0 q4_1
/// q5_0 q5_1 iq4_nl mxfp4 q2_K q3_K q4_K q5_K q6_K (into q8_K, iq4_xs, tq1_0, tq2_0 and the
/// lattice i-quants: cudaErrorNotSupported; supports.hpp narrows them).
inline cudaError_t launch_copy(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace copy_detail;
    const tensor* src = node.src[0];
    if (src == nullptr) return cudaErrorInvalidValue;
    const i64 n = node.nelements();
    if (n <= 0) return cudaSuccess;
    const tview d = view_of(node);
    const tview s = view_of(*src);

    if (node.type == src->type) {
        if (node.is_contiguous() && src->is_contiguous()) {
            // the same bytes in the same order: one copy (none when already in place)
            if (node.data == src->data) return cudaSuccess;
            const auto bytes = static_cast<std::size_t>(n / block_size(node.type)) * type_size(node.type);
            return cudaMemcpyAsync(node.data, src->data, bytes, cudaMemcpyDeviceToDevice, ctx.stream);
        }
        return launch_units(d, s, ctx);
    }
    if (!op_rules::real_type(node.type) || !op_rules::real_type(src->type)) return cudaErrorNotSupported;

    if (quant::quantizable(node.type)) {
        const unsigned blocks = blocks_for(n / quant::block_values(node.type), 128); // one thread per block of values
        return visit_quantizable(node.type, [&](auto dtag) -> cudaError_t {
            constexpr elem_type D = decltype(dtag)::value;
            return visit_real(src->type, [&](auto stag) -> cudaError_t {
                constexpr elem_type S = decltype(stag)::value;
                if constexpr (S != D) k_quantize_ext<S, D><<<blocks, 128, 0, ctx.stream>>>(d, s);
                return cudaGetLastError();
            });
        });
    }
    if (is_quantized(node.type)) {
        if (node.type != elem_type::q8_0 && node.type != elem_type::q4_0) return cudaErrorNotSupported;
        const i64 nblocks = n / 32;
        const unsigned blocks = blocks_for(nblocks, 256 / 32); // one warp per block of values
        return visit_real(src->type, [&](auto stag) -> cudaError_t {
            constexpr elem_type S = decltype(stag)::value;
            if (node.type == elem_type::q8_0) {
                if constexpr (S != elem_type::q8_0) k_quantize<S, elem_type::q8_0><<<blocks, 256, 0, ctx.stream>>>(d, s);
            } else {
                if constexpr (S != elem_type::q4_0) k_quantize<S, elem_type::q4_0><<<blocks, 256, 0, ctx.stream>>>(d, s);
            }
            return cudaGetLastError();
        });
    }

    const rows_grid g = rows_geometry(d.ne[0], d.nrows());
    return visit_float(node.type, [&](auto dtag) -> cudaError_t {
        constexpr elem_type D = decltype(dtag)::value;
        return visit_real(src->type, [&](auto stag) -> cudaError_t {
            constexpr elem_type S = decltype(stag)::value;
            if constexpr (S != D) k_convert<S, D><<<g.grid, g.block, 0, ctx.stream>>>(d, s);
            return cudaGetLastError();
        });
    });
}

} // namespace backplane::cuda::kernels

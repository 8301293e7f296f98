#pragma once
// Geometry of a quantized mul_mat (weights q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4:
// blocks of 32 values, read as weights.hpp describes): which nodes the fast path takes,
// the layout of the work buffer, and how the node is cut into jobs for the threads.
//
// Work buffer (64-byte aligned, shared by the node's threads):
//
//   [ quantized b | panel scratch of thread 0 | ... of thread nth-1 ]
//
// Quantized b: every column n of b (a row of the tensor, K values) becomes K/32 blocks of
// q8_0, 40 bytes each: int8 qs[32], float d and a 4-byte corr, where d is the f16 scale
// of core's quantize_row_q8_0 widened to f32, and corr depends on the weight type's
// offset c (weights.hpp):
//
//   c > 0 (q8_0 128, q4_0 8, q5_0 16, iq4_nl 128, mxfp4 12): int32 corr = -c * sum(qs),
//         the constant a kernel adds to an unsigned-times-signed byte dot product
//         (u8 = weight code + c) to get the signed one;
//   c = 0 (q4_1, q5_1: value = d * u + m): f32 corr = d * sum(qs), met with the weight
//         block's m (ggml's q8_1 s, kept in f32).
//
// Two arrangements, chosen by the tile width `nr` of the kernel that reads them:
//
//   nr = 1 (column by column):  qs[nblk][32] | d[nblk] | corr[nblk]      per column
//   nr = 7 (AVX-512 microkernel), tiles of w = 7 columns (the last may be narrower),
//          block by block:      qs[w][32] | d[w] | corr[w]               per tile block
//
// so that the column kernels load 16 consecutive scales at once and the microkernel walks
// one pointer with constant displacements. Either way a column takes nblk * 40 bytes and
// columns follow each other in order (matrix by matrix).
//
// Panel scratch: the AVX-512 kernels repack 32 weight rows, kc_blocks blocks of K at a
// time (see avx512.hpp; panel_block_bytes per block).
//
// Jobs: (matrix of b, chunk of columns, panel of rows), as fast/jobs.hpp cuts them.

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/jobs.hpp>
#include <backplane/backends/cpu/fast/quant/weights.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace backplane::cpu::fast::quant {

using i64 = std::int64_t;

inline constexpr i64 qk = 32;           ///< values per block (every weight type here)
inline constexpr i64 rec_bytes = 40;    ///< bytes of one quantized b block record
using jobs::panel_rows;
/// Bytes of one packed panel block: 32 x 32 codes, 32 f32 scales and, for the minimum
/// types, 32 f32 minima.
constexpr i64 panel_block_bytes(bool has_min) noexcept { return 32 * 32 + 32 * 4 + (has_min ? 32 * 4 : 0); }
inline constexpr int nr_avx512 = 7;     ///< b tile width of the AVX-512 microkernel
inline constexpr i64 kc_blocks = 16;    ///< K blocks per packed AVX-512 panel chunk
inline constexpr i64 gemv_max_cols = 1; ///< up to this N, AVX-512 streams unpacked weights (mat-vec)

/// Tile width (columns of b per tile) of the kernel a level runs for N columns: the
/// AVX-512 microkernel's 7, or 1 for the kernels that read b column by column.
constexpr int tile_width(isa level, i64 N) noexcept {
    return level == isa::avx512 && N > gemv_max_cols ? nr_avx512 : 1;
}

/// Where a column's blocks live in the quantized b (see the header comment): block kb's
/// values at qs + kb * step, its scale at d + kb * dstep, its corr at corr + kb * dstep.
struct column_ref {
    std::byte* qs;
    std::byte* d;
    std::byte* corr;
    i64 step;
    i64 dstep;

    /// The same column starting at block kb.
    [[nodiscard]] column_ref from_block(i64 kb) const noexcept {
        return {qs + kb * step, d + kb * dstep, corr + kb * dstep, step, dstep};
    }
};

/// Everything derived from the node's shape that the kernels need.
struct plan {
    elem_type wtype{};  ///< a weight type of weights.hpp
    i64 K = 0, nblk = 0, M = 0, N = 0, B2 = 1, B3 = 1, r2 = 1, r3 = 1;
    std::size_t wbytes = 0;  ///< bytes of one weight block
    std::size_t b_bytes = 0; ///< quantized b, rounded up to 64
    std::size_t panel_bytes = 0; ///< one thread's panel scratch, rounded up to 64
    std::int32_t corr_c = 0; ///< the weight type's offset c (0: a minimum type)

    [[nodiscard]] i64 matrices() const noexcept { return B2 * B3; }
    [[nodiscard]] i64 col_bytes() const noexcept { return nblk * rec_bytes; }

    /// Column n of matrix bi in the arrangement for tile width nr.
    [[nodiscard]] column_ref column(std::byte* qb, i64 bi, i64 n, int nr) const noexcept {
        if (nr == 1) {
            std::byte* c = qb + static_cast<std::size_t>((bi * N + n) * col_bytes());
            return {c, c + nblk * qk, c + nblk * (qk + 4), qk, 4};
        }
        const i64 t = n / nr;
        const i64 s = n % nr;
        const i64 w = std::min<i64>(nr, N - t * nr);
        std::byte* base = qb + static_cast<std::size_t>((bi * N + t * nr) * col_bytes());
        return {base + s * qk, base + w * qk + s * 4, base + w * (qk + 4) + s * 4, w * rec_bytes, w * rec_bytes};
    }
    /// Start of tile t of matrix bi (of column t when nr = 1).
    [[nodiscard]] const std::byte* tile(const std::byte* qb, i64 bi, i64 t, int nr) const noexcept {
        return qb + static_cast<std::size_t>((bi * N + t * nr) * col_bytes());
    }
};

inline std::size_t round64(std::size_t n) noexcept { return (n + 63) / 64 * 64; }

/// True when the fast kernels compute this node; fills *out when given.
/// A pure function of the node (types, extents, strides).
inline bool make_plan(const tensor& dst, plan* out) noexcept {
    if (!jobs::mul_mat_shape_ok(dst, qk) || !is_weight_type(dst.src[0]->type)) return false;
    const tensor* a = dst.src[0];
    const tensor* b = dst.src[1];
    const weight_format f = format_of(a->type);
    plan p;
    p.wtype = a->type;
    p.K = a->ne[0];
    p.nblk = p.K / qk;
    p.M = a->ne[1];
    p.N = b->ne[1];
    p.B2 = b->ne[2];
    p.B3 = b->ne[3];
    p.r2 = b->ne[2] / a->ne[2];
    p.r3 = b->ne[3] / a->ne[3];
    p.wbytes = static_cast<std::size_t>(f.bytes);
    p.corr_c = f.c;
    if (!jobs::quantized_b_bytes(*b, p.nblk, rec_bytes, p.b_bytes)) return false;
    p.panel_bytes = round64(static_cast<std::size_t>(std::min(p.nblk, kc_blocks) * panel_block_bytes(f.has_min())));
    if (out != nullptr) *out = p;
    return true;
}

/// Bytes of the work buffer for nth threads.
inline std::size_t work_bytes(const plan& p, int nth) noexcept {
#if BACKPLANE_HAS_X86_KERNELS
    return p.b_bytes + static_cast<std::size_t>(nth > 0 ? nth : 1) * p.panel_bytes;
#else
    (void)nth;
    return p.b_bytes;
#endif
}

using jobs::dst_at;
using jobs::effective_level;
using jobs::job;
using jobs::job_at;
using jobs::job_grid;
using jobs::load_f16;
using jobs::load_f32;
using jobs::load_i32;
using jobs::make_grid;
using jobs::store_f32;
using jobs::weight_row;

} // namespace backplane::cpu::fast::quant

#pragma once
// What the quantized mul_mat kernels (quant/, kquant/) share about cutting a node into
// jobs and addressing its operands: the job grid (matrix of b, chunk of columns, panel of
// 32 weight rows, panel fastest), where a weight row and a result element are, and
// unaligned scalar loads and stores, the shape checks both families make, and how a
// column of b is read as f32 blocks for quantizing. A plan
// (quant::plan, kquant::plan) provides M, N, B2, B3, r2, r3, matrices() and col_bytes()
// (the bytes of one quantized column of b).
//
// A chunk holds as many columns as keep their quantized b within a cache budget; when
// there are fewer jobs than threads, chunks are made smaller, so that a single row panel
// (small M, large N) or a mat-vec (N = 1, many panels) both split across threads.

#include <backplane/backends/cpu/isa.hpp>
#include <backplane/backends/cpu/kernels/common.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

namespace backplane::cpu::fast::jobs {

using i64 = std::int64_t;

inline constexpr i64 panel_rows = 32;                             ///< weight rows per job
inline constexpr std::size_t chunk_budget = std::size_t{1} << 20; ///< quantized b per job

/// How a node is cut into jobs.
struct job_grid {
    i64 panels = 0;     ///< row panels per matrix (panel_rows rows each)
    i64 chunks = 0;     ///< column chunks per matrix
    i64 chunk_cols = 0; ///< columns per chunk (a multiple of the tile width)
    template <class Plan> [[nodiscard]] i64 jobs(const Plan& p) const noexcept { return p.matrices() * chunks * panels; }
};

/// The grid for nth threads and a kernel whose column tiles are nr wide (1: any).
template <class Plan> job_grid make_grid(const Plan& p, int nth, int nr) noexcept {
    job_grid g;
    g.panels = (p.M + panel_rows - 1) / panel_rows;
    const i64 tiles = (p.N + nr - 1) / nr;
    const i64 tile_bytes = nr * p.col_bytes();
    i64 per = std::max<i64>(1, static_cast<i64>(chunk_budget) / tile_bytes); // tiles per chunk
    i64 chunks = (tiles + per - 1) / per;
    const i64 have = p.matrices() * g.panels;
    if (have * chunks < nth) chunks = std::min<i64>(tiles, (nth + have - 1) / have);
    per = (tiles + chunks - 1) / chunks;
    g.chunks = (tiles + per - 1) / per;
    g.chunk_cols = per * nr;
    return g;
}

/// Job j of the grid: matrix bi (of b), columns [n0, n1), rows [m0, m1).
struct job {
    i64 bi, n0, n1, m0, m1;
};
template <class Plan> job job_at(const Plan& p, const job_grid& g, i64 j) noexcept {
    const i64 panel = j % g.panels;
    j /= g.panels;
    const i64 chunk = j % g.chunks;
    const i64 bi = j / g.chunks;
    const i64 n0 = chunk * g.chunk_cols;
    const i64 m0 = panel * panel_rows;
    return {bi, n0, std::min(p.N, n0 + g.chunk_cols), m0, std::min(p.M, m0 + panel_rows)};
}

/// Calls put(kb, x, blocks) for runs of the nblk blocks of Len values of a b column (type
/// t, element stride nb0 bytes) at src, x the values of the run's blocks from block kb as
/// f32: one run read in place from aligned contiguous f32, else a block at a time
/// converted into a buffer (f16, bf16, strided or misaligned rows).
template <i64 Len, class Put>
inline void for_each_b_block(elem_type t, const std::byte* src, std::size_t nb0, i64 nblk, Put&& put) noexcept {
    if (t == elem_type::f32 && nb0 == sizeof(float) && reinterpret_cast<std::uintptr_t>(src) % alignof(float) == 0) {
        put(i64{0}, reinterpret_cast<const float*>(src), nblk);
        return;
    }
    alignas(64) float tmp[Len];
    for (i64 kb = 0; kb < nblk; ++kb) {
        kernels::read_row_f32(t, src, nb0, kb * Len, Len, tmp);
        put(kb, static_cast<const float*>(tmp), i64{1});
    }
}

/// Row m of the weight matrix that meets matrix bi of b.
template <class Plan> const std::byte* weight_row(const tensor& a, const Plan& p, i64 bi, i64 m) noexcept {
    const i64 i2 = bi % p.B2;
    const i64 i3 = bi / p.B2;
    return static_cast<const std::byte*>(a.data) + static_cast<std::size_t>(m) * a.nb[1] +
           static_cast<std::size_t>(i2 / p.r2) * a.nb[2] + static_cast<std::size_t>(i3 / p.r3) * a.nb[3];
}
/// Column n of matrix bi of b (the activations; a row of the tensor).
template <class Plan> const std::byte* b_column(const tensor& b, const Plan& p, i64 bi, i64 n) noexcept {
    return static_cast<const std::byte*>(b.data) + static_cast<std::size_t>(n) * b.nb[1] +
           static_cast<std::size_t>(bi % p.B2) * b.nb[2] + static_cast<std::size_t>(bi / p.B2) * b.nb[3];
}
/// Address of dst[m, n] of matrix bi (any alignment: stores go through memcpy or
/// unaligned vector stores).
template <class Plan> std::byte* dst_at(tensor& dst, const Plan& p, i64 bi, i64 m, i64 n) noexcept {
    const i64 i2 = bi % p.B2;
    const i64 i3 = bi / p.B2;
    return static_cast<std::byte*>(dst.data) + static_cast<std::size_t>(m) * sizeof(float) +
           static_cast<std::size_t>(n) * dst.nb[1] + static_cast<std::size_t>(i2) * dst.nb[2] +
           static_cast<std::size_t>(i3) * dst.nb[3];
}

/// The shape checks of a quantized mul_mat whose weight blocks hold `block` values (the
/// weight type itself is the caller's to check): b f32 / f16 / bf16 in any layout, dst
/// f32 with unit stride along its rows, weight rows contiguous, K whole blocks, every
/// extent positive, dst's extents those of the product, b's dims 2 and 3 multiples of a's.
inline bool mul_mat_shape_ok(const tensor& dst, i64 block) noexcept {
    if (dst.op != op_kind::mul_mat) return false;
    const tensor* a = dst.src[0];
    const tensor* b = dst.src[1];
    if (a == nullptr || b == nullptr) return false;
    if (b->type != elem_type::f32 && b->type != elem_type::f16 && b->type != elem_type::bf16) return false;
    if (dst.type != elem_type::f32 || dst.nb[0] != sizeof(float)) return false;
    if (!a->rows_contiguous()) return false;
    const i64 K = a->ne[0];
    if (K <= 0 || K % block != 0 || b->ne[0] != K) return false;
    for (std::size_t i = 0; i < max_dims; ++i)
        if (a->ne[i] <= 0 || b->ne[i] <= 0 || dst.ne[i] <= 0) return false;
    if (dst.ne[0] != a->ne[1] || dst.ne[1] != b->ne[1] || dst.ne[2] != b->ne[2] || dst.ne[3] != b->ne[3])
        return false;
    return b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0;
}

/// Bytes of every column of b (b's ne[1..3]), each nblk records of rec_bytes, rounded up
/// to 64; false when a byte count could overflow (the reference kernel then runs).
inline bool quantized_b_bytes(const tensor& b, i64 nblk, i64 rec_bytes, std::size_t& out) noexcept {
    constexpr auto lim = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max() / 4);
    const auto cols = static_cast<std::uint64_t>(b.ne[1]) * static_cast<std::uint64_t>(b.ne[2]);
    if (cols > lim / static_cast<std::uint64_t>(b.ne[3])) return false;
    const std::uint64_t all_cols = cols * static_cast<std::uint64_t>(b.ne[3]);
    const std::uint64_t cb = static_cast<std::uint64_t>(nblk) * static_cast<std::uint64_t>(rec_bytes);
    if (all_cols > lim / cb) return false;
    out = static_cast<std::size_t>((all_cols * cb + 63) / 64 * 64);
    return true;
}

/// The instruction set a node is computed with: the requested level, never above what
/// the CPU has, and portable where no x86 kernels are compiled.
inline isa effective_level(isa requested) noexcept {
#if BACKPLANE_HAS_X86_KERNELS
    const isa hw = detected_isa();
    return static_cast<int>(requested) < static_cast<int>(hw) ? requested : hw;
#else
    (void)requested;
    return isa::portable;
#endif
}

inline std::int32_t load_i32(const void* p) noexcept {
    std::int32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline float load_f32(const void* p) noexcept {
    float v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline f16_t load_f16(const void* p) noexcept {
    f16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void store_f32(std::byte* p, float v) noexcept { std::memcpy(p, &v, sizeof v); }

} // namespace backplane::cpu::fast::jobs

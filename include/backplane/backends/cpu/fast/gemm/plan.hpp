#pragma once
// The fast float mul_mat's view of a node: the problem in BLAS terms, the blocking, the
// path (mat-vec or packed GEMM), how the threads share the work, and where each piece of
// scratch lives in the work buffer. Everything here is a pure function of the node and
// the thread count (never of the instruction set), so gemm_work_size() can be asked
// before the level is known and every thread of a node takes the same path.
//
// dst[m, n] = sum_k a[k, m] * b[k, n] is, with row-major storage, C = B * A^T: a is M
// rows of K, b is N rows of K, dst is N rows of M (contiguous along M, so the micro-tile
// vectors run along M). The GEMM path packs, BLIS-style:
//   for each matrix (i2, i3), for jc in N by nc:
//       pack columns [jc, jc + nc) of b, all of K, into micro-panels of nr columns
//           (shared: each thread packs a share of the panels into wdata), barrier
//       for pc in K by kc, for ic in this thread's rows of M by mc:
//           pack the mc x kc block of a into micro-panels of mr rows (private, in wdata)
//           for each b micro-panel (kc x nr, stays in L1), for each a micro-panel (L2):
//               micro-kernel: an mr x nr tile of dst (+)= a-panel * b-panel
// so there is one barrier per column block (one in all when N <= nc). When a node has a
// second block to pack (N > nc, or several matrices), the b block is double-buffered: a
// thread packing block s + 1 writes the buffer block s - 1 was read from, and every
// thread has finished block s - 1 before anyone passes barrier s.
// With enough matrices to go round (dims 2 and 3), threads take whole matrices instead,
// each with its own blocks and no barrier at all. N <= matvec_max_n takes the mat-vec
// path: rows of a split among threads, each row block dotted with all of b's columns.

#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

// Helpers of the SIMD kernels (loads, transposes, sums) must be inlined into them: GCC
// keeps a large `inline` function out of line and passes its vector arrays through memory.
#if defined(__GNUC__) || defined(__clang__)
#define BACKPLANE_GEMM_INLINE inline __attribute__((always_inline))
#else
#define BACKPLANE_GEMM_INLINE inline
#endif

namespace backplane::cpu::fast::gemm_detail {

using i64 = std::int64_t;

// Blocking shared by every level (the micro-tile sizes differ, these are multiples of
// all of them), tuned on the reference machine (L1d 48 KiB, L2 2 MiB): a kc x nr b
// micro-panel (32 KiB at nr = 8) stays in L1 while the mc x kc block of a (768 KiB)
// streams from L2. kc = 1024 beat 256 and 512 by 2-5% in cache, and by 10-20% when a
// streams from memory (longer runs of each row for the hardware prefetcher).
inline constexpr i64 kc_block = 1024;
inline constexpr i64 mc_block = 192; ///< a multiple of every level's mr (48, 24, 16)
inline constexpr i64 nc_block = 4096; ///< columns of b per packed block at most
inline constexpr i64 b_block_cap = i64{1} << 21; ///< floats of one packed b block (8 MiB)
inline constexpr i64 mr_max = 48;    ///< largest micro-tile height (rows of a)
inline constexpr i64 nr_max = 8;     ///< largest micro-tile width (columns of b)
inline constexpr i64 m_unit = 16;    ///< rows of a are split among threads in these units
/// N up to this takes the mat-vec path (it beat the packed path up to N ~ 12 with
/// 4096 x 4096 weights streamed from memory).
inline constexpr i64 matvec_max_n = 8;
inline constexpr std::size_t align_bytes = 64;

constexpr i64 round_up(i64 x, i64 m) noexcept { return (x + m - 1) / m * m; }
constexpr i64 ceil_div(i64 x, i64 m) noexcept { return (x + m - 1) / m; }

/// Calls f.template operator()<T>() with T the storage type (float, f16_t, bf16_t).
template <class F>
inline void visit_type(elem_type t, F&& f) {
    switch (t) {
    case elem_type::f16: f.template operator()<f16_t>(); break;
    case elem_type::bf16: f.template operator()<bf16_t>(); break;
    default: f.template operator()<float>(); break;
    }
}

/// One operand (or the destination) as the kernels address it: element (k, row, i2, i3)
/// at data + k * elem + row * nb1 + i2 * nb2 + i3 * nb3.
struct operand {
    const std::byte* data = nullptr;
    elem_type type = elem_type::f32;
    std::size_t nb1 = 0, nb2 = 0, nb3 = 0;

    [[nodiscard]] const std::byte* matrix(i64 i2, i64 i3) const noexcept {
        return data + static_cast<std::size_t>(i2) * nb2 + static_cast<std::size_t>(i3) * nb3;
    }
};

/// How a node's work is shared by nth threads.
enum class path : std::uint8_t {
    matvec,        ///< N small: rows of a split among threads, a streamed once
    shared_blocks, ///< one matrix at a time, b blocks packed together, rows of a split
    whole_matrices ///< whole matrices per thread, each packing its own blocks (no barrier)
};

struct problem {
    i64 M = 0, N = 0, K = 0;  ///< dst is M x N per matrix, K the reduced length
    i64 B2 = 1, B3 = 1;       ///< matrices in dims 2 and 3 (b's and dst's)
    i64 r2 = 1, r3 = 1;       ///< broadcast ratios: a's matrix is (i2 / r2, i3 / r3)
    operand a, b;
    std::byte* d = nullptr;   ///< dst data (f32, unit stride along M)
    std::size_t dnb1 = 0, dnb2 = 0, dnb3 = 0;

    [[nodiscard]] i64 batches() const noexcept { return B2 * B3; }
    [[nodiscard]] const std::byte* a_matrix(i64 q) const noexcept {
        return a.matrix(q % B2 / r2, q / B2 / r3);
    }
    [[nodiscard]] const std::byte* b_matrix(i64 q) const noexcept { return b.matrix(q % B2, q / B2); }
    [[nodiscard]] std::byte* d_matrix(i64 q) const noexcept {
        return d + static_cast<std::size_t>(q % B2) * dnb2 + static_cast<std::size_t>(q / B2) * dnb3;
    }
};

inline bool is_float_elem(elem_type t) noexcept {
    return t == elem_type::f32 || t == elem_type::f16 || t == elem_type::bf16;
}
/// Unit stride along dim 0 (or only one element there, whose stride never matters).
inline bool unit_rows(const tensor& t) noexcept { return t.ne[0] <= 1 || t.rows_contiguous(); }

/// True when the kernels here handle the node: float a and b with unit-stride rows (any
/// stride for rows and matrices), f32 dst with unit-stride rows, ggml broadcasting.
inline bool applies(const tensor& dst) noexcept {
    const tensor* a = dst.src[0];
    const tensor* b = dst.src[1];
    if (a == nullptr || b == nullptr || dst.type != elem_type::f32) return false;
    if (!is_float_elem(a->type) || !is_float_elem(b->type)) return false;
    if (!unit_rows(*a) || !unit_rows(*b) || !unit_rows(dst)) return false;
    if (a->ne[0] != b->ne[0] || dst.ne[0] != a->ne[1] || dst.ne[1] != b->ne[1] ||
        dst.ne[2] != b->ne[2] || dst.ne[3] != b->ne[3])
        return false;
    if (a->ne[2] <= 0 || a->ne[3] <= 0 || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) return false;
    return true;
}

inline problem make_problem(const tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& b = *dst.src[1];
    problem pr;
    pr.M = a.ne[1];
    pr.N = b.ne[1];
    pr.K = a.ne[0];
    pr.B2 = b.ne[2];
    pr.B3 = b.ne[3];
    pr.r2 = b.ne[2] / a.ne[2];
    pr.r3 = b.ne[3] / a.ne[3];
    pr.a = {static_cast<const std::byte*>(a.data), a.type, a.nb[1], a.nb[2], a.nb[3]};
    pr.b = {static_cast<const std::byte*>(b.data), b.type, b.nb[1], b.nb[2], b.nb[3]};
    pr.d = static_cast<std::byte*>(dst.data);
    pr.dnb1 = dst.nb[1];
    pr.dnb2 = dst.nb[2];
    pr.dnb3 = dst.nb[3];
    return pr;
}

/// The path, blocking and work-buffer layout of a node for nth threads.
struct plan {
    path kind = path::shared_blocks;
    i64 kc = 0, mc = 0, nc = 0;  ///< block sizes actually used (clipped to the problem)
    int tm = 1, tn = 1;          ///< shared path: threads over rows of a x over b panels
    // work buffer, in floats from its 64-byte aligned start
    std::size_t b_block = 0;     ///< floats of one packed b block (K x nc)
    std::size_t a_block = 0;     ///< floats of one packed a block (mc x kc)
    std::size_t per_thread = 0;  ///< floats each thread owns (private blocks or b columns)
    std::size_t shared_floats = 0; ///< floats shared by all threads (before the private ones)
    std::size_t bytes = 0;       ///< work buffer size, alignment slack included

    [[nodiscard]] float* shared_b(float* base, i64 step) const noexcept {
        return base + (shared_floats > b_block ? static_cast<std::size_t>(step & 1) * b_block : 0);
    }
    [[nodiscard]] float* thread_area(float* base, int ith) const noexcept {
        return base + shared_floats + static_cast<std::size_t>(ith) * per_thread;
    }
};

constexpr std::size_t round_floats(std::size_t n) noexcept {
    constexpr std::size_t f = align_bytes / sizeof(float);
    return (n + f - 1) / f * f;
}

/// The thread grid tm x tn (tm * tn == nth) that balances the shared path best: rows of
/// a in m_unit steps over tm, b micro-panels over tn; ties go to splitting rows (each
/// thread then packs only its own rows of a).
inline void choose_grid(i64 M, i64 N, i64 nc, int nth, int& tm, int& tn) noexcept {
    const i64 mu = ceil_div(M, m_unit);
    const i64 pu = ceil_div(std::min(N, nc), nr_max);
    double best = -1.0;
    for (int t = nth; t >= 1; --t) {
        if (nth % t != 0) continue;
        const int u = nth / t;
        const double em = static_cast<double>(mu) / static_cast<double>(t * ceil_div(mu, t));
        const double en = static_cast<double>(pu) / static_cast<double>(u * ceil_div(pu, u));
        if (em * en > best + 1e-9) {
            best = em * en;
            tm = t;
            tn = u;
        }
    }
}

inline plan make_plan(const problem& pr, int nth) noexcept {
    plan pl;
    if (nth < 1) nth = 1;
    const i64 nmat = pr.batches();
    if (pr.M <= 0 || pr.N <= 0 || nmat <= 0 || pr.K <= 0) { // nothing to pack
        pl.kind = path::whole_matrices;
        return pl;
    }
    if (pr.N <= matvec_max_n) {
        pl.kind = path::matvec;
        // b's columns as aligned f32, each thread its own copy (used when b is not f32
        // or not 4-byte aligned; whether it is depends on the data, not the node)
        pl.per_thread = round_floats(static_cast<std::size_t>(pr.K * pr.N));
    } else {
        pl.kc = std::min(kc_block, pr.K);
        pl.mc = std::min(mc_block, round_up(pr.M, mr_max));
        // b is packed for all of K at once (one barrier per column block), so the column
        // block shrinks as K grows to keep the packed block within b_block_cap floats
        const i64 nc_cap = std::max(nr_max, b_block_cap / pr.K / nr_max * nr_max);
        pl.nc = std::min({nc_block, nc_cap, round_up(pr.N, nr_max)});
        pl.b_block = round_floats(static_cast<std::size_t>(pr.K * pl.nc));
        pl.a_block = round_floats(static_cast<std::size_t>(pl.kc * pl.mc));
        // whole matrices per thread when there are enough of them to go round evenly
        const bool by_matrix = nth == 1 || (nmat >= nth && (nmat % nth == 0 || nmat >= 4 * nth));
        if (by_matrix) {
            pl.kind = path::whole_matrices;
            pl.per_thread = pl.a_block + pl.b_block;
        } else {
            pl.kind = path::shared_blocks;
            choose_grid(pr.M, pr.N, pl.nc, nth, pl.tm, pl.tn);
            // a second buffer only when there is a second block to pack (see the top)
            const i64 steps = nmat * ceil_div(pr.N, pl.nc);
            pl.shared_floats = (steps > 1 ? 2 : 1) * pl.b_block;
            pl.per_thread = pl.a_block;
        }
    }
    const std::size_t floats = pl.shared_floats + static_cast<std::size_t>(nth) * pl.per_thread;
    pl.bytes = floats == 0 ? 0 : floats * sizeof(float) + align_bytes;
    return pl;
}

/// The 64-byte aligned start of the work buffer.
inline float* aligned_floats(void* w) noexcept {
    const auto u = reinterpret_cast<std::uintptr_t>(w);
    return reinterpret_cast<float*>((u + align_bytes - 1) / align_bytes * align_bytes);
}

} // namespace backplane::cpu::fast::gemm_detail

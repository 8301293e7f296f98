#pragma once
// flash_attn_ext's AVX-512 and AVX2 kernels for a group of G query rows that read the same k and v
// rows (G heads of one query sharing a key-value head under grouped-query attention; G is
// 1, 2, 4 or 8, a single head when G is 1). Each k and v row is loaded and widened once
// for the G rows, and a tile of 16 positions is scored without a horizontal sum per dot
// product: the 16 accumulators of a block (P = 16 / G positions times G rows) are folded
// into one vector of their 16 sums by a tree of shuffles (`fold16`), 45 instructions for
// 16 dot products instead of about 8 each.
//
// fast/attention.hpp drives it: it keeps each row's running maximum and sum and calls
//   scores<G, TK>   s[g][j] = dot(q row g, k row j) for the tile's rows;
//   logits          scale, soft-cap, mask and ALiBi of one row's scores, and their maximum;
//   accumulate<G, TV>  acc[g] += w[g][j] * v row j over the tile, the sums of the G rows
//                      kept in registers a slice of d at a time, each v row widened once.

#include <backplane/backends/cpu/fast/rowwise.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/detail/unroll.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#if BACKPLANE_HAS_X86_KERNELS
#include <backplane/backends/cpu/detail/x86_intrinsics.hpp>
#endif

namespace backplane::cpu::fast::attention_detail {

inline constexpr std::int64_t group_tile = 16; ///< positions per tile of the group kernel
inline constexpr float ninf = -std::numeric_limits<float>::infinity();

/// The rows a group kernel handles at once: G in {1, 2, 4, 8}. A group of query heads of
/// another size is cut into such pieces, largest first (7 = 4 + 2 + 1).
inline constexpr int max_group_rows = 8;
[[nodiscard]] constexpr std::int64_t pieces_of(std::int64_t group) noexcept {
    std::int64_t n = group / max_group_rows;
    for (std::int64_t r = group % max_group_rows; r != 0; r &= r - 1) ++n;
    return n;
}
/// First head (within its group) and size of piece i of a group.
struct piece {
    std::int64_t first, rows;
};
[[nodiscard]] constexpr piece piece_of(std::int64_t group, std::int64_t i) noexcept {
    std::int64_t first = 0;
    for (std::int64_t size = max_group_rows; size > 0; size /= 2) {
        while (group - first >= size) {
            if (i == 0) return {first, size};
            first += size;
            --i;
        }
    }
    return {group, 0}; // past the last piece: no rows
}
static_assert(pieces_of(7) == 3 && piece_of(7, 0).rows == 4 && piece_of(7, 1).first == 4 && piece_of(7, 2).rows == 1);
static_assert(pieces_of(16) == 2 && piece_of(16, 1).first == 8 && pieces_of(1) == 1 && piece_of(1, 1).rows == 0);

#if BACKPLANE_HAS_X86_KERNELS

BACKPLANE_X86_KERNELS_BEGIN

struct avx512_group {
    using i64 = std::int64_t;

    BACKPLANE_TARGET_AVX512 static inline __mmask16 lanes(i64 left) noexcept {
        return left >= 16 ? static_cast<__mmask16>(0xffff)
                          : left <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << left) - 1u);
    }
    template <class T> BACKPLANE_TARGET_AVX512 static inline __m512 load16(const std::byte* p, __mmask16 m) noexcept {
        if constexpr (std::is_same_v<T, float>)
            return _mm512_maskz_loadu_ps(m, p);
        else
            return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    }
    /// Prefetches `ahead` bytes past p when p (value i of its row) starts a cache line.
    template <class T> BACKPLANE_TARGET_AVX512 static inline void fetch_at(const std::byte* p, i64 i, std::size_t ahead) noexcept {
        if ((i * i64{sizeof(T)}) % 64 == 0) _mm_prefetch(reinterpret_cast<const char*>(p) + ahead, _MM_HINT_T0);
    }

    /// The 16 lane sums of a[0..15], in order: a[i]'s sum in lane i.
    BACKPLANE_TARGET_AVX512 static inline __m512 fold16(const __m512 (&a)[16]) noexcept {
        __m512 b[8], c[4], d[2];
BACKPLANE_UNROLL(8)
        for (int i = 0; i < 8; ++i) // 256-bit halves: each source on 8 lanes
            b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[i], a[i + 8], 0x44), _mm512_shuffle_f32x4(a[i], a[i + 8], 0xee));
BACKPLANE_UNROLL(4)
        for (int i = 0; i < 4; ++i) // 128-bit blocks: each source on 4 lanes
            c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[i], b[i + 4], 0x88), _mm512_shuffle_f32x4(b[i], b[i + 4], 0xdd));
BACKPLANE_UNROLL(2)
        for (int i = 0; i < 2; ++i) // pairs of lanes: each source on 2 lanes
            d[i] = _mm512_add_ps(_mm512_unpacklo_ps(c[i], c[i + 2]), _mm512_unpackhi_ps(c[i], c[i + 2]));
        const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(d[0]), _mm512_castps_pd(d[1]));
        const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(d[0]), _mm512_castps_pd(d[1]));
        const __m512 e = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
        // the tree leaves source i in lane order(i); the order is its own inverse
        const __m512i order = _mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15);
        return _mm512_permutexvar_ps(order, e);
    }

    /// s[g * group_tile + j] = dot(q + g * dk, row j of k) for the n (<= 16) rows of the
    /// tile, ld bytes apart; k's rows are prefetched `ahead` bytes on.
    template <int G, class TK>
    BACKPLANE_TARGET_AVX512 static void scores(const float* q, i64 dk, const std::byte* k, std::size_t ld, i64 n,
                                               std::size_t ahead, float* s) noexcept {
        constexpr int P = 16 / G; // positions per block of 16 dot products
        alignas(64) float sums[16];
        for (i64 jb = 0; jb < n; jb += P) {
            __m512 acc[16];
BACKPLANE_UNROLL(16)
            for (int t = 0; t < 16; ++t) acc[t] = _mm512_setzero_ps();
            const std::byte* rows = k + static_cast<std::size_t>(jb) * ld;
            const int live = static_cast<int>(n - jb < P ? n - jb : P);
            for (i64 i = 0; i < dk; i += 16) {
                const __mmask16 m = lanes(dk - i);
                __m512 qv[G];
BACKPLANE_UNROLL(8)
                for (int g = 0; g < G; ++g) qv[g] = _mm512_maskz_loadu_ps(m, q + g * dk + i);
BACKPLANE_UNROLL(16)
                for (int p = 0; p < P; ++p) {
                    if (p >= live) break;
                    const std::byte* at = rows + static_cast<std::size_t>(p) * ld + static_cast<std::size_t>(i) * sizeof(TK);
                    fetch_at<TK>(at, i, ahead);
                    const __m512 kv = load16<TK>(at, m);
BACKPLANE_UNROLL(8)
                    for (int g = 0; g < G; ++g) acc[g * P + p] = _mm512_fmadd_ps(qv[g], kv, acc[g * P + p]);
                }
            }
            _mm512_store_ps(sums, fold16(acc));
BACKPLANE_UNROLL(8)
            for (int g = 0; g < G; ++g)
                std::memcpy(s + g * group_tile + jb, sums + g * P, static_cast<std::size_t>(live) * sizeof(float));
        }
    }

    /// One row's scores of the tile turned into logits in place: times scale, soft-capped
    /// (cap != 0; rowwise.hpp's tanh, within about 2 ulp of std::tanh), plus slope times the
    /// f16 mask (when given); a position masked with -inf and the lanes past n are -inf.
    /// Returns their maximum.
    BACKPLANE_TARGET_AVX512 static float logits(float* s, i64 n, float scale, float cap, const std::byte* mask,
                                                float slope) noexcept {
        const __mmask16 in = lanes(n);
        __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(in, s), _mm512_set1_ps(scale));
        if (cap != 0.0f) x = _mm512_mul_ps(_mm512_set1_ps(cap), rowwise_detail::avx512::tanh(x));
        const __m512 none = _mm512_set1_ps(ninf);
        __mmask16 live = in;
        if (mask != nullptr) {
            const __m512 mv = _mm512_mul_ps(_mm512_set1_ps(slope), load16<f16_t>(mask, in));
            live = _mm512_mask_cmp_ps_mask(in, mv, none, _CMP_NEQ_OQ);
            x = _mm512_add_ps(x, mv);
        }
        x = _mm512_mask_blend_ps(live, none, x);
        _mm512_store_ps(s, x);
        return rowwise_detail::avx512::hmax(x);
    }

    /// acc[g * dv + d] += w[g * group_tile + j] * v[j][d] over the tile's n rows (ld bytes
    /// apart; w 64-byte aligned); a weight of 0 adds nothing (a masked position's v is
    /// never read into a sum).
    template <int G, class TV>
    BACKPLANE_TARGET_AVX512 static void accumulate(const float* w, const std::byte* v, std::size_t ld, i64 n,
                                                   float* acc, i64 dv, std::size_t ahead) noexcept {
        constexpr int nv = G <= 2 ? 8 : 16 / G; // vectors of d per row held at once
        // positions whose weight is 0 in every row (skipped) or in none (no test per row)
        unsigned every = (1u << n) - 1u, any = 0;
BACKPLANE_UNROLL(8)
        for (int g = 0; g < G; ++g) {
            const unsigned nz =
                _mm512_cmp_ps_mask(_mm512_maskz_load_ps(lanes(n), w + g * group_tile), _mm512_setzero_ps(), _CMP_NEQ_UQ);
            every &= nz;
            any |= nz;
        }
        for (i64 d0 = 0; d0 < dv; d0 += 16 * nv) {
            __mmask16 m[nv];
            __m512 a[G][nv];
BACKPLANE_UNROLL(8)
            for (int t = 0; t < nv; ++t) m[t] = lanes(dv - d0 - 16 * t);
BACKPLANE_UNROLL(8)
            for (int g = 0; g < G; ++g)
BACKPLANE_UNROLL(8)
                for (int t = 0; t < nv; ++t) a[g][t] = _mm512_maskz_loadu_ps(m[t], acc + g * dv + d0 + 16 * t);
            for (i64 j = 0; j < n; ++j) {
                if (!(any >> j & 1u)) continue;
                const bool all = every >> j & 1u;
                const std::byte* row = v + static_cast<std::size_t>(j) * ld + static_cast<std::size_t>(d0) * sizeof(TV);
                __m512 x[nv];
BACKPLANE_UNROLL(8)
                for (int t = 0; t < nv; ++t) {
                    x[t] = _mm512_setzero_ps();
                    if (m[t] == 0) break;
                    fetch_at<TV>(row + 16 * t * sizeof(TV), d0 + 16 * t, ahead);
                    x[t] = load16<TV>(row + 16 * t * sizeof(TV), m[t]);
                }
BACKPLANE_UNROLL(8)
                for (int g = 0; g < G; ++g) {
                    if (!all && w[g * group_tile + j] == 0.0f) continue;
                    const __m512 wb = _mm512_set1_ps(w[g * group_tile + j]);
BACKPLANE_UNROLL(8)
                    for (int t = 0; t < nv; ++t) {
                        if (m[t] == 0) break;
                        a[g][t] = _mm512_fmadd_ps(wb, x[t], a[g][t]);
                    }
                }
            }
BACKPLANE_UNROLL(8)
            for (int g = 0; g < G; ++g)
BACKPLANE_UNROLL(8)
                for (int t = 0; t < nv; ++t) _mm512_mask_storeu_ps(acc + g * dv + d0 + 16 * t, m[t], a[g][t]);
        }
    }
};


/// The same for AVX2 (8 lanes, 16 registers), for heads whose sizes are multiples of 8:
/// blocks of 8 dot products (P = 8 / G positions), the weighted sums a slice of 8 to 32
/// values of d at a time.
struct avx2_group {
    using i64 = std::int64_t;

    template <class T> BACKPLANE_TARGET_AVX2 static inline __m256 load8(const std::byte* p) noexcept {
        if constexpr (std::is_same_v<T, float>)
            return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
        else
            return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    template <class T> BACKPLANE_TARGET_AVX2 static inline void fetch_at(const std::byte* p, i64 i, std::size_t ahead) noexcept {
        if ((i * i64{sizeof(T)}) % 64 == 0) _mm_prefetch(reinterpret_cast<const char*>(p) + ahead, _MM_HINT_T0);
    }
    /// Lanes [0, n) of 8 set (all bits), the others clear.
    BACKPLANE_TARGET_AVX2 static inline __m256i first(i64 n) noexcept {
        return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    }

    /// The 8 lane sums of a[0..7], in order.
    BACKPLANE_TARGET_AVX2 static inline __m256 fold8(const __m256 (&a)[8]) noexcept {
        __m256 b[4], c[2];
BACKPLANE_UNROLL(4)
        for (int i = 0; i < 4; ++i) // 128-bit halves: each source on 4 lanes
            b[i] = _mm256_add_ps(_mm256_permute2f128_ps(a[i], a[i + 4], 0x20), _mm256_permute2f128_ps(a[i], a[i + 4], 0x31));
BACKPLANE_UNROLL(2)
        for (int i = 0; i < 2; ++i) // each source on 2 lanes
            c[i] = _mm256_add_ps(_mm256_unpacklo_ps(b[i], b[i + 2]), _mm256_unpackhi_ps(b[i], b[i + 2]));
        const __m256d lo = _mm256_unpacklo_pd(_mm256_castps_pd(c[0]), _mm256_castps_pd(c[1]));
        const __m256d hi = _mm256_unpackhi_pd(_mm256_castps_pd(c[0]), _mm256_castps_pd(c[1]));
        // the tree leaves source i in lane order(i); the order is its own inverse
        return _mm256_permutevar8x32_ps(_mm256_add_ps(_mm256_castpd_ps(lo), _mm256_castpd_ps(hi)),
                                        _mm256_setr_epi32(0, 2, 1, 3, 4, 6, 5, 7));
    }

    /// As avx512_group::scores (dk a multiple of 8).
    template <int G, class TK>
    BACKPLANE_TARGET_AVX2 static void scores(const float* q, i64 dk, const std::byte* k, std::size_t ld, i64 n,
                                             std::size_t ahead, float* s) noexcept {
        constexpr int P = 8 / G;
        alignas(32) float sums[8];
        for (i64 jb = 0; jb < n; jb += P) {
            __m256 acc[8];
BACKPLANE_UNROLL(8)
            for (int t = 0; t < 8; ++t) acc[t] = _mm256_setzero_ps();
            const std::byte* rows = k + static_cast<std::size_t>(jb) * ld;
            const int live = static_cast<int>(n - jb < P ? n - jb : P);
            for (i64 i = 0; i < dk; i += 8) {
BACKPLANE_UNROLL(4)
                for (int p = 0; p < P; ++p) {
                    if (p >= live) break;
                    const std::byte* at = rows + static_cast<std::size_t>(p) * ld + static_cast<std::size_t>(i) * sizeof(TK);
                    fetch_at<TK>(at, i, ahead);
                    const __m256 kv = load8<TK>(at);
BACKPLANE_UNROLL(8)
                    for (int g = 0; g < G; ++g)
                        acc[g * P + p] = _mm256_fmadd_ps(_mm256_loadu_ps(q + g * dk + i), kv, acc[g * P + p]);
                }
            }
            _mm256_store_ps(sums, fold8(acc));
BACKPLANE_UNROLL(8)
            for (int g = 0; g < G; ++g)
                std::memcpy(s + g * group_tile + jb, sums + g * P, static_cast<std::size_t>(live) * sizeof(float));
        }
    }

    /// As avx512_group::logits.
    BACKPLANE_TARGET_AVX2 static float logits(float* s, i64 n, float scale, float cap, const std::byte* mask,
                                              float slope) noexcept {
        alignas(32) std::uint16_t bits[group_tile] = {};
        if (mask != nullptr) std::memcpy(bits, mask, static_cast<std::size_t>(n) * sizeof(std::uint16_t));
        const __m256 none = _mm256_set1_ps(ninf);
        __m256 best = none;
        for (i64 h = 0; h < group_tile; h += 8) {
            const __m256i in = first(n - h);
            __m256 x = _mm256_mul_ps(_mm256_maskload_ps(s + h, in), _mm256_set1_ps(scale));
            if (cap != 0.0f) x = _mm256_mul_ps(_mm256_set1_ps(cap), rowwise_detail::avx2::tanh(x));
            __m256 live = _mm256_castsi256_ps(in);
            if (mask != nullptr) {
                const __m256 mv = _mm256_mul_ps(_mm256_set1_ps(slope),
                                                _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(bits + h))));
                live = _mm256_and_ps(live, _mm256_cmp_ps(mv, none, _CMP_NEQ_OQ));
                x = _mm256_add_ps(x, mv);
            }
            x = _mm256_blendv_ps(none, x, live);
            _mm256_store_ps(s + h, x);
            best = _mm256_max_ps(best, x);
        }
        return rowwise_detail::avx2::hmax(best);
    }

    /// As avx512_group::accumulate (dv a multiple of 8).
    template <int G, class TV>
    BACKPLANE_TARGET_AVX2 static void accumulate(const float* w, const std::byte* v, std::size_t ld, i64 n, float* acc,
                                                 i64 dv, std::size_t ahead) noexcept {
        constexpr int nv = G <= 2 ? 4 : 8 / G; // 8 to 12 sums in registers
        unsigned every = (1u << n) - 1u, any = 0;
BACKPLANE_UNROLL(8)
        for (int g = 0; g < G; ++g) {
            unsigned nz = 0;
            for (i64 h = 0; h < group_tile; h += 8) {
                const __m256 x = _mm256_maskload_ps(w + g * group_tile + h, first(n - h));
                nz |= static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NEQ_UQ))) << h;
            }
            every &= nz;
            any |= nz & ((1u << n) - 1u);
        }
        for (i64 d0 = 0; d0 < dv; d0 += 8 * nv) {
            const int live = static_cast<int>(std::min<i64>(nv, (dv - d0) / 8));
            __m256 a[G][nv];
BACKPLANE_UNROLL(8)
            for (int g = 0; g < G; ++g)
BACKPLANE_UNROLL(4)
                for (int t = 0; t < nv; ++t)
                    a[g][t] = t < live ? _mm256_loadu_ps(acc + g * dv + d0 + 8 * t) : _mm256_setzero_ps();
            for (i64 j = 0; j < n; ++j) {
                if (!(any >> j & 1u)) continue;
                const bool all = every >> j & 1u;
                const std::byte* row = v + static_cast<std::size_t>(j) * ld + static_cast<std::size_t>(d0) * sizeof(TV);
                __m256 x[nv];
BACKPLANE_UNROLL(4)
                for (int t = 0; t < nv; ++t) {
                    x[t] = _mm256_setzero_ps();
                    if (t >= live) break;
                    fetch_at<TV>(row + 8 * t * sizeof(TV), d0 + 8 * t, ahead);
                    x[t] = load8<TV>(row + 8 * t * sizeof(TV));
                }
BACKPLANE_UNROLL(8)
                for (int g = 0; g < G; ++g) {
                    if (!all && w[g * group_tile + j] == 0.0f) continue;
                    const __m256 wb = _mm256_set1_ps(w[g * group_tile + j]);
BACKPLANE_UNROLL(4)
                    for (int t = 0; t < nv; ++t) {
                        if (t >= live) break;
                        a[g][t] = _mm256_fmadd_ps(wb, x[t], a[g][t]);
                    }
                }
            }
BACKPLANE_UNROLL(8)
            for (int g = 0; g < G; ++g)
BACKPLANE_UNROLL(4)
                for (int t = 0; t < nv; ++t)
                    if (t < live) _mm256_storeu_ps(acc + g * dv + d0 + 8 * t, a[g][t]);
        }
    }
};

BACKPLANE_X86_KERNELS_END

#endif // BACKPLANE_HAS_X86_KERNELS

} // namespace backplane::cpu::fast::attention_detail

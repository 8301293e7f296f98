#pragma once
// Step 2 for many columns (AVX-512, every K-quant type): a panel kernel whose vector lanes
// run along 16 weight rows, so that one vpdpbusd does 64 useful multiply-adds and the
// scales cost one FMA per sub-block, as quant/avx512.hpp does for q8_0 / q4_0.
//
// Packing. A job unpacks its 32 weight rows (a panel) kc super-blocks at a time into the
// thread's part of the work buffer (plan.hpp's kpanel_bytes, 22 KiB: it stays in L1 while the
// job's b columns stream past from L2). Per super-block:
//
//   codes    for each 4 codes g = 0..63 (b's record order): 64 bytes of rows 0-15, then 64
//            of rows 16-31, the codes unsigned (decode_avx512.hpp, 8x8 dword transposes)
//   scales   per 32 (q4_K, q5_K; 8) or 16 (q2_K, q3_K, q6_K; 16) codes of the record:
//            32 f32 d * sc
//   mins     q2_K, q4_K, q5_K: per sub-block likewise, 32 f32 dmin * m
//
// Microkernel, 32 rows x W columns: per sub-block, int32 accumulators (two per column)
// start at zero (or at b's -c * bsum for q3_K's and q6_K's offset, plan.hpp's ex[]), take
// one vpdpbusd per 4 codes, and end in one conversion and one FMA with the rows' f32 scales
// into the super-block's f32 sums; the minimum types subtract dmin * m * ex from the sums
// with one more FMA per sub-block; the super-block ends with an FMA by b's scale. Results
// go straight into dst (lanes = 16 consecutive rows), stored after the first K chunk and
// added to after the others, masked on a partial panel.

#include <backplane/core/detail/unroll.hpp>
#include <backplane/backends/cpu/fast/kquant/decode_avx512.hpp>
#include <backplane/backends/cpu/fast/kquant/gemv.hpp>
#include <backplane/backends/cpu/fast/kquant/plan.hpp>
#include <backplane/backends/cpu/fast/quant/avx512.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/tensor.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if BACKPLANE_HAS_X86_KERNELS
#include <backplane/backends/cpu/detail/x86_intrinsics.hpp>

BACKPLANE_X86_KERNELS_BEGIN

namespace backplane::cpu::fast::kquant {

inline constexpr i64 pk_codes = 8192;                       ///< packed codes of a super-block
inline constexpr i64 pk_block = pk_codes + 16 * 128 + 16 * 128; ///< with scales and mins
inline constexpr i64 pk_kc = 2;                              ///< super-blocks per K chunk
static_assert(kpanel_bytes == static_cast<std::size_t>(pk_kc * pk_block), "plan.hpp's kpanel_bytes");

/// Record block i (32 codes) of q4_K / q5_K in b_order::pairs: its sub-block.
constexpr int pair_sub(int i) noexcept { return 4 * (i / 4) + (i / 2) % 2 + 2 * (i % 2); }

/// Packs super-blocks [kb0, kb0 + nb) of 32 rows (rows[i], may repeat) into out. Each
/// block prefetches the one pk_kc further on (the next K chunk; past the last, the
/// panel's that follows, 32 rows of row_stride bytes on): 32 short streams that the
/// hardware prefetchers would not follow.
template <elem_type T>
BACKPLANE_TARGET_AVX512 inline void pack_kpanel(const std::byte* const* rows, i64 kb0, i64 nb, i64 nblk,
                                                std::size_t wb, std::size_t row_stride, std::byte* out) noexcept {
    alignas(64) std::byte tmp[32][qk];
    for (i64 kb = 0; kb < nb; ++kb) {
        std::byte* o = out + kb * pk_block;
        auto* sc = reinterpret_cast<float*>(o + pk_codes);
        auto* mn = reinterpret_cast<float*>(o + pk_codes + 16 * 128);
        const i64 ahead = kb0 + kb + pk_kc;
        const std::size_t pf = ahead < nblk ? static_cast<std::size_t>(ahead) * wb
                                            : 32 * row_stride + static_cast<std::size_t>(ahead - nblk) * wb;
        for (int r = 0; r < 32; ++r) {
            prefetch_lines(reinterpret_cast<std::uintptr_t>(rows[r]) + pf, wb);
            const std::byte* blk = rows[r] + static_cast<std::size_t>(kb0 + kb) * wb;
BACKPLANE_UNROLL(4)
            for (int k = 0; k < 4; ++k) _mm512_store_si512(tmp[r] + 64 * k, zdec<T>::codes(blk, k));
            if constexpr (T == elem_type::q6_K || T == elem_type::q3_K) {
                alignas(16) std::int8_t s8[16];
                if constexpr (T == elem_type::q6_K)
                    std::memcpy(s8, blk + 192, 16);
                else
                    _mm_store_si128(reinterpret_cast<__m128i*>(s8), dec<elem_type::q3_K>::scale_bytes(blk));
                const float d = f16_at(blk + (T == elem_type::q6_K ? 208 : 108));
                for (int j = 0; j < 16; ++j) sc[32 * j + r] = d * static_cast<float>(s8[j]);
            } else if constexpr (T == elem_type::q2_K) {
                const float d = f16_at(blk + 80), dmin = f16_at(blk + 82);
                for (int j = 0; j < 16; ++j) {
                    const auto b = static_cast<std::uint8_t>(blk[j]);
                    sc[32 * j + r] = d * static_cast<float>(b & 15);
                    mn[32 * j + r] = dmin * static_cast<float>(b >> 4);
                }
            } else {
                alignas(16) std::uint8_t sm[16];
                _mm_store_si128(reinterpret_cast<__m128i*>(sm), scale_min_bytes(blk));
                const float d = f16_at(blk), dmin = f16_at(blk + 2);
                for (int i = 0; i < 8; ++i) {
                    sc[32 * i + r] = d * static_cast<float>(sm[pair_sub(i)]);
                    mn[32 * i + r] = dmin * static_cast<float>(sm[8 + pair_sub(i)]);
                }
            }
        }
        // 16 rows x 8 dwords at a time: dword g of rows 0-7 | 8-15 after the transpose
        for (int v = 0; v < 2; ++v)
            for (int q = 0; q < 8; ++q) {
                __m512i x[8];
BACKPLANE_UNROLL(8)
                for (int j = 0; j < 8; ++j)
                    x[j] = _mm512_inserti64x4(
                        _mm512_castsi256_si512(_mm256_load_si256(reinterpret_cast<const __m256i*>(tmp[16 * v + j] + 32 * q))),
                        _mm256_load_si256(reinterpret_cast<const __m256i*>(tmp[16 * v + j + 8] + 32 * q)), 1);
                quant::transpose8_halves(x);
BACKPLANE_UNROLL(8)
                for (int j = 0; j < 8; ++j) _mm512_store_si512(o + ((8 * q + j) * 2 + v) * 64, x[j]);
            }
    }
}

/// A packed panel (nb super-blocks) times W columns of b (records bc[c]), stored to (or,
/// when accumulate, added to) out: column c at out + c * ldn, rows under masks mk0, mk1.
template <elem_type T, int W>
BACKPLANE_TARGET_AVX512 inline void kpanel_tile(const std::byte* pa, const std::byte* const* bc, i64 nb,
                                                std::byte* out, std::size_t ldn, __mmask16 mk0, __mmask16 mk1,
                                                bool accumulate) noexcept {
    constexpr int subs = traits_of(T).subs();
    constexpr int groups = 64 / subs; // 4 codes each
    __m512 f0[W], f1[W];
BACKPLANE_UNROLL(8)
    for (int c = 0; c < W; ++c) {
        const std::byte* o = out + static_cast<std::size_t>(c) * ldn;
        f0[c] = accumulate ? _mm512_maskz_loadu_ps(mk0, o) : _mm512_setzero_ps();
        f1[c] = accumulate ? _mm512_maskz_loadu_ps(mk1, o + 64) : _mm512_setzero_ps();
    }
    for (i64 kb = 0; kb < nb; ++kb) {
        const std::byte* qa = pa + kb * pk_block;
        const auto* sc = reinterpret_cast<const float*>(qa + pk_codes);
        const auto* mn = reinterpret_cast<const float*>(qa + pk_codes + 16 * 128);
        __m512 s0[W], s1[W];
BACKPLANE_UNROLL(8)
        for (int c = 0; c < W; ++c) s0[c] = s1[c] = _mm512_setzero_ps();
        for (int j = 0; j < subs; ++j) {
            __m512i a0[W], a1[W];
BACKPLANE_UNROLL(8)
            for (int c = 0; c < W; ++c) {
                const std::byte* rec = bc[c] + kb * rec_bytes;
                a0[c] = has_offset<T> ? _mm512_set1_epi32(load_i32(rec + rec_ex + 4 * j)) : _mm512_setzero_si512();
                a1[c] = a0[c];
            }
BACKPLANE_UNROLL(8)
            for (int g = groups * j; g < groups * (j + 1); ++g) {
                const __m512i w0 = _mm512_load_si512(qa + g * 128);
                const __m512i w1 = _mm512_load_si512(qa + g * 128 + 64);
BACKPLANE_UNROLL(8)
                for (int c = 0; c < W; ++c) {
                    const __m512i bb = _mm512_set1_epi32(load_i32(bc[c] + kb * rec_bytes + 4 * g));
                    a0[c] = _mm512_dpbusd_epi32(a0[c], w0, bb);
                    a1[c] = _mm512_dpbusd_epi32(a1[c], w1, bb);
                }
            }
            const __m512 d0 = _mm512_load_ps(sc + 32 * j), d1 = _mm512_load_ps(sc + 32 * j + 16);
BACKPLANE_UNROLL(8)
            for (int c = 0; c < W; ++c) {
                s0[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a0[c]), d0, s0[c]);
                s1[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a1[c]), d1, s1[c]);
            }
            if constexpr (!has_offset<T>) {
                const __m512 m0 = _mm512_load_ps(mn + 32 * j), m1 = _mm512_load_ps(mn + 32 * j + 16);
                const int e = T == elem_type::q2_K ? j : pair_sub(j); // b's ex[] in value order
BACKPLANE_UNROLL(8)
                for (int c = 0; c < W; ++c) {
                    const __m512 ex = _mm512_set1_ps(load_f32(bc[c] + kb * rec_bytes + rec_ex + 4 * e));
                    f0[c] = _mm512_fnmadd_ps(m0, ex, f0[c]);
                    f1[c] = _mm512_fnmadd_ps(m1, ex, f1[c]);
                }
            }
        }
BACKPLANE_UNROLL(8)
        for (int c = 0; c < W; ++c) {
            const __m512 db = _mm512_set1_ps(load_f32(bc[c] + kb * rec_bytes + rec_d));
            f0[c] = _mm512_fmadd_ps(s0[c], db, f0[c]);
            f1[c] = _mm512_fmadd_ps(s1[c], db, f1[c]);
        }
    }
BACKPLANE_UNROLL(8)
    for (int c = 0; c < W; ++c) {
        std::byte* o = out + static_cast<std::size_t>(c) * ldn;
        _mm512_mask_storeu_ps(o, mk0, f0[c]);
        _mm512_mask_storeu_ps(o + 64, mk1, f1[c]);
    }
}

/// One job (a run of panels of one column chunk) with the panel kernel; pk: this
/// thread's packing area (kpanel_bytes, 64-byte aligned).
template <elem_type T>
inline void job_kpanel_t(const plan& pl, const tensor& a, tensor& dst, const std::byte* qb, const job& whole,
                         std::byte* pk) noexcept {
    constexpr int W = 4;
    const std::size_t ldn = dst.nb[1];
    for (i64 m0 = whole.m0; m0 < whole.m1; m0 += panel_rows) {
        const i64 m1 = std::min(whole.m1, m0 + panel_rows);
        const auto live = static_cast<int>(m1 - m0);
        const std::byte* rows[32];
        for (int r = 0; r < 32; ++r) rows[r] = weight_row(a, pl, whole.bi, m0 + std::min(r, live - 1));
        const auto mk0 = static_cast<__mmask16>(live >= 16 ? 0xffff : (1u << live) - 1);
        const auto mk1 = static_cast<__mmask16>(live >= 32 ? 0xffff : live <= 16 ? 0 : (1u << (live - 16)) - 1);
        for (i64 kb0 = 0; kb0 < pl.nblk; kb0 += pk_kc) {
            const i64 nb = std::min(pk_kc, pl.nblk - kb0);
            pack_kpanel<T>(rows, kb0, nb, pl.nblk, pl.wbytes, a.nb[1], pk);
            for (i64 n = whole.n0; n < whole.n1; n += W) {
                const int nc = static_cast<int>(std::min<i64>(W, whole.n1 - n));
                const std::byte* bc[W];
                for (int c = 0; c < W; ++c) bc[c] = pl.column(qb, whole.bi, n + std::min(c, nc - 1)) + kb0 * rec_bytes;
                std::byte* out = dst_at(dst, pl, whole.bi, m0, n);
                const bool acc = kb0 > 0;
                switch (nc) {
                case 4: kpanel_tile<T, 4>(pk, bc, nb, out, ldn, mk0, mk1, acc); break;
                case 3: kpanel_tile<T, 3>(pk, bc, nb, out, ldn, mk0, mk1, acc); break;
                case 2: kpanel_tile<T, 2>(pk, bc, nb, out, ldn, mk0, mk1, acc); break;
                default: kpanel_tile<T, 1>(pk, bc, nb, out, ldn, mk0, mk1, acc); break;
                }
            }
        }
    }
}

inline void job_kpanel(const plan& pl, const tensor& a, tensor& dst, const std::byte* qb, const job& jb,
                       std::byte* pk) noexcept {
    switch (pl.wtype) {
    case elem_type::q2_K: return job_kpanel_t<elem_type::q2_K>(pl, a, dst, qb, jb, pk);
    case elem_type::q3_K: return job_kpanel_t<elem_type::q3_K>(pl, a, dst, qb, jb, pk);
    case elem_type::q4_K: return job_kpanel_t<elem_type::q4_K>(pl, a, dst, qb, jb, pk);
    case elem_type::q5_K: return job_kpanel_t<elem_type::q5_K>(pl, a, dst, qb, jb, pk);
    default: return job_kpanel_t<elem_type::q6_K>(pl, a, dst, qb, jb, pk);
    }
}

} // namespace backplane::cpu::fast::kquant

BACKPLANE_X86_KERNELS_END

#endif // BACKPLANE_HAS_X86_KERNELS

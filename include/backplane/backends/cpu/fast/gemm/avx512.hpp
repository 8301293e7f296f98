#pragma once
// The AVX-512 kernel set of the fast float mul_mat (isa::avx512).
//
// Micro-tile 48 x 8: three zmm of a (48 rows of M, the contiguous direction of dst) times
// eight broadcast values of b, 24 zmm accumulators. Per k: 3 loads, 8 broadcast loads,
// 24 FMAs, so the two FMA ports stay busy (~194 GFLOP/s of ~196 in L1 on the reference
// machine; 32 x 12, 16 x 28 measured the same, 32 x 8 7% slower). 8 columns make b's
// packing a plain 8 x 8 transpose; a is packed with 16 x 16 transposes. Both convert
// f16 (vcvtph2ps) and bf16 (a 16-bit shift) to f32 on the way, so the micro-kernel only
// ever sees f32. Edges: the last micro-panel of a is 16, 32 or 48 rows wide and its last
// vector is stored under a mask; the last panel of b has 1..8 columns, each width its own
// instantiation. K tails use masked loads, which never touch memory past the row.
//
// Every function that uses an intrinsic carries BACKPLANE_TARGET_AVX512 and the helpers
// are always inlined into those, so the translation unit itself needs no -m flags.

#include <backplane/core/detail/unroll.hpp>
#include <backplane/backends/cpu/fast/gemm/plan.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/types.hpp>

#if BACKPLANE_HAS_X86_KERNELS

#include <backplane/backends/cpu/detail/x86_intrinsics.hpp>

#include <array>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

// GCC 12.1-12.2 warn inside the intrinsics that take an _mm*_undefined_*() operand
// (unpack, shuffle, cvtph, extract...) wherever they are inlined (GCC PR 105593, fixed in
// 12.3): not this code's, and not silenced by the system header, so off for these kernels.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace backplane::cpu::fast::gemm_detail::avx512 {

inline constexpr i64 mr = 48;
inline constexpr i64 nr = 8;
inline constexpr int mv_max = 3; ///< zmm per micro-tile column
/// Mat-vec (mv_rows): the rows are read as 4 sequential streams (4 contiguous parts side
/// by side, as ref/read_bandwidth reads), each row prefetching this many bytes ahead, into
/// the next row of its part at the end. On the 2-core VM (4096 x 4096 from DRAM, 1
/// thread) f16 went from 0.87 to 0.91-0.94 of the read loop and f32 from 0.95 to 0.97-0.99
/// when the 4 rows of a block became rows of 4 parts instead of 4 adjacent rows; 512 to
/// 2048 bytes ahead measured the same, 4096 ~2% less.
inline constexpr int mv_prefetch = 1024;

constexpr __mmask16 mask16(i64 n) noexcept {
    return n >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
}
constexpr __mmask8 mask8(i64 n) noexcept {
    return n >= 8 ? __mmask8(0xff) : static_cast<__mmask8>((1u << n) - 1u);
}

/// 16 values of type T at p as f32; lanes outside m read as zero and are not loaded.
template <class T>
BACKPLANE_TARGET_AVX512 BACKPLANE_GEMM_INLINE __m512 load16(const std::byte* p, __mmask16 m) noexcept {
    if constexpr (std::is_same_v<T, float>) {
        return _mm512_maskz_loadu_ps(m, p);
    } else if constexpr (std::is_same_v<T, f16_t>) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    } else { // zero-masked forms: the plain ones trip GCC 12's -Wuninitialized (PR 105593)
        const __m512i w = _mm512_maskz_cvtepu16_epi32(m, _mm256_maskz_loadu_epi16(m, p));
        return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(m, w, 16));
    }
}

/// 8 values of type T at p as f32 (masked like load16).
template <class T>
BACKPLANE_TARGET_AVX512 BACKPLANE_GEMM_INLINE __m256 load8(const std::byte* p, __mmask8 m) noexcept {
    if constexpr (std::is_same_v<T, float>) {
        return _mm256_maskz_loadu_ps(m, p);
    } else if constexpr (std::is_same_v<T, f16_t>) {
        return _mm256_cvtph_ps(_mm_maskz_loadu_epi16(m, p));
    } else {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_maskz_loadu_epi16(m, p));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
}

/// Sum of the 16 lanes (not _mm512_reduce_add_ps: see load16).
BACKPLANE_TARGET_AVX512 BACKPLANE_GEMM_INLINE float hsum(__m512 v) noexcept {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_maskz_extractf32x8_ps(0xff, v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/// r[i] = row i of a 16 x 16 block in, column i out.
BACKPLANE_TARGET_AVX512 BACKPLANE_GEMM_INLINE void transpose16(__m512* r) noexcept {
    __m512 t[16];
    __m512 u[16];
BACKPLANE_UNROLL(8)
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4g + e], lane L: rows 4g..4g+3 of column 4L + e
BACKPLANE_UNROLL(4)
    for (int g = 0; g < 4; ++g) {
        u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
        u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
    }
BACKPLANE_UNROLL(4)
    for (int e = 0; e < 4; ++e) {
        const __m512 v0 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0x88);
        const __m512 v1 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0xdd);
        const __m512 w0 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0x88);
        const __m512 w1 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0xdd);
        r[e] = _mm512_shuffle_f32x4(v0, w0, 0x88);
        r[4 + e] = _mm512_shuffle_f32x4(v1, w1, 0x88);
        r[8 + e] = _mm512_shuffle_f32x4(v0, w0, 0xdd);
        r[12 + e] = _mm512_shuffle_f32x4(v1, w1, 0xdd);
    }
}

/// r[i] = row i of an 8 x 8 block in, column i out.
BACKPLANE_TARGET_AVX512 BACKPLANE_GEMM_INLINE void transpose8(__m256* r) noexcept {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xee);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xee);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xee);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

template <class T>
BACKPLANE_TARGET_AVX512 void convert_t(const std::byte* s, i64 n, float* o) noexcept {
    for (i64 k = 0; k < n; k += 16) {
        const __mmask16 m = mask16(n - k);
        _mm512_mask_storeu_ps(o + k, m, load16<T>(s + static_cast<std::size_t>(k) * sizeof(T), m));
    }
}

/// Rows [0, rows) of a, values [k0, k0 + kc), into micro-panels of up to 48 rows:
/// out[k * w + i] for a panel of width w (48, or 16 / 32 for the last), zero-padded rows.
template <class T>
BACKPLANE_TARGET_AVX512 void pack_a_t(const std::byte* a, std::size_t lda, i64 rows, i64 k0, i64 kc,
                                      float* out) noexcept {
    for (i64 r0 = 0; r0 < rows; r0 += mr) {
        const i64 pr = rows - r0 < mr ? rows - r0 : mr;
        const i64 width = round_up(pr, 16);
        for (i64 g = 0; g < width; g += 16) {
            const i64 gr = pr - g;
            const std::byte* src = a + static_cast<std::size_t>(r0 + g) * lda + static_cast<std::size_t>(k0) * sizeof(T);
            for (i64 k = 0; k < kc; k += 16) {
                const i64 kn = kc - k;
                const __mmask16 m = mask16(kn);
                const std::byte* s = src + static_cast<std::size_t>(k) * sizeof(T);
                __m512 v[16];
BACKPLANE_UNROLL(16)
                for (int i = 0; i < 16; ++i)
                    v[i] = i < gr ? load16<T>(s + static_cast<std::size_t>(i) * lda, m) : _mm512_setzero_ps();
                transpose16(v);
                float* o = out + k * width + g;
BACKPLANE_UNROLL(16)
                for (int i = 0; i < 16; ++i)
                    if (i < kn) _mm512_storeu_ps(o + i * width, v[i]);
            }
        }
        out += width * kc;
    }
}

/// One micro-panel of b: cols (<= 8) rows of b, values [k0, k0 + kc), as out[k * 8 + j].
template <class T>
BACKPLANE_TARGET_AVX512 void pack_b_t(const std::byte* b, std::size_t ldb, i64 cols, i64 k0, i64 kc,
                                      float* out) noexcept {
    const std::byte* src = b + static_cast<std::size_t>(k0) * sizeof(T);
    for (i64 k = 0; k < kc; k += 8) {
        const i64 kn = kc - k;
        const __mmask8 m = mask8(kn);
        const std::byte* s = src + static_cast<std::size_t>(k) * sizeof(T);
        __m256 v[8];
BACKPLANE_UNROLL(8)
        for (int j = 0; j < 8; ++j)
            v[j] = j < cols ? load8<T>(s + static_cast<std::size_t>(j) * ldb, m) : _mm256_setzero_ps();
        transpose8(v);
BACKPLANE_UNROLL(8)
        for (int i = 0; i < 8; ++i)
            if (i < kn) _mm256_storeu_ps(out + (k + i) * nr, v[i]);
    }
}

/// The micro-kernel: an (MV * 16) x NR tile of dst (+)= a-panel (width MV * 16) times
/// b-panel (width 8, first NR columns used). The last of the MV vectors is stored
/// under `last`.
template <int MV, int NR>
BACKPLANE_TARGET_AVX512 void ukr(i64 kc, const float* a, const float* b, std::byte* c, std::size_t ldc,
                                 __mmask16 last, bool accumulate) noexcept {
    __m512 acc[NR][MV];
    // the tile of dst is read (or written) last: start fetching it now
BACKPLANE_UNROLL(8)
    for (int j = 0; j < NR; ++j)
BACKPLANE_UNROLL(4)
        for (int i = 0; i < MV; ++i)
            _mm_prefetch(reinterpret_cast<const char*>(c + static_cast<std::size_t>(j) * ldc) + i * 64, _MM_HINT_T0);
BACKPLANE_UNROLL(8)
    for (int j = 0; j < NR; ++j)
BACKPLANE_UNROLL(4)
        for (int i = 0; i < MV; ++i) acc[j][i] = _mm512_setzero_ps();
    for (i64 k = 0; k < kc; ++k) {
        __m512 av[MV];
BACKPLANE_UNROLL(4)
        for (int i = 0; i < MV; ++i) av[i] = _mm512_loadu_ps(a + i * 16);
BACKPLANE_UNROLL(8)
        for (int j = 0; j < NR; ++j) {
            const __m512 bj = _mm512_set1_ps(b[j]);
BACKPLANE_UNROLL(4)
            for (int i = 0; i < MV; ++i) acc[j][i] = _mm512_fmadd_ps(av[i], bj, acc[j][i]);
        }
        a += MV * 16;
        b += nr;
    }
BACKPLANE_UNROLL(8)
    for (int j = 0; j < NR; ++j) {
        float* cj = reinterpret_cast<float*>(c + static_cast<std::size_t>(j) * ldc);
BACKPLANE_UNROLL(4)
        for (int i = 0; i < MV; ++i) {
            const __mmask16 m = i == MV - 1 ? last : __mmask16(0xffff);
            __m512 v = acc[j][i];
            if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, cj + i * 16));
            _mm512_mask_storeu_ps(cj + i * 16, m, v);
        }
    }
}

using ukr_fn = void (*)(i64, const float*, const float*, std::byte*, std::size_t, __mmask16, bool) noexcept;

// the array type spelt out: nvcc's front end drops the pack expansion of a braced
// `return {...}` from the host code it hands on
template <int MV, std::size_t... J>
constexpr std::array<ukr_fn, nr> ukr_row(std::index_sequence<J...>) noexcept {
    return std::array<ukr_fn, nr>{&ukr<MV, static_cast<int>(J) + 1>...};
}
inline constexpr std::array<std::array<ukr_fn, nr>, mv_max> ukr_table = {
    ukr_row<1>(std::make_index_sequence<nr>{}), ukr_row<2>(std::make_index_sequence<nr>{}),
    ukr_row<3>(std::make_index_sequence<nr>{})};

/// R rows of a (lda bytes apart) dotted with C f32 columns of b (ldb floats apart):
/// dst[r, j] for the R x C block, d at dst[0, 0], rows ds bytes apart, columns ldd bytes
/// apart. Each row is prefetched mv_prefetch bytes ahead.
template <class T, int R, int C>
BACKPLANE_TARGET_AVX512 void mv_block(const std::byte* a, std::size_t lda, i64 K, const float* b, i64 ldb,
                                      std::byte* d, std::size_t ds, std::size_t ldd) noexcept {
    __m512 acc[R][C];
BACKPLANE_UNROLL(4)
    for (int r = 0; r < R; ++r)
BACKPLANE_UNROLL(4)
        for (int j = 0; j < C; ++j) acc[r][j] = _mm512_setzero_ps();
    // one loop for body and tail: a masked load costs what a plain one does
    for (i64 k = 0; k < K; k += 16) {
        const __mmask16 m = mask16(K - k);
        __m512 bv[C];
BACKPLANE_UNROLL(4)
        for (int j = 0; j < C; ++j) bv[j] = _mm512_maskz_loadu_ps(m, b + j * ldb + k);
        const std::byte* ak = a + static_cast<std::size_t>(k) * sizeof(T);
BACKPLANE_UNROLL(4)
        for (int r = 0; r < R; ++r) {
            _mm_prefetch(reinterpret_cast<const char*>(ak + static_cast<std::size_t>(r) * lda) + mv_prefetch, _MM_HINT_T0);
            const __m512 av = load16<T>(ak + static_cast<std::size_t>(r) * lda, m);
BACKPLANE_UNROLL(4)
            for (int j = 0; j < C; ++j) acc[r][j] = _mm512_fmadd_ps(av, bv[j], acc[r][j]);
        }
    }
BACKPLANE_UNROLL(4)
    for (int r = 0; r < R; ++r)
BACKPLANE_UNROLL(4)
        for (int j = 0; j < C; ++j) {
            const float s = hsum(acc[r][j]);
            std::memcpy(d + static_cast<std::size_t>(j) * ldd + static_cast<std::size_t>(r) * ds, &s, sizeof s);
        }
}

/// Rows [0, rows) against C columns: cut into R contiguous parts that are read side by
/// side, a block taking row t of each.
template <class T, int C>
BACKPLANE_TARGET_AVX512 void mv_rows(const std::byte* a, std::size_t lda, i64 rows, i64 K, const float* b, i64 ldb,
                                     std::byte* d, std::size_t ldd) noexcept {
    constexpr int R = 4;
    const i64 q = rows / R;
    const auto sq = static_cast<std::size_t>(q);
    for (i64 t = 0; t < q; ++t)
        mv_block<T, R, C>(a + static_cast<std::size_t>(t) * lda, sq * lda, K, b, ldb,
                          d + static_cast<std::size_t>(t) * sizeof(float), sq * sizeof(float), ldd);
    for (i64 r = R * q; r < rows; ++r)
        mv_block<T, 1, C>(a + static_cast<std::size_t>(r) * lda, lda, K, b, ldb,
                          d + static_cast<std::size_t>(r) * sizeof(float), sizeof(float), ldd);
}

/// Rows [0, rows) of a against ncols (<= matvec_max_n) columns. Up to 4 columns, all rows
/// at once (mv_rows); more, row blocks of 32 and columns in groups of 4, a block's rows
/// coming from L2 for every group after the first, so a is streamed from memory once.
/// nr_ rows of a against nc <= 4 columns (a function, not a lambda: nvcc's front end
/// drops a lambda's target attribute from the host code it hands on).
template <class T>
BACKPLANE_TARGET_AVX512 inline void mv_group(const std::byte* ar, std::size_t lda, i64 nr_, i64 K, const float* bc, i64 ldb,
                                            i64 nc, std::byte* dc, std::size_t ldd) noexcept {
    switch (nc) {
    case 1: mv_rows<T, 1>(ar, lda, nr_, K, bc, ldb, dc, ldd); break;
    case 2: mv_rows<T, 2>(ar, lda, nr_, K, bc, ldb, dc, ldd); break;
    case 3: mv_rows<T, 3>(ar, lda, nr_, K, bc, ldb, dc, ldd); break;
    default: mv_rows<T, 4>(ar, lda, nr_, K, bc, ldb, dc, ldd); break;
    }
}

template <class T>
BACKPLANE_TARGET_AVX512 void matvec_t(const std::byte* a, std::size_t lda, i64 rows, i64 K, const float* b, i64 ldb, i64 ncols,
                                     std::byte* d, std::size_t ldd) noexcept {
    if (ncols <= 4) {
        mv_group<T>(a, lda, rows, K, b, ldb, ncols, d, ldd);
        return;
    }
    constexpr i64 block = 32; // rows per block: 32 x K of a stays in L2 for K up to 16 Ki (f32)
    for (i64 r0 = 0; r0 < rows; r0 += block) {
        const i64 nr_ = rows - r0 < block ? rows - r0 : block;
        const std::byte* ar = a + static_cast<std::size_t>(r0) * lda;
        std::byte* dr = d + static_cast<std::size_t>(r0) * sizeof(float);
        for (i64 c0 = 0; c0 < ncols; c0 += 4)
            mv_group<T>(ar, lda, nr_, K, b + c0 * ldb, ldb, std::min<i64>(4, ncols - c0),
                        dr + static_cast<std::size_t>(c0) * ldd, ldd);
    }
}

/// The set as the driver sees it (see portable::kernels for the contract of each).
struct kernels {
    static constexpr i64 mr = avx512::mr;
    static constexpr i64 nr = avx512::nr;
    static void convert(elem_type t, const std::byte* s, i64 n, float* o) noexcept {
        visit_type(t, [&]<class T>() { convert_t<T>(s, n, o); });
    }
    static void pack_a(elem_type t, const std::byte* a, std::size_t lda, i64 rows, i64 k0, i64 kc, float* o) noexcept {
        visit_type(t, [&]<class T>() { pack_a_t<T>(a, lda, rows, k0, kc, o); });
    }
    static void pack_b(elem_type t, const std::byte* b, std::size_t ldb, i64 cols, i64 k0, i64 kc, float* o) noexcept {
        visit_type(t, [&]<class T>() { pack_b_t<T>(b, ldb, cols, k0, kc, o); });
    }
    static void tile(i64 kc, const float* a, i64 rows, const float* b, i64 cols, std::byte* c, std::size_t ldc,
                     bool accumulate) noexcept {
        const i64 mv = ceil_div(rows, 16);
        ukr_table[static_cast<std::size_t>(mv - 1)][static_cast<std::size_t>(cols - 1)](
            kc, a, b, c, ldc, mask16(rows - (mv - 1) * 16), accumulate);
    }
    static void matvec(elem_type t, const std::byte* a, std::size_t lda, i64 rows, i64 K, const float* b, i64 ldb,
                       i64 ncols, std::byte* d, std::size_t ldd) noexcept {
        visit_type(t, [&]<class T>() { matvec_t<T>(a, lda, rows, K, b, ldb, ncols, d, ldd); });
    }
};

} // namespace backplane::cpu::fast::gemm_detail::avx512

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif // BACKPLANE_HAS_X86_KERNELS

#pragma once
// The AVX2 + FMA + F16C kernel set of the fast float mul_mat (isa::avx2).
//
// Micro-tile 24 x 4: three ymm of a times four broadcast values of b, 12 accumulators of
// the 16 ymm registers (16 x 6 measured the same, ~97 GFLOP/s on one core of the
// reference machine; 4 columns make b's packing a 4 x 8 transpose). a is packed with
// 8 x 8 transposes; f16 and bf16 become f32 while packing. AVX2 has no masked 16-bit
// loads, so partial vectors at K tails go through a zeroed local copy, and the last
// vector of a tile is stored with vmaskmovps.

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

namespace backplane::cpu::fast::gemm_detail::avx2 {

inline constexpr i64 mr = 24;
inline constexpr i64 nr = 4;
inline constexpr int mv_max = 3; ///< ymm per micro-tile column
inline constexpr int mv_prefetch = 1024; ///< mat-vec prefetch distance (see avx512.hpp)

/// 8 values of type T at p as f32.
template <class T>
BACKPLANE_TARGET_AVX2 BACKPLANE_GEMM_INLINE __m256 load8(const std::byte* p) noexcept {
    if constexpr (std::is_same_v<T, float>) {
        return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    } else {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        if constexpr (std::is_same_v<T, f16_t>)
            return _mm256_cvtph_ps(h);
        else
            return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
}

/// n (0..8) values of type T at p as f32, zero past n; reads only those n values.
template <class T>
BACKPLANE_TARGET_AVX2 BACKPLANE_GEMM_INLINE __m256 load8n(const std::byte* p, i64 n) noexcept {
    if (n >= 8) return load8<T>(p);
    alignas(32) std::byte tmp[8 * sizeof(T)] = {};
    std::memcpy(tmp, p, static_cast<std::size_t>(n) * sizeof(T));
    return load8<T>(tmp);
}

/// Lane mask for vmaskmovps: the first n (0..8) lanes.
BACKPLANE_TARGET_AVX2 BACKPLANE_GEMM_INLINE __m256i lanes(i64 n) noexcept {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

BACKPLANE_TARGET_AVX2 BACKPLANE_GEMM_INLINE float hsum(__m256 v) noexcept {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/// r[i] = row i of an 8 x 8 block in, column i out.
BACKPLANE_TARGET_AVX2 BACKPLANE_GEMM_INLINE void transpose8(__m256* r) noexcept {
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
BACKPLANE_TARGET_AVX2 void convert_t(const std::byte* s, i64 n, float* o) noexcept {
    i64 k = 0;
    for (; k + 8 <= n; k += 8) _mm256_storeu_ps(o + k, load8<T>(s + static_cast<std::size_t>(k) * sizeof(T)));
    if (k < n)
        _mm256_maskstore_ps(o + k, lanes(n - k), load8n<T>(s + static_cast<std::size_t>(k) * sizeof(T), n - k));
}

/// Rows [0, rows) of a, values [k0, k0 + kc), into micro-panels of up to 24 rows:
/// out[k * w + i] for a panel of width w (24, or 8 / 16 for the last), zero-padded rows.
template <class T>
BACKPLANE_TARGET_AVX2 void pack_a_t(const std::byte* a, std::size_t lda, i64 rows, i64 k0, i64 kc,
                                    float* out) noexcept {
    for (i64 r0 = 0; r0 < rows; r0 += mr) {
        const i64 pr = rows - r0 < mr ? rows - r0 : mr;
        const i64 width = round_up(pr, 8);
        for (i64 g = 0; g < width; g += 8) {
            const i64 gr = pr - g;
            const std::byte* src = a + static_cast<std::size_t>(r0 + g) * lda + static_cast<std::size_t>(k0) * sizeof(T);
            for (i64 k = 0; k < kc; k += 8) {
                const i64 kn = kc - k;
                const std::byte* s = src + static_cast<std::size_t>(k) * sizeof(T);
                __m256 v[8];
                if (kn >= 8) {
BACKPLANE_UNROLL(8)
                    for (int i = 0; i < 8; ++i)
                        v[i] = i < gr ? load8<T>(s + static_cast<std::size_t>(i) * lda) : _mm256_setzero_ps();
                } else {
BACKPLANE_UNROLL(8)
                    for (int i = 0; i < 8; ++i)
                        v[i] = i < gr ? load8n<T>(s + static_cast<std::size_t>(i) * lda, kn) : _mm256_setzero_ps();
                }
                transpose8(v);
                float* o = out + k * width + g;
BACKPLANE_UNROLL(8)
                for (int i = 0; i < 8; ++i)
                    if (i < kn) _mm256_storeu_ps(o + i * width, v[i]);
            }
        }
        out += width * kc;
    }
}

/// One micro-panel of b: cols (<= 4) rows of b, values [k0, k0 + kc), as out[k * 4 + j].
template <class T>
BACKPLANE_TARGET_AVX2 void pack_b_t(const std::byte* b, std::size_t ldb, i64 cols, i64 k0, i64 kc,
                                    float* out) noexcept {
    const std::byte* src = b + static_cast<std::size_t>(k0) * sizeof(T);
    for (i64 k = 0; k < kc; k += 8) {
        const i64 kn = kc - k;
        const std::byte* s = src + static_cast<std::size_t>(k) * sizeof(T);
        __m256 v[4];
BACKPLANE_UNROLL(4)
        for (int j = 0; j < 4; ++j)
            v[j] = j >= cols ? _mm256_setzero_ps()
                   : kn >= 8 ? load8<T>(s + static_cast<std::size_t>(j) * ldb)
                             : load8n<T>(s + static_cast<std::size_t>(j) * ldb, kn);
        // 4 x 8 transpose: lane 0 of s_e holds k = e, lane 1 holds k = e + 4
        const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
        const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
        const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xee);
        const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xee);
        const __m256 o[4] = {_mm256_permute2f128_ps(s0, s1, 0x20), _mm256_permute2f128_ps(s2, s3, 0x20),
                             _mm256_permute2f128_ps(s0, s1, 0x31), _mm256_permute2f128_ps(s2, s3, 0x31)};
        float* dst = out + k * nr;
BACKPLANE_UNROLL(4)
        for (int i = 0; i < 4; ++i) { // o[i] holds k + 2i and k + 2i + 1
            if (2 * i + 1 < kn)
                _mm256_storeu_ps(dst + 8 * i, o[i]);
            else if (2 * i < kn)
                _mm_storeu_ps(dst + 8 * i, _mm256_castps256_ps128(o[i]));
        }
    }
}

/// The micro-kernel: an (MV * 8) x NR tile of dst (+)= a-panel (width MV * 8) times
/// b-panel (width 4, first NR columns used); the last vector is stored under `last`.
template <int MV, int NR>
BACKPLANE_TARGET_AVX2 void ukr(i64 kc, const float* a, const float* b, std::byte* c, std::size_t ldc, i64 last,
                               bool accumulate) noexcept {
    __m256 acc[NR][MV];
BACKPLANE_UNROLL(4)
    for (int j = 0; j < NR; ++j)
BACKPLANE_UNROLL(4)
        for (int i = 0; i < MV; ++i) acc[j][i] = _mm256_setzero_ps();
    for (i64 k = 0; k < kc; ++k) {
        __m256 av[MV];
BACKPLANE_UNROLL(4)
        for (int i = 0; i < MV; ++i) av[i] = _mm256_loadu_ps(a + i * 8);
BACKPLANE_UNROLL(4)
        for (int j = 0; j < NR; ++j) {
            const __m256 bj = _mm256_broadcast_ss(b + j);
BACKPLANE_UNROLL(4)
            for (int i = 0; i < MV; ++i) acc[j][i] = _mm256_fmadd_ps(av[i], bj, acc[j][i]);
        }
        a += MV * 8;
        b += nr;
    }
    const __m256i lm = lanes(last);
BACKPLANE_UNROLL(4)
    for (int j = 0; j < NR; ++j) {
        float* cj = reinterpret_cast<float*>(c + static_cast<std::size_t>(j) * ldc);
BACKPLANE_UNROLL(4)
        for (int i = 0; i < MV; ++i) {
            __m256 v = acc[j][i];
            if (i < MV - 1 || last == 8) {
                if (accumulate) v = _mm256_add_ps(v, _mm256_loadu_ps(cj + i * 8));
                _mm256_storeu_ps(cj + i * 8, v);
            } else {
                if (accumulate) v = _mm256_add_ps(v, _mm256_maskload_ps(cj + i * 8, lm));
                _mm256_maskstore_ps(cj + i * 8, lm, v);
            }
        }
    }
}

using ukr_fn = void (*)(i64, const float*, const float*, std::byte*, std::size_t, i64, bool) noexcept;

// the array type spelt out: nvcc's front end drops the pack expansion of a braced
// `return {...}` from the host code it hands on
template <int MV, std::size_t... J>
constexpr std::array<ukr_fn, nr> ukr_row(std::index_sequence<J...>) noexcept {
    return std::array<ukr_fn, nr>{&ukr<MV, static_cast<int>(J) + 1>...};
}
inline constexpr std::array<std::array<ukr_fn, nr>, mv_max> ukr_table = {
    ukr_row<1>(std::make_index_sequence<nr>{}), ukr_row<2>(std::make_index_sequence<nr>{}),
    ukr_row<3>(std::make_index_sequence<nr>{})};

/// R rows of a dotted with C f32 columns of b (see avx512::mv_block).
template <class T, int R, int C>
BACKPLANE_TARGET_AVX2 void mv_block(const std::byte* a, std::size_t lda, i64 K, const float* b, i64 ldb,
                                    std::byte* d, std::size_t ldd) noexcept {
    __m256 acc[R][C];
BACKPLANE_UNROLL(4)
    for (int r = 0; r < R; ++r)
BACKPLANE_UNROLL(4)
        for (int j = 0; j < C; ++j) acc[r][j] = _mm256_setzero_ps();
    i64 k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 bv[C];
BACKPLANE_UNROLL(4)
        for (int j = 0; j < C; ++j) bv[j] = _mm256_loadu_ps(b + j * ldb + k);
        const std::byte* ak = a + static_cast<std::size_t>(k) * sizeof(T);
BACKPLANE_UNROLL(4)
        for (int r = 0; r < R; ++r) {
            _mm_prefetch(reinterpret_cast<const char*>(ak + static_cast<std::size_t>(r) * lda) + mv_prefetch, _MM_HINT_T0);
            const __m256 av = load8<T>(ak + static_cast<std::size_t>(r) * lda);
BACKPLANE_UNROLL(4)
            for (int j = 0; j < C; ++j) acc[r][j] = _mm256_fmadd_ps(av, bv[j], acc[r][j]);
        }
    }
    if (k < K) {
        const i64 n = K - k;
        __m256 bv[C];
BACKPLANE_UNROLL(4)
        for (int j = 0; j < C; ++j)
            bv[j] = load8n<float>(reinterpret_cast<const std::byte*>(b + j * ldb + k), n);
        const std::byte* ak = a + static_cast<std::size_t>(k) * sizeof(T);
BACKPLANE_UNROLL(4)
        for (int r = 0; r < R; ++r) {
            const __m256 av = load8n<T>(ak + static_cast<std::size_t>(r) * lda, n);
BACKPLANE_UNROLL(4)
            for (int j = 0; j < C; ++j) acc[r][j] = _mm256_fmadd_ps(av, bv[j], acc[r][j]);
        }
    }
BACKPLANE_UNROLL(4)
    for (int r = 0; r < R; ++r)
BACKPLANE_UNROLL(4)
        for (int j = 0; j < C; ++j) {
            const float s = hsum(acc[r][j]);
            std::memcpy(d + static_cast<std::size_t>(j) * ldd + static_cast<std::size_t>(r) * sizeof(float), &s,
                        sizeof s);
        }
}

template <class T, int C>
BACKPLANE_TARGET_AVX2 void mv_rows(const std::byte* a, std::size_t lda, i64 rows, i64 K, const float* b, i64 ldb,
                                     std::byte* d, std::size_t ldd) noexcept {
    constexpr int R = C <= 2 ? 4 : 2; // R * C accumulators + C + 1 of 16 registers
    i64 r = 0;
    for (; r + R <= rows; r += R)
        mv_block<T, R, C>(a + static_cast<std::size_t>(r) * lda, lda, K, b, ldb,
                          d + static_cast<std::size_t>(r) * sizeof(float), ldd);
    for (; r < rows; ++r)
        mv_block<T, 1, C>(a + static_cast<std::size_t>(r) * lda, lda, K, b, ldb,
                          d + static_cast<std::size_t>(r) * sizeof(float), ldd);
}

/// Rows [0, rows) of a against ncols (<= matvec_max_n) columns: row blocks of mv_rows,
/// columns in groups of up to 4; a block's rows come from L2 for every group after the
/// first, so a is streamed from memory once.
template <class T>
BACKPLANE_TARGET_AVX2 void matvec_t(const std::byte* a, std::size_t lda, i64 rows, i64 K, const float* b, i64 ldb, i64 ncols,
                                     std::byte* d, std::size_t ldd) noexcept {
    constexpr i64 block = 32; // rows per block: 32 x K of a stays in L2 for K up to 16 Ki (f32)
    for (i64 r0 = 0; r0 < rows; r0 += block) {
        const i64 nr_ = rows - r0 < block ? rows - r0 : block;
        const std::byte* ar = a + static_cast<std::size_t>(r0) * lda;
        std::byte* dr = d + static_cast<std::size_t>(r0) * sizeof(float);
        for (i64 c0 = 0; c0 < ncols; c0 += 4) {
            const float* bc = b + c0 * ldb;
            std::byte* dc = dr + static_cast<std::size_t>(c0) * ldd;
            switch (ncols - c0) {
            case 1: mv_rows<T, 1>(ar, lda, nr_, K, bc, ldb, dc, ldd); break;
            case 2: mv_rows<T, 2>(ar, lda, nr_, K, bc, ldb, dc, ldd); break;
            case 3: mv_rows<T, 3>(ar, lda, nr_, K, bc, ldb, dc, ldd); break;
            default: mv_rows<T, 4>(ar, lda, nr_, K, bc, ldb, dc, ldd); break;
            }
        }
    }
}

/// The set as the driver sees it (see portable::kernels for the contract of each).
struct kernels {
    static constexpr i64 mr = avx2::mr;
    static constexpr i64 nr = avx2::nr;
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
        const i64 mv = ceil_div(rows, 8);
        ukr_table[static_cast<std::size_t>(mv - 1)][static_cast<std::size_t>(cols - 1)](
            kc, a, b, c, ldc, rows - (mv - 1) * 8, accumulate);
    }
    static void matvec(elem_type t, const std::byte* a, std::size_t lda, i64 rows, i64 K, const float* b, i64 ldb,
                       i64 ncols, std::byte* d, std::size_t ldd) noexcept {
        visit_type(t, [&]<class T>() { matvec_t<T>(a, lda, rows, K, b, ldb, ncols, d, ldd); });
    }
};

} // namespace backplane::cpu::fast::gemm_detail::avx2

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif // BACKPLANE_HAS_X86_KERNELS

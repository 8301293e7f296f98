#pragma once
// The portable kernel set of the fast float mul_mat: plain C++ that GCC and Clang
// vectorise for the baseline target (SSE2 on x86-64), always compiled and always
// tested. Same packed layout as the SIMD sets (see gemm/plan.hpp), with a 16 x 4
// micro-tile held in a local array: at -O2 the inner loops become 4 x 4 SSE
// multiply-adds, about 25 GFLOP/s on one core of the reference machine.
//
// Sources are read through memcpy (any alignment a view produces is fine) and
// converted to f32 while packing.

#include <backplane/core/detail/unroll.hpp>
#include <backplane/backends/cpu/fast/gemm/plan.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

namespace backplane::cpu::fast::gemm_detail::portable {

inline constexpr i64 mr = 16;
inline constexpr i64 nr = 4;
inline constexpr i64 chunk = 256; ///< values converted at a time (a local buffer)

/// n values of type T at p (any alignment) as f32.
template <class T>
inline void to_f32(const std::byte* p, i64 n, float* out) noexcept {
    if constexpr (std::is_same_v<T, float>) {
        std::memcpy(out, p, static_cast<std::size_t>(n) * sizeof(float));
    } else {
        for (i64 i = 0; i < n; ++i) {
            T v;
            std::memcpy(&v, p + static_cast<std::size_t>(i) * sizeof(T), sizeof(T));
            if constexpr (std::is_same_v<T, f16_t>)
                out[i] = f16_to_f32(v);
            else
                out[i] = bf16_to_f32(v);
        }
    }
}

inline void convert(elem_type t, const std::byte* src, i64 n, float* out) noexcept {
    visit_type(t, [&]<class T>() { to_f32<T>(src, n, out); });
}

/// Rows [0, rows) of a (row stride lda bytes), values [k0, k0 + kc), into micro-panels
/// of mr rows: panel p holds out[p * mr * kc + k * mr + i] = a[row p * mr + i][k0 + k],
/// zero past the last row.
inline void pack_a(elem_type t, const std::byte* a, std::size_t lda, i64 rows, i64 k0, i64 kc,
                   float* out) noexcept {
    visit_type(t, [&]<class T>() {
        float buf[chunk];
        for (i64 r0 = 0; r0 < rows; r0 += mr) {
            const i64 pr = std::min(mr, rows - r0);
            for (i64 c0 = 0; c0 < kc; c0 += chunk) {
                const i64 len = std::min(chunk, kc - c0);
                for (i64 i = 0; i < mr; ++i) {
                    float* o = out + c0 * mr + i;
                    if (i >= pr) {
                        for (i64 k = 0; k < len; ++k) o[k * mr] = 0.0f;
                        continue;
                    }
                    to_f32<T>(a + static_cast<std::size_t>(r0 + i) * lda +
                                  static_cast<std::size_t>(k0 + c0) * sizeof(T),
                              len, buf);
                    for (i64 k = 0; k < len; ++k) o[k * mr] = buf[k];
                }
            }
            out += mr * kc;
        }
    });
}

/// One micro-panel of b: cols (<= nr) rows of b, values [k0, k0 + kc), as
/// out[k * nr + j], zero past the last column.
inline void pack_b(elem_type t, const std::byte* b, std::size_t ldb, i64 cols, i64 k0, i64 kc,
                   float* out) noexcept {
    visit_type(t, [&]<class T>() {
        float buf[chunk];
        for (i64 c0 = 0; c0 < kc; c0 += chunk) {
            const i64 len = std::min(chunk, kc - c0);
            for (i64 j = 0; j < nr; ++j) {
                float* o = out + c0 * nr + j;
                if (j >= cols) {
                    for (i64 k = 0; k < len; ++k) o[k * nr] = 0.0f;
                    continue;
                }
                to_f32<T>(b + static_cast<std::size_t>(j) * ldb + static_cast<std::size_t>(k0 + c0) * sizeof(T),
                          len, buf);
                for (i64 k = 0; k < len; ++k) o[k * nr] = buf[k];
            }
        }
    });
}

/// dst tile (rows x cols, rows <= mr, cols <= nr) = (or +=) a-panel * b-panel.
/// c points at dst[m0, n0]; column n of the tile starts ldc bytes after column n - 1.
inline void tile(i64 kc, const float* a, i64 rows, const float* b, i64 cols, std::byte* c, std::size_t ldc,
                 bool accumulate) noexcept {
    float acc[nr][mr] = {};
    for (i64 k = 0; k < kc; ++k) {
        const float* ak = a + k * mr;
        const float* bk = b + k * nr;
BACKPLANE_UNROLL(16)
        for (int j = 0; j < nr; ++j)
BACKPLANE_UNROLL(16)
            for (int i = 0; i < mr; ++i) acc[j][i] += ak[i] * bk[j];
    }
    for (i64 j = 0; j < cols; ++j) {
        std::byte* cj = c + static_cast<std::size_t>(j) * ldc;
        const auto bytes = static_cast<std::size_t>(rows) * sizeof(float);
        if (accumulate) {
            float old[mr];
            std::memcpy(old, cj, bytes);
            for (i64 i = 0; i < rows; ++i) acc[j][i] += old[i];
        }
        std::memcpy(cj, acc[j], bytes);
    }
}

/// dst[r, n] = dot(row r of a, column n of b) for r < rows, n < ncols: f32 products with
/// 8 partial sums per chunk. b's columns are f32, ldb floats apart.
inline void matvec(elem_type t, const std::byte* a, std::size_t lda, i64 rows, i64 K, const float* b, i64 ldb,
                   i64 ncols, std::byte* d, std::size_t ldd) noexcept {
    visit_type(t, [&]<class T>() {
        float abuf[chunk];
        for (i64 r = 0; r < rows; ++r) {
            const std::byte* ar = a + static_cast<std::size_t>(r) * lda;
            float sum[matvec_max_n] = {};
            for (i64 k0 = 0; k0 < K; k0 += chunk) {
                const i64 len = std::min(chunk, K - k0);
                to_f32<T>(ar + static_cast<std::size_t>(k0) * sizeof(T), len, abuf);
                for (i64 n = 0; n < ncols; ++n) {
                    const float* bn = b + n * ldb + k0;
                    float s[8] = {};
                    i64 k = 0;
                    for (; k + 8 <= len; k += 8)
                        for (int j = 0; j < 8; ++j) s[j] += abuf[k + j] * bn[k + j];
                    for (int j = 0; k < len; ++k, ++j) s[j] += abuf[k] * bn[k];
                    sum[n] += ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
                }
            }
            for (i64 n = 0; n < ncols; ++n)
                std::memcpy(d + static_cast<std::size_t>(n) * ldd + static_cast<std::size_t>(r) * sizeof(float),
                            &sum[n], sizeof(float));
        }
    });
}

/// The set as the driver sees it.
struct kernels {
    static constexpr i64 mr = portable::mr;
    static constexpr i64 nr = portable::nr;
    static void convert(elem_type t, const std::byte* s, i64 n, float* o) noexcept { portable::convert(t, s, n, o); }
    static void pack_a(elem_type t, const std::byte* a, std::size_t lda, i64 rows, i64 k0, i64 kc, float* o) noexcept {
        portable::pack_a(t, a, lda, rows, k0, kc, o);
    }
    static void pack_b(elem_type t, const std::byte* b, std::size_t ldb, i64 cols, i64 k0, i64 kc, float* o) noexcept {
        portable::pack_b(t, b, ldb, cols, k0, kc, o);
    }
    static void tile(i64 kc, const float* a, i64 rows, const float* b, i64 cols, std::byte* c, std::size_t ldc,
                     bool accumulate) noexcept {
        portable::tile(kc, a, rows, b, cols, c, ldc, accumulate);
    }
    static void matvec(elem_type t, const std::byte* a, std::size_t lda, i64 rows, i64 K, const float* b, i64 ldb,
                       i64 ncols, std::byte* d, std::size_t ldd) noexcept {
        portable::matvec(t, a, lda, rows, K, b, ldb, ncols, d, ldd);
    }
};

} // namespace backplane::cpu::fast::gemm_detail::portable

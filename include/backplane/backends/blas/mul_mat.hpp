#pragma once
// mul_mat through cblas_sgemm: dst[m, n] = sum_k a[k, m] * b[k, n], a the weights
// [K, M, A2, A3], b [K, N, B2, B3], dst [M, N, B2, B3], a broadcast over b's dims 2 and 3.
//
// Row-major, each matrix is C = B * A^T (as in the CPU backend's fast/gemm/plan.hpp): a
// is M rows of K, b is N rows of K, dst is N rows of M, so one matrix is
//     cblas_sgemm(RowMajor, NoTrans, Trans, N, M, K, 1, b, ldb, a, lda, 0, dst, ldc)
// with the row strides as leading dimensions: padded rows and any dim-2/3 strides are
// used in place. The weight matrices are visited once each, in order; every b matrix
// that reads weight matrix (i02, i03) is multiplied right after it, so f16 / bf16
// weights are converted to f32 once per node and matrix, into the backend's work buffer.
// When b's and dst's rows over dim 2 lie at one stride (a contiguous batch), the r2 =
// B2 / A2 matrices that share a weight matrix are one sgemm with r2 * N rows: a batch
// of vectors against shared weights becomes a matrix product.
//
// The caller has checked blas::supports_op and that every tensor has host data.

#include <backplane/backends/blas/cblas.hpp>
#include <backplane/backends/blas/supports.hpp>
#include <backplane/core/convert.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace backplane::blas::detail {

using i64 = std::int64_t;

/// f32 elements of scratch the node needs: one converted weight matrix (K x M) when the
/// weights are f16 or bf16, nothing for f32 weights or for other ops.
inline std::size_t work_elements(const tensor& node) noexcept {
    const tensor* a = node.src[0];
    if (node.op != op_kind::mul_mat || a == nullptr || a->type == elem_type::f32) return 0;
    return static_cast<std::size_t>(a->ne[0]) * static_cast<std::size_t>(a->ne[1]);
}

/// Values converted per extra thread at least: a thread costs tens of microseconds to
/// start, converting 256K values a few hundred.
inline constexpr i64 convert_per_thread = i64{1} << 18;

/// f16 to f32 for every one of the 65536 bit patterns, made once from core's f16_to_f32
/// (so the same bits): one load per value instead of the scalar conversion's shifts and
/// branches, about 0.4 ns per value against 2.3 (256 KiB, which stays in L2 while a
/// matrix converts). bf16 needs no table: its conversion is a shift.
struct f16_table {
    float value[1u << 16];
    f16_table() noexcept {
        for (std::uint32_t h = 0; h < (1u << 16); ++h) value[h] = f16_to_f32(f16_t{static_cast<std::uint16_t>(h)});
    }
};
inline const f16_table& f16_to_f32_table() noexcept {
    static const f16_table table; // static storage, not the stack
    return table;
}

/// Rows [r0, r1) of weight matrix (i02, i03) of `a`, converted to f32 rows of K values
/// each at dst (dst holds the whole matrix).
inline void convert_rows(const tensor& a, i64 i02, i64 i03, i64 r0, i64 r1, float* dst) noexcept {
    const i64 k = a.ne[0];
    const auto* base = static_cast<const std::byte*>(a.data) + static_cast<std::size_t>(i02) * a.nb[2] +
                       static_cast<std::size_t>(i03) * a.nb[3];
    if (a.type == elem_type::f16) {
        const float* table = f16_to_f32_table().value;
        for (i64 r = r0; r < r1; ++r) {
            const auto* src = reinterpret_cast<const f16_t*>(base + static_cast<std::size_t>(r) * a.nb[1]);
            float* row = dst + r * k;
            for (i64 i = 0; i < k; ++i) row[i] = table[src[i].bits];
        }
        return;
    }
    for (i64 r = r0; r < r1; ++r)
        to_float_row(a.type, base + static_cast<std::size_t>(r) * a.nb[1], dst + r * k, k);
}

/// Weight matrix (i02, i03) of `a` converted to f32 into dst (M rows of K). Big matrices
/// are shared among up to n_threads threads, started for this call as ggml's BLAS
/// backend does (a pool would spin beside the BLAS library's own threads); a thread that
/// cannot be started leaves its rows to the calling thread.
template <class = void>
void convert_matrix(const tensor& a, i64 i02, i64 i03, float* dst, int n_threads) noexcept {
    const i64 m = a.ne[1];
    const i64 nth = std::clamp<i64>(a.ne[0] * m / convert_per_thread, 1, std::min<i64>(n_threads, m));
    if (nth <= 1) {
        convert_rows(a, i02, i03, 0, m, dst);
        return;
    }
    const i64 per = (m + nth - 1) / nth;
    i64 done_by_workers = 0; // rows [per, done_by_workers + per) went to started threads
    std::vector<std::thread> workers;
    try {
        workers.reserve(static_cast<std::size_t>(nth - 1));
        for (i64 t = 1; t < nth; ++t) {
            const i64 r0 = t * per;
            const i64 r1 = std::min(m, r0 + per);
            if (r0 >= r1) break;
            workers.emplace_back([&a, i02, i03, r0, r1, dst] { convert_rows(a, i02, i03, r0, r1, dst); });
            done_by_workers = r1 - per;
        }
    } catch (...) { // no thread (or no memory for one): the rest is done here
    }
    convert_rows(a, i02, i03, 0, per, dst);
    convert_rows(a, i02, i03, per + done_by_workers, m, dst);
    for (std::thread& w : workers) w.join();
}

/// The stride in bytes at which the rows (i1, i2) of one matrix group, i2 in a range of
/// dim 2, follow one another as rows i1 + ne1 * i2 of a single matrix; 0 when they do
/// not (padding between the matrices of dim 2).
constexpr std::size_t merged_row_stride(i64 ne1, std::size_t nb1, std::size_t nb2) noexcept {
    if (ne1 == 1) return nb2;
    return nb2 == static_cast<std::size_t>(ne1) * nb1 ? nb1 : 0;
}

/// Computes the mul_mat `node`. work holds work_elements(node) floats; n_threads is the
/// thread count for the weight conversion (the BLAS library's own is set by the caller).
template <class = void>
void mul_mat(tensor& node, float* work, int n_threads) noexcept {
    const tensor& a = *node.src[0];
    const tensor& b = *node.src[1];
    const i64 k = a.ne[0];
    const i64 m = a.ne[1];
    const i64 n = b.ne[1];
    const i64 r2 = b.ne[2] / a.ne[2];
    const i64 r3 = b.ne[3] / a.ne[3];
    const bool convert = a.type != elem_type::f32;

    // leading dimensions (supports_op checked that they fit an int)
    const int lda = convert ? static_cast<int>(k) : static_cast<int>(leading_dim(m, a.nb[1], sizeof(float), k));
    const int ldb = static_cast<int>(leading_dim(n, b.nb[1], sizeof(float), k));
    const int ldc = static_cast<int>(leading_dim(n, node.nb[1], sizeof(float), m));

    // the r2 matrices of b (and dst) that share a weight matrix, as one sgemm
    const std::size_t sb = merged_row_stride(n, b.nb[1], b.nb[2]);
    const std::size_t sc = merged_row_stride(n, node.nb[1], node.nb[2]);
    const bool merge = r2 > 1 && sb != 0 && sc != 0 && n * r2 <= max_blas_int &&
                       static_cast<i64>(sb / sizeof(float)) >= k && static_cast<i64>(sb / sizeof(float)) <= max_blas_int &&
                       static_cast<i64>(sc / sizeof(float)) >= m && static_cast<i64>(sc / sizeof(float)) <= max_blas_int;

    const auto* a_data = static_cast<const std::byte*>(a.data);
    const auto* b_data = static_cast<const std::byte*>(b.data);
    auto* d_data = static_cast<std::byte*>(node.data);
    const auto b_at = [&](i64 i12, i64 i13) {
        return reinterpret_cast<const float*>(b_data + static_cast<std::size_t>(i12) * b.nb[2] +
                                              static_cast<std::size_t>(i13) * b.nb[3]);
    };
    const auto d_at = [&](i64 i12, i64 i13) {
        return reinterpret_cast<float*>(d_data + static_cast<std::size_t>(i12) * node.nb[2] +
                                        static_cast<std::size_t>(i13) * node.nb[3]);
    };

    for (i64 i03 = 0; i03 < a.ne[3]; ++i03) {
        for (i64 i02 = 0; i02 < a.ne[2]; ++i02) {
            const float* w = nullptr;
            if (convert) {
                convert_matrix(a, i02, i03, work, n_threads);
                w = work;
            } else {
                w = reinterpret_cast<const float*>(a_data + static_cast<std::size_t>(i02) * a.nb[2] +
                                                   static_cast<std::size_t>(i03) * a.nb[3]);
            }
            for (i64 i13 = i03 * r3; i13 < (i03 + 1) * r3; ++i13) {
                const i64 i12_0 = i02 * r2;
                if (merge) {
                    sgemm_b_at(static_cast<int>(n * r2), static_cast<int>(m), static_cast<int>(k), b_at(i12_0, i13),
                               static_cast<int>(sb / sizeof(float)), w, lda, d_at(i12_0, i13),
                               static_cast<int>(sc / sizeof(float)));
                    continue;
                }
                for (i64 i12 = i12_0; i12 < i12_0 + r2; ++i12)
                    sgemm_b_at(static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), b_at(i12, i13), ldb, w,
                               lda, d_at(i12, i13), ldc);
            }
        }
    }
}

} // namespace backplane::blas::detail

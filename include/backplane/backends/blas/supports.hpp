#pragma once
// What the BLAS backend computes: blas::supports_op answers exactly for the product in
// backends/blas/mul_mat.hpp, which hands each matrix of a mul_mat to cblas_sgemm as it
// lies in memory (no copies, except f16 / bf16 weights converted to f32).
//
//   op                              dst    src[0] (weights a)   src[1] (b)
//   ------------------------------  -----  -------------------  ----------
//   none, view, reshape, permute,   (computes nothing)
//   transpose
//   mul_mat                         f32    f32 f16 bf16         f32
//
// mul_mat also needs
//  * a layout sgemm takes directly: rows contiguous (nb[0] == element size) in a, b and
//    dst; every stride a multiple of the element size and the data element-aligned; row
//    strides (sgemm's leading dimensions) at least a row long. Dims 2 and 3 may have any
//    strides (one sgemm per matrix), and a is broadcast over b's dims 2 and 3 as the
//    core mul_mat op defines (b.ne2 a multiple of a.ne2, b.ne3 of a.ne3);
//  * every extent positive and every size sgemm sees within an int;
//  * a product big enough to be worth a BLAS call: dst.ne0 (M), dst.ne1 (N) and the
//    shared length K all at least min_batch (ggml's BLAS backend: 32; a backend
//    parameter here, 0 accepts every size).
// Everything else (other ops, quantized weights, f16 activations, transposed or
// element-strided operands) is refused and stays on the CPU backend.

#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace backplane::blas {

/// ggml's BLAS backend threshold: smaller products run faster on the CPU backend.
inline constexpr int default_min_batch = 32;

namespace detail {

/// Row stride, in elements, of a matrix of `rows` rows whose rows are `stride` bytes
/// apart (sgemm's leading dimension): any value at least `row` serves a single row.
constexpr std::int64_t leading_dim(std::int64_t rows, std::size_t stride, std::size_t elem, std::int64_t row) noexcept {
    return rows > 1 ? static_cast<std::int64_t>(stride / elem) : row;
}

/// The layout checks shared by a, b and dst: rows contiguous, strides in whole elements,
/// data element-aligned, rows not overlapping in one matrix, sizes within an int.
/// Returns the reason for a refusal, or an empty view.
inline std::string_view layout_refusal(const tensor& t, std::int64_t row) noexcept {
    const std::size_t elem = type_size(t.type);
    if (t.nb[0] != elem) return "rows are not contiguous (nb[0] must be the element size)";
    if (t.nb[1] % elem != 0 || t.nb[2] % elem != 0 || t.nb[3] % elem != 0 || t.view_offs % elem != 0 ||
        reinterpret_cast<std::uintptr_t>(t.data) % elem != 0)
        return "strides or data are not element-aligned";
    const std::int64_t ld = leading_dim(t.ne[1], t.nb[1], elem, row);
    if (ld < row) return "rows overlap (nb[1] is shorter than a row)";
    if (t.ne[0] > INT_MAX || t.ne[1] > INT_MAX || ld > INT_MAX) return "too large for the BLAS library's int sizes";
    return {};
}

/// Why the BLAS backend cannot compute t with this min_batch; empty when it can.
inline std::string_view refusal(const tensor& t, std::int64_t min_batch) noexcept {
    if (t.op == op_kind::none || is_view_op(t.op)) return {}; // computes nothing
    if (t.op != op_kind::mul_mat) return "the BLAS backend computes mul_mat only";
    const tensor* a = t.src[0];
    const tensor* b = t.src[1];
    if (a == nullptr || b == nullptr) return "mul_mat needs two sources";
    if (a->type != elem_type::f32 && a->type != elem_type::f16 && a->type != elem_type::bf16)
        return "the weights (src[0]) must be f32, f16 or bf16";
    if (b->type != elem_type::f32) return "src[1] must be f32";
    if (t.type != elem_type::f32) return "the result must be f32";
    for (std::size_t i = 0; i < max_dims; ++i)
        if (a->ne[i] <= 0 || b->ne[i] <= 0) return "an extent is empty";
    if (a->ne[0] != b->ne[0] || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0 || t.ne[0] != a->ne[1] ||
        t.ne[1] != b->ne[1] || t.ne[2] != b->ne[2] || t.ne[3] != b->ne[3])
        return "the shapes do not form a mul_mat";
    const std::int64_t k = a->ne[0];
    if (t.ne[0] < min_batch || t.ne[1] < min_batch || k < min_batch)
        return "smaller than min_batch (dst.ne0, dst.ne1 and K must all reach it)";
    if (auto why = layout_refusal(*a, k); !why.empty()) return why;
    if (auto why = layout_refusal(*b, k); !why.empty()) return why;
    if (auto why = layout_refusal(t, t.ne[0]); !why.empty()) return why;
    return {};
}

} // namespace detail

/// True when the BLAS backend computes t correctly, for a backend with this min_batch
/// (see the table above). View ops and leafs are true: they compute nothing.
inline bool supports_op(const tensor& t, std::int64_t min_batch = default_min_batch) noexcept {
    return detail::refusal(t, min_batch).empty();
}

} // namespace backplane::blas

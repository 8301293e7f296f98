#pragma once
// What the CPU backend computes: cpu::supports_op answers exactly for the kernels in
// backends/cpu/kernels/. Any layout (byte strides, views, permutations, broadcasting) is
// supported; the answer depends on the op and the element types only, plus the shape
// relations the graph builders already guarantee (a node assembled by hand that breaks
// them is refused instead of computed out of bounds).
//
//   op                              dst              src[0]                   src[1]
//   ------------------------------  ---------------  -----------------------  ------------------
//   none, view, reshape, permute,   (computes nothing)
//   transpose
//   dup, cont, cpy                  f32 f16 bf16     f32 f16 bf16             (cpy: the target,
//                                   q8_0 q4_0        q8_0 q4_0  (any pair)     dst's memory)
//                                   i32              i32
//   add, sub, mul, div              = src[0]         f32 f16 bf16             f32 f16 bf16 (any)
//   scale, sqr, sqrt, silu, gelu,   = src[0]         f32 f16 bf16
//   relu
//   sum_rows                        f32              f32 f16 bf16
//   argmax                          i32              f32 f16 bf16
//   norm, rms_norm                  f32              f32
//   soft_max                        f32              f32                      none, f32, f16 mask
//   mul_mat                         f32              f32 f16 bf16 q8_0 q4_0   f32 f16 bf16
//   get_rows                        f32              f32 f16 bf16 q8_0 q4_0   i32 indices
//                                   i32              i32                      i32 indices
//   rope (normal, neox)             = src[0]         f32 f16                  i32 positions
//   concat                          = src[0]         f32 f16 bf16 i32         = src[0]
//
// This is everything the graph builders accept: no valid graph is refused by the CPU.

#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <array>
#include <cstdint>

namespace backplane::cpu {

namespace detail {

constexpr bool is_f32_f16_bf16(elem_type t) noexcept {
    return t == elem_type::f32 || t == elem_type::f16 || t == elem_type::bf16;
}
constexpr bool is_real(elem_type t) noexcept {
    return is_f32_f16_bf16(t) || is_quantized(t);
}

/// Equal extents (std::array's == calls memcmp, which shows when checking big graphs).
constexpr bool same_ne(const tensor& x, const tensor& y) noexcept {
    return x.ne[0] == y.ne[0] && x.ne[1] == y.ne[1] && x.ne[2] == y.ne[2] && x.ne[3] == y.ne[3];
}

/// t's extents are (n0, n1, n2, n3) (no memcmp: this runs per node of big graphs).
constexpr bool ne_is(const tensor& t, std::int64_t n0, std::int64_t n1, std::int64_t n2, std::int64_t n3) noexcept {
    return t.ne[0] == n0 && t.ne[1] == n1 && t.ne[2] == n2 && t.ne[3] == n3;
}

/// n is a multiple of d > 0, without a 64-bit division in the usual cases (d is 1 or n):
/// checking a big graph is dominated by those divisions otherwise.
constexpr bool multiple_of(std::int64_t n, std::int64_t d) noexcept {
    return d == 1 || n == d || n % d == 0;
}

/// Quantized rows hold whole blocks.
inline bool whole_blocks(const tensor& t) noexcept {
    return multiple_of(t.ne[0], block_size(t.type));
}

inline bool supports_copy(const tensor& t, const tensor& src) noexcept {
    const bool ints = t.type == elem_type::i32;
    if (ints != (src.type == elem_type::i32))
        return false; // i32 copies only to i32
    if (!ints && (!is_real(t.type) || !is_real(src.type)))
        return false;
    return src.nelements() == t.nelements() && whole_blocks(t) && whole_blocks(src);
}

/// can_repeat(b, a) (core/tensor.hpp), without a division for the usual extents (equal
/// or 1): checking a graph of many small nodes is dominated by those divisions.
inline bool repeats(const tensor& b, const tensor& a) noexcept {
    if (b.nelements() == 0) return a.nelements() == 0; // empty broadcasts only to empty
    for (std::size_t i = 0; i < max_dims; ++i) {
        const std::int64_t nb = b.ne[i];
        const std::int64_t na = a.ne[i];
        if (nb == 1 || (nb == na && nb > 0)) continue;
        if (nb <= 0 || na % nb != 0) return false;
    }
    return true;
}

inline bool supports_binary(const tensor& t, const tensor& a, const tensor& b) noexcept {
    return is_f32_f16_bf16(a.type) && is_f32_f16_bf16(b.type) && t.type == a.type && same_ne(t, a) &&
           repeats(b, a);
}

inline bool supports_mul_mat(const tensor& t, const tensor& a, const tensor& b) noexcept {
    return is_real(a.type) && whole_blocks(a) && is_f32_f16_bf16(b.type) &&
           t.type == elem_type::f32 && a.ne[0] == b.ne[0] && a.ne[2] > 0 && a.ne[3] > 0 &&
           multiple_of(b.ne[2], a.ne[2]) && multiple_of(b.ne[3], a.ne[3]) &&
           ne_is(t, a.ne[1], b.ne[1], b.ne[2], b.ne[3]);
}

inline bool supports_get_rows(const tensor& t, const tensor& a, const tensor& idx) noexcept {
    const bool ints = a.type == elem_type::i32;
    return (ints || is_real(a.type)) && whole_blocks(a) && idx.type == elem_type::i32 &&
           t.type == (ints ? elem_type::i32 : elem_type::f32) && idx.ne[1] == a.ne[2] &&
           idx.ne[2] == a.ne[3] && idx.ne[3] == 1 &&
           ne_is(t, a.ne[0], idx.ne[0], idx.ne[1], idx.ne[2]);
}

inline bool supports_soft_max(const tensor& t, const tensor& a, const tensor* mask) noexcept {
    if (a.type != elem_type::f32 || t.type != elem_type::f32 || !same_ne(t, a))
        return false;
    if (mask == nullptr)
        return true;
    return (mask->type == elem_type::f32 || mask->type == elem_type::f16) &&
           mask->ne[0] == a.ne[0] && mask->ne[1] >= a.ne[1] && mask->ne[2] > 0 && mask->ne[3] > 0 &&
           multiple_of(a.ne[2], mask->ne[2]) && multiple_of(a.ne[3], mask->ne[3]);
}

inline bool supports_rope(const tensor& t, const tensor& a, const tensor& pos) noexcept {
    const std::int32_t n_dims = t.param<std::int32_t>(0);
    const std::int32_t mode = t.param<std::int32_t>(1);
    return (a.type == elem_type::f32 || a.type == elem_type::f16) && t.type == a.type &&
           same_ne(t, a) && pos.type == elem_type::i32 && pos.ne[0] >= a.ne[2] && n_dims > 0 &&
           n_dims % 2 == 0 && n_dims <= a.ne[0] &&
           (mode == static_cast<std::int32_t>(rope_mode::normal) ||
            mode == static_cast<std::int32_t>(rope_mode::neox));
}

inline bool supports_concat(const tensor& t, const tensor& a, const tensor& b) noexcept {
    const std::int32_t dim = t.param<std::int32_t>(0);
    if (dim < 0 || dim >= max_dims)
        return false;
    if (a.type != b.type || t.type != a.type || is_quantized(a.type))
        return false;
    for (std::size_t i = 0; i < max_dims; ++i) {
        const std::int64_t want = static_cast<int>(i) == dim ? a.ne[i] + b.ne[i] : a.ne[i];
        if (t.ne[i] != want || (static_cast<int>(i) != dim && b.ne[i] != a.ne[i]))
            return false;
    }
    return true;
}

} // namespace detail

/// True when compute_forward computes t (its op, with its element types) correctly.
inline bool supports_op(const tensor& t) noexcept {
    const tensor* a = t.src[0];
    const tensor* b = t.src[1];
    switch (t.op) {
    case op_kind::none:
    case op_kind::view:
    case op_kind::reshape:
    case op_kind::permute:
    case op_kind::transpose:
        return true;
    case op_kind::dup:
    case op_kind::cont:
    case op_kind::cpy:
        return a != nullptr && detail::supports_copy(t, *a);
    case op_kind::add:
    case op_kind::sub:
    case op_kind::mul:
    case op_kind::div:
        return a != nullptr && b != nullptr && detail::supports_binary(t, *a, *b);
    case op_kind::scale:
    case op_kind::sqr:
    case op_kind::sqrt:
    case op_kind::silu:
    case op_kind::gelu:
    case op_kind::relu:
        return a != nullptr && detail::is_f32_f16_bf16(a->type) && t.type == a->type &&
               detail::same_ne(t, *a);
    case op_kind::sum_rows:
        return a != nullptr && detail::is_f32_f16_bf16(a->type) && t.type == elem_type::f32 &&
               detail::ne_is(t, 1, a->ne[1], a->ne[2], a->ne[3]);
    case op_kind::argmax:
        return a != nullptr && detail::is_f32_f16_bf16(a->type) && t.type == elem_type::i32 &&
               detail::ne_is(t, a->ne[1], a->ne[2], a->ne[3], 1);
    case op_kind::norm:
    case op_kind::rms_norm:
        return a != nullptr && a->type == elem_type::f32 && t.type == elem_type::f32 &&
               detail::same_ne(t, *a);
    case op_kind::soft_max:
        return a != nullptr && detail::supports_soft_max(t, *a, b);
    case op_kind::mul_mat:
        return a != nullptr && b != nullptr && detail::supports_mul_mat(t, *a, *b);
    case op_kind::get_rows:
        return a != nullptr && b != nullptr && detail::supports_get_rows(t, *a, *b);
    case op_kind::rope:
        return a != nullptr && b != nullptr && detail::supports_rope(t, *a, *b);
    case op_kind::concat:
        return a != nullptr && b != nullptr && detail::supports_concat(t, *a, *b);
    }
    return false;
}

} // namespace backplane::cpu

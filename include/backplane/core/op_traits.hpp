#pragma once
// What each op is, in one place: a row per op_kind with everything generic about it: its
// name, its sources, its parameters, whether it computes anything, whether its result may
// take its first source's memory, the family of work it is, and its rule (the element
// types, shapes, layouts and parameters for which the op is defined). Whatever asks one of
// these questions reads the row: the graph builders (which refuse an undefined node), the
// graph allocator, the cost model, the backends. A backend narrows the answers (what it
// computes); it never restates them. Adding an op: docs/adding-an-op.md.
//
// The rules, by op (element types; "= a" means the type of src[0]):
//
//   op                              result           src[0] (a)               src[1]
//   ------------------------------  ---------------  -----------------------  ------------------
//   none, view, reshape, permute,   (computes nothing)
//   transpose
//   dup, cont, cpy                  f32 f16 bf16     f32 f16 bf16             (cpy: the target,
//                                   quantized        quantized  (any pair)     the result's memory)
//                                   i32, i64         the same type
//   add, sub, mul, div              = a              f32 f16 bf16             f32 f16 bf16, broadcast
//   scale, sqr, sqrt, silu, gelu,   = a              f32 f16 bf16
//   relu, neg, abs, sgn, step, tanh,
//   sigmoid, exp, log, sin, cos, elu,
//   hardsigmoid, hardswish, softplus,
//   gelu_erf, gelu_quick, leaky_relu,
//   clamp
//   sum_rows, mean                  f32              f32 f16 bf16
//   sum                             = a (1 element)  f32 f16 bf16
//   argmax, argsort, top_k          i32              f32 f16 bf16
//   norm, rms_norm, l2_norm,        f32              f32
//   group_norm
//   repeat                          = a              f32 f16 bf16 i32
//   repeat_back, cumsum, tri, diag  f32              f32
//   timestep_embedding              f32 [dim, N]     f32 [N] (timesteps)
//   out_prod                        f32              f32 quantized (not     f32
//                                                    q8_K, not transposed)
//   count_equal                     i64 (1 element)  i32                      i32, a's shape
//   acc                             f32              f32, contiguous          f32 (in a's view)
//   soft_max                        f32              f32                      none, f32, f16 mask
//                                                                             (src[2]: f32 sinks)
//   mul_mat                         f32              f32 f16 bf16 quantized   f32 f16 bf16
//   get_rows                        f32 (i32)        f32 f16 bf16 quantized   i32 indices
//                                                    (i32)
//   rope (normal, neox, mrope,      = a              f32 f16                  i32 positions
//   vision, imrope)                                                           (src[2]: f32 freq
//                                                                              factors)
//   concat                          = a              any type (quantized:     = a
//                                                    contiguous rows)
//   glu (every function)            = a              f32 f16 bf16             none, or = a (split)
//   set_rows (b, idx, a)            = a: f32 f16     f32 f16 bf16 (b, the     i32 or i64 row
//                                   bf16 quantized   rows written)            numbers (idx)
//   pad                             = a              f32 f16 bf16
//   mul_mat_id (as, b, ids)         f32              f32 f16 bf16 quantized   f32 f16 bf16 (b);
//                                                    (as: the experts)        i32 ids (src[2])
//   add_id (a, b, ids)              f32              f32                      f32 (b: a row per
//                                                                             expert); i32 ids
//   arange                          f32              (no source)
//   flash_attn_ext (q, k, v, mask,  f32              f32 (q)                  f32 f16 bf16 q8_0 q4_0
//   sinks)                                                                    (k; v at src[2] the
//                                                                             same set); f16 mask,
//                                                                             f32 sinks (src[3, 4])
//   im2col (kernel, input)          f32 f16          f32 f16 (the kernel:     f32 f16 (the input)
//                                                    extents only)
//   conv_2d (kernel, input)         f32              f32 f16 (the kernel)     f32 (the input)
//   pool_1d, pool_2d                f32              f32 f16
//   upscale                         f32              f32
//   pad_reflect_1d, roll            = a              f32 f16 bf16
//   conv_transpose_1d,              f32              f32 f16 (the kernel)     f32 (the input)
//   conv_transpose_2d (kernel,
//   input)
//   conv_2d_dw (kernel, input)      f32              f32 (the kernel)         f32 (the input)
//   win_part, win_unpart            f32              f32
//   get_rel_pos                     f16              f16
//   ssm_conv (sx, c)                f32 [d_inner,    f32 [d_conv - 1 + n_t,   f32 [d_conv, d_inner]
//                                   n_t, n_s]        d_inner, n_s]            (c)
//   ssm_scan (s, x, dt, A, B, C,    f32 (y, then     f32 (s: the states,      f32 (x); dt, A, B,
//   ids)                            the states)      contiguous)              C f32; ids i32
//   gated_linear_attn (k, v, q, g,  f32 [S * H,      f32 [S, H, T] (k; v,     the state: f32
//   state), rwkv_wkv6 (k, v, r,     T + S * n_seqs]  q, g, r, tf, td, w, a,   [S * S * H, n_seqs];
//   tf, td, state), rwkv_wkv7 (r,   (y, then the     b the same), every       all contiguous
//   w, k, v, a, b, state)           states)          operand contiguous       (tf: S * H values)
//
// "quantized" is every quantized type (q8_0, q4_0, q4_1, q5_0, q5_1, q2_K ... q6_K, q8_K,
// iq4_nl, mxfp4, iq4_xs, iq3_xxs, iq3_s, iq2_xxs, iq2_xs, iq2_s, iq1_s, iq1_m, tq1_0,
// tq2_0); flash_attn_ext's k and v take q8_0 and q4_0 of them, the KV-cache types. As a
// result (cpy from another type, set_rows' destination) only those f32 converts into
// (converts_from_float: not iq3_xxs ... iq1_m, as ggml's CPU has no from_float for them).
//
// Any layout is allowed (byte strides, views, permutations), except that quantized
// operands keep their rows' blocks contiguous, mul_mat's weights are not transposed, and
// glu's and flash_attn_ext's operands have contiguous rows (ggml_is_contiguous_1; other
// strides are free) and flash_attn_ext's mask is contiguous.

#include <backplane/core/conv_geometry.hpp>
#include <backplane/core/image_params.hpp>
#include <backplane/core/acc_view.hpp>
#include <backplane/core/op_kind.hpp>
#include <backplane/core/rope_functions.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace backplane {

/// The kind of work an op is (the cost model prices each family by its own rate).
enum class op_family : std::uint8_t {
    none,        ///< computes nothing: leafs and views
    mul_mat,     ///< matrix products (and attention, flash_attn_ext, conv_2d): compute- or weight-bound
    elementwise, ///< each result element from the same elements of the sources: memory-bound
    rows,        ///< reductions and per-row transforms: norms, soft_max, rope, sum_rows, sum, mean,
                 ///< argmax, argsort, top_k, pooling
    data,        ///< data movement: copies, cont, get_rows, concat, add_id, im2col
};

/// Why `node` is not an instance of its op that the op defines: empty when it is. The
/// node's required sources are set (is_defined checks the arity first).
using op_rule = std::string_view (*)(const tensor& node) noexcept;

/// The generic facts of one op.
struct op_traits {
    std::string_view name; ///< as ggml names the op (lower case)
    std::uint8_t min_srcs; ///< sources that must be set (src[0] .. src[min_srcs - 1])
    std::uint8_t max_srcs; ///< sources it may have; those past min_srcs are optional
    std::uint8_t n_params; ///< op_params slots it reads
    bool view;             ///< reinterprets src[0]'s memory: computes nothing
    bool inplace;          ///< its result may be written over src[0] (same layout, last reader)
    op_family family;
    op_rule rule;          ///< the types, shapes, layouts and parameters it is defined for
    bool copy = false;     ///< copies src[0]'s elements, in order, into the result's type and layout
};

// ---------------------------------------------------------------------------------------
// The rules. Each reads one node; the graph builders call them on the node they are about
// to make and throw with the reason, the backends ask them before their own narrowing.

namespace op_rules {

/// f32, f16 or bf16: the types arithmetic reads and writes.
constexpr bool float_type(elem_type t) noexcept {
    return t == elem_type::f32 || t == elem_type::f16 || t == elem_type::bf16;
}
/// A float or quantized type: what holds real numbers.
constexpr bool real_type(elem_type t) noexcept { return float_type(t) || is_quantized(t); }
/// i32 or i64: what holds indices.
constexpr bool index_type(elem_type t) noexcept { return t == elem_type::i32 || t == elem_type::i64; }

/// Equal extents (std::array's == calls memcmp, which shows when checking big graphs).
constexpr bool same_ne(const tensor& x, const tensor& y) noexcept {
    return x.ne[0] == y.ne[0] && x.ne[1] == y.ne[1] && x.ne[2] == y.ne[2] && x.ne[3] == y.ne[3];
}
/// t's extents are (n0, n1, n2, n3).
constexpr bool ne_is(const tensor& t, std::int64_t n0, std::int64_t n1, std::int64_t n2, std::int64_t n3) noexcept {
    return t.ne[0] == n0 && t.ne[1] == n1 && t.ne[2] == n2 && t.ne[3] == n3;
}
/// n is a multiple of d > 0, without a 64-bit division in the usual cases (d is 1 or n):
/// checking a big graph is dominated by those divisions otherwise.
constexpr bool multiple_of(std::int64_t n, std::int64_t d) noexcept { return d == 1 || n == d || (d > 0 && n % d == 0); }

/// Quantized rows hold whole blocks, contiguous.
inline bool whole_blocks(const tensor& t) noexcept {
    return !is_quantized(t.type) || (multiple_of(t.ne[0], block_size(t.type)) && t.rows_contiguous());
}

/// b broadcasts to a's shape (ggml's repeat rule): each of a's extents a multiple of b's.
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

inline bool finite_param(const tensor& t, std::size_t i) noexcept { return std::isfinite(t.param<float>(i)); }

inline std::string_view leaf(const tensor&) noexcept { return {}; }

inline std::string_view view(const tensor& t) noexcept {
    return t.type == t.src[0]->type ? std::string_view{} : "a view has its source's type";
}

inline std::string_view copy(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    if (index_type(a.type) || index_type(t.type)) {
        if (a.type != t.type) return "i32 and i64 copy only to their own type";
    } else if (!real_type(a.type) || !real_type(t.type)) {
        return "no conversion between these types";
    }
    if (a.nelements() != t.nelements()) return "a and the result must have the same number of elements";
    if (!whole_blocks(a)) return "a quantized source must have contiguous rows of whole blocks";
    if (is_quantized(t.type) && !t.is_contiguous()) return "a quantized destination must be contiguous";
    if (a.type != t.type && !converts_from_float(t.type)) return "f32 does not convert into the result's type";
    return {};
}

inline std::string_view binary(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const tensor& b = *t.src[1];
    if (!float_type(a.type) || !float_type(b.type)) return "operands must be f32, f16 or bf16";
    if (t.type != a.type || !same_ne(t, a)) return "the result has a's type and shape";
    if (!repeats(b, a)) return "cannot broadcast b to a's shape (each extent of a must be a multiple of b's)";
    return {};
}

inline std::string_view unary(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    if (!float_type(a.type)) return "operand must be f32, f16 or bf16";
    if (t.type != a.type || !same_ne(t, a)) return "the result has a's type and shape";
    return {};
}

inline std::string_view sum_rows(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    if (!float_type(a.type)) return "operand must be f32, f16 or bf16";
    if (t.type != elem_type::f32 || !ne_is(t, 1, a.ne[1], a.ne[2], a.ne[3])) return "the result is f32 [1, a.ne1, a.ne2, a.ne3]";
    return {};
}

/// sum: one element of a's type.
inline std::string_view sum(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    if (!float_type(a.type)) return "operand must be f32, f16 or bf16";
    if (t.type != a.type || !ne_is(t, 1, 1, 1, 1)) return "the result is one element of a's type";
    return {};
}

/// mean: as sum_rows, rows not empty (a mean of nothing is undefined).
inline std::string_view mean(const tensor& t) noexcept {
    if (t.src[0]->ne[0] == 0) return "rows are empty";
    return sum_rows(t);
}

/// The longest rows argsort and top_k sort: their indices are i32.
inline constexpr std::int64_t max_sort_row = 0x7fffffff;

/// argsort (order in param 0) and top_k (k = the result's ne0, at most a.ne0).
inline std::string_view sort_rows(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    if (!float_type(a.type)) return "operand must be f32, f16 or bf16";
    if (a.ne[0] > max_sort_row) return "rows are longer than i32 indices reach";
    if (t.type != elem_type::i32) return "the result is i32";
    if (t.op == op_kind::argsort) {
        if (!same_ne(t, a)) return "the result has a's shape";
        const std::int32_t order = t.param<std::int32_t>(0);
        if (order != static_cast<std::int32_t>(sort_order::asc) && order != static_cast<std::int32_t>(sort_order::desc))
            return "unknown sort order";
        return {};
    }
    if (t.ne[0] < 1 || t.ne[0] > a.ne[0]) return "k must be at least 1 and at most a.ne0";
    if (!ne_is(t, t.ne[0], a.ne[1], a.ne[2], a.ne[3])) return "the result is i32 [k, a.ne1, a.ne2, a.ne3]";
    return {};
}

inline std::string_view argmax(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    if (!float_type(a.type)) return "operand must be f32, f16 or bf16";
    if (a.ne[0] == 0) return "rows are empty";
    if (t.type != elem_type::i32 || !ne_is(t, a.ne[1], a.ne[2], a.ne[3], 1)) return "the result is i32 [a.ne1, a.ne2, a.ne3]";
    return {};
}

/// An f32 operand and a result of its type and shape.
inline std::string_view f32_like_a(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    if (a.type != elem_type::f32) return "operand must be f32";
    if (t.type != elem_type::f32 || !same_ne(t, a)) return "the result has a's type and shape";
    return {};
}

/// A norm's operand and result (f32, of a's shape) and its eps, in param eps_slot
/// (finite and non-negative, as ggml asserts for norm, rms_norm and l2_norm).
inline std::string_view norm_operands(const tensor& t, std::size_t eps_slot) noexcept {
    if (const std::string_view why = f32_like_a(t); !why.empty()) return why;
    const float eps = t.param<float>(eps_slot);
    return eps >= 0.0f && std::isfinite(eps) ? std::string_view{} : "eps must be finite and non-negative";
}

/// norm, rms_norm, l2_norm: eps in param 0.
inline std::string_view row_norm(const tensor& t) noexcept { return norm_operands(t, 0); }

/// group_norm: n_groups (param 0) at least 1, eps in param 1.
inline std::string_view group_norm(const tensor& t) noexcept {
    if (t.param<std::int32_t>(0) < 1) return "n_groups must be at least 1";
    return norm_operands(t, 1);
}

/// repeat: a (f32, f16, bf16, i32) tiled; the result of a's type, each extent a
/// multiple of a's.
inline std::string_view repeat(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    if (!float_type(a.type) && a.type != elem_type::i32) return "operand must be f32, f16, bf16 or i32";
    if (t.type != a.type) return "the result has a's type";
    if (t.ne[0] < 0 || t.ne[1] < 0 || t.ne[2] < 0 || t.ne[3] < 0 || !repeats(a, t))
        return "each extent of the result must be a multiple of a's";
    return {};
}

/// repeat_back: f32 a summed down to an f32 result, each extent of which divides a's.
inline std::string_view repeat_back(const tensor& t) noexcept {
    if (t.src[0]->type != elem_type::f32 || t.type != elem_type::f32) return "operand and result must be f32";
    if (!repeats(t, *t.src[0])) return "each extent of a must be a multiple of the result's";
    return {};
}

/// tri: f32 square matrices (ne0 == ne1), a tri_type in param 0.
inline std::string_view tri(const tensor& t) noexcept {
    if (const std::string_view why = f32_like_a(t); !why.empty()) return why;
    if (t.src[0]->ne[0] != t.src[0]->ne[1]) return "a's matrices must be square (ne0 == ne1)";
    const std::int32_t type = t.param<std::int32_t>(0);
    return type >= 0 && type <= 3 ? std::string_view{} : "unknown tri type";
}

/// The longest vector diag spreads (its result has ne0^2 elements per matrix).
inline constexpr std::int64_t max_diag = std::int64_t{1} << 30;

/// diag: f32 a [n, 1, ne2, ne3], the result f32 [n, n, ne2, ne3].
inline std::string_view diag(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    if (a.type != elem_type::f32) return "operand must be f32";
    if (a.ne[1] != 1) return "a must hold one vector per matrix (ne1 == 1)";
    if (a.ne[0] > max_diag) return "a is too long for a square result";
    if (t.type != elem_type::f32 || !ne_is(t, a.ne[0], a.ne[0], a.ne[2], a.ne[3]))
        return "the result is f32 [a.ne0, a.ne0, a.ne2, a.ne3]";
    return {};
}

/// timestep_embedding: f32 timesteps [N], dim (param 0) and max_period (param 1) at least
/// 1; the result f32 [dim, N].
inline std::string_view timestep_embedding(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    if (a.type != elem_type::f32 || a.ne[1] != 1 || a.ne[2] != 1 || a.ne[3] != 1) return "timesteps must be an f32 vector";
    const std::int32_t dim = t.param<std::int32_t>(0);
    if (dim < 1 || t.param<std::int32_t>(1) < 1) return "dim and max_period must be at least 1";
    if (t.type != elem_type::f32 || !ne_is(t, dim, a.ne[0], 1, 1)) return "the result is f32 [dim, N]";
    return {};
}

/// ssm_conv: sx f32 [d_conv - 1 + n_t, d_inner, n_s] (n_t >= 1), c f32 [d_conv, d_inner];
/// the result f32 [d_inner, n_t, n_s]. Any layout (ggml's CPU: unit-stride rows of sx and c).
inline std::string_view ssm_conv(const tensor& t) noexcept {
    const tensor& sx = *t.src[0];
    const tensor& c = *t.src[1];
    if (sx.type != elem_type::f32 || c.type != elem_type::f32) return "sx and c must be f32";
    if (sx.ne[3] != 1) return "sx must be 3-D [d_conv - 1 + n_t, d_inner, n_s]";
    if (c.ne[2] != 1 || c.ne[3] != 1) return "c must be a matrix [d_conv, d_inner]";
    if (sx.ne[1] != c.ne[1]) return "sx and c must have the same d_inner (ne1)";
    if (sx.ne[0] < c.ne[0]) return "sx must hold d_conv - 1 + n_t columns, n_t at least 1";
    if (t.type != elem_type::f32 || !ne_is(t, c.ne[1], sx.ne[0] - c.ne[0] + 1, sx.ne[2], 1))
        return "the result is f32 [d_inner, n_t, n_s]";
    return {};
}

/// ssm_scan: s f32 [d_state, head_dim, n_head, n_rs] contiguous (the states, n_rs >= the
/// states ids picks), x f32 [head_dim, n_head, n_t, n_s], dt f32 [n_head, n_t, n_s]
/// contiguous, A f32 [d_state, n_head] (Mamba-1) or [1, n_head] (Mamba-2) contiguous, B and
/// C f32 [d_state, n_group, n_t, n_s] (n_head a multiple of n_group), ids i32 [n_s]; x, B
/// and C with contiguous dims 0 and 1 (as ggml asks). The result f32 [head_dim * n_head *
/// n_t * n_s + d_state * head_dim * n_head * n_s]: y, then the final states.
inline std::string_view ssm_scan(const tensor& t) noexcept {
    const tensor& s = *t.src[0];
    const tensor& x = *t.src[1];
    const tensor& dt = *t.src[2];
    const tensor& A = *t.src[3];
    const tensor& B = *t.src[4];
    const tensor& C = *t.src[5];
    const tensor& ids = *t.src[6];
    for (const tensor* f : {&s, &x, &dt, &A, &B, &C})
        if (f->type != elem_type::f32) return "s, x, dt, A, B and C must be f32";
    if (ids.type != elem_type::i32) return "ids must be i32";
    if (!s.is_contiguous() || !dt.is_contiguous() || !A.is_contiguous()) return "s, dt and A must be contiguous";
    const auto rows_packed = [](const tensor& v) { return v.rows_contiguous() && (v.ne[1] == 1 || v.nb[1] == v.nb[0] * static_cast<std::size_t>(v.ne[0])); };
    if (!rows_packed(x) || !rows_packed(B) || !rows_packed(C)) return "x, B and C must have contiguous dims 0 and 1";
    const std::int64_t d_state = s.ne[0], head_dim = x.ne[0], n_head = x.ne[1], n_t = x.ne[2], n_s = x.ne[3];
    if (s.ne[1] != head_dim || s.ne[2] != n_head) return "s must be [d_state, x.ne0 (head_dim), x.ne1 (n_head), n_rs]";
    if (!ne_is(dt, n_head, n_t, n_s, 1)) return "dt must be [n_head, n_t, n_s] (x.ne1, x.ne2, x.ne3)";
    if (A.ne[1] != n_head || A.ne[2] != 1 || A.ne[3] != 1 || (A.ne[0] != 1 && A.ne[0] != d_state))
        return "A must be [d_state, n_head] (Mamba-1) or [1, n_head] (Mamba-2)";
    if (!same_ne(B, C)) return "B and C must have the same shape";
    if (B.ne[0] != d_state || B.ne[2] != n_t || B.ne[3] != n_s) return "B and C must be [d_state, n_group, n_t, n_s]";
    if (!multiple_of(n_head, B.ne[1])) return "n_head (x.ne1) must be a multiple of n_group (B.ne1)";
    if (!ne_is(ids, n_s, 1, 1, 1)) return "ids must be an i32 vector of n_s (x.ne3) state numbers";
    if (t.type != elem_type::f32 || !ne_is(t, x.nelements() + d_state * head_dim * n_head * n_s, 1, 1, 1))
        return "the result is f32 [x's elements + d_state * head_dim * n_head * n_s]";
    return {};
}

/// The linear-attention recurrences (gated_linear_attn, rwkv_wkv6, rwkv_wkv7): every
/// source f32 and contiguous; the per-token ones [S, H, T] (k's extents, ne3 1), rwkv_wkv6's
/// tf S * H values (one per channel of each head), the state (the last source) with ne1
/// n_seqs and S * S * H * n_seqs values, T a multiple of n_seqs (each sequence's tokens
/// are consecutive); the result f32 [S * H, T + S * n_seqs]: y, then the final states.
inline std::string_view linear_attention(const tensor& t) noexcept {
    const std::size_t n = static_cast<std::size_t>(t.op == op_kind::gated_linear_attn ? 5 : t.op == op_kind::rwkv_wkv6 ? 6 : 7);
    const std::size_t k_at = t.op == op_kind::rwkv_wkv7 ? 2 : 0; // whose extents are S, H, T
    const tensor& k = *t.src[k_at];
    const tensor& state = *t.src[n - 1];
    for (std::size_t j = 0; j < n; ++j)
        if (t.src[j]->type != elem_type::f32 || !t.src[j]->is_contiguous()) return "every operand must be f32 and contiguous";
    const std::int64_t S = k.ne[0], H = k.ne[1], T = k.ne[2];
    if (k.ne[3] != 1) return "k must be [S, H, T] (head size, heads, tokens)";
    for (std::size_t j = 0; j + 1 < n; ++j) {
        if (t.op == op_kind::rwkv_wkv6 && j == 3) {
            if (t.src[j]->nelements() != S * H) return "tf must hold S * H values (one per channel of each head)";
        } else if (!same_ne(*t.src[j], k)) {
            return "the per-token operands must all be [S, H, T] (k's extents)";
        }
    }
    const std::int64_t n_seqs = state.ne[1];
    if (state.nelements() != S * S * H * n_seqs) return "state must hold S * S * H values for each of its ne1 (n_seqs) sequences";
    if (!multiple_of(T, n_seqs)) return "the tokens (T) must be a multiple of the sequences (state.ne1)";
    if (t.op == op_kind::gated_linear_attn && !finite_param(t, 0)) return "scale must be finite";
    if (t.type != elem_type::f32 || !ne_is(t, S * H, T + S * n_seqs, 1, 1)) return "the result is f32 [S * H, T + S * n_seqs]";
    return {};
}

/// out_prod: a [M, K, A2, A3] f32 or quantized (ggml's CPU list: every quantized type but
/// q8_K; not transposed, rows of whole blocks), b [N, K, B2, B3] f32 with A2 | B2 and A3 |
/// B3; the result f32 [M, N, B2, B3].
inline std::string_view out_prod(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const tensor& b = *t.src[1];
    if ((a.type != elem_type::f32 && !is_quantized(a.type)) || a.type == elem_type::q8_K)
        return "a must be f32 or quantized (not q8_K)";
    if (b.type != elem_type::f32) return "b must be f32";
    if (a.nb[0] > a.nb[1] || !whole_blocks(a)) return "a must not be transposed, and quantized rows are whole blocks";
    if (a.ne[1] != b.ne[1]) return "a and b must have the same extent in dimension 1 (the summed one)";
    if (a.ne[2] <= 0 || a.ne[3] <= 0 || !multiple_of(b.ne[2], a.ne[2]) || !multiple_of(b.ne[3], a.ne[3]))
        return "a's extents in dimensions 2 and 3 must divide b's";
    if (t.type != elem_type::f32 || !ne_is(t, a.ne[0], b.ne[0], b.ne[2], b.ne[3]))
        return "the result is f32 [a.ne0, b.ne0, b.ne2, b.ne3]";
    return {};
}

/// count_equal: i32 a and b of one shape; the result one i64.
inline std::string_view count_equal(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const tensor& b = *t.src[1];
    if (a.type != elem_type::i32 || b.type != elem_type::i32) return "a and b must be i32";
    if (!same_ne(a, b)) return "a and b must have the same shape";
    if (t.type != elem_type::i64 || !ne_is(t, 1, 1, 1, 1)) return "the result is one i64";
    return {};
}

/// acc: f32 a (contiguous) and b, the view core/acc_view.hpp checks (params 0 .. 3), the
/// inplace flag 0 or 1 (param 4); the result has a's type and shape.
inline std::string_view acc(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    if (a.type != elem_type::f32 || t.src[1]->type != elem_type::f32) return "a and b must be f32";
    if (!a.is_contiguous()) return "a must be contiguous";
    if (t.type != elem_type::f32 || !same_ne(t, a)) return "the result has a's type and shape";
    if (t.param<std::int32_t>(4) != 0 && t.param<std::int32_t>(4) != 1) return "inplace must be 0 or 1";
    const char* why = acc_view_fault(t);
    return why == nullptr ? std::string_view{} : why;
}

inline std::string_view soft_max(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const tensor* mask = t.src[1];
    const tensor* sinks = t.src[2];
    if (a.type != elem_type::f32) return "operand must be f32";
    if (t.type != elem_type::f32 || !same_ne(t, a)) return "the result has a's type and shape";
    if (!finite_param(t, 0) || !finite_param(t, 1)) return "scale and max_bias must be finite";
    if (sinks != nullptr && (sinks->type != elem_type::f32 || sinks->ne[0] != a.ne[2] || sinks->nelements() != a.ne[2]))
        return "sinks must be an f32 vector with one value per a.ne2 (head)";
    if (mask == nullptr) return t.param<float>(1) > 0.0f ? "max_bias (ALiBi) needs a mask" : std::string_view{};
    if (mask->type != elem_type::f32 && mask->type != elem_type::f16) return "mask must be f32 or f16";
    if (mask->ne[0] != a.ne[0] || mask->ne[1] < a.ne[1] || mask->ne[2] <= 0 || mask->ne[3] <= 0 ||
        !multiple_of(a.ne[2], mask->ne[2]) || !multiple_of(a.ne[3], mask->ne[3]))
        return "mask must have a's row length, at least a's rows, and divide a's dims 2 and 3";
    return {};
}

inline std::string_view mul_mat(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const tensor& b = *t.src[1];
    if (!real_type(a.type) || !float_type(b.type)) return "a must be a float or quantized type and b f32, f16 or bf16";
    if (a.ne[0] != b.ne[0]) return "a and b must have the same length in dimension 0 (K)";
    if (a.ne[2] <= 0 || a.ne[3] <= 0 || !multiple_of(b.ne[2], a.ne[2]) || !multiple_of(b.ne[3], a.ne[3]))
        return "b's dims 2 and 3 must be multiples of a's (broadcast of a)";
    if (a.is_transposed()) return "a must not be transposed (use cont on the transpose)";
    if (!whole_blocks(a)) return "a quantized a must have contiguous rows";
    if (t.type != elem_type::f32 || !ne_is(t, a.ne[1], b.ne[1], b.ne[2], b.ne[3])) return "the result is f32 [a.ne1, b.ne1, b.ne2, b.ne3]";
    return {};
}

inline std::string_view get_rows(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const tensor& idx = *t.src[1];
    const bool ints = a.type == elem_type::i32;
    if (!ints && !real_type(a.type)) return "a must be a float, quantized or i32 type";
    if (idx.type != elem_type::i32) return "indices must be i32";
    if (idx.ne[1] != a.ne[2] || idx.ne[2] != a.ne[3] || idx.ne[3] != 1) return "idx must be [N, a.ne2, a.ne3]";
    if (!whole_blocks(a)) return "a quantized a must have contiguous rows";
    if (t.type != (ints ? elem_type::i32 : elem_type::f32) || !ne_is(t, a.ne[0], idx.ne[0], idx.ne[1], idx.ne[2]))
        return "the result is f32 (i32 for i32 a) [a.ne0, idx.ne0, idx.ne1, idx.ne2]";
    return {};
}

/// rope's mode and M-RoPE sections (rope_sections below).
inline std::string_view rope_mode_of(const tensor& t, const tensor& a) noexcept {
    namespace rf = rope_fn;
    const std::int32_t mode = t.param<std::int32_t>(rf::slot::mode);
    if (mode != rf::mode_normal && mode != rf::mode_neox && mode != rf::mode_mrope && mode != rf::mode_vision &&
        mode != rf::mode_imrope)
        return "unknown mode (normal 0, neox 2, mrope 8, vision 24, imrope 40)";
    if (!rf::is_multi(mode)) return {};
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < 4; ++i) {
        const std::int32_t s = t.param<std::int32_t>(rf::slot::sections + i);
        if (s < 0) return "sections must not be negative";
        sum += s;
    }
    if (t.param<std::int32_t>(rf::slot::sections) <= 0 && t.param<std::int32_t>(rf::slot::sections + 1) <= 0 &&
        t.param<std::int32_t>(rf::slot::sections + 2) <= 0)
        return "one of sections[0..2] must be positive";
    if (sum > a.ne[0]) return "the sections add up to more than a.ne0";
    if (mode == rf::mode_vision && 2 * static_cast<std::int64_t>(t.param<std::int32_t>(rf::slot::n_dims)) != a.ne[0])
        return "vision mode rotates (k, k + n_dims): n_dims must be a.ne0 / 2";
    return {};
}

/// rope's float parameters (YaRN's included).
inline std::string_view rope_scalars(const tensor& t) noexcept {
    namespace rf = rope_fn;
    const float freq_base = t.param<float>(rf::slot::freq_base);
    if (!(freq_base > 0.0f) || !std::isfinite(freq_base) || !finite_param(t, rf::slot::freq_scale))
        return "freq_base must be positive and finite, freq_scale finite";
    if (!finite_param(t, rf::slot::ext_factor) || !finite_param(t, rf::slot::attn_factor) ||
        !finite_param(t, rf::slot::beta_fast) || !finite_param(t, rf::slot::beta_slow))
        return "ext_factor, attn_factor, beta_fast and beta_slow must be finite";
    if (t.param<std::int32_t>(rf::slot::n_ctx_orig) < 0) return "n_ctx_orig must not be negative";
    if (t.param<float>(rf::slot::ext_factor) == 0.0f) return {};
    if (!(t.param<float>(rf::slot::freq_scale) > 0.0f)) return "YaRN (ext_factor != 0) needs a positive freq_scale";
    const rf::params c = rf::params_of(t);
    if (std::isnan(c.corr_low) || std::isnan(c.corr_high))
        return "YaRN's correction dims are undefined for these n_ctx_orig, freq_base, beta_fast and beta_slow";
    return {};
}

inline std::string_view rope(const tensor& t) noexcept {
    namespace rf = rope_fn;
    const tensor& a = *t.src[0];
    const tensor& pos = *t.src[1];
    const tensor* ff = t.src[2];
    const std::int32_t n_dims = t.param<std::int32_t>(rf::slot::n_dims);
    if (a.type != elem_type::f32 && a.type != elem_type::f16) return "a must be f32 or f16";
    if (t.type != a.type || !same_ne(t, a)) return "the result has a's type and shape";
    if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > a.ne[0]) return "n_dims must be even, positive and at most a.ne0";
    if (const std::string_view why = rope_mode_of(t, a); !why.empty()) return why;
    const std::int64_t streams = rf::is_multi(t.param<std::int32_t>(rf::slot::mode)) ? 4 : 1;
    if (pos.type != elem_type::i32 || pos.ne[0] != streams * a.ne[2] || pos.nelements() != pos.ne[0])
        return "pos must be an i32 vector with one position per a.ne2 (four per a.ne2 in the M-RoPE modes)";
    if (ff != nullptr) {
        rf::params c;
        c.n_dims = n_dims;
        c.mode = t.param<std::int32_t>(rf::slot::mode);
        if (ff->type != elem_type::f32 || ff->nelements() != ff->ne[0] || ff->ne[0] < rf::n_pairs(c))
            return "freq_factors must be an f32 vector of at least n_dims / 2 values (n_dims in vision mode)";
    }
    return rope_scalars(t);
}

inline std::string_view concat(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const tensor& b = *t.src[1];
    const std::int32_t dim = t.param<std::int32_t>(0);
    if (dim < 0 || dim >= max_dims) return "the dimension is outside 0..3";
    if (a.type != b.type || t.type != a.type) return "a and b must have the same type";
    if (!whole_blocks(a) || !whole_blocks(b)) return "quantized operands must have contiguous rows of whole blocks";
    for (std::size_t i = 0; i < max_dims; ++i) {
        const bool joined = static_cast<int>(i) == dim;
        if (!joined && b.ne[i] != a.ne[i]) return "extents differ outside the joined dimension";
        if (t.ne[i] != (joined ? a.ne[i] + b.ne[i] : a.ne[i])) return "the result joins a and b along the dimension";
    }
    return {};
}

inline std::string_view glu(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const tensor* b = t.src[1];
    const std::int32_t fn = t.param<std::int32_t>(0);
    const std::int32_t swapped = t.param<std::int32_t>(1);
    if (!float_type(a.type)) return "operand must be f32, f16 or bf16";
    if (fn < 0 || fn >= glu_op_count) return "unknown glu function";
    if (swapped != 0 && swapped != 1) return "swapped must be 0 or 1";
    if (!a.rows_contiguous()) return "a's rows must be contiguous (dimension 0)";
    if (b != nullptr) {
        if (b->type != a.type || !same_ne(*b, a)) return "b (the gate) must have a's type and shape";
        if (!b->rows_contiguous()) return "b's rows must be contiguous (dimension 0)";
        if (swapped != 0) return "the split form has no halves to swap";
        if (t.type != a.type || !same_ne(t, a)) return "the result has a's type and shape";
    } else if (t.type != a.type || !ne_is(t, a.ne[0] / 2, a.ne[1], a.ne[2], a.ne[3])) {
        return "the result has a's type and shape [a.ne0 / 2, a.ne1, a.ne2, a.ne3]";
    }
    if (fn == static_cast<std::int32_t>(glu_op::swiglu_oai) && (!finite_param(t, 2) || !finite_param(t, 3)))
        return "alpha and limit must be finite";
    return {};
}

/// set_rows: src[0] = b (the rows written), src[1] = idx, src[2] = a (the destination,
/// whose memory the result is), as ggml orders them.
inline std::string_view set_rows(const tensor& t) noexcept {
    const tensor& b = *t.src[0];
    const tensor& idx = *t.src[1];
    const tensor& a = *t.src[2];
    if (!real_type(a.type)) return "a (the destination) must be a float or quantized type";
    if (!converts_from_float(a.type)) return "f32 does not convert into a's type";
    if (!float_type(b.type)) return "b (the rows written) must be f32, f16 or bf16";
    if (!index_type(idx.type)) return "indices must be i32 or i64";
    if (a.ne[0] != b.ne[0] || a.ne[2] != b.ne[2] || a.ne[3] != b.ne[3])
        return "a and b must have the same extents in dimensions 0, 2 and 3";
    if (idx.ne[0] != b.ne[1] || idx.ne[3] != 1 || idx.ne[1] <= 0 || idx.ne[2] <= 0 ||
        !multiple_of(b.ne[2], idx.ne[1]) || !multiple_of(b.ne[3], idx.ne[2]))
        return "idx must be [b.ne1, a divisor of b.ne2, a divisor of b.ne3, 1]";
    if (!whole_blocks(a)) return "a quantized destination must have contiguous rows of whole blocks";
    if (t.type != a.type || !same_ne(t, a)) return "the result is a (its type, shape and memory)";
    return {};
}

/// mul_mat_id: src[0] = as [K, M, n_expert], src[1] = b [K, B1, n_tokens], src[2] = ids
/// [n_used, n_tokens].
inline std::string_view mul_mat_id(const tensor& t) noexcept {
    const tensor& as = *t.src[0];
    const tensor& b = *t.src[1];
    const tensor& ids = *t.src[2];
    if (!real_type(as.type) || !float_type(b.type)) return "as must be a float or quantized type and b f32, f16 or bf16";
    if (ids.type != elem_type::i32) return "ids must be i32";
    if (as.ne[3] != 1 || b.ne[3] != 1 || ids.ne[2] != 1 || ids.ne[3] != 1)
        return "as and b are at most 3-dimensional, ids at most 2-dimensional";
    if (as.ne[0] != b.ne[0]) return "as and b must have the same length in dimension 0 (K)";
    if (ids.ne[1] != b.ne[2]) return "ids must have one column per token (b.ne2)";
    if (b.ne[1] <= 0 || ids.ne[0] % b.ne[1] != 0) return "b.ne1 must divide the experts used per token (ids.ne0)";
    if (as.is_transposed()) return "as must not be transposed";
    if (!whole_blocks(as)) return "a quantized as must have contiguous rows";
    if (t.type != elem_type::f32 || !ne_is(t, as.ne[1], ids.ne[0], ids.ne[1], 1))
        return "the result is f32 [as.ne1, ids.ne0, ids.ne1]";
    return {};
}

/// add_id: src[0] = a [ne0, n_used, n_tokens], src[1] = b [ne0, n_expert], src[2] = ids
/// [n_used, n_tokens].
inline std::string_view add_id(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const tensor& b = *t.src[1];
    const tensor& ids = *t.src[2];
    if (a.type != elem_type::f32 || b.type != elem_type::f32) return "a and b must be f32";
    if (ids.type != elem_type::i32) return "ids must be i32";
    if (a.ne[3] != 1 || b.ne[2] != 1 || b.ne[3] != 1 || ids.ne[2] != 1 || ids.ne[3] != 1)
        return "a is at most 3-dimensional, b and ids at most 2-dimensional";
    if (a.ne[0] != b.ne[0]) return "a and b must have the same length in dimension 0";
    if (a.ne[1] != ids.ne[0] || a.ne[2] != ids.ne[1]) return "ids must have one id per row of a ([a.ne1, a.ne2])";
    if (t.type != elem_type::f32 || !same_ne(t, a)) return "the result is f32 with a's shape";
    return {};
}

inline std::string_view pad(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    if (!float_type(a.type)) return "operand must be f32, f16 or bf16";
    for (std::size_t i = 0; i < max_dims; ++i) {
        const std::int32_t lp = t.param<std::int32_t>(2 * i), rp = t.param<std::int32_t>(2 * i + 1);
        if (lp < 0 || rp < 0) return "pads must not be negative";
        if (t.ne[i] != a.ne[i] + lp + rp) return "the result's extents are a's plus the pads";
    }
    const std::int32_t circular = t.param<std::int32_t>(8);
    if (circular != 0 && circular != 1) return "circular must be 0 or 1";
    if (circular == 1 && a.nelements() == 0) return "an empty tensor cannot be wrapped around";
    if (t.type != a.type) return "the result has a's type";
    return {};
}

/// flash_attn_ext's K or V: f32, f16, bf16, q8_0 or q4_0 (the KV-cache types), contiguous
/// rows of whole blocks.
inline bool attention_operand(const tensor& x) noexcept {
    const bool cache_type = float_type(x.type) || x.type == elem_type::q8_0 || x.type == elem_type::q4_0;
    return cache_type && x.rows_contiguous() && whole_blocks(x);
}

/// flash_attn_ext's mask (src[3]) and sinks (src[4]) for q [D_k, n_q, n_head, ne3] and
/// n_kv positions (as ggml: an f16 contiguous mask of n_kv columns and at least n_q rows,
/// broadcast over heads and dim 3; f32 sinks, one per head).
inline std::string_view attention_mask_sinks(const tensor& t, const tensor& q, std::int64_t n_kv) noexcept {
    const tensor* mask = t.src[3];
    const tensor* sinks = t.src[4];
    if (sinks != nullptr && (sinks->type != elem_type::f32 || sinks->ne[0] != q.ne[2] || sinks->nelements() != q.ne[2]))
        return "sinks must be an f32 vector with one value per head (q.ne2)";
    if (mask == nullptr) return t.param<float>(1) > 0.0f ? "max_bias (ALiBi) needs a mask" : std::string_view{};
    if (mask->type != elem_type::f16 || !mask->is_contiguous()) return "mask must be f16 and contiguous";
    if (mask->ne[0] != n_kv || mask->ne[1] < q.ne[1] || mask->ne[2] <= 0 || mask->ne[3] <= 0 ||
        !multiple_of(q.ne[2], mask->ne[2]) || !multiple_of(q.ne[3], mask->ne[3]))
        return "mask must be [n_kv, at least n_q, a divisor of n_head, a divisor of q.ne3]";
    return {};
}

/// flash_attn_ext: src[0] = q [D_k, n_q, n_head, ne3] f32, src[1] = k [D_k, n_kv,
/// n_head_kv, ne3], src[2] = v [D_v, n_kv, n_head_kv, ne3], src[3] = mask, src[4] = sinks;
/// params scale, max_bias, logit_softcap.
inline std::string_view flash_attn_ext(const tensor& t) noexcept {
    const tensor& q = *t.src[0];
    const tensor& k = *t.src[1];
    const tensor& v = *t.src[2];
    if (q.type != elem_type::f32 || !q.rows_contiguous()) return "q must be f32 with contiguous rows";
    if (!attention_operand(k) || !attention_operand(v))
        return "k and v must be f32, f16, bf16, q8_0 or q4_0 with contiguous rows (of whole blocks)";
    if (k.ne[0] != q.ne[0]) return "k and q must have the same head size (dimension 0)";
    if (v.ne[1] != k.ne[1] || v.ne[2] != k.ne[2]) return "v must have k's positions (dim 1) and heads (dim 2)";
    if (k.ne[3] != q.ne[3] || v.ne[3] != q.ne[3]) return "q, k and v must have the same extent in dimension 3";
    if (k.ne[2] <= 0 || !multiple_of(q.ne[2], k.ne[2])) return "k's heads (dim 2) must divide q's (grouped-query attention)";
    if (!finite_param(t, 0) || !finite_param(t, 1) || !finite_param(t, 2))
        return "scale, max_bias and logit_softcap must be finite";
    if (const std::string_view why = attention_mask_sinks(t, q, k.ne[1]); !why.empty()) return why;
    if (t.type != elem_type::f32 || !ne_is(t, v.ne[0], q.ne[2], q.ne[1], q.ne[3]))
        return "the result is f32 [v.ne0, q.ne2, q.ne1, q.ne3] (heads before queries)";
    return {};
}

inline std::string_view arange(const tensor& t) noexcept {
    const float start = t.param<float>(0), stop = t.param<float>(1), step = t.param<float>(2);
    if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step)) return "start, stop and step must be finite";
    if (!(stop > start) || !(step > 0.0f)) return "stop must be above start and step positive";
    const float n = std::ceil((stop - start) / step);
    if (!(n < 9.0e18f)) return "too many steps";
    if (t.type != elem_type::f32 || !ne_is(t, static_cast<std::int64_t>(n), 1, 1, 1))
        return "the result is f32 [ceil((stop - start) / step)]";
    return {};
}

/// f32 or f16: the kernels' and the inputs' types of the convolutions.
constexpr bool f32_or_f16(elem_type t) noexcept { return t == elem_type::f32 || t == elem_type::f16; }

/// A convolution's window (conv_slot): strides and dilations positive, pads not
/// negative; in dimension 1 too when `two_d`.
inline std::string_view conv_window_rule(const tensor& t, bool two_d) noexcept {
    const conv_window w = window_of(t);
    if (w.s0 < 1 || w.d0 < 1 || w.p0 < 0) return "s0 and d0 must be positive, p0 not negative";
    if (two_d && (w.s1 < 1 || w.d1 < 1 || w.p1 < 0)) return "s1 and d1 must be positive, p1 not negative";
    return {};
}

/// im2col: src[0] = the kernel a ([kw, kh, ic, oc]; 1-D: [k, ic, oc]), read for its
/// extents only; src[1] = the input b ([iw, ih, ic, n]; 1-D: [iw, ic, n]).
inline std::string_view im2col(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const tensor& b = *t.src[1];
    if (!f32_or_f16(a.type) || !f32_or_f16(b.type) || !f32_or_f16(t.type)) return "a, b and the result must be f32 or f16";
    const std::int32_t two_d = t.param<std::int32_t>(conv_slot::is_2d);
    if (two_d != 0 && two_d != 1) return "is_2D must be 0 or 1";
    if (const std::string_view why = conv_window_rule(t, two_d == 1); !why.empty()) return why;
    if (two_d == 1) {
        if (a.ne[2] != b.ne[2]) return "a and b must have the same channels (dimension 2)";
    } else {
        if (t.param<std::int32_t>(conv_slot::p1) != 0) return "the 1-D form has no second dimension to pad (p1 must be 0)";
        if (a.ne[1] != b.ne[1] || b.ne[3] != 1) return "a and b must have the same channels (dimension 1), b 3-dimensional";
    }
    const im2col_geometry g = im2col_geometry_of(t);
    if (g.kw < 1 || g.kh < 1) return "the kernel is empty";
    const std::int64_t ow = conv_output_size(g.iw, g.kw, g.w.s0, g.w.p0, g.w.d0);
    const std::int64_t oh = two_d == 1 ? conv_output_size(g.ih, g.kh, g.w.s1, g.w.p1, g.w.d1) : 1;
    if (ow < 1 || oh < 1) return "b is too small for the kernel (no output position)";
    const bool shaped = two_d == 1 ? ne_is(t, g.ic * g.kh * g.kw, ow, oh, g.n) : ne_is(t, g.ic * g.kw, ow, g.n, 1);
    if (!shaped) return "the result is [ic * kh * kw, ow, oh, n] (1-D: [ic * k, ow, n])";
    return {};
}

/// conv_2d: src[0] = the kernel a [kw, kh, ic, oc], src[1] = the input b [iw, ih, ic, n].
inline std::string_view conv_2d(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const tensor& b = *t.src[1];
    if (!f32_or_f16(a.type) || b.type != elem_type::f32) return "a (the kernel) must be f32 or f16, b f32";
    if (const std::string_view why = conv_window_rule(t, true); !why.empty()) return why;
    if (a.ne[2] != b.ne[2]) return "a and b must have the same channels (dimension 2)";
    if (a.ne[0] < 1 || a.ne[1] < 1) return "the kernel is empty";
    const conv_2d_geometry g = conv_2d_geometry_of(t);
    const std::int64_t ow = conv_output_size(g.iw, g.kw, g.w.s0, g.w.p0, g.w.d0);
    const std::int64_t oh = conv_output_size(g.ih, g.kh, g.w.s1, g.w.p1, g.w.d1);
    if (ow < 1 || oh < 1) return "b is too small for the kernel (no output position)";
    if (t.type != elem_type::f32 || !ne_is(t, ow, oh, a.ne[3], b.ne[3])) return "the result is f32 [ow, oh, oc, n]";
    return {};
}

// -- image and sequence layout ------------------------------------------------------

/// pool_1d and pool_2d (pool_window_of): f32 or f16 in, f32 out, a kernel that fits the
/// padded source.
inline std::string_view pool(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const pool_window w = pool_window_of(t);
    if (a.type != elem_type::f32 && a.type != elem_type::f16) return "operand must be f32 or f16";
    if (w.op != pool_op::max && w.op != pool_op::avg) return "unknown pooling (max or avg)";
    if (w.k0 <= 0 || w.k1 <= 0 || w.s0 <= 0 || w.s1 <= 0 || w.p0 < 0 || w.p1 < 0)
        return "kernel extents and strides must be positive, paddings not negative";
    const std::int64_t n0 = pool_extent(a.ne[0], w.k0, w.s0, w.p0), n1 = pool_extent(a.ne[1], w.k1, w.s1, w.p1);
    if (n0 == 0 || n1 == 0) return "the kernel is larger than the padded source";
    if (t.type != elem_type::f32 || !ne_is(t, n0, n1, a.ne[2], a.ne[3]))
        return "the result is f32 [(a.ne0 + 2 p0 - k0) / s0 + 1, (a.ne1 + 2 p1 - k1) / s1 + 1, a.ne2, a.ne3]";
    return {};
}

/// upscale: f32 to f32 of any positive extents; a known mode, whose flags are aligned
/// corners and, for bilinear, antialiasing.
inline std::string_view upscale(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const auto flags = static_cast<std::uint32_t>(t.param<std::int32_t>(0));
    const std::uint32_t mode = flags & 0xffu;
    if (a.type != elem_type::f32 || t.type != elem_type::f32) return "operand and result must be f32";
    if (mode >= static_cast<std::uint32_t>(scale_mode_count) || (flags & ~(0xffu | scale_align_corners | scale_antialias)) != 0)
        return "unknown mode or flag (nearest, bilinear, bicubic; aligned corners, antialias)";
    if ((flags & scale_antialias) != 0 && mode != static_cast<std::uint32_t>(scale_mode::bilinear))
        return "antialias is for bilinear only";
    for (std::size_t i = 0; i < max_dims; ++i)
        if (a.ne[i] <= 0 || t.ne[i] <= 0) return "extents must be positive";
    return {};
}

/// pad_reflect_1d: p0 and p1 (op params 0, 1) below a.ne0, the result a's type with
/// extents (a.ne0 + p0 + p1, a.ne1, a.ne2, a.ne3).
inline std::string_view pad_reflect_1d(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const std::int32_t p0 = t.param<std::int32_t>(0), p1 = t.param<std::int32_t>(1);
    if (!float_type(a.type)) return "operand must be f32, f16 or bf16";
    if (p0 < 0 || p1 < 0 || p0 >= a.ne[0] || p1 >= a.ne[0]) return "pads must be at least 0 and below a.ne0";
    if (t.type != a.type || !ne_is(t, a.ne[0] + p0 + p1, a.ne[1], a.ne[2], a.ne[3]))
        return "the result has a's type and extents (a.ne0 + p0 + p1, a.ne1, a.ne2, a.ne3)";
    return {};
}

/// roll: a shift per dimension (op params 0 .. 3) of magnitude below its extent; the
/// result has a's type and shape.
inline std::string_view roll(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    if (!float_type(a.type)) return "operand must be f32, f16 or bf16";
    for (std::size_t i = 0; i < max_dims; ++i) {
        const std::int64_t s = t.param<std::int32_t>(i);
        if (s <= -a.ne[i] || s >= a.ne[i]) return "each shift's magnitude must be below its dimension's extent";
    }
    if (t.type != a.type || !same_ne(t, a)) return "the result has a's type and shape";
    return {};
}

/// conv_transpose_1d: src[0] = the kernel a [k, oc, ic] (f32 or f16), src[1] = the input
/// b [iw, ic] (f32, a matrix); params s0, p0, d0 with p0 = 0 and d0 = 1 (all ggml defines).
inline std::string_view conv_transpose_1d(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const tensor& b = *t.src[1];
    namespace s = conv_transpose_slot;
    if (!f32_or_f16(a.type) || b.type != elem_type::f32) return "a (the kernel) must be f32 or f16, b f32";
    if (t.param<std::int32_t>(s::s0) < 1) return "s0 must be positive";
    if (t.param<std::int32_t>(s::p0) != 0 || t.param<std::int32_t>(s::d0) != 1)
        return "p0 must be 0 and d0 1 (ggml defines no other)";
    if (b.ne[2] != 1 || b.ne[3] != 1) return "b must be a matrix [iw, ic]";
    if (a.ne[3] != 1 || a.ne[2] != b.ne[1]) return "a must be [k, oc, ic] with b's channels (b.ne1) as ic";
    if (a.ne[0] < 1) return "the kernel is empty";
    const conv_transpose_geometry g = conv_transpose_geometry_of(t);
    if (t.type != elem_type::f32 || !ne_is(t, conv_transpose_output_size(g.iw, g.kw, g.s0), g.oc, 1, 1))
        return "the result is f32 [(iw - 1) s0 + k, oc]";
    return {};
}

/// conv_transpose_2d (ggml's conv_transpose_2d_p0): src[0] = the kernel a [kw, kh, oc,
/// ic] (f32 or f16), src[1] = the input b [iw, ih, ic, n] (f32); param the stride.
inline std::string_view conv_transpose_2d(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const tensor& b = *t.src[1];
    if (!f32_or_f16(a.type) || b.type != elem_type::f32) return "a (the kernel) must be f32 or f16, b f32";
    if (t.param<std::int32_t>(0) < 1) return "the stride must be positive";
    if (a.ne[3] != b.ne[2]) return "a must be [kw, kh, oc, ic] with b's channels (b.ne2) as ic";
    if (a.ne[0] < 1 || a.ne[1] < 1) return "the kernel is empty";
    const conv_transpose_geometry g = conv_transpose_geometry_of(t);
    if (t.type != elem_type::f32 || !ne_is(t, conv_transpose_output_size(g.iw, g.kw, g.s0),
                                           conv_transpose_output_size(g.ih, g.kh, g.s1), g.oc, g.n))
        return "the result is f32 [(iw - 1) s + kw, (ih - 1) s + kh, oc, n]";
    return {};
}

/// conv_2d_dw: src[0] = the kernel a [kw, kh, 1, c], src[1] = the input b [iw, ih, c, n],
/// both f32; params s0, s1, p0, p1, d0, d1. The result in any layout (the builder gives
/// ggml's: channel-last over a channel-last input).
inline std::string_view conv_2d_dw(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const tensor& b = *t.src[1];
    if (a.type != elem_type::f32 || b.type != elem_type::f32) return "a (the kernel) and b must be f32";
    if (const std::string_view why = conv_window_rule(t, true); !why.empty()) return why;
    if (a.ne[2] != 1 || a.ne[3] != b.ne[2]) return "a must be [kw, kh, 1, c] with b's channels (b.ne2) as c";
    if (a.ne[0] < 1 || a.ne[1] < 1) return "the kernel is empty";
    const conv_2d_dw_geometry g = conv_2d_dw_geometry_of(t);
    const std::int64_t ow = conv_output_size(g.iw, g.kw, g.w.s0, g.w.p0, g.w.d0);
    const std::int64_t oh = conv_output_size(g.ih, g.kh, g.w.s1, g.w.p1, g.w.d1);
    if (ow < 1 || oh < 1) return "b is too small for the kernel (no output position)";
    if (t.type != elem_type::f32 || !ne_is(t, ow, oh, g.c, g.n)) return "the result is f32 [ow, oh, c, n]";
    return {};
}

/// win_part: f32 a [c, w0, h0, 1] into f32 [c, w, w, npx npy]; params npx, npy, w with w
/// positive and npx, npy the windows across w0 and h0 (the last ones padded).
inline std::string_view win_part(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const std::int64_t npx = t.param<std::int32_t>(window_slot::npx), npy = t.param<std::int32_t>(window_slot::npy);
    const std::int64_t w = t.param<std::int32_t>(window_slot::part_w);
    if (a.type != elem_type::f32) return "a must be f32";
    if (a.ne[3] != 1) return "a must be 3-dimensional [c, w0, h0]";
    if (w < 1) return "the window side w must be positive";
    if (npx != windows_across(a.ne[1], w) || npy != windows_across(a.ne[2], w))
        return "npx and npy must be the windows across a's width and height";
    if (t.type != elem_type::f32 || !ne_is(t, a.ne[0], w, w, npx * npy)) return "the result is f32 [c, w, w, npx * npy]";
    return {};
}

/// win_unpart: f32 a [c, w, w, np] into f32 [c, w0, h0, 1]; param w positive, a holding at
/// least the windows across w0 and h0.
inline std::string_view win_unpart(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    const std::int64_t w = t.param<std::int32_t>(window_slot::unpart_w);
    if (a.type != elem_type::f32 || t.type != elem_type::f32) return "a and the result must be f32";
    if (w < 1) return "the window side w must be positive";
    if (a.ne[1] != w || a.ne[2] != w) return "a must be windows [c, w, w, np]";
    if (t.ne[0] != a.ne[0] || t.ne[1] < 1 || t.ne[2] < 1 || t.ne[3] != 1) return "the result is [c, w0, h0] with w0, h0 positive";
    if (a.ne[3] < windows_across(t.ne[1], w) * windows_across(t.ne[2], w)) return "a has fewer windows than w0 and h0 need";
    return {};
}

/// get_rel_pos: f16 a [c, 2 qh - 1] into f16 [c, kh, qh] with kh = qh (all ggml defines).
inline std::string_view get_rel_pos(const tensor& t) noexcept {
    const tensor& a = *t.src[0];
    if (a.type != elem_type::f16 || t.type != elem_type::f16) return "a and the result must be f16";
    if (t.ne[1] != t.ne[2] || t.ne[1] < 1 || t.ne[3] != 1) return "qh and kh must be equal and positive";
    if (a.ne[2] != 1 || a.ne[3] != 1 || a.ne[1] != 2 * t.ne[1] - 1) return "a must be [c, 2 qh - 1]";
    if (t.ne[0] != a.ne[0]) return "the result is f16 [c, kh, qh]";
    return {};
}

} // namespace op_rules

namespace detail {
using fam = op_family;
namespace r = op_rules;
/// One row per op_kind, in its order. Sources and parameters, by op:
///   cpy (a, destination); permute, transpose (axes[4]); scale (s, bias);
///   rms_norm, norm (eps); soft_max (a, optional mask, optional sinks; scale, max_bias);
///   rope (a, positions, optional frequency factors; rope_fn::slot's 13 slots); concat
///   (a, b; dim); get_rows (a, indices); glu (a, optional gate b; function, swapped, alpha,
///   limit); argsort (order). top_k's k is its result's ne0. set_rows (b, indices,
///   destination); pad (a; lp0, rp0, .. lp3, rp3, circular);
///   arange (no source; start, stop, step); mul_mat_id (as, b, ids); add_id (a, b, ids);
///   flash_attn_ext (q, k, v,
///   optional mask, optional sinks; scale, max_bias, logit_softcap); group_norm (n_groups,
///   eps); l2_norm (eps); tri (type); timestep_embedding (timesteps; dim, max_period);
///   out_prod (a, b); im2col (kernel, input; s0, s1, p0, p1, d0, d1, is_2D); conv_2d
///   (kernel, input; s0, s1, p0, p1, d0, d1); pool_1d (a; op, k0, s0, p0); pool_2d (a; op,
///   k0, k1, s0, s1, p0, p1); upscale (a; mode and flags); pad_reflect_1d (a; p0, p1); roll
///   (a; shift0 .. shift3); count_equal (a, b); acc (a, b; nb1, nb2, nb3, offset, inplace);
///   conv_transpose_1d (kernel, input; s0, p0, d0); conv_transpose_2d (kernel, input; stride);
///   conv_2d_dw (kernel, input; s0, s1, p0, p1, d0, d1); win_part (a; npx, npy, w);
///   win_unpart (a; w); get_rel_pos (a).
///   ssm_conv (sx, c); ssm_scan (s, x, dt, A, B, C, ids); gated_linear_attn (k, v, q, g,
///   state; scale); rwkv_wkv6 (k, v, r, tf, td, state); rwkv_wkv7 (r, w, k, v, a, b, state).
inline constexpr std::array<op_traits, op_kind_count> op_table = {{
    // name       srcs  params view   inplace family            rule  (copy)
    {"none",      0, 0, 0, false, false, fam::none,        r::leaf},
    {"dup",       1, 1, 0, false, false, fam::data,        r::copy, true},
    {"cpy",       2, 2, 0, false, false, fam::data,        r::copy, true},
    {"cont",      1, 1, 0, false, false, fam::data,        r::copy, true},
    {"view",      1, 1, 0, true,  false, fam::none,        r::view},
    {"reshape",   1, 1, 0, true,  false, fam::none,        r::view},
    {"permute",   1, 1, 4, true,  false, fam::none,        r::view},
    {"transpose", 1, 1, 4, true,  false, fam::none,        r::view},
    {"add",       2, 2, 0, false, true,  fam::elementwise, r::binary},
    {"sub",       2, 2, 0, false, true,  fam::elementwise, r::binary},
    {"mul",       2, 2, 0, false, true,  fam::elementwise, r::binary},
    {"div",       2, 2, 0, false, true,  fam::elementwise, r::binary},
    {"scale",     1, 1, 2, false, true,  fam::elementwise, r::unary},
    {"sqr",       1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"sqrt",      1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"sum_rows",  1, 1, 0, false, false, fam::rows,        r::sum_rows},
    {"mul_mat",   2, 2, 0, false, false, fam::mul_mat,     r::mul_mat},
    {"get_rows",  2, 2, 0, false, false, fam::data,        r::get_rows},
    {"rms_norm",  1, 1, 1, false, true,  fam::rows,        r::row_norm},
    {"norm",      1, 1, 1, false, false, fam::rows,        r::row_norm},
    {"soft_max",  1, 3, 2, false, true,  fam::rows,        r::soft_max},
    {"rope",      2, 3, rope_fn::n_params, false, true,  fam::rows, r::rope},
    {"silu",      1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"gelu",      1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"relu",      1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"concat",    2, 2, 1, false, false, fam::data,        r::concat},
    {"argmax",    1, 1, 0, false, false, fam::rows,        r::argmax},
    {"neg",       1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"abs",       1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"sgn",       1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"step",      1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"tanh",      1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"sigmoid",   1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"exp",       1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"log",       1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"sin",       1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"cos",       1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"elu",       1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"hardsigmoid", 1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"hardswish", 1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"softplus",  1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"gelu_erf",  1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"gelu_quick", 1, 1, 0, false, true,  fam::elementwise, r::unary},
    {"leaky_relu", 1, 1, 1, false, true,  fam::elementwise, r::unary},
    {"clamp",     1, 1, 2, false, true,  fam::elementwise, r::unary},
    {"glu",       1, 2, 4, false, true,  fam::elementwise, r::glu},
    {"sum",       1, 1, 0, false, false, fam::rows,        r::sum},
    {"mean",      1, 1, 0, false, false, fam::rows,        r::mean},
    {"argsort",   1, 1, 1, false, false, fam::rows,        r::sort_rows},
    {"top_k",     1, 1, 0, false, false, fam::rows,        r::sort_rows},
    {"set_rows",  3, 3, 0, false, false, fam::data,        r::set_rows},
    {"pad",       1, 1, 9, false, false, fam::data,        r::pad},
    {"arange",    0, 0, 3, false, false, fam::data,        r::arange},
    {"mul_mat_id", 3, 3, 0, false, false, fam::mul_mat,    r::mul_mat_id},
    {"add_id",    3, 3, 0, false, false, fam::data,        r::add_id},
    {"flash_attn_ext", 3, 5, 3, false, false, fam::mul_mat, r::flash_attn_ext},
    // normalisation of vision and audio models
    {"group_norm", 1, 1, 2, false, true,  fam::rows,        r::group_norm},
    {"l2_norm",   1, 1, 1, false, true,  fam::rows,        r::row_norm},
    // small ops of vision, audio and state-space models
    {"repeat",    1, 1, 0, false, false, fam::data,        r::repeat},
    {"repeat_back", 1, 1, 0, false, false, fam::rows,      r::repeat_back},
    {"cumsum",    1, 1, 0, false, false, fam::rows,        r::f32_like_a},
    {"tri",       1, 1, 1, false, false, fam::data,        r::tri},
    {"diag",      1, 1, 0, false, false, fam::data,        r::diag},
    {"timestep_embedding", 1, 1, 2, false, false, fam::data, r::timestep_embedding},
    {"out_prod",  2, 2, 0, false, false, fam::mul_mat,     r::out_prod},
    // convolutions
    {"im2col",    2, 2, 7, false, false, fam::data,        r::im2col},
    {"conv_2d",   2, 2, 6, false, false, fam::mul_mat,     r::conv_2d},
    // image and sequence layout
    {"pool_1d",   1, 1, 4, false, false, fam::rows,        r::pool},
    {"pool_2d",   1, 1, 7, false, false, fam::rows,        r::pool},
    {"upscale",   1, 1, 1, false, false, fam::data,        r::upscale},
    {"pad_reflect_1d", 1, 1, 2, false, false, fam::data,   r::pad_reflect_1d},
    {"roll",      1, 1, 4, false, false, fam::data,        r::roll},
    {"count_equal", 2, 2, 0, false, false, fam::rows,      r::count_equal},
    {"acc",       2, 2, 5, false, false, fam::data,        r::acc},
    // transposed and depthwise convolutions, windows
    {"conv_transpose_1d", 2, 2, 3, false, false, fam::mul_mat, r::conv_transpose_1d},
    {"conv_transpose_2d", 2, 2, 1, false, false, fam::mul_mat, r::conv_transpose_2d},
    {"conv_2d_dw", 2, 2, 6, false, false, fam::rows,       r::conv_2d_dw},
    {"win_part",  1, 1, 3, false, false, fam::data,        r::win_part},
    {"win_unpart", 1, 1, 1, false, false, fam::data,       r::win_unpart},
    {"get_rel_pos", 1, 1, 0, false, false, fam::data,      r::get_rel_pos},
    // state-space and linear-attention recurrences
    {"ssm_conv",  2, 2, 0, false, false, fam::rows,        r::ssm_conv},
    {"ssm_scan",  7, 7, 0, false, false, fam::rows,        r::ssm_scan},
    {"gated_linear_attn", 5, 5, 1, false, false, fam::rows, r::linear_attention},
    {"rwkv_wkv6", 6, 6, 0, false, false, fam::rows,        r::linear_attention},
    {"rwkv_wkv7", 7, 7, 0, false, false, fam::rows,        r::linear_attention},
}};

inline std::string_view unknown_rule(const tensor&) noexcept { return "unknown op"; }

/// The row answered for a value outside op_kind (read from a corrupt or hand-made tensor).
inline constexpr op_traits unknown_op{"?", 0, 0, 0, false, false, fam::none, unknown_rule};

constexpr bool op_table_in_order() {
    // names are unique and none is empty: a row added out of order shows up as a
    // duplicate or a missing name
    for (std::size_t i = 0; i < op_kind_count; ++i) {
        if (op_table[i].name.empty() || op_table[i].min_srcs > op_table[i].max_srcs ||
            op_table[i].max_srcs > max_srcs || op_table[i].n_params > max_op_params)
            return false;
        for (std::size_t j = 0; j < i; ++j)
            if (op_table[i].name == op_table[j].name) return false;
    }
    return op_table[op_kind_count - 1].name == "rwkv_wkv7"; // the last kind's row is the last row
}
static_assert(op_table_in_order(), "op_table has one row per op_kind, in its order");
} // namespace detail

/// The generic facts of op (unknown_op's for a value outside op_kind).
constexpr const op_traits& traits(op_kind op) noexcept {
    const auto i = static_cast<std::size_t>(op);
    return i < op_kind_count ? detail::op_table[i] : detail::unknown_op;
}

constexpr std::string_view to_string(op_kind op) noexcept { return traits(op).name; }

/// True for ops that only reinterpret their source's memory.
constexpr bool is_view_op(op_kind op) noexcept { return traits(op).view; }

namespace detail {
/// The sources node sets, bit j for src[j] (without a loop: support checks of big graphs
/// spend their time in why_undefined).
inline unsigned set_sources(const tensor& node) noexcept {
    static_assert(max_srcs == 7, "one term per source");
    return static_cast<unsigned>(node.src[0] != nullptr) | static_cast<unsigned>(node.src[1] != nullptr) << 1 |
           static_cast<unsigned>(node.src[2] != nullptr) << 2 | static_cast<unsigned>(node.src[3] != nullptr) << 3 |
           static_cast<unsigned>(node.src[4] != nullptr) << 4 | static_cast<unsigned>(node.src[5] != nullptr) << 5 |
           static_cast<unsigned>(node.src[6] != nullptr) << 6;
}

/// why_undefined for a node whose set sources are `set` (set_sources(node)), for a pass
/// that has read them already.
inline std::string_view why_undefined_given(const tensor& node, unsigned set) noexcept {
    const op_traits& t = traits(node.op);
    const unsigned required = (1u << t.min_srcs) - 1;
    if ((set & required) != required) return "a required source is missing";
    if ((set >> t.max_srcs) != 0) return "a source past the op's last is set";
    return t.rule(node);
}
} // namespace detail

/// Why `node` is not an instance of its op that the op defines (its sources as its row's
/// arity says, then the row's rule); empty when it is.
inline std::string_view why_undefined(const tensor& node) noexcept {
    return detail::why_undefined_given(node, detail::set_sources(node));
}

/// True when `node` is an instance of its op that the op defines: what every backend
/// narrows, and what the graph builders make.
inline bool is_defined(const tensor& node) noexcept { return why_undefined(node).empty(); }

// ---------------------------------------------------------------------------------------
// Questions a backend asks to route a node to its kernels, answered by the op's row: which
// ops are element-wise, and of how many operands, and which are copies, is written in the
// table, not in each backend's dispatch.

/// Element-wise work: each result element from one element of each source, or a fixed few
/// (glu's fused form reads two halves of a row). The cost model prices the family by its
/// bytes; the routing to kernels is is_binary_elementwise's and is_unary_elementwise's.
constexpr bool is_elementwise(op_kind op) noexcept { return traits(op).family == op_family::elementwise; }

/// An element-wise op of exactly two operands, b broadcast over a (add, sub, mul, div):
/// each backend's binary element-wise kernel.
constexpr bool is_binary_elementwise(op_kind op) noexcept {
    return is_elementwise(op) && traits(op).min_srcs == 2 && traits(op).max_srcs == 2;
}

/// An element-wise op of exactly one operand (scale, sqr, sqrt, silu, gelu, relu, neg and
/// the functions of core/unary_functions.hpp): each backend's unary element-wise kernel.
constexpr bool is_unary_elementwise(op_kind op) noexcept { return is_elementwise(op) && traits(op).max_srcs == 1; }

/// An element-wise op with an optional operand (glu: a gate b, or both halves of a's
/// rows), which neither element-wise kernel computes: each backend routes it to a kernel
/// of its own.
constexpr bool is_gated_elementwise(op_kind op) noexcept {
    return is_elementwise(op) && traits(op).min_srcs == 1 && traits(op).max_srcs == 2;
}
static_assert(is_gated_elementwise(op_kind::glu) && !is_unary_elementwise(op_kind::glu) &&
              !is_binary_elementwise(op_kind::glu));

/// A copy of src[0]'s elements, in order, into the result's type and layout (dup, cont,
/// cpy): one kernel in each backend.
constexpr bool is_copy(op_kind op) noexcept { return traits(op).copy; }
static_assert(is_copy(op_kind::dup) && is_copy(op_kind::cont) && is_copy(op_kind::cpy) && !is_copy(op_kind::view));

} // namespace backplane

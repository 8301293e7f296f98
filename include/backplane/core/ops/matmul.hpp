#pragma once
// mul_mat and get_rows: the ops that read weights.

#include <backplane/core/context.hpp>
#include <backplane/core/detail/describe.hpp>

namespace backplane {

/// c = a^T b over dimension 0: a [K, M, A2, A3], b [K, N, B2, B3] -> c f32 [M, N, B2, B3],
/// with a broadcast over dims 2 and 3 (B2 a multiple of A2, B3 of A3), as ggml's mul_mat.
/// a may be quantized (its rows then contiguous); b is f32, f16 or bf16.
inline tensor* mul_mat(context& ctx, tensor* a, tensor* b) {
    detail::require_tensor("mul_mat", "a", a);
    detail::require_tensor("mul_mat", "b", b);
    if (a->type == elem_type::i32 || !detail::is_float_type(b->type))
        detail::op_error("mul_mat", "a must be a float or quantized type and b f32, f16 or bf16", {{"a", a}, {"b", b}});
    if (a->ne[0] != b->ne[0])
        detail::op_error("mul_mat", "a and b must have the same length in dimension 0 (K)", {{"a", a}, {"b", b}});
    if (a->ne[2] <= 0 || a->ne[3] <= 0 || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0)
        detail::op_error("mul_mat", "b's dims 2 and 3 must be multiples of a's (broadcast of a)", {{"a", a}, {"b", b}});
    if (a->is_transposed())
        detail::op_error("mul_mat", "a must not be transposed (use cont on the transpose)", {{"a", a}, {"b", b}});
    if (is_quantized(a->type) && !a->rows_contiguous())
        detail::op_error("mul_mat", "a quantized a must have contiguous rows", {{"a", a}, {"b", b}});
    tensor* r = ctx.new_result(elem_type::f32, {a->ne[1], b->ne[1], b->ne[2], b->ne[3]});
    r->op = op_kind::mul_mat;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

/// Rows of a picked by the i32 indices in idx: a [E, R, A2, A3], idx [N, A2, A3] ->
/// f32 [E, N, A2, A3] (i32 when a is i32). Row idx[n, j, k] of matrix (j, k) of a.
inline tensor* get_rows(context& ctx, tensor* a, tensor* idx) {
    detail::require_tensor("get_rows", "a", a);
    detail::require_tensor("get_rows", "idx", idx);
    if (idx->type != elem_type::i32) detail::op_error("get_rows", "indices must be i32", {{"a", a}, {"idx", idx}});
    if (idx->ne[1] != a->ne[2] || idx->ne[2] != a->ne[3] || idx->ne[3] != 1)
        detail::op_error("get_rows", "idx must be [N, a.ne2, a.ne3]", {{"a", a}, {"idx", idx}});
    if (is_quantized(a->type) && !a->rows_contiguous())
        detail::op_error("get_rows", "a quantized a must have contiguous rows", {{"a", a}, {"idx", idx}});
    const elem_type rt = a->type == elem_type::i32 ? elem_type::i32 : elem_type::f32;
    tensor* r = ctx.new_result(rt, {a->ne[0], idx->ne[0], idx->ne[1], idx->ne[2]});
    r->op = op_kind::get_rows;
    r->src[0] = a;
    r->src[1] = idx;
    return r;
}

} // namespace backplane

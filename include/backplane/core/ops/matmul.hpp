#pragma once
// mul_mat and get_rows: the ops that read weights.

#include <backplane/core/ops/node.hpp>

namespace backplane {

/// c = a^T b over dimension 0: a [K, M, A2, A3], b [K, N, B2, B3] -> c f32 [M, N, B2, B3],
/// with a broadcast over dims 2 and 3 (B2 a multiple of A2, B3 of A3), as ggml's mul_mat.
/// a may be quantized (its rows then contiguous); b is f32, f16 or bf16.
inline tensor* mul_mat(context& ctx, tensor* a, tensor* b) {
    detail::require_tensor("mul_mat", "a", a);
    detail::require_tensor("mul_mat", "b", b);
    return detail::make_node(ctx, detail::proposed(op_kind::mul_mat, elem_type::f32, {a->ne[1], b->ne[1], b->ne[2], b->ne[3]}, {a, b}),
                             {{"a", a}, {"b", b}});
}

/// Rows of a picked by the i32 indices in idx: a [E, R, A2, A3], idx [N, A2, A3] ->
/// f32 [E, N, A2, A3] (i32 when a is i32). Row idx[n, j, k] of matrix (j, k) of a.
inline tensor* get_rows(context& ctx, tensor* a, tensor* idx) {
    detail::require_tensor("get_rows", "a", a);
    detail::require_tensor("get_rows", "idx", idx);
    const elem_type rt = a->type == elem_type::i32 ? elem_type::i32 : elem_type::f32;
    return detail::make_node(ctx, detail::proposed(op_kind::get_rows, rt, {a->ne[0], idx->ne[0], idx->ne[1], idx->ne[2]}, {a, idx}),
                             {{"a", a}, {"idx", idx}});
}

} // namespace backplane

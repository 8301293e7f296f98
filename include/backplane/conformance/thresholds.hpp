#pragma once
// How closely a result must match, by node: the one place that says it.
//
// threshold_for: a target against the CPU backend's reference kernels, which compute in
// f32 and round once to the node's type, as a target should (ggml's test-backend-ops
// defaults): NMSE 1e-7; 5e-4 for mul_mat and mul_mat_id of weights other than f32 (the
// target may accumulate a dequantized or 16-bit dot product another way); 1e-6 for
// soft_max; 5e-4 for flash_attn_ext (ggml's test-backend-ops figure: a target may keep
// scores or sums in f16); 1e-4 for sum into f16 or bf16 (its one element may round one step apart when
// the f32 sums differ in their last bit); argmax, argsort, top_k, get_rows of unquantized
// rows, set_rows into an unquantized destination, pad, pad_reflect_1d, roll, arange, repeat,
// tri, diag, count_equal, acc, im2col, win_part, win_unpart, get_rel_pos, max pooling and
// nearest upscaling exact.
//
// default_max_nmse: a kernel against the double-precision test oracle, which rounds the
// exact result once where a kernel rounds its f32 steps too: NMSE 1e-7; 5e-4 when an f16,
// bf16 or quantized operand or result takes part; 1e-6 for soft_max; argmax, argsort and
// top_k exact.

#include <backplane/core/op_kind.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

namespace backplane::conformance {

/// How closely one node must match.
struct threshold {
    double max_nmse = 1e-7;
    bool exact = false; ///< every element equal too
};

/// A target's result against the CPU reference kernels (see the file comment).
inline threshold threshold_for(const tensor& node) {
    const tensor* a = node.src[0];
    switch (node.op) {
    case op_kind::argmax:
    case op_kind::argsort:
    case op_kind::top_k:
        return {0.0, true};
    case op_kind::sum:
        return {node.type == elem_type::f32 ? 1e-7 : 1e-4, false};
    case op_kind::get_rows:
        return a != nullptr && is_quantized(a->type) ? threshold{1e-7, false} : threshold{0.0, true};
    case op_kind::set_rows:
        return is_quantized(node.type) ? threshold{1e-7, false} : threshold{0.0, true};
    case op_kind::pad:
    case op_kind::im2col:
    case op_kind::pad_reflect_1d:
    case op_kind::roll:
    case op_kind::arange:
    case op_kind::repeat:
    case op_kind::tri:
    case op_kind::diag:
    case op_kind::count_equal:
    case op_kind::acc:
    case op_kind::win_part:
    case op_kind::win_unpart:
    case op_kind::get_rel_pos:
        return {0.0, true};
    case op_kind::pool_1d:
    case op_kind::pool_2d:
        return pool_window_of(node).op == pool_op::max ? threshold{0.0, true} : threshold{};
    case op_kind::upscale:
        return interpolation_of(node).mode == scale_mode::nearest ? threshold{0.0, true} : threshold{};
    case op_kind::mul_mat:
    case op_kind::mul_mat_id:
        return {a != nullptr && a->type == elem_type::f32 ? 1e-7 : 5e-4, false};
    case op_kind::soft_max:
        return {1e-6, false};
    case op_kind::flash_attn_ext:
        return {5e-4, false};
    default:
        return {1e-7, false};
    }
}

/// A kernel's result against the double-precision oracle (see the file comment).
inline double default_max_nmse(const tensor& node) {
    if (node.op == op_kind::argmax || node.op == op_kind::argsort || node.op == op_kind::top_k)
        return 0.0;
    bool low = node.type != elem_type::f32 && node.type != elem_type::i32;
    for (const tensor* s : node.src)
        if (s != nullptr && s->type != elem_type::f32 && s->type != elem_type::i32)
            low = true;
    if (low)
        return 5e-4;
    if (node.op == op_kind::soft_max)
        return 1e-6;
    return 1e-7;
}

} // namespace backplane::conformance

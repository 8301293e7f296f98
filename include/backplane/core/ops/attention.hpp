#pragma once
// Attention: flash_attn_ext (ggml's GGML_OP_FLASH_ATTN_EXT), softmax(scale * K q + mask) V
// in one op, without the [n_kv, n_q] matrix of scores in memory.

#include <backplane/core/ops/node.hpp>

namespace backplane {

/// ggml_flash_attn_ext: attention of every query of q over the keys k and values v, as
/// ggml's op (its sources and parameters in the same slots):
///
///     q    f32 [D_k, n_q,  n_head,    ne3]
///     k        [D_k, n_kv, n_head_kv, ne3]   f32, f16, bf16, q8_0 or q4_0
///     v        [D_v, n_kv, n_head_kv, ne3]   (the same types; not transposed)
///     mask f16 [n_kv, >= n_q, ne32, ne33]    optional
///     result f32 [D_v, n_head, n_q, ne3]     heads before queries (ggml's permute(0, 2, 1, 3))
///
/// For query i of head h (in dim 3 slice i3), with GQA's key/value head h / (n_head /
/// n_head_kv), and s_j the score of position j:
///
///     s_j = scale * dot(q_i, k_j)
///     s_j = logit_softcap * tanh(s_j / logit_softcap)   when logit_softcap != 0 (ggml
///                                                        divides scale by it first)
///     s_j += slope_h * mask[j, i, h % ne32, i3 % ne33]   (ALiBi's slope, 1 when max_bias
///                                                        is 0; see soft_max_ext)
///     out_i = sum_j exp(s_j - M) v_j / S,  M = max_j s_j, S = sum_j exp(s_j - M)
///
/// The mask is added after the softcap. A position whose masked term is -inf is skipped.
/// q, k and v need contiguous rows (dimension 0, as ggml's kernels assert); their other
/// strides are free, so permuted views of a cache work. The mask must be contiguous and
/// has at least n_q rows (row i serves query i; ggml no longer pads it to
/// GGML_KQ_MASK_PAD, and reads row i without checking, so fewer rows are refused here).
/// max_bias > 0 needs a mask. Sinks: flash_attn_ext_add_sinks.
///
/// Differences from ggml's CPU kernel, for accuracy: the score is the dot product of q in
/// f32 with k widened to f32 (ggml rounds q to f16 for an f16 k, and quantizes it to q8_0
/// for a quantized k), and the weighted sum of v accumulates in f32 (ggml accumulates in
/// f16 for an f16 v, rounding after every position). A query every position of which is
/// masked (and without sinks) gives zeros, as ggml's.
inline tensor* flash_attn_ext(context& ctx, tensor* q, tensor* k, tensor* v, tensor* mask, float scale,
                              float max_bias = 0.0f, float logit_softcap = 0.0f) {
    detail::require_tensor("flash_attn_ext", "q", q);
    detail::require_tensor("flash_attn_ext", "k", k);
    detail::require_tensor("flash_attn_ext", "v", v);
    tensor node = detail::proposed(op_kind::flash_attn_ext, elem_type::f32, {v->ne[0], q->ne[2], q->ne[1], q->ne[3]},
                                   {q, k, v, mask});
    node.set_param(0, scale);
    node.set_param(1, max_bias);
    node.set_param(2, logit_softcap);
    return detail::make_node(ctx, node, {{"q", q}, {"k", k}, {"v", v}, {"mask", mask}});
}

/// ggml_flash_attn_ext_add_sinks: sets the attention sinks of flash_attn_ext node `node`
/// (its source 4), an f32 vector of one value per head (q.ne2), and returns the node. A
/// head's sink takes part in the maximum M and adds exp(sink - M) to the sum S, without a
/// value: it only takes probability mass away from the positions. A node that has sinks
/// already is refused; nothing changes when the sinks are refused.
inline tensor* flash_attn_ext_add_sinks(tensor* node, tensor* sinks) {
    detail::require_tensor("flash_attn_ext_add_sinks", "node", node);
    detail::require_tensor("flash_attn_ext_add_sinks", "sinks", sinks);
    if (node->op != op_kind::flash_attn_ext)
        detail::op_error("flash_attn_ext_add_sinks", "the node is not a flash_attn_ext", {{"node", node}});
    if (node->src[4] != nullptr)
        detail::op_error("flash_attn_ext_add_sinks", "the node has sinks already", {{"node", node}});
    tensor proposal = *node;
    proposal.src[4] = sinks;
    detail::require_defined(proposal, {{"q", node->src[0]}, {"k", node->src[1]}, {"v", node->src[2]},
                                       {"mask", node->src[3]}, {"sinks", sinks}});
    node->src[4] = sinks;
    return node;
}

} // namespace backplane

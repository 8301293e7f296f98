#pragma once
// The graph of examples/vit: one image through the encoder, as llama.cpp's build_vit
// (tools/mtmd/clip.cpp) builds CLIP's and SigLIP's:
//
//   x = conv_2d(patch_embd, image), stride = kernel = the patch size   [E, N] (+ bias)
//   x = [class token, x] (when the model has one)                     [E, N + C]
//   x = x + position_embd
//   x = layer_norm(x) * pre_ln.weight + pre_ln.bias (when present)
//   per block:
//     h = x + attn_out(attention(layer_norm(x) * ln1.weight + ln1.bias))
//     x = h + ffn_down(gelu(ffn_up(layer_norm(h) * ln2.weight + ln2.bias)))
//   hidden = layer_norm(x) * post_ln.weight + post_ln.bias (when present)
//   pooled = hidden's class token row, or the mean of hidden's patch rows
//
// attention: Q, K, V products with their biases, split into heads, softmax(K^T Q / sqrt(d))
// without a mask (every position sees every other), V times it, the heads merged, the
// output product. The MLP's activation is GELU (tanh approximation) or, without
// clip.use_gelu, the quick GELU.
//
// The class token comes first, as in the original CLIP (position 0 of the position
// embeddings); llama.cpp's llava graph appends it after the patches instead.

#include "model.hpp"

#include <cmath>
#include <memory>
#include <string>

namespace vit {

enum class pooling { cls, mean };

/// One image's graph and its inputs and outputs.
struct encoder_graph {
    context ctx{context_params{.no_alloc = true}};
    graph g;
    tensor* image = nullptr;  ///< f32 [image_size, image_size, 3, 1], input: the normalised pixels
    tensor* hidden = nullptr; ///< f32 [n_embd, n_pos], output: the last hidden states
    tensor* pooled = nullptr; ///< f32 [n_embd, 1] or [1, n_embd], output
};

namespace detail {

class encoder_builder {
  public:
    encoder_builder(const model& m, context& ctx) : m_(m), hp_(m.hp), ctx_(ctx) {}

    tensor* layer_norm(tensor* x, tensor* w, tensor* b) {
        tensor* cur = norm(ctx_, x, hp_.eps);
        if (w != nullptr)
            cur = mul(ctx_, cur, w);
        return b != nullptr ? add(ctx_, cur, b) : cur;
    }

    /// The patches with the class token and the positions: [E, n_pos].
    tensor* embeddings(tensor* image) {
        const std::int64_t E = hp_.n_embd, N = hp_.n_patches(), P = hp_.patch_size;
        tensor* x = conv_2d(ctx_, m_.w.patch_w, image, static_cast<int>(P), static_cast<int>(P), 0, 0, 1, 1);
        x = named(cont(ctx_, transpose(ctx_, reshape(ctx_, x, {N, E}))), "patches"); // [E, N]
        if (m_.w.patch_b != nullptr)
            x = named(add(ctx_, x, m_.w.patch_b), "patch_bias");
        if (m_.w.class_embd != nullptr)
            x = named(concat(ctx_, reshape(ctx_, m_.w.class_embd, {E, 1}), x, 1), "with_class");
        x = named(add(ctx_, x, m_.w.pos_embd), "pos_embed");
        if (m_.w.pre_ln_w != nullptr)
            x = named(layer_norm(x, m_.w.pre_ln_w, m_.w.pre_ln_b), "pre_ln");
        return x;
    }

    /// x [E, T] -> x after block il.
    tensor* block(tensor* x, int il) {
        const layer_weights& l = m_.layers[static_cast<std::size_t>(il)];
        sfx_ = "-" + std::to_string(il);
        tensor* cur = named(layer_norm(x, l.ln1_w, l.ln1_b), "layer_inp_normed");
        cur = attention(l, cur);
        tensor* h = named(add(ctx_, cur, x), "ffn_inp");
        cur = named(layer_norm(h, l.ln2_w, l.ln2_b), "ffn_inp_normed");
        cur = linear(l.up_w, l.up_b, cur);
        cur = named(hp_.gelu ? gelu(ctx_, cur) : gelu_quick(ctx_, cur), "ffn_act");
        cur = named(linear(l.down_w, l.down_b, cur), "ffn_out");
        x = named(add(ctx_, h, cur), "layer_out");
        sfx_.clear();
        return x;
    }

  private:
    const model& m_;
    const hparams& hp_;
    context& ctx_;
    std::string sfx_;

    tensor* named(tensor* t, const std::string& name) {
        t->name = name + sfx_;
        return t;
    }
    tensor* linear(tensor* w, tensor* b, tensor* x) {
        tensor* y = mul_mat(ctx_, w, x);
        return b != nullptr ? add(ctx_, y, b) : y;
    }

    /// x [E, T] -> [E, T]: multi-head self-attention without a mask.
    tensor* attention(const layer_weights& l, tensor* x) {
        const std::int64_t D = hp_.head_dim(), H = hp_.n_head, T = x->ne[1];
        tensor* q = named(reshape(ctx_, linear(l.q_w, l.q_b, x), {D, H, T}), "Qcur");
        tensor* k = named(reshape(ctx_, linear(l.k_w, l.k_b, x), {D, H, T}), "Kcur");
        tensor* v = named(reshape(ctx_, linear(l.v_w, l.v_b, x), {D, H, T}), "Vcur");
        tensor* Q = permute(ctx_, q, 0, 2, 1, 3);                 // [D, T, H]
        tensor* K = permute(ctx_, k, 0, 2, 1, 3);                 // [D, T, H]
        tensor* V = cont(ctx_, permute(ctx_, v, 1, 2, 0, 3));     // [T, D, H]
        tensor* kq = named(mul_mat(ctx_, K, Q), "kq");            // [T keys, T queries, H]
        kq = named(soft_max_ext(ctx_, kq, nullptr, 1.0f / std::sqrt(static_cast<float>(D)), 0.0f), "kq_soft_max");
        tensor* kqv = named(mul_mat(ctx_, V, kq), "kqv");         // [D, T, H]
        tensor* merged = reshape(ctx_, cont(ctx_, permute(ctx_, kqv, 0, 2, 1, 3)), {D * H, T});
        return named(linear(l.o_w, l.o_b, merged), "attn_out");
    }
};

} // namespace detail

/// Builds the graph of one image. Throws backplane::error on a shape an op refuses.
inline std::unique_ptr<encoder_graph> build_encoder(const model& m, pooling pool) {
    const hparams& hp = m.hp;
    auto eg = std::make_unique<encoder_graph>();
    context& ctx = eg->ctx;
    eg->image = ctx.new_tensor(elem_type::f32, {hp.image_size, hp.image_size, 3, 1});
    eg->image->name = "inp_raw";
    eg->image->set_input();

    detail::encoder_builder b(m, ctx);
    tensor* x = b.embeddings(eg->image);
    for (int il = 0; il < hp.n_layer; ++il)
        x = b.block(x, il);
    if (m.w.post_ln_w != nullptr)
        x = b.layer_norm(x, m.w.post_ln_w, m.w.post_ln_b);
    x->name = "hidden";
    eg->hidden = x;

    if (pool == pooling::cls) { // the class token's row
        eg->pooled = cont(ctx, view_2d(ctx, x, hp.n_embd, 1, x->nb[1], 0));
    } else { // the mean over the patches' rows (the class token's left out)
        const std::size_t first = m.class_token() ? x->nb[1] : 0;
        tensor* patches = view_2d(ctx, x, hp.n_embd, hp.n_patches(), x->nb[1], first);
        eg->pooled = mean(ctx, cont(ctx, transpose(ctx, patches))); // [1, E]
    }
    eg->pooled->name = "pooled";
    eg->hidden->set_output();
    eg->pooled->set_output();
    eg->g.build_forward(eg->hidden);
    eg->g.build_forward(eg->pooled);
    return eg;
}

} // namespace vit

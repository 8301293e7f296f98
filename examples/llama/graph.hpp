#pragma once
// The graph of one forward step of examples/llama, for every family (hparams.hpp's
// traits decide what a layer has):
//
//   x = token embeddings (gemma2: times sqrt(n_embd))
//   per layer:
//     a = attention(rms_norm(x) * attn_norm)        gemma2: a = rms_norm(a) * post_attention_norm
//     h = x + a
//     f = ffn(rms_norm(h) * ffn_norm)               gemma2: f = rms_norm(f) * post_ffw_norm
//     x = h + f
//   logits = output(rms_norm(x) * output_norm)     gemma2: soft-capped
//
// attention: Q, K, V products (qwen2: plus biases); per head RMSNorm of Q and K (qwen3,
// qwen3moe); RoPE on Q and K (llama: "normal" pairs, with rope_freqs.weight's frequency
// factors when the file has them; the others: "neox"); the new keys and values written
// into the cache (set_rows at the tokens' positions); softmax(K^T Q * scale + mask) over every cached position, grouped-query
// (query head h reads key/value head h / (n_head / n_head_kv), which mul_mat's broadcast
// over dimension 2 gives without repeating K and V); V times it; the output product.
// gemma2 scales Q before (scale 1 in the softmax), soft-caps the products (c tanh(x / c)
// before the mask) and masks its even layers to a sliding window.
// With a cache laid out for flash attention (kv_cache::flash_attn) the softmax and both
// products are one flash_attn_ext node (its logit_softcap gemma2's soft-cap), over V
// untransposed, with an f16 mask, as llama.cpp does.
// ffn: SwiGLU (silu(gate) * up, then down; gemma2: GeGLU, gelu-tanh) or, for qwen3moe,
// the routed experts: softmax of the router's logits, the top expert_used_count experts
// of each token, their probabilities renormalized to sum 1, each expert's SwiGLU through
// mul_mat_id, and the weighted sum.
//
// mamba2 (llama.cpp's build_mamba2_layer, one sequence): per layer x = x + mixer(rms_norm(x)
// * attn_norm), no attention and no feed-forward. The mixer: the in-projection split into
// z [d_inner], xBC [d_inner + 2 groups * state_size] and dt [heads]; xBC after the
// convolution's state (its last conv_kernel - 1 tokens), ssm_conv over both with
// ssm_conv1d, plus its bias, silu, the last conv_kernel - 1 tokens written back as the new
// state; split into x (heads of d_inner / heads channels), B and C (state_size per group);
// ssm_scan from the scan's state with dt + ssm_dt.bias, A = ssm_a, its final state written
// back; y + x * D, times silu(z), RMSNorm per group of d_inner / groups channels times
// ssm_norm, and the out-projection. The state (kv_cache's, recurrent) carries a sequence
// from step to step: a prompt in batches then token by token computes what one batch does.

#include "model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace llama {

/// One forward step: n_tokens new tokens at positions [n_past, n_past + n_tokens), their
/// keys and values written into the cache, attention over positions [0, n_kv) (n_kv
/// padded up to a multiple of kv_pad, the padding masked out). The logits are those of
/// the last token, or of every token with all_logits. The graph depends on the positions
/// only through its inputs (positions, masks, the cache rows written): move_to() makes it
/// the step of later positions with the same n_kv, so a generation builds and allocates
/// one graph per kv_pad tokens.
struct step {
    context ctx{context_params{.no_alloc = true}};
    graph g;
    tensor* tokens = nullptr;   ///< i32 [n_tokens], input
    tensor* pos = nullptr;      ///< i32 [n_tokens], input
    tensor* mask = nullptr;     ///< [n_kv, n_tokens], input: causal (null: no layer uses it);
                                ///< f32, f16 for flash attention (as llama.cpp)
    tensor* mask_swa = nullptr; ///< likewise, causal and within the sliding window
    /// i32 [n_embd_v * n_tokens], input, with V transposed in the cache (no flash
    /// attention): value e of token t goes to element e * n_ctx + n_past + t of V
    tensor* v_rows = nullptr;
    tensor* rs_ids = nullptr;   ///< i32 [1], input (mamba2): the state ssm_scan starts from, 0
    tensor* logits = nullptr;   ///< f32 [n_vocab, 1 or n_tokens], output
    int n_past = 0;
    int n_tokens = 0;
    int n_kv = 0;
    int n_swa = 0; ///< the window of mask_swa
    int n_ctx = 0; ///< the cache's positions
    int kv_pad = 1;
    bool recurrent = false; ///< mamba2: no positions, masks or n_kv; any later position

    /// Makes this the step of positions [n_past, n_past + n_tokens) when they need the same
    /// n_kv (the graph is then the same); false, and nothing changes, when they do not.
    [[nodiscard]] bool move_to(int new_n_past) noexcept {
        if (new_n_past < 0 || new_n_past + n_tokens > n_ctx || (!recurrent && n_kv_for(new_n_past) != n_kv))
            return false;
        n_past = new_n_past;
        return true;
    }
    /// The positions attended to by a step at n_past: n_past + n_tokens rounded up to
    /// kv_pad, at most n_ctx.
    [[nodiscard]] int n_kv_for(int at) const noexcept {
        return std::min(n_ctx, (at + n_tokens + kv_pad - 1) / kv_pad * kv_pad);
    }

    /// The inputs' values for `ids`.
    [[nodiscard]] status set_inputs(std::span<const std::int32_t> ids) const {
        if (ids.size() != static_cast<std::size_t>(n_tokens))
            return {errc::invalid_argument, "step: wrong number of token ids"};
        if (auto s = tensor_set(*tokens, std::vector<std::int32_t>(ids.begin(), ids.end())); !s)
            return s;
        if (rs_ids != nullptr)
            if (auto s = tensor_set(*rs_ids, std::vector<std::int32_t>{0}); !s)
                return s;
        if (pos == nullptr) // mamba2: the state is the only context
            return {};
        std::vector<std::int32_t> p(static_cast<std::size_t>(n_tokens));
        for (int i = 0; i < n_tokens; ++i)
            p[static_cast<std::size_t>(i)] = n_past + i;
        if (auto s = tensor_set(*pos, p); !s)
            return s;
        if (mask != nullptr)
            if (auto s = set_mask(*mask, std::numeric_limits<int>::max()); !s)
                return s;
        if (v_rows != nullptr)
            if (auto s = set_v_rows(); !s)
                return s;
        return mask_swa != nullptr ? set_mask(*mask_swa, n_swa) : status{};
    }

  private:
    [[nodiscard]] status set_v_rows() const {
        const std::int64_t Ev = v_rows->ne[0] / n_tokens;
        std::vector<std::int32_t> r(static_cast<std::size_t>(v_rows->ne[0]));
        for (int t = 0; t < n_tokens; ++t)
            for (std::int64_t e = 0; e < Ev; ++e)
                r[static_cast<std::size_t>(e + Ev * t)] = static_cast<std::int32_t>(e * n_ctx + n_past + t);
        return tensor_set(*v_rows, r);
    }

    /// Query q (at position n_past + q) sees cached position j when j <= n_past + q and
    /// n_past + q - j < window (llama.cpp's standard sliding window).
    [[nodiscard]] status set_mask(tensor& t, int window) const {
        std::vector<float> m(static_cast<std::size_t>(n_kv) * static_cast<std::size_t>(n_tokens));
        for (int q = 0; q < n_tokens; ++q)
            for (int j = 0; j < n_kv; ++j) {
                const int d = n_past + q - j;
                m[static_cast<std::size_t>(q) * static_cast<std::size_t>(n_kv) +
                  static_cast<std::size_t>(j)] =
                    d >= 0 && d < window ? 0.0f : -std::numeric_limits<float>::infinity();
            }
        if (t.type == elem_type::f32)
            return tensor_set(t, m);
        std::vector<std::byte> bytes(t.nbytes());
        from_float_row(t.type, m.data(), bytes.data(), static_cast<std::int64_t>(m.size()));
        return tensor_set(t, bytes);
    }
};

namespace detail {

/// Builds the nodes of one step for model m over cache c.
class step_builder {
  public:
    step_builder(const model& m, const kv_cache& c, step& st)
        : m_(m), hp_(m.hp), tr_(m.hp.tr()), c_(c), st_(st), ctx_(st.ctx) {}

    /// x [n_embd, T] -> x after layer il.
    tensor* layer(tensor* x, int il) {
        const layer_weights& l = m_.layers[S(il)];
        sfx_ = "-" + std::to_string(il);
        tensor* cur = attention(l, named(norm(x, l.attn_norm), "attn_norm"), il);
        if (tr_.gemma)
            cur = named(norm(cur, l.attn_post_norm), "attn_post_norm");
        tensor* h = named(add(ctx_, cur, x), "ffn_inp");
        cur = named(norm(h, l.ffn_norm), "ffn_norm");
        cur = tr_.experts ? experts(l, cur) : dense_ffn(l, cur);
        if (tr_.gemma)
            cur = named(norm(cur, l.ffn_post_norm), "ffn_post_norm");
        return named(add(ctx_, cur, h), "l_out");
    }

    /// mamba2: x [n_embd, T] -> x after layer il.
    tensor* ssm_layer(tensor* x, int il) {
        const layer_weights& l = m_.layers[S(il)];
        sfx_ = "-" + std::to_string(il);
        tensor* cur = named(ssm_mixer(l, named(norm(x, l.attn_norm), "attn_norm"), il), "mamba_out");
        return named(add(ctx_, cur, x), "l_out");
    }

    /// x [n_embd, T] -> logits [n_vocab, T].
    tensor* output(tensor* x) {
        sfx_.clear();
        tensor* cur = named(norm(x, m_.w.output_norm), "result_norm");
        cur = mul_mat(ctx_, m_.w.output, cur);
        if (tr_.gemma)
            cur = softcap(cur, hp_.final_softcap);
        return named(cur, "result_output");
    }

    tensor* norm(tensor* x, tensor* weight) {
        return mul(ctx_, rms_norm(ctx_, x, hp_.rms_eps), weight);
    }

  private:
    const model& m_;
    const hparams& hp_;
    const arch_traits& tr_;
    const kv_cache& c_;
    step& st_;
    context& ctx_;
    std::string sfx_; ///< "-<layer>", appended to node names

    static std::size_t S(std::int64_t x) { return static_cast<std::size_t>(x); }
    tensor* named(tensor* t, const std::string& name) {
        t->name = name + sfx_;
        return t;
    }
    /// c tanh(x / c)
    tensor* softcap(tensor* x, float c) {
        return scale(ctx_, tanh(ctx_, scale(ctx_, x, 1.0f / c)), c);
    }

    /// w x (+ b)
    tensor* linear(tensor* w, tensor* b, tensor* x) {
        tensor* y = mul_mat(ctx_, w, x);
        return b != nullptr ? add(ctx_, y, b) : y;
    }

    /// x [n_embd, T] -> the attention's output [n_embd, T].
    tensor* attention(const layer_weights& l, tensor* cur, int il) {
        const std::int64_t Dk = hp_.head_dim_k, Dv = hp_.head_dim_v, H = hp_.n_head,
                           Hkv = hp_.n_head_kv, T = st_.n_tokens;
        tensor* q = reshape(ctx_, linear(l.wq, l.bq, cur), {Dk, H, T});
        tensor* k = reshape(ctx_, linear(l.wk, l.bk, cur), {Dk, Hkv, T});
        tensor* v = named(linear(l.wv, l.bv, cur), "Vcur"); // [Dv * Hkv, T]
        if (tr_.qk_norm) {
            q = named(norm(q, l.q_norm), "Qcur_normed");
            k = named(norm(k, l.k_norm), "Kcur_normed");
        }
        q = named(rope_ext(ctx_, q, st_.pos, m_.w.rope_freqs, hp_.n_rot, tr_.rope, hp_.n_ctx,
                           hp_.rope_base, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f),
                  "Qcur");
        k = named(rope_ext(ctx_, k, st_.pos, m_.w.rope_freqs, hp_.n_rot, tr_.rope, hp_.n_ctx,
                           hp_.rope_base, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f),
                  "Kcur");
        float kq_scale = hp_.kq_scale();
        if (tr_.gemma) { // llama.cpp scales the queries first, then softmax's scale is 1
            q = named(scale(ctx_, q, kq_scale), "Qcur_scaled");
            kq_scale = 1.0f;
        }
        store_kv(k, v, il);
        tensor* mask = hp_.sliding(il) ? st_.mask_swa : st_.mask;

        // over the cached positions [0, n_kv); query head h reads key/value head
        // h / (H / Hkv) (mul_mat and flash_attn_ext broadcast K and V over the query heads)
        const std::size_t es = type_size(c_.type);
        const std::int64_t n_kv = st_.n_kv, Ek = hp_.n_embd_k(), Ev = hp_.n_embd_v();
        tensor* K =
            named(view_3d(ctx_, c_.k[S(il)], Dk, n_kv, Hkv, S(Ek) * es, S(Dk) * es, 0), "k");
        tensor* Q = permute(ctx_, q, 0, 2, 1, 3); // [Dk, T, H]
        const float cap = tr_.gemma ? hp_.attn_softcap : 0.0f;
        if (c_.flash_attn) {
            tensor* V =
                named(view_3d(ctx_, c_.v[S(il)], Dv, n_kv, Hkv, S(Ev) * es, S(Dv) * es, 0), "v");
            tensor* kqv = named(flash_attn_ext(ctx_, Q, K, V, mask, kq_scale, 0.0f, cap),
                                "fattn"); // [Dv, H, T]
            cur = reshape(ctx_, kqv, {Dv * H, T});
        } else {
            tensor* V = named(view_3d(ctx_, c_.v[S(il)], n_kv, Dv, Hkv, S(c_.n_ctx) * es,
                                      S(c_.n_ctx) * S(Dv) * es, 0),
                              "v");
            tensor* kq = named(mul_mat(ctx_, K, Q), "kq"); // [n_kv, T, H]
            if (cap != 0.0f)
                kq = named(softcap(kq, cap), "kq_softcapped");
            kq = named(soft_max_ext(ctx_, kq, mask, kq_scale, 0.0f), "kq_soft_max");
            tensor* kqv = named(mul_mat(ctx_, V, kq), "kqv"); // [Dv, T, H]
            cur = reshape(ctx_, cont(ctx_, permute(ctx_, kqv, 0, 2, 1, 3)),
                          {Dv * H, T}); // heads merged
        }
        return named(mul_mat(ctx_, l.wo, cur), "attn_out");
    }

    /// This step's keys and values into the cache; the nodes are added now, so they run
    /// before the attention reads the cache. A token's row of K (and of V for flash
    /// attention) is the cache's row at its position: set_rows with the positions as row
    /// numbers (one sequence, so position = row), which a backend fuses with the rope.
    /// V transposed (no flash attention): each value a row of one element of the cache seen
    /// as [1, n_ctx * n_embd_v], at the element st_.v_rows names.
    void store_kv(tensor* k, tensor* v, int il) {
        const std::int64_t T = st_.n_tokens, Ek = hp_.n_embd_k(), Ev = hp_.n_embd_v();
        st_.g.build_forward(named(set_rows(ctx_, c_.k[S(il)], reshape(ctx_, k, {Ek, T}), st_.pos), "k_store"));
        if (c_.flash_attn) {
            st_.g.build_forward(named(set_rows(ctx_, c_.v[S(il)], v, st_.pos), "v_store"));
        } else {
            tensor* cells = reshape(ctx_, c_.v[S(il)], {1, c_.n_ctx * Ev});
            st_.g.build_forward(named(set_rows(ctx_, cells, reshape(ctx_, v, {1, Ev * T}), st_.v_rows), "v_store"));
        }
    }

    /// mamba2's mixer (graph.hpp's header): cur [n_embd, T] -> [n_embd, T]; the new
    /// convolution and scan states written into the cache (the nodes added now, after the
    /// nodes that read the old ones).
    tensor* ssm_mixer(const layer_weights& l, tensor* cur, int il) {
        const std::int64_t I = hp_.ssm_d_inner, N = hp_.ssm_d_state, H = hp_.n_head,
                           R = hp_.ssm_n_group, P = hp_.ssm_head_dim(), W = hp_.ssm_d_conv,
                           Cc = hp_.ssm_conv_channels(), T = st_.n_tokens;
        constexpr std::size_t es = sizeof(float);
        tensor* zxbcdt = named(mul_mat(ctx_, l.ssm_in, cur), "ssm_in"); // [I + Cc + H, T]
        const std::size_t row = zxbcdt->nb[1];
        tensor* z = view_2d(ctx_, zxbcdt, I, T, row, 0);
        tensor* xbc = view_2d(ctx_, zxbcdt, Cc, T, row, S(I) * es);
        tensor* dt = view_2d(ctx_, zxbcdt, H, T, row, S(I + Cc) * es);

        // the convolution over the state's W - 1 tokens and the T new ones
        tensor* conv_x = named(concat(ctx_, reshape(ctx_, c_.k[S(il)], {W - 1, Cc, 1}),
                                      reshape(ctx_, cont(ctx_, transpose(ctx_, xbc)), {T, Cc, 1}), 0),
                               "conv_x"); // [W - 1 + T, Cc, 1]
        tensor* last = view_3d(ctx_, conv_x, W - 1, Cc, 1, conv_x->nb[1], conv_x->nb[2], S(T) * es);
        st_.g.build_forward(named(cpy(ctx_, last, c_.k[S(il)]), "conv_store"));
        xbc = named(ssm_conv(ctx_, conv_x, l.ssm_conv1d), "ssm_conv"); // [Cc, T, 1]
        xbc = named(silu(ctx_, add(ctx_, xbc, l.ssm_conv1d_b)), "conv_out");

        // the scan: x by heads, B and C by groups
        tensor* x = view_4d(ctx_, xbc, P, H, T, 1, S(P) * es, xbc->nb[1], xbc->nb[2], 0);
        tensor* B = view_4d(ctx_, xbc, N, R, T, 1, S(N) * es, xbc->nb[1], xbc->nb[2], S(I) * es);
        tensor* C = view_4d(ctx_, xbc, N, R, T, 1, S(N) * es, xbc->nb[1], xbc->nb[2], S(I + R * N) * es);
        dt = named(add(ctx_, reshape(ctx_, cont(ctx_, dt), {H, T, 1}), l.ssm_dt_b), "dt");
        tensor* s = reshape(ctx_, c_.v[S(il)], {N, P, H, 1});
        tensor* y_ssm = named(ssm_scan(ctx_, s, x, dt, l.ssm_a, B, C, st_.rs_ids), "ssm_scan");
        const std::int64_t n_y = P * H * T;
        st_.g.build_forward(
            named(cpy(ctx_, view_1d(ctx_, y_ssm, N * P * H, S(n_y) * es), c_.v[S(il)]), "ssm_store"));

        // y + x D, gated by silu(z), RMSNorm per group, out-projection
        tensor* y = view_3d(ctx_, y_ssm, P, H, T, S(P) * es, S(P * H) * es, 0);
        y = named(add(ctx_, y, mul(ctx_, x, l.ssm_d)), "mamba2_y_add_d");
        y = named(swiglu_split(ctx_, cont(ctx_, z), reshape(ctx_, y, {I, T})), "mamba2_y_gated");
        y = reshape(ctx_, y, {I / R, R, T});
        y = named(norm(y, l.ssm_norm), "mamba2_y_norm");
        return named(mul_mat(ctx_, l.ssm_out, reshape(ctx_, y, {I, T})), "ssm_out");
    }

    /// SwiGLU (gemma2: GeGLU) feed-forward.
    tensor* dense_ffn(const layer_weights& l, tensor* cur) {
        tensor* gate = named(mul_mat(ctx_, l.ffn_gate, cur), "ffn_gate");
        tensor* up = named(mul_mat(ctx_, l.ffn_up, cur), "ffn_up");
        tensor* act = tr_.gemma ? geglu_split(ctx_, gate, up) : swiglu_split(ctx_, gate, up);
        return named(mul_mat(ctx_, l.ffn_down, named(act, "ffn_act")), "ffn_out");
    }

    /// The routed experts (qwen3moe): cur [n_embd, T] -> [n_embd, T].
    tensor* experts(const layer_weights& l, tensor* cur) {
        const std::int64_t E = hp_.n_embd, X = hp_.n_expert, U = hp_.n_expert_used,
                           T = st_.n_tokens;
        tensor* probs =
            named(soft_max(ctx_, mul_mat(ctx_, l.router, cur)), "ffn_moe_probs");    // [X, T]
        tensor* selected = named(top_k(ctx_, probs, U), "ffn_moe_topk");             // i32 [U, T]
        tensor* weights = get_rows(ctx_, reshape(ctx_, probs, {1, X, T}), selected); // [1, U, T]
        weights = reshape(ctx_, weights, {U, T});
        weights = named(div(ctx_, weights, sum_rows(ctx_, weights)), "ffn_moe_weights_norm");
        weights = reshape(ctx_, weights, {1, U, T});

        tensor* x = reshape(ctx_, cur, {E, 1, T});
        tensor* gate =
            named(mul_mat_id(ctx_, l.gate_exps, x, selected), "ffn_moe_gate"); // [G, U, T]
        tensor* up = named(mul_mat_id(ctx_, l.up_exps, x, selected), "ffn_moe_up");
        tensor* act = named(swiglu_split(ctx_, gate, up), "ffn_moe_act");
        tensor* out =
            named(mul_mat_id(ctx_, l.down_exps, act, selected), "ffn_moe_down"); // [E, U, T]
        out = named(mul(ctx_, out, weights), "ffn_moe_weighted");

        // the sum over the used experts
        const auto expert = [&](std::int64_t s) {
            return view_2d(ctx_, out, E, T, out->nb[2], S(s) * out->nb[1]);
        };
        tensor* sum = expert(0);
        for (std::int64_t s = 1; s < U; ++s)
            sum = add(ctx_, sum, expert(s));
        return named(U == 1 ? cont(ctx_, sum) : sum, "ffn_moe_out");
    }
};

} // namespace detail

namespace detail {
/// The logits of x (of its last token unless all_logits) as the step's output.
inline std::unique_ptr<step> finish_step(std::unique_ptr<step> st, step_builder& b, tensor* x, bool all_logits) {
    context& ctx = st->ctx;
    const std::int64_t E = x->ne[0], T = x->ne[1];
    if (!all_logits && T > 1)
        x = view_2d(ctx, x, E, 1, x->nb[1],
                    static_cast<std::size_t>(T - 1) * x->nb[1]); // the last token
    st->logits = b.output(x);
    st->logits->set_output();
    st->g.build_forward(st->logits);
    return st;
}
} // namespace detail


/// Builds a step's graph. Throws backplane::error on a bad shape (n_past + n_tokens past
/// the cache, say).
inline std::unique_ptr<step> build_step(const model& m, const kv_cache& c, int n_past, int n_tokens,
                                        bool all_logits, int kv_pad = 32) {
    const hparams& hp = m.hp;
    if (n_tokens <= 0 || n_past < 0 || n_past + n_tokens > c.n_ctx)
        throw error("build_step: positions [" + std::to_string(n_past) + ", " +
                        std::to_string(n_past + n_tokens) + ") do not fit the KV cache of " +
                        std::to_string(c.n_ctx),
                    errc::out_of_range);
    auto st = std::make_unique<step>();
    context& ctx = st->ctx;
    const std::int64_t E = hp.n_embd, T = n_tokens;
    const int pad = std::max(1, kv_pad);
    st->n_past = n_past;
    st->n_tokens = n_tokens;
    st->n_ctx = c.n_ctx;
    st->kv_pad = pad;
    st->n_kv = st->n_kv_for(n_past);
    st->n_swa = hp.n_swa;
    st->recurrent = c.recurrent;

    const auto input = [&](elem_type type, std::initializer_list<std::int64_t> ne,
                           const char* name) {
        tensor* t = ctx.new_tensor(type, ne);
        t->name = name;
        t->set_input();
        return t;
    };
    st->tokens = input(elem_type::i32, {T}, "inp_tokens");
    if (c.recurrent) {
        st->n_kv = 0;
        st->rs_ids = input(elem_type::i32, {1}, "inp_s_copy");
        detail::step_builder b(m, c, *st);
        tensor* x = get_rows(ctx, m.w.tok_embd, st->tokens);
        x->name = "inp_embd";
        for (int il = 0; il < hp.n_layer; ++il)
            x = b.ssm_layer(x, il);
        return detail::finish_step(std::move(st), b, x, all_logits);
    }
    st->pos = input(elem_type::i32, {T}, "inp_pos");
    if (!c.flash_attn)
        st->v_rows = input(elem_type::i32, {hp.n_embd_v() * T}, "inp_v_rows");
    for (int il = 0; il < hp.n_layer; ++il) { // each mask some layer reads
        tensor*& mask = hp.sliding(il) ? st->mask_swa : st->mask;
        if (mask == nullptr)
            mask = input(c.flash_attn ? elem_type::f16 : elem_type::f32, {st->n_kv, T},
                         hp.sliding(il) ? "kq_mask_swa" : "kq_mask");
    }

    detail::step_builder b(m, c, *st);
    tensor* x = get_rows(ctx, m.w.tok_embd, st->tokens);
    if (hp.tr().gemma)
        x = scale(ctx, x, std::sqrt(static_cast<float>(E)));
    x->name = "inp_embd";
    for (int il = 0; il < hp.n_layer; ++il)
        x = b.layer(x, il);
    return detail::finish_step(std::move(st), b, x, all_logits);
}

} // namespace llama

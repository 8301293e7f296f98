#pragma once
// The reference llama-like decoder graph for scheduler tests and benchmarks: a
// transformer of n_layer blocks (default 32 layers, n_embd 512, 8 heads, n_ff 1376,
// 32 tokens, vocabulary 4096, f32 weights) computing logits for a batch of tokens with
// no KV cache.
//
//     context wctx({.no_alloc = true});                    // weights: metadata only
//     llama_model model = make_llama_model(wctx, {});
//     auto wbufs = alloc_tensors(wctx, cpu_buffer_type::instance(), buffer_usage::weights);
//     context gctx({.no_alloc = true});                    // the compute graph
//     llama_inputs in = make_llama_inputs(gctx, model.params);
//     graph g = build_llama_graph(gctx, model, in);        // g.back() = logits (output)
//     graph_allocator ga(cpu_buffer_type::instance());
//     ga.alloc_graph(g);
//     fill_llama(model, in, 42);                           // through tensor_set: any buffer
//     cpu.compute(g);
//
// Weights are created in the caller's context; to spread them over buffers of several
// buffer types (half the layers on a GPU), place the lists model.layers[i].weights() with
// alloc_tensor_list() before anything else allocates that context.
//
// Per layer (30 nodes; names as llama.cpp's callbacks, suffixed with "-<layer>"):
//   attn_norm   rms_norm, mul by attn_norm weight                     2
//   Q, K, V     mul_mat(wq | wk | wv, cur)                            3
//   Q, K        reshape to [head_dim, n_head, n_tokens], rope,
//               permute(0, 2, 1, 3) to [head_dim, n_tokens, n_head]   6
//   V           reshape, permute(1, 2, 0, 3), cont: V^T per head,
//               [n_tokens, head_dim, n_head] (mul_mat's a must not be
//               transposed, as in ggml)                               3
//   kq          mul_mat(K, Q), soft_max(kq, mask, 1/sqrt(head_dim))   2
//   kqv         mul_mat(V^T, kq), permute(0, 2, 1, 3), cont,
//               reshape to [n_embd, n_tokens]                         4
//   attn_out    mul_mat(wo, .), residual add                          2
//   ffn         rms_norm, mul, mul_mat(gate), mul_mat(up), silu,
//               mul, mul_mat(down), residual add                      8
// then output norm (rms_norm, mul) and the vocabulary mul_mat: 3 nodes.
//
// Node count: 30 * n_layer + 3 = 963 for 32 layers (964 with token_input, where the
// embeddings come from get_rows(tok_embd, tokens)); llama_node_count(params) computes
// it. ggml counts 932 for this model: its ggml_cont_2d makes the merged heads contiguous
// and 2-d in one node, where backplane's cont keeps the shape and needs a reshape after
// it (+1 node per layer, +32), and ggml's graph starts with the get_rows of the token
// embeddings (-1 here by default): 963 = 932 + 32 - 1.

#include <backplane/core/convert.hpp>
#include <backplane/core.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>
#include <backplane/memory/detail/align.hpp>
#include <backplane/memory/tensor_alloc.hpp>
#include <backplane/memory/tensor_io.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace backplane::test {

struct llama_params {
    int n_layer = 32;
    int n_embd = 512;
    int n_head = 8;
    int n_ff = 1376;
    int n_tokens = 32;
    int n_vocab = 4096;
    elem_type wtype = elem_type::f32; ///< the mul_mat weights (and tok_embd); norms stay f32
    float rms_eps = 1e-5f;
    float rope_base = 10000.0f;
    /// Start from token ids: inputs.tokens (i32) and get_rows(model.tok_embd, tokens).
    /// false: start from inputs.x, the embeddings, an f32 input.
    bool token_input = false;

    [[nodiscard]] int head_dim() const noexcept { return n_embd / n_head; }
};

/// Nodes of build_llama_graph's graph (see the file comment).
[[nodiscard]] constexpr std::size_t llama_node_count(const llama_params& p) noexcept {
    return static_cast<std::size_t>(p.n_layer) * 30 + 3 + (p.token_input ? 1 : 0);
}

struct llama_layer {
    tensor* attn_norm = nullptr; ///< f32 [n_embd]
    tensor* wq = nullptr;        ///< wtype [n_embd, n_embd]
    tensor* wk = nullptr;
    tensor* wv = nullptr;
    tensor* wo = nullptr;
    tensor* ffn_norm = nullptr; ///< f32 [n_embd]
    tensor* ffn_gate = nullptr; ///< wtype [n_embd, n_ff]
    tensor* ffn_up = nullptr;   ///< wtype [n_embd, n_ff]
    tensor* ffn_down = nullptr; ///< wtype [n_ff, n_embd]

    /// This layer's weights, in creation order.
    [[nodiscard]] std::vector<tensor*> weights() const {
        return {attn_norm, wq, wk, wv, wo, ffn_norm, ffn_gate, ffn_up, ffn_down};
    }
};

struct llama_model {
    llama_params params;
    std::vector<llama_layer> layers;
    tensor* tok_embd = nullptr;    ///< wtype [n_embd, n_vocab]; only with params.token_input
    tensor* output_norm = nullptr; ///< f32 [n_embd]
    tensor* output = nullptr;      ///< wtype [n_embd, n_vocab]

    /// Weights outside the layers (tok_embd when present, output_norm, output).
    [[nodiscard]] std::vector<tensor*> global_weights() const {
        std::vector<tensor*> v;
        if (tok_embd) v.push_back(tok_embd);
        v.push_back(output_norm);
        v.push_back(output);
        return v;
    }
    /// Weights of layers [first, last).
    [[nodiscard]] std::vector<tensor*> layer_weights(int first, int last) const {
        std::vector<tensor*> v;
        for (int il = first; il < last; ++il)
            for (tensor* t : layers[static_cast<std::size_t>(il)].weights()) v.push_back(t);
        return v;
    }
    /// Every weight.
    [[nodiscard]] std::vector<tensor*> all_weights() const {
        std::vector<tensor*> v = global_weights();
        for (tensor* t : layer_weights(0, params.n_layer)) v.push_back(t);
        return v;
    }
};

struct llama_inputs {
    tensor* tokens = nullptr; ///< i32 [n_tokens], input; only with params.token_input
    tensor* x = nullptr;      ///< f32 [n_embd, n_tokens] embeddings, input; without token_input
    tensor* pos = nullptr;    ///< i32 [n_tokens] positions for rope, input
    tensor* mask = nullptr;   ///< f32 [n_tokens, n_tokens] causal kq mask (0 / -inf), input
};

namespace detail {
inline tensor* named(tensor* t, std::string name) {
    t->name = std::move(name);
    return t;
}
inline std::string layer_name(const char* what, int il) { return std::string(what) + "-" + std::to_string(il); }
} // namespace detail

/// The weights, created (without data when ctx is no_alloc) in ctx. Throws
/// backplane::error for inconsistent parameters.
inline llama_model make_llama_model(context& ctx, const llama_params& p) {
    if (p.n_layer < 0 || p.n_embd <= 0 || p.n_head <= 0 || p.n_embd % p.n_head != 0 || p.head_dim() % 2 != 0 ||
        p.n_ff <= 0 || p.n_tokens <= 0 || p.n_vocab <= 0)
        throw error("make_llama_model: inconsistent parameters (n_embd must be a multiple of n_head, with an even "
                    "head_dim)");
    llama_model m;
    m.params = p;
    const std::int64_t E = p.n_embd, F = p.n_ff, V = p.n_vocab;
    using detail::named;
    if (p.token_input) m.tok_embd = named(ctx.new_tensor_2d(p.wtype, E, V), "token_embd.weight");
    m.layers.resize(static_cast<std::size_t>(p.n_layer));
    for (int il = 0; il < p.n_layer; ++il) {
        llama_layer& l = m.layers[static_cast<std::size_t>(il)];
        const std::string blk = "blk." + std::to_string(il) + ".";
        l.attn_norm = named(ctx.new_tensor_1d(elem_type::f32, E), blk + "attn_norm.weight");
        l.wq = named(ctx.new_tensor_2d(p.wtype, E, E), blk + "attn_q.weight");
        l.wk = named(ctx.new_tensor_2d(p.wtype, E, E), blk + "attn_k.weight");
        l.wv = named(ctx.new_tensor_2d(p.wtype, E, E), blk + "attn_v.weight");
        l.wo = named(ctx.new_tensor_2d(p.wtype, E, E), blk + "attn_output.weight");
        l.ffn_norm = named(ctx.new_tensor_1d(elem_type::f32, E), blk + "ffn_norm.weight");
        l.ffn_gate = named(ctx.new_tensor_2d(p.wtype, E, F), blk + "ffn_gate.weight");
        l.ffn_up = named(ctx.new_tensor_2d(p.wtype, E, F), blk + "ffn_up.weight");
        l.ffn_down = named(ctx.new_tensor_2d(p.wtype, F, E), blk + "ffn_down.weight");
    }
    m.output_norm = named(ctx.new_tensor_1d(elem_type::f32, E), "output_norm.weight");
    m.output = named(ctx.new_tensor_2d(p.wtype, E, V), "output.weight");
    return m;
}

/// The graph's inputs, created in ctx (usually the graph's no_alloc context, so the graph
/// allocator places them) and flagged input.
inline llama_inputs make_llama_inputs(context& ctx, const llama_params& p) {
    llama_inputs in;
    using detail::named;
    if (p.token_input)
        in.tokens = named(ctx.new_tensor_1d(elem_type::i32, p.n_tokens), "inp_tokens");
    else
        in.x = named(ctx.new_tensor_2d(elem_type::f32, p.n_embd, p.n_tokens), "inp_embd");
    in.pos = named(ctx.new_tensor_1d(elem_type::i32, p.n_tokens), "inp_pos");
    in.mask = named(ctx.new_tensor_2d(elem_type::f32, p.n_tokens, p.n_tokens), "kq_mask");
    for (tensor* t : {in.tokens, in.x, in.pos, in.mask})
        if (t) t->set_input();
    return in;
}

/// The forward graph; its last node (g.back()) is the logits, f32 [n_vocab, n_tokens],
/// flagged output. Node tensors are created in ctx.
inline graph build_llama_graph(context& ctx, const llama_model& m, const llama_inputs& in) {
    const llama_params& p = m.params;
    const std::int64_t E = p.n_embd, H = p.n_head, D = p.head_dim(), T = p.n_tokens;
    const float kq_scale = 1.0f / std::sqrt(static_cast<float>(D));
    using detail::layer_name;
    using detail::named;

    tensor* inpL = nullptr;
    if (p.token_input) {
        if (in.tokens == nullptr || m.tok_embd == nullptr)
            throw error("build_llama_graph: token_input needs inputs.tokens and model.tok_embd");
        inpL = named(get_rows(ctx, m.tok_embd, in.tokens), "inp_embd");
    } else {
        if (in.x == nullptr) throw error("build_llama_graph: inputs.x is null");
        inpL = in.x;
    }

    for (int il = 0; il < p.n_layer; ++il) {
        const llama_layer& l = m.layers[static_cast<std::size_t>(il)];
        tensor* cur = named(rms_norm(ctx, inpL, p.rms_eps), layer_name("norm", il));
        cur = named(mul(ctx, cur, l.attn_norm), layer_name("attn_norm", il));

        tensor* q = named(mul_mat(ctx, l.wq, cur), layer_name("Qcur", il));
        tensor* k = named(mul_mat(ctx, l.wk, cur), layer_name("Kcur", il));
        tensor* v = named(mul_mat(ctx, l.wv, cur), layer_name("Vcur", il));

        q = named(reshape(ctx, q, {D, H, T}), layer_name("Qcur_3d", il));
        q = named(rope(ctx, q, in.pos, static_cast<int>(D), rope_mode::normal, p.rope_base), layer_name("Qrope", il));
        q = named(permute(ctx, q, 0, 2, 1, 3), layer_name("q", il)); // [D, T, H]
        k = named(reshape(ctx, k, {D, H, T}), layer_name("Kcur_3d", il));
        k = named(rope(ctx, k, in.pos, static_cast<int>(D), rope_mode::normal, p.rope_base), layer_name("Krope", il));
        k = named(permute(ctx, k, 0, 2, 1, 3), layer_name("k", il)); // [D, T, H]
        v = named(reshape(ctx, v, {D, H, T}), layer_name("Vcur_3d", il));
        v = named(permute(ctx, v, 1, 2, 0, 3), layer_name("v_t", il)); // [T, D, H]: V^T per head
        v = named(cont(ctx, v), layer_name("v", il));

        tensor* kq = named(mul_mat(ctx, k, q), layer_name("kq", il)); // [T_kv, T_q, H]
        kq = named(soft_max(ctx, kq, in.mask, kq_scale), layer_name("kq_soft_max", il));
        tensor* kqv = named(mul_mat(ctx, v, kq), layer_name("kqv", il));                  // [D, T, H]
        kqv = named(permute(ctx, kqv, 0, 2, 1, 3), layer_name("kqv_merged", il));         // [D, H, T]
        kqv = named(cont(ctx, kqv), layer_name("kqv_merged_cont", il));
        cur = named(reshape(ctx, kqv, {E, T}), layer_name("kqv_out", il));

        cur = named(mul_mat(ctx, l.wo, cur), layer_name("attn_out", il));
        tensor* ffn_inp = named(add(ctx, cur, inpL), layer_name("ffn_inp", il));

        cur = named(rms_norm(ctx, ffn_inp, p.rms_eps), layer_name("ffn_norm_raw", il));
        cur = named(mul(ctx, cur, l.ffn_norm), layer_name("ffn_norm", il));
        tensor* gate = named(mul_mat(ctx, l.ffn_gate, cur), layer_name("ffn_gate", il));
        tensor* up = named(mul_mat(ctx, l.ffn_up, cur), layer_name("ffn_up", il));
        gate = named(silu(ctx, gate), layer_name("ffn_silu", il));
        cur = named(mul(ctx, gate, up), layer_name("ffn_gate_par", il));
        cur = named(mul_mat(ctx, l.ffn_down, cur), layer_name("ffn_out", il));
        inpL = named(add(ctx, cur, ffn_inp), layer_name("l_out", il));
    }

    tensor* cur = named(rms_norm(ctx, inpL, p.rms_eps), "result_norm_raw");
    cur = named(mul(ctx, cur, m.output_norm), "result_norm");
    tensor* logits = named(mul_mat(ctx, m.output, cur), "result_output");
    logits->set_output();
    return graph(logits);
}

/// Places `tensors` (none with data yet; views excluded) one after another in a new
/// buffer of type bt with the given usage, returned to the caller (it must outlive them).
/// On failure nothing is placed.
inline result<buffer_ptr> alloc_tensor_list(std::span<tensor* const> tensors, buffer_type_ref bt,
                                            buffer_usage usage = buffer_usage::weights) {
    const std::size_t align = backplane::detail::sane_alignment(bt.alignment());
    std::size_t total = 0;
    for (const tensor* t : tensors) {
        const auto padded = backplane::detail::align_up(bt.alloc_size(*t), align);
        if (!padded || *padded > std::numeric_limits<std::size_t>::max() - total)
            return status(errc::alloc_failed, "alloc_tensor_list: sizes overflow");
        total += *padded;
    }
    auto buf = bt.allocate(total);
    if (!buf) return buf.error();
    (*buf)->set_usage(usage);
    tensor_allocator ta(**buf);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        if (status s = ta.allocate(*tensors[i]); !s) {
            for (std::size_t j = 0; j < i; ++j) unplace_tensor(*tensors[j]);
            return s;
        }
    }
    return std::move(*buf);
}

namespace detail {
/// Uniform in [lo, hi), the same on every platform (std::uniform_real_distribution is not).
inline float uniform(std::mt19937& rng, float lo, float hi) {
    const double u = static_cast<double>(rng() >> 8) / static_cast<double>(1u << 24);
    return static_cast<float>(lo + (hi - lo) * u);
}

/// Writes n_values uniform values into t (contiguous) in its element type.
inline status fill_uniform(tensor& t, std::mt19937& rng, float lo, float hi) {
    if (!t.is_contiguous())
        return {errc::invalid_argument, "fill_llama: tensor '" + t.name + "' is not contiguous"};
    const std::int64_t row = t.ne[0];
    std::vector<float> values(static_cast<std::size_t>(row));
    std::vector<std::byte> bytes(t.nbytes());
    for (std::int64_t r = 0; r < t.nrows(); ++r) {
        for (float& v : values) v = uniform(rng, lo, hi);
        from_float_row(t.type, values.data(), bytes.data() + static_cast<std::size_t>(r) * t.nb[1], row);
    }
    return tensor_set(t, bytes.data(), 0, bytes.size());
}
} // namespace detail

/// Random weights (uniform in +-1/sqrt(fan_in) for matrices, [0.8, 1.2) for norms),
/// written through tensor_set, so any buffer works. The weights must have data.
inline status fill_llama_weights(const llama_model& m, std::uint32_t seed) {
    std::mt19937 rng(seed);
    auto fill_matrix = [&](tensor* t) {
        const float a = 1.0f / std::sqrt(static_cast<float>(t->ne[0]));
        return detail::fill_uniform(*t, rng, -a, a);
    };
    auto fill_norm = [&](tensor* t) { return detail::fill_uniform(*t, rng, 0.8f, 1.2f); };
    if (m.tok_embd)
        if (status s = detail::fill_uniform(*m.tok_embd, rng, -1.0f, 1.0f); !s) return s;
    for (const llama_layer& l : m.layers) {
        for (tensor* t : {l.attn_norm, l.ffn_norm})
            if (status s = fill_norm(t); !s) return s;
        for (tensor* t : {l.wq, l.wk, l.wv, l.wo, l.ffn_gate, l.ffn_up, l.ffn_down})
            if (status s = fill_matrix(t); !s) return s;
    }
    if (status s = fill_norm(m.output_norm); !s) return s;
    return fill_matrix(m.output);
}

/// Inputs: random embeddings in [-1, 1) (or random token ids), positions 0..n_tokens-1
/// and the causal mask (0 where key <= query, -inf after). The inputs must have data.
inline status fill_llama_inputs(const llama_params& p, const llama_inputs& in, std::uint32_t seed) {
    std::mt19937 rng(seed ^ 0x9e3779b9u);
    if (in.x)
        if (status s = detail::fill_uniform(*in.x, rng, -1.0f, 1.0f); !s) return s;
    if (in.tokens) {
        std::vector<std::int32_t> ids(static_cast<std::size_t>(p.n_tokens));
        for (auto& id : ids) id = static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(p.n_vocab));
        if (status s = tensor_set(*in.tokens, ids); !s) return s;
    }
    std::vector<std::int32_t> pos(static_cast<std::size_t>(p.n_tokens));
    for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<std::int32_t>(i);
    if (status s = tensor_set(*in.pos, pos); !s) return s;
    std::vector<float> mask(static_cast<std::size_t>(p.n_tokens) * static_cast<std::size_t>(p.n_tokens));
    for (int q = 0; q < p.n_tokens; ++q)
        for (int k = 0; k < p.n_tokens; ++k)
            mask[static_cast<std::size_t>(q) * static_cast<std::size_t>(p.n_tokens) + static_cast<std::size_t>(k)] =
                k <= q ? 0.0f : -std::numeric_limits<float>::infinity();
    return tensor_set(*in.mask, mask);
}

/// fill_llama_weights and fill_llama_inputs with one seed.
inline status fill_llama(const llama_model& m, const llama_inputs& in, std::uint32_t seed) {
    if (status s = fill_llama_weights(m, seed); !s) return s;
    return fill_llama_inputs(m.params, in, seed);
}

/// A model with its weights placed in memory and its graph built: the weights of layers
/// [0, split) (and the global weights too with globals_too) in one weights buffer of type
/// `first`, everything else in one host weights buffer; without `first`, everything in
/// host memory. Weights and inputs are not filled (fill_llama). Throws backplane::error
/// when a buffer cannot be allocated.
struct llama_instance {
    context wctx{context_params{.no_alloc = true}};
    context gctx{context_params{.no_alloc = true}};
    llama_model model;
    llama_inputs inputs;
    graph g;
    std::vector<buffer_ptr> buffers;

    explicit llama_instance(const llama_params& p, std::optional<buffer_type_ref> first = std::nullopt, int split = 0,
                            bool globals_too = false) {
        model = make_llama_model(wctx, p);
        const int cut = first ? std::clamp(split, 0, p.n_layer) : 0;
        std::vector<tensor*> host, dev;
        for (tensor* t : model.global_weights()) (first && globals_too ? dev : host).push_back(t);
        for (tensor* t : model.layer_weights(0, cut)) dev.push_back(t);
        for (tensor* t : model.layer_weights(cut, p.n_layer)) host.push_back(t);
        if (!host.empty()) keep(alloc_tensor_list(host, cpu_buffer_type::instance()));
        if (!dev.empty()) keep(alloc_tensor_list(dev, *first));
        inputs = make_llama_inputs(gctx, p);
        g = build_llama_graph(gctx, model, inputs);
    }

    /// The weights placed by `place(model)`, which returns the buffers holding them
    /// (throwing backplane::error when it cannot).
    template <class Place>
        requires std::is_invocable_r_v<std::vector<buffer_ptr>, Place&, const llama_model&>
    llama_instance(const llama_params& p, Place&& place) {
        model = make_llama_model(wctx, p);
        buffers = place(model);
        inputs = make_llama_inputs(gctx, p);
        g = build_llama_graph(gctx, model, inputs);
    }

private:
    void keep(result<buffer_ptr> r) {
        if (!r) throw error(r.error().message(), r.error().code());
        buffers.push_back(std::move(*r));
    }
};

} // namespace backplane::test

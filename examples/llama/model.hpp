#pragma once
// The model of examples/llama: a llama-style decoder (RMSNorm, RoPE, grouped-query
// attention over a KV cache, SwiGLU feed-forward, tied or separate output matrix) whose
// hyper-parameters and weights come from a GGUF file with llama.cpp's names:
//
//   general.architecture = "llama"
//   llama.context_length, llama.embedding_length, llama.block_count,
//   llama.feed_forward_length, llama.attention.head_count,
//   llama.attention.head_count_kv (default: head_count),
//   llama.attention.layer_norm_rms_epsilon, llama.rope.freq_base (default 10000)
//
//   token_embd.weight [n_embd, n_vocab]          output_norm.weight [n_embd]
//   output.weight [n_embd, n_vocab] (absent: tied to token_embd.weight)
//   blk.<i>.attn_norm.weight [n_embd]            blk.<i>.ffn_norm.weight [n_embd]
//   blk.<i>.attn_q.weight [n_embd, n_embd]       blk.<i>.attn_output.weight [n_embd, n_embd]
//   blk.<i>.attn_k.weight [n_embd, n_embd_kv]    blk.<i>.attn_v.weight [n_embd, n_embd_kv]
//   blk.<i>.ffn_gate.weight [n_embd, n_ff]       blk.<i>.ffn_up.weight [n_embd, n_ff]
//   blk.<i>.ffn_down.weight [n_ff, n_embd]
//
// Weights on the CPU stay in the file's memory mapping (a host buffer over it: no copy);
// the weights of offloaded layers are copied into the device's memory. Q and K use RoPE's
// "normal" mode (adjacent pairs), as llama.cpp does for this architecture (its converter
// permutes the rows of attn_q and attn_k to match).

#include <backplane/backplane.hpp>
#include <backplane/io/gguf.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace llama {

using namespace backplane;

struct hparams {
    int n_vocab = 4096;
    int n_ctx = 2048; ///< the longest sequence the model was made for
    int n_embd = 512;
    int n_layer = 8;
    int n_head = 8;
    int n_head_kv = 4;
    int n_ff = 1376;
    float rms_eps = 1e-5f;
    float rope_base = 10000.0f;

    [[nodiscard]] int head_dim() const noexcept { return n_embd / n_head; }
    [[nodiscard]] int n_embd_kv() const noexcept { return head_dim() * n_head_kv; }

    [[nodiscard]] status validate() const {
        const auto bad = [](const std::string& what) {
            return status(errc::invalid_argument, "model: " + what);
        };
        if (n_vocab <= 0 || n_ctx <= 0 || n_embd <= 0 || n_layer <= 0 || n_head <= 0 ||
            n_head_kv <= 0 || n_ff <= 0)
            return bad("every size must be positive");
        if (n_embd % n_head != 0 || head_dim() % 2 != 0)
            return bad("n_embd (" + std::to_string(n_embd) + ") must be a multiple of n_head (" +
                       std::to_string(n_head) + ") with an even head size");
        if (n_head % n_head_kv != 0)
            return bad("n_head (" + std::to_string(n_head) + ") must be a multiple of n_head_kv (" +
                       std::to_string(n_head_kv) + ")");
        if (!(rms_eps > 0.0f) || !(rope_base > 0.0f))
            return bad("rms epsilon and rope base must be positive");
        return {};
    }
};

/// Reads the hyper-parameters of a "llama" GGUF file (n_vocab from token_embd.weight).
inline result<hparams> read_hparams(const gguf::file& f) {
    auto arch = f.get<std::string>("general.architecture");
    if (!arch)
        return arch.error();
    if (*arch != "llama")
        return status(errc::invalid_argument,
                      "model: general.architecture is '" + *arch + "'; this example runs 'llama'");
    hparams hp;
    // an int or float value; a missing optional key leaves `out` as it is
    const auto get = [&]<class T>(const char* key, T& out, bool required) -> status {
        auto v = f.get<T>(key);
        if (v) {
            out = *v;
            return {};
        }
        if (!required && v.error().code() == errc::not_found)
            return {};
        return v.error();
    };
    if (auto s = get("llama.context_length", hp.n_ctx, true); !s)
        return s;
    if (auto s = get("llama.embedding_length", hp.n_embd, true); !s)
        return s;
    if (auto s = get("llama.block_count", hp.n_layer, true); !s)
        return s;
    if (auto s = get("llama.feed_forward_length", hp.n_ff, true); !s)
        return s;
    if (auto s = get("llama.attention.head_count", hp.n_head, true); !s)
        return s;
    hp.n_head_kv = hp.n_head;
    if (auto s = get("llama.attention.head_count_kv", hp.n_head_kv, false); !s)
        return s;
    if (auto s = get("llama.attention.layer_norm_rms_epsilon", hp.rms_eps, true); !s)
        return s;
    if (auto s = get("llama.rope.freq_base", hp.rope_base, false); !s)
        return s;
    const gguf::tensor_info* emb = f.find_tensor("token_embd.weight");
    if (emb == nullptr)
        return status(errc::invalid_argument, "model: no tensor 'token_embd.weight'");
    if (emb->ne[1] > std::numeric_limits<int>::max())
        return status(errc::invalid_argument, "model: vocabulary too large");
    hp.n_vocab = static_cast<int>(emb->ne[1]);
    if (auto s = hp.validate(); !s)
        return s;
    return hp;
}

struct layer {
    tensor* attn_norm = nullptr;
    tensor* wq = nullptr;
    tensor* wk = nullptr;
    tensor* wv = nullptr;
    tensor* wo = nullptr;
    tensor* ffn_norm = nullptr;
    tensor* ffn_gate = nullptr;
    tensor* ffn_up = nullptr;
    tensor* ffn_down = nullptr;
};

/// Which weights live in a device's memory: the last `layers` layers, and the output norm
/// and matrix when `layers` exceeds the layer count (-1: everything). Without a device,
/// everything stays on the CPU. model::load resolves it into first_offloaded and output.
struct placement {
    std::optional<buffer_type_ref> device;
    int layers = -1;
    int first_offloaded = 0; ///< set by model::load: the first layer on the device
    bool output = false;     ///< set by model::load: the output on the device
};

/// Called while loading with (tensors done, tensors in all).
using progress_fn = std::function<void(std::size_t, std::size_t)>;

/// The expected shape of each tensor of a model, by name (n_dims and extents).
struct expected_tensor {
    std::string name;
    std::int64_t ne0 = 1;
    std::int64_t ne1 = 1;
    int n_dims = 1;
    int layer = -1; ///< -1: not in a layer (token_embd, output_norm, output)
};

inline std::vector<expected_tensor> expected_tensors(const hparams& hp, bool with_output) {
    const std::int64_t E = hp.n_embd, Ekv = hp.n_embd_kv(), F = hp.n_ff, V = hp.n_vocab;
    std::vector<expected_tensor> v;
    v.push_back({"token_embd.weight", E, V, 2, -1});
    for (int il = 0; il < hp.n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        v.push_back({b + "attn_norm.weight", E, 1, 1, il});
        v.push_back({b + "attn_q.weight", E, E, 2, il});
        v.push_back({b + "attn_k.weight", E, Ekv, 2, il});
        v.push_back({b + "attn_v.weight", E, Ekv, 2, il});
        v.push_back({b + "attn_output.weight", E, E, 2, il});
        v.push_back({b + "ffn_norm.weight", E, 1, 1, il});
        v.push_back({b + "ffn_gate.weight", E, F, 2, il});
        v.push_back({b + "ffn_up.weight", E, F, 2, il});
        v.push_back({b + "ffn_down.weight", F, E, 2, il});
    }
    v.push_back({"output_norm.weight", E, 1, 1, -1});
    if (with_output)
        v.push_back({"output.weight", E, V, 2, -1});
    return v;
}

/// A loaded model: hyper-parameters and weights, some over the file's mapping, some in
/// device memory. Not movable (tensors point into its contexts).
class model {
  public:
    hparams hp;
    tensor* tok_embd = nullptr;
    tensor* output_norm = nullptr;
    tensor* output = nullptr;
    bool tied_output = false;
    std::vector<layer> layers;
    placement place;
    std::size_t device_bytes = 0; ///< weights copied into the device's memory
    std::size_t host_bytes = 0;   ///< weights read over the mapping

    model() = default;
    model(const model&) = delete;
    model& operator=(const model&) = delete;

    /// Opens `path`, checks every tensor's name, type and shape, maps the file and copies
    /// the offloaded weights into the device's memory.
    static result<std::unique_ptr<model>> load(const std::filesystem::path& path,
                                               const placement& place,
                                               const progress_fn& progress = {}) {
        auto m = std::make_unique<model>();
        if (auto s = m->load_from(path, place, progress); !s)
            return s;
        return m;
    }

    /// True when layer il's weights and KV cache are in the device's memory (il = n_layer:
    /// the output norm and matrix).
    [[nodiscard]] bool on_device(int il) const {
        return place.device && (il < hp.n_layer ? il >= place.first_offloaded : place.output);
    }

  private:
    std::optional<gguf::file> file_;
    context mapped_ctx_{context_params{.no_alloc = true}};
    context device_ctx_{context_params{.no_alloc = true}};
    gguf::loaded mapped_;
    buffer_list device_bufs_;

    status load_from(const std::filesystem::path& path, const placement& pl,
                     const progress_fn& progress) {
        auto f = gguf::file::open(path);
        if (!f)
            return f.error();
        file_.emplace(std::move(*f));
        auto h = read_hparams(*file_);
        if (!h)
            return h.error();
        hp = *h;
        place = pl;
        const int n_off = !place.device ? 0 : place.layers < 0 ? hp.n_layer + 1 : place.layers;
        place.first_offloaded = hp.n_layer - std::min(n_off, hp.n_layer);
        place.output = n_off > hp.n_layer;
        tied_output = file_->find_tensor("output.weight") == nullptr;

        // every tensor present with its shape and a type the backends compute
        const std::vector<expected_tensor> expected = expected_tensors(hp, !tied_output);
        for (const expected_tensor& e : expected) {
            const gguf::tensor_info* ti = file_->find_tensor(e.name);
            if (ti == nullptr)
                return {errc::invalid_argument, "model: no tensor '" + e.name + "'"};
            if (ti->ne[0] != e.ne0 || ti->ne[1] != e.ne1 || ti->ne[2] != 1 || ti->ne[3] != 1)
                return {errc::invalid_argument,
                        "model: tensor '" + e.name + "' has shape [" + std::to_string(ti->ne[0]) +
                            ", " + std::to_string(ti->ne[1]) + ", ...], expected [" +
                            std::to_string(e.ne0) + ", " + std::to_string(e.ne1) + "]"};
            const bool norm = e.n_dims == 1;
            if (norm ? ti->type != elem_type::f32 : ti->type == elem_type::i32)
                return {errc::invalid_argument,
                        "model: tensor '" + e.name + "' has type " +
                            std::string(to_string(ti->type)) +
                            (norm ? ", expected f32" : ", expected a float or quantized type")};
        }

        // everything over the mapping first: the CPU's weights are used in place
        auto mapped = file_->load(mapped_ctx_);
        if (!mapped)
            return mapped.error();
        mapped_ = std::move(*mapped);

        // the offloaded weights: device tensors of the same type and shape, filled from the
        // mapping (the output matrix of a tied model is a device copy of token_embd)
        std::vector<std::pair<const tensor*, tensor*>> copies;
        const auto to_device = [&](const expected_tensor& e) { // token_embd stays for get_rows
            return e.name != "token_embd.weight" && on_device(e.layer >= 0 ? e.layer : hp.n_layer);
        };
        std::vector<const tensor*> chosen;
        try {
            for (const expected_tensor& e : expected) {
                const tensor* src = mapped_.find(e.name);
                if (!to_device(e)) {
                    chosen.push_back(src);
                    host_bytes += src->nbytes();
                    continue;
                }
                tensor* t = device_ctx_.new_tensor(src->type, {src->ne[0], src->ne[1]});
                t->name = e.name;
                copies.emplace_back(src, t);
                chosen.push_back(t);
            }
            if (tied_output && on_device(hp.n_layer)) {
                const tensor* src = mapped_.find("token_embd.weight");
                tensor* t = device_ctx_.new_tensor(src->type, {src->ne[0], src->ne[1]});
                t->name = "output.weight";
                copies.emplace_back(src, t);
            }
        } catch (const error& e) {
            return {e.code(), e.what()};
        }
        if (!copies.empty()) {
            auto bufs = alloc_tensors(device_ctx_, *place.device, buffer_usage::weights);
            if (!bufs)
                return bufs.error();
            device_bufs_ = std::move(*bufs);
        }
        std::vector<std::byte> staging;
        for (std::size_t i = 0; i < copies.size(); ++i) {
            if (auto s = tensor_copy(*copies[i].first, *copies[i].second, staging); !s)
                return s;
            device_bytes += copies[i].second->nbytes();
            if (progress)
                progress(i + 1, copies.size());
        }

        // wire the model
        std::size_t k = 0;
        const auto next = [&]() { return const_cast<tensor*>(chosen[k++]); };
        tok_embd = next();
        layers.resize(static_cast<std::size_t>(hp.n_layer));
        for (layer& l : layers)
            for (tensor** p : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.ffn_gate,
                               &l.ffn_up, &l.ffn_down})
                *p = next();
        output_norm = next();
        if (!tied_output) {
            output = next();
        } else if (on_device(hp.n_layer)) {
            output = copies.back().second;
        } else {
            output = tok_embd;
        }
        return {};
    }
};

/// The keys and values of every layer: K as [n_embd_kv, n_ctx] (one row per position),
/// V transposed as [n_ctx, n_embd_kv] (one row per channel), so that attention reads both
/// as matrices without a copy. Each layer's cache lives where its weights do.
class kv_cache {
  public:
    int n_ctx = 0;
    elem_type type = elem_type::f32;
    std::vector<tensor*> k, v;
    std::size_t bytes = 0;

    kv_cache() = default;
    kv_cache(const kv_cache&) = delete;
    kv_cache& operator=(const kv_cache&) = delete;

    static result<std::unique_ptr<kv_cache>> make(const model& m, int n_ctx, elem_type type) {
        if (n_ctx <= 0)
            return status(errc::invalid_argument, "kv cache: n_ctx must be positive");
        if (type != elem_type::f32 && type != elem_type::f16)
            return status(errc::invalid_argument, "kv cache: type must be f32 or f16");
        auto c = std::make_unique<kv_cache>();
        c->n_ctx = n_ctx;
        c->type = type;
        const std::int64_t Ekv = m.hp.n_embd_kv();
        try {
            for (int il = 0; il < m.hp.n_layer; ++il) {
                context& ctx = m.on_device(il) ? c->device_ctx_ : c->host_ctx_;
                tensor* kt = ctx.new_tensor(type, {Ekv, n_ctx});
                tensor* vt = ctx.new_tensor(type, {n_ctx, Ekv});
                kt->name = "cache_k_l" + std::to_string(il);
                vt->name = "cache_v_l" + std::to_string(il);
                c->k.push_back(kt);
                c->v.push_back(vt);
            }
        } catch (const error& e) {
            return status(e.code(), e.what());
        }
        // zeros: attention reads the padded positions (masked out) and 0 * 0 must stay 0
        const auto place = [&](context& ctx, buffer_type_ref bt) -> status {
            if (ctx.size() == 0)
                return {};
            auto bufs = alloc_tensors(ctx, bt);
            if (!bufs)
                return bufs.error();
            if (auto s = bufs->clear(0); !s)
                return s;
            c->bytes += bufs->total_bytes();
            c->bufs_.push_back(std::move(*bufs));
            return {};
        };
        if (auto s = place(c->host_ctx_, cpu_buffer_type::instance()); !s)
            return s;
        if (m.place.device)
            if (auto s = place(c->device_ctx_, *m.place.device); !s)
                return s;
        return c;
    }

  private:
    context host_ctx_{context_params{.no_alloc = true}};
    context device_ctx_{context_params{.no_alloc = true}};
    std::vector<buffer_list> bufs_;
};

/// One forward step: n_tokens new tokens at positions [n_past, n_past + n_tokens), their
/// keys and values written into the cache, attention over positions [0, n_kv) (n_kv
/// padded up to a multiple of kv_pad, the padding masked out, so the graph keeps its shape
/// for kv_pad steps and the scheduler replays its allocation). The logits are those of
/// the last token, or of every token with all_logits.
struct step {
    context ctx{context_params{.no_alloc = true}};
    graph g;
    tensor* tokens = nullptr; ///< i32 [n_tokens], input
    tensor* pos = nullptr;    ///< i32 [n_tokens], input
    tensor* mask = nullptr;   ///< f32 [n_kv, n_tokens], input
    tensor* logits = nullptr; ///< f32 [n_vocab, 1 or n_tokens], output
    int n_past = 0;
    int n_tokens = 0;
    int n_kv = 0;

    /// The inputs' values for `ids`.
    [[nodiscard]] status set_inputs(std::span<const std::int32_t> ids) const {
        if (ids.size() != static_cast<std::size_t>(n_tokens))
            return {errc::invalid_argument, "step: wrong number of token ids"};
        if (auto s = tensor_set(*tokens, std::vector<std::int32_t>(ids.begin(), ids.end())); !s)
            return s;
        std::vector<std::int32_t> p(static_cast<std::size_t>(n_tokens));
        for (int i = 0; i < n_tokens; ++i)
            p[static_cast<std::size_t>(i)] = n_past + i;
        if (auto s = tensor_set(*pos, p); !s)
            return s;
        std::vector<float> m(static_cast<std::size_t>(n_kv) * static_cast<std::size_t>(n_tokens));
        for (int q = 0; q < n_tokens; ++q)
            for (int j = 0; j < n_kv; ++j)
                m[static_cast<std::size_t>(q) * static_cast<std::size_t>(n_kv) +
                  static_cast<std::size_t>(j)] =
                    j <= n_past + q ? 0.0f : -std::numeric_limits<float>::infinity();
        return tensor_set(*mask, m);
    }
};

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
    const std::int64_t E = hp.n_embd, D = hp.head_dim(), H = hp.n_head, Hkv = hp.n_head_kv,
                       Ekv = hp.n_embd_kv();
    const std::int64_t T = n_tokens;
    const int pad = std::max(1, kv_pad);
    const int n_kv = std::min(c.n_ctx, (n_past + n_tokens + pad - 1) / pad * pad);
    const std::size_t es = type_size(c.type);
    const auto S = [](std::int64_t x) { return static_cast<std::size_t>(x); };
    const auto named = [](tensor* t, const std::string& name) {
        t->name = name;
        return t;
    };
    st->n_past = n_past;
    st->n_tokens = n_tokens;
    st->n_kv = n_kv;

    st->tokens = named(ctx.new_tensor(elem_type::i32, {T}), "inp_tokens");
    st->pos = named(ctx.new_tensor(elem_type::i32, {T}), "inp_pos");
    st->mask = named(ctx.new_tensor(elem_type::f32, {n_kv, T}), "kq_mask");
    for (tensor* t : {st->tokens, st->pos, st->mask})
        t->set_input();

    graph& g = st->g;
    tensor* x = named(get_rows(ctx, m.tok_embd, st->tokens), "inp_embd");
    const float kq_scale = 1.0f / std::sqrt(static_cast<float>(D));
    for (int il = 0; il < hp.n_layer; ++il) {
        const layer& l = m.layers[static_cast<std::size_t>(il)];
        const std::string sfx = "-" + std::to_string(il);
        tensor* cur = named(mul(ctx, rms_norm(ctx, x, hp.rms_eps), l.attn_norm), "attn_norm" + sfx);

        tensor* q = mul_mat(ctx, l.wq, cur);
        tensor* k = mul_mat(ctx, l.wk, cur);
        tensor* v = named(mul_mat(ctx, l.wv, cur), "Vcur" + sfx); // [Ekv, T]
        q = named(rope(ctx, reshape(ctx, q, {D, H, T}), st->pos, static_cast<int>(D),
                       rope_mode::normal, hp.rope_base),
                  "Qcur" + sfx);
        k = named(rope(ctx, reshape(ctx, k, {D, Hkv, T}), st->pos, static_cast<int>(D),
                       rope_mode::normal, hp.rope_base),
                  "Kcur" + sfx);

        // this step's keys and values into the cache; the nodes are added now, so they run
        // before the attention below reads the cache
        tensor* k_dst = view_1d(ctx, c.k[S(il)], Ekv * T, S(n_past) * S(Ekv) * es);
        g.build_forward(named(cpy(ctx, k, k_dst), "k_store" + sfx));
        tensor* v_dst = view_2d(ctx, c.v[S(il)], T, Ekv, S(c.n_ctx) * es, S(n_past) * es);
        g.build_forward(named(cpy(ctx, transpose(ctx, v), v_dst), "v_store" + sfx));

        // attention over the cached positions [0, n_kv); query head h reads key/value
        // head h / (H / Hkv) (mul_mat broadcasts K and V over the query heads)
        tensor* K =
            named(view_3d(ctx, c.k[S(il)], D, n_kv, Hkv, S(Ekv) * es, S(D) * es, 0), "k" + sfx);
        tensor* V = named(
            view_3d(ctx, c.v[S(il)], n_kv, D, Hkv, S(c.n_ctx) * es, S(c.n_ctx) * S(D) * es, 0),
            "v" + sfx);
        tensor* Q = permute(ctx, q, 0, 2, 1, 3);            // [D, T, H]
        tensor* kq = named(mul_mat(ctx, K, Q), "kq" + sfx); // [n_kv, T, H]
        kq = named(soft_max(ctx, kq, st->mask, kq_scale), "kq_soft_max" + sfx);
        tensor* kqv = named(mul_mat(ctx, V, kq), "kqv" + sfx);                // [D, T, H]
        cur = reshape(ctx, cont(ctx, permute(ctx, kqv, 0, 2, 1, 3)), {E, T}); // heads merged
        cur = named(mul_mat(ctx, l.wo, cur), "attn_out" + sfx);
        tensor* ffn_inp = named(add(ctx, cur, x), "ffn_inp" + sfx);

        cur = named(mul(ctx, rms_norm(ctx, ffn_inp, hp.rms_eps), l.ffn_norm), "ffn_norm" + sfx);
        tensor* gate = named(silu(ctx, mul_mat(ctx, l.ffn_gate, cur)), "ffn_silu" + sfx);
        tensor* up = named(mul_mat(ctx, l.ffn_up, cur), "ffn_up" + sfx);
        cur = named(mul_mat(ctx, l.ffn_down, mul(ctx, gate, up)), "ffn_out" + sfx);
        x = named(add(ctx, cur, ffn_inp), "l_out" + sfx);
    }
    if (!all_logits && T > 1)
        x = view_2d(ctx, x, E, 1, x->nb[1], S(T - 1) * x->nb[1]); // the last token
    tensor* cur = named(mul(ctx, rms_norm(ctx, x, hp.rms_eps), m.output_norm), "result_norm");
    st->logits = named(mul_mat(ctx, m.output, cur), "result_output");
    st->logits->set_output();
    g.build_forward(st->logits);
    return st;
}

// -- a deterministic random model ---------------------------------------------------------

/// Writes a "llama" GGUF file with random weights from `seed` (uniform in +-1/sqrt(fan in)
/// for matrices, [0.8, 1.2) for norms), matrices in `wtype`, the output matrix tied to the
/// token embeddings when `tied`.
inline status write_random_model(const std::filesystem::path& path, const hparams& hp,
                                 elem_type wtype, std::uint32_t seed, bool tied,
                                 const progress_fn& progress = {}) {
    if (auto s = hp.validate(); !s)
        return s;
    if (wtype == elem_type::i32)
        return {errc::invalid_argument, "random model: i32 weights make no sense"};
    gguf::writer w;
    const auto set = [&](const char* key, gguf::value v) { return w.set(key, std::move(v)); };
    for (const status& s :
         {set("general.architecture", "llama"), set("general.name", "backplane random llama"),
          set("llama.context_length", static_cast<std::uint32_t>(hp.n_ctx)),
          set("llama.embedding_length", static_cast<std::uint32_t>(hp.n_embd)),
          set("llama.block_count", static_cast<std::uint32_t>(hp.n_layer)),
          set("llama.feed_forward_length", static_cast<std::uint32_t>(hp.n_ff)),
          set("llama.attention.head_count", static_cast<std::uint32_t>(hp.n_head)),
          set("llama.attention.head_count_kv", static_cast<std::uint32_t>(hp.n_head_kv)),
          set("llama.attention.layer_norm_rms_epsilon", hp.rms_eps),
          set("llama.rope.freq_base", hp.rope_base),
          set("llama.rope.dimension_count", static_cast<std::uint32_t>(hp.head_dim())),
          set("llama.vocab_size", static_cast<std::uint32_t>(hp.n_vocab))})
        if (!s)
            return s;
    if (is_quantized(wtype) &&
        (hp.n_embd % block_size(wtype) != 0 || hp.n_ff % block_size(wtype) != 0))
        return {errc::invalid_argument, "random model: n_embd and n_ff must be multiples of " +
                                            std::to_string(block_size(wtype)) + " for " +
                                            std::string(to_string(wtype))};

    std::mt19937 rng(seed);
    const auto uniform = [&](float lo, float hi) { // the same on every platform
        const double u = static_cast<double>(rng() >> 8) / static_cast<double>(1u << 24);
        return static_cast<float>(lo + (hi - lo) * u);
    };
    const std::vector<expected_tensor> tensors = expected_tensors(hp, !tied);
    std::vector<float> row;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const expected_tensor& e = tensors[i];
        const bool norm = e.n_dims == 1;
        const elem_type type = norm ? elem_type::f32 : wtype;
        context ctx(context_params{.no_alloc = true});
        tensor* t = norm ? ctx.new_tensor(type, {e.ne0}) : ctx.new_tensor(type, {e.ne0, e.ne1});
        t->name = e.name;
        auto bufs = alloc_tensors(ctx, cpu_buffer_type::instance());
        if (!bufs)
            return bufs.error();
        const float a =
            e.name == "token_embd.weight" ? 1.0f : 1.0f / std::sqrt(static_cast<float>(e.ne0));
        row.resize(static_cast<std::size_t>(e.ne0));
        for (std::int64_t r = 0; r < t->nrows(); ++r) {
            for (float& x : row)
                x = norm ? uniform(0.8f, 1.2f) : uniform(-a, a);
            from_float_row(
                type, row.data(),
                static_cast<std::byte*>(t->data) + static_cast<std::size_t>(r) * t->nb[1], e.ne0);
        }
        if (auto s = w.add_tensor(*t); !s)
            return s;
        if (progress)
            progress(i + 1, tensors.size());
    }
    return w.write(path);
}

} // namespace llama

#pragma once
// The model families of examples/llama and their hyper-parameters, read from a GGUF
// file's metadata with llama.cpp's keys (every key is "<architecture>.<name>"):
//
//   context_length, embedding_length, block_count, feed_forward_length,
//   attention.head_count, attention.head_count_kv (default: head_count),
//   attention.key_length, attention.value_length (default: embedding_length / head_count),
//   attention.layer_norm_rms_epsilon, rope.freq_base (default 10000),
//   rope.dimension_count (default: key_length)
//   qwen3moe: expert_count, expert_used_count, expert_feed_forward_length
//   gemma2: attention.sliding_window (default 4096), attn_logit_softcapping (default 50),
//           final_logit_softcapping (default 30)
//   mamba2: no attention and no feed-forward: context_length, embedding_length,
//           block_count, attention.layer_norm_rms_epsilon, ssm.conv_kernel,
//           ssm.inner_size, ssm.state_size, ssm.time_step_rank (its heads),
//           ssm.group_count; no other key is read (llama.cpp's converter writes
//           head_count and feed_forward_length 0)
//
// What differs between the families is one row of `traits` (arch_traits below); the
// tensors each family has follow from it (weights.hpp), and so does the graph (graph.hpp).

#include <backplane/backplane.hpp>
#include <backplane/io/gguf.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace llama {

using namespace backplane;

enum class arch { llama, qwen2, qwen3, gemma2, qwen3moe, mamba2 };

/// How a family's layers are built (llama.cpp's build_llama, build_qwen2, build_qwen3,
/// build_gemma2_iswa, build_qwen3moe, and build_mamba2_layer for mamba2).
struct arch_traits {
    arch id;
    std::string_view name; ///< general.architecture, and the prefix of its keys
    rope_mode rope;        ///< normal: adjacent pairs; neox: halves
    bool rope_freqs;       ///< may have rope_freqs.weight (Llama 3.1's frequency factors)
    bool qkv_bias;         ///< blk.N.attn_{q,k,v}.bias
    bool qk_norm;          ///< blk.N.attn_{q,k}_norm.weight: RMSNorm of each head before RoPE
    bool experts;          ///< routed experts instead of the dense feed-forward
    bool gemma;            ///< embeddings scaled by sqrt(n_embd), sandwich norms
                           ///< (post_attention_norm, post_ffw_norm), GeGLU, queries scaled
                           ///< before attention, logit soft-capping, sliding-window layers,
                           ///< the output tied to the embeddings
    bool recurrent;        ///< Mamba-2 layers (a state-space mixer instead of attention
                           ///< and feed-forward) and a recurrent state instead of a KV cache
};

// clang-format off
inline constexpr std::array<arch_traits, 6> families{{
    // id            name        rope               freqs  bias   qk_norm experts gemma  recurrent
    {arch::llama,    "llama",    rope_mode::normal, true,  false, false,  false,  false, false},
    {arch::qwen2,    "qwen2",    rope_mode::neox,   false, true,  false,  false,  false, false},
    {arch::qwen3,    "qwen3",    rope_mode::neox,   false, false, true,   false,  false, false},
    {arch::gemma2,   "gemma2",   rope_mode::neox,   false, false, false,  false,  true,  false},
    {arch::qwen3moe, "qwen3moe", rope_mode::neox,   false, false, true,   true,   false, false},
    {arch::mamba2,   "mamba2",   rope_mode::normal, false, false, false,  false,  false, true},
}};
// clang-format on

inline const arch_traits& traits(arch a) {
    return families[static_cast<std::size_t>(a)];
}

inline std::optional<arch> parse_arch(std::string_view name) {
    for (const arch_traits& t : families)
        if (t.name == name)
            return t.id;
    return std::nullopt;
}

/// The families' names, "llama, qwen2, ...", for messages.
inline std::string arch_names() {
    std::string s;
    for (const arch_traits& t : families)
        s += (s.empty() ? "" : ", ") + std::string(t.name);
    return s;
}

struct hparams {
    arch family = arch::llama;
    int n_vocab = 4096;
    int n_ctx = 2048; ///< the longest sequence the model was made for
    int n_embd = 512;
    int n_layer = 8;
    int n_head = 8;
    int n_head_kv = 4;
    int n_ff = 1376;
    int head_dim_k = 0; ///< 0: n_embd / n_head (resolved by read_hparams and the writer)
    int head_dim_v = 0; ///< likewise
    int n_rot = 0;      ///< the rotated dimensions of a head; 0: head_dim_k
    float rms_eps = 1e-5f;
    float rope_base = 10000.0f;
    // qwen3moe
    int n_expert = 8;
    int n_expert_used = 2;
    int n_ff_exp = 256;
    // gemma2 (read_hparams's defaults are llama.cpp's: 4096, 50, 30; these, a random
    // model's, make a small model's prompt outrun the window and its soft-caps bend)
    int n_swa = 32;
    float attn_softcap = 1.0f;
    float final_softcap = 30.0f;
    // mamba2 (llama.cpp's ssm_d_conv, ssm_d_inner, ssm_d_state, ssm_n_group); its heads
    // are n_head (ssm.time_step_rank), of d_inner / n_head channels each
    int ssm_d_conv = 4;
    int ssm_d_inner = 0; ///< 0: 2 * n_embd (resolved by resolve_defaults)
    int ssm_d_state = 128;
    int ssm_n_group = 1;

    [[nodiscard]] const arch_traits& tr() const { return traits(family); }
    [[nodiscard]] int n_embd_q() const noexcept { return head_dim_k * n_head; }
    [[nodiscard]] int n_embd_k() const noexcept { return head_dim_k * n_head_kv; }
    [[nodiscard]] int n_embd_v() const noexcept { return head_dim_v * n_head_kv; }
    /// gemma2's even layers attend to the last n_swa positions only (llama.cpp's swa
    /// pattern 2: layer il slides when il % 2 < 1).
    [[nodiscard]] bool sliding(int il) const noexcept { return tr().gemma && il % 2 == 0; }
    /// The scale of the query-key products: 1/sqrt(head size); gemma2 27B (46 layers)
    /// uses 1/sqrt(n_embd / n_head), as llama.cpp.
    [[nodiscard]] float kq_scale() const {
        const int d = tr().gemma && n_layer == 46 ? n_embd / n_head : head_dim_k;
        return 1.0f / std::sqrt(static_cast<float>(d));
    }

    /// mamba2: the channels the convolution reads (x, then B and C of every group).
    [[nodiscard]] std::int64_t ssm_conv_channels() const noexcept {
        return ssm_d_inner + 2LL * ssm_n_group * ssm_d_state;
    }
    /// mamba2: the in-projection's outputs (z, x, B, C, dt).
    [[nodiscard]] std::int64_t ssm_in_proj() const noexcept { return ssm_d_inner + ssm_conv_channels() + n_head; }
    /// mamba2: the channels of a head.
    [[nodiscard]] int ssm_head_dim() const noexcept { return n_head > 0 ? ssm_d_inner / n_head : 0; }

    /// Fills the head sizes and n_rot left at 0 (mamba2: d_inner left at 0 as 2 * n_embd,
    /// llama.cpp's only expansion; the head size as head_dim_k and head_dim_v).
    void resolve_defaults() {
        if (tr().recurrent) {
            if (ssm_d_inner == 0)
                ssm_d_inner = 2 * n_embd;
            n_head_kv = n_head;
            head_dim_k = head_dim_v = n_rot = ssm_head_dim();
            return;
        }
        if (head_dim_k == 0 && n_head > 0)
            head_dim_k = n_embd / n_head;
        if (head_dim_v == 0)
            head_dim_v = head_dim_k;
        if (n_rot == 0)
            n_rot = head_dim_k;
    }

    [[nodiscard]] status validate() const {
        const auto bad = [](const std::string& what) {
            return status(errc::invalid_argument, "model: " + what);
        };
        if (tr().recurrent)
            return validate_ssm();
        if (n_vocab <= 0 || n_ctx <= 0 || n_embd <= 0 || n_layer <= 0 || n_head <= 0 ||
            n_head_kv <= 0 || n_ff <= 0 || head_dim_k <= 0 || head_dim_v <= 0 || n_rot <= 0)
            return bad("every size must be positive");
        if (n_rot % 2 != 0 || n_rot > head_dim_k)
            return bad("the rotated dimensions (" + std::to_string(n_rot) +
                       ") must be even and at most the key head size (" +
                       std::to_string(head_dim_k) + ")");
        if (tr().experts && head_dim_k != head_dim_v)
            return bad("key and value heads must have the same size");
        if (n_head % n_head_kv != 0)
            return bad("n_head (" + std::to_string(n_head) + ") must be a multiple of n_head_kv (" +
                       std::to_string(n_head_kv) + ")");
        if (!(rms_eps > 0.0f) || !(rope_base > 0.0f))
            return bad("rms epsilon and rope base must be positive");
        if (tr().experts &&
            (n_expert <= 0 || n_expert_used <= 0 || n_expert_used > n_expert || n_ff_exp <= 0))
            return bad("experts: need 0 < expert_used_count (" + std::to_string(n_expert_used) +
                       ") <= expert_count (" + std::to_string(n_expert) +
                       ") and a positive expert_feed_forward_length");
        if (tr().gemma && (n_swa <= 0 || !(attn_softcap > 0.0f) || !(final_softcap > 0.0f)))
            return bad("the sliding window and the soft-caps must be positive");
        return {};
    }

  private:
    [[nodiscard]] status validate_ssm() const {
        const auto bad = [](const std::string& what) {
            return status(errc::invalid_argument, "model: " + what);
        };
        const auto n = [](int x) { return std::to_string(x); };
        if (n_vocab <= 0 || n_ctx <= 0 || n_embd <= 0 || n_layer <= 0 || n_head <= 0 ||
            ssm_d_conv <= 0 || ssm_d_inner <= 0 || ssm_d_state <= 0 || ssm_n_group <= 0)
            return bad("every size must be positive (mamba2: context_length, embedding_length, "
                       "block_count, ssm.conv_kernel, ssm.inner_size, ssm.state_size, "
                       "ssm.time_step_rank, ssm.group_count)");
        if (ssm_d_conv < 2)
            return bad("ssm.conv_kernel (" + n(ssm_d_conv) + ") must be at least 2");
        if (ssm_d_inner % n_head != 0)
            return bad("ssm.inner_size (" + n(ssm_d_inner) + ") must be a multiple of ssm.time_step_rank (" +
                       n(n_head) + ", the heads)");
        if (n_head % ssm_n_group != 0)
            return bad("ssm.time_step_rank (" + n(n_head) + ", the heads) must be a multiple of ssm.group_count (" +
                       n(ssm_n_group) + ")");
        if (ssm_in_proj() > std::numeric_limits<int>::max())
            return bad("the in-projection is too large");
        if (!(rms_eps > 0.0f))
            return bad("rms epsilon must be positive");
        return {};
    }
};

/// The GGUF key "<arch>.<name>".
inline std::string key(const hparams& hp, std::string_view name) {
    return std::string(hp.tr().name) + "." + std::string(name);
}

/// hp's defaults resolved, n_vocab from token_embd.weight, the whole checked.
inline result<hparams> finish_hparams(const gguf::file& f, hparams hp) {
    hp.resolve_defaults();
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

/// Reads the hyper-parameters of a GGUF file of one of the families (n_vocab from
/// token_embd.weight).
inline result<hparams> read_hparams(const gguf::file& f) {
    auto name = f.get<std::string>("general.architecture");
    if (!name)
        return name.error();
    const std::optional<arch> a = parse_arch(*name);
    if (!a)
        return status(errc::invalid_argument, "model: general.architecture is '" + *name +
                                                  "'; this example runs " + arch_names());
    hparams hp;
    hp.family = *a;
    hp.head_dim_k = hp.head_dim_v = hp.n_rot = 0;
    // an int or float value; a missing optional key leaves `out` as it is
    const auto get = [&]<class T>(const char* k, T& out, bool required) -> status {
        auto v = f.get<T>(key(hp, k));
        if (v) {
            out = *v;
            return {};
        }
        if (!required && v.error().code() == errc::not_found)
            return {};
        return v.error();
    };
    if (hp.tr().recurrent) {
        for (const status& s : {
                 get("context_length", hp.n_ctx, true),
                 get("embedding_length", hp.n_embd, true),
                 get("block_count", hp.n_layer, true),
                 get("ssm.conv_kernel", hp.ssm_d_conv, true),
                 get("ssm.inner_size", hp.ssm_d_inner, true),
                 get("ssm.state_size", hp.ssm_d_state, true),
                 get("ssm.time_step_rank", hp.n_head, true),
                 get("ssm.group_count", hp.ssm_n_group, true),
                 get("attention.layer_norm_rms_epsilon", hp.rms_eps, true),
             })
            if (!s)
                return s;
        return finish_hparams(f, hp);
    }
    const bool moe = hp.tr().experts, gemma = hp.tr().gemma;
    if (gemma) {
        hp.n_swa = 4096;
        hp.attn_softcap = 50.0f;
        hp.final_softcap = 30.0f;
    }
    for (const status& s : {
             get("context_length", hp.n_ctx, true),
             get("embedding_length", hp.n_embd, true),
             get("block_count", hp.n_layer, true),
             get("feed_forward_length", hp.n_ff, !moe),
             get("attention.head_count", hp.n_head, true),
             get("attention.key_length", hp.head_dim_k, false),
             get("attention.value_length", hp.head_dim_v, false),
             get("attention.layer_norm_rms_epsilon", hp.rms_eps, true),
             get("rope.freq_base", hp.rope_base, false),
             get("rope.dimension_count", hp.n_rot, false),
             get("expert_count", hp.n_expert, moe),
             get("expert_used_count", hp.n_expert_used, moe),
             get("expert_feed_forward_length", hp.n_ff_exp, moe),
             get("attention.sliding_window", hp.n_swa, false),
             get("attn_logit_softcapping", hp.attn_softcap, false),
             get("final_logit_softcapping", hp.final_softcap, false),
         })
        if (!s)
            return s;
    hp.n_head_kv = hp.n_head;
    if (auto s = get("attention.head_count_kv", hp.n_head_kv, false); !s)
        return s;
    return finish_hparams(f, hp);
}

} // namespace llama

#pragma once
// The tensors of each family, with llama.cpp's names and shapes (E n_embd, Q n_head *
// key_length, K n_head_kv * key_length, V n_head_kv * value_length, O n_head *
// value_length, F feed_forward_length, X expert_count, G expert_feed_forward_length):
//
//   token_embd.weight [E, n_vocab]      output_norm.weight [E]
//   output.weight [E, n_vocab]          optional (absent: tied to token_embd; gemma2: always tied)
//   rope_freqs.weight [n_rot / 2]       llama, optional: RoPE's frequency factors
//   blk.N.attn_norm.weight [E]          blk.N.ffn_norm.weight [E]
//   blk.N.attn_q.weight [E, Q]          blk.N.attn_k.weight [E, K]
//   blk.N.attn_v.weight [E, V]          blk.N.attn_output.weight [O, E]
//   blk.N.attn_{q,k,v}.bias [Q], [K], [V]                       qwen2
//   blk.N.attn_q_norm.weight, attn_k_norm.weight [key_length]   qwen3, qwen3moe
//   blk.N.post_attention_norm.weight, post_ffw_norm.weight [E]  gemma2
//   blk.N.ffn_gate.weight, ffn_up.weight [E, F], ffn_down.weight [F, E]   (not qwen3moe)
//   blk.N.ffn_gate_inp.weight [E, X]                            qwen3moe: the router
//   blk.N.ffn_gate_exps.weight, ffn_up_exps.weight [E, G, X], ffn_down_exps.weight [G, E, X]
//
// mamba2 (I ssm.inner_size, N ssm.state_size, H ssm.time_step_rank, R ssm.group_count,
// W ssm.conv_kernel, C = I + 2 R N the convolved channels, P = I + C + H), as llama.cpp's
// llama_model_mamba2, instead of every blk.N tensor above:
//   blk.N.attn_norm.weight [E]          blk.N.ssm_in.weight [E, P]: z, x, B, C, dt
//   blk.N.ssm_conv1d.weight [W, C]      blk.N.ssm_conv1d.bias [C]
//   blk.N.ssm_dt.bias [H]               blk.N.ssm_a [1, H] (negative: -exp(A_log))
//   blk.N.ssm_d [1, H]                  blk.N.ssm_norm.weight [I / R, R]: the grouped RMSNorm
//   blk.N.ssm_out.weight [I, E]
//
// Vectors (norms, biases, frequency factors) and mamba2's convolution, A and D are f32
// (ggml's ssm_conv and ssm_scan read f32); matrices f32, f16, bf16 or a quantized type.

#include "hparams.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace llama {

struct layer_weights {
    tensor* attn_norm = nullptr;
    tensor* wq = nullptr;
    tensor* wk = nullptr;
    tensor* wv = nullptr;
    tensor* wo = nullptr;
    tensor* bq = nullptr;
    tensor* bk = nullptr;
    tensor* bv = nullptr;
    tensor* q_norm = nullptr;
    tensor* k_norm = nullptr;
    tensor* attn_post_norm = nullptr;
    tensor* ffn_norm = nullptr;
    tensor* ffn_gate = nullptr;
    tensor* ffn_up = nullptr;
    tensor* ffn_down = nullptr;
    tensor* ffn_post_norm = nullptr;
    tensor* router = nullptr;
    tensor* gate_exps = nullptr;
    tensor* up_exps = nullptr;
    tensor* down_exps = nullptr;
    // mamba2
    tensor* ssm_in = nullptr;
    tensor* ssm_conv1d = nullptr;
    tensor* ssm_conv1d_b = nullptr;
    tensor* ssm_dt_b = nullptr;
    tensor* ssm_a = nullptr;
    tensor* ssm_d = nullptr;
    tensor* ssm_norm = nullptr;
    tensor* ssm_out = nullptr;
};

struct global_weights {
    tensor* tok_embd = nullptr;
    tensor* output_norm = nullptr;
    tensor* output = nullptr;     ///< token_embd (or a device copy of it) when tied
    tensor* rope_freqs = nullptr; ///< null: no frequency factors
};

/// Called while loading or writing a model with (tensors done, tensors in all).
using progress_fn = std::function<void(std::size_t, std::size_t)>;

/// What a tensor holds, for checking its type and writing random values.
/// (mamba2: conv the convolution's taps, ssm_a the decays A, ssm_d the skip D.)
enum class tensor_kind { norm, bias, freqs, embedding, matrix, router, experts, conv, ssm_a, ssm_d };

/// The expected shape of a tensor of a model, by name, and where the model keeps it.
struct expected_tensor {
    std::string name;
    std::array<std::int64_t, 3> ne{1, 1, 1};
    tensor_kind kind = tensor_kind::matrix;
    int layer = -1;                             ///< -1: not in a layer
    tensor* layer_weights::*in_layer = nullptr; ///< its field, for a layer's tensor
    tensor* global_weights::*global = nullptr;  ///< its field, otherwise

    /// Values kept f32 in every file (norms, biases, frequency factors, mamba2's
    /// convolution, A and D), never a matrix's type.
    [[nodiscard]] bool vector() const noexcept {
        return kind == tensor_kind::norm || kind == tensor_kind::bias || kind == tensor_kind::freqs ||
               kind == tensor_kind::conv || kind == tensor_kind::ssm_a || kind == tensor_kind::ssm_d;
    }
};

/// Which optional tensors a file has.
struct optional_tensors {
    bool output = true; ///< output.weight (else tied)
    bool rope_freqs = false;
};

/// Every tensor of a model of family hp.family, in file order.
inline std::vector<expected_tensor> expected_tensors(const hparams& hp, optional_tensors opt) {
    const arch_traits& t = hp.tr();
    const std::int64_t E = hp.n_embd, Q = hp.n_embd_q(), K = hp.n_embd_k(), V = hp.n_embd_v(),
                       O = static_cast<std::int64_t>(hp.head_dim_v) * hp.n_head, F = hp.n_ff,
                       X = hp.n_expert, G = hp.n_ff_exp, Dk = hp.head_dim_k;
    using k = tensor_kind;
    using L = layer_weights;
    std::vector<expected_tensor> v;
    v.push_back({"token_embd.weight",
                 {E, hp.n_vocab, 1},
                 k::embedding,
                 -1,
                 nullptr,
                 &global_weights::tok_embd});
    if (t.rope_freqs && opt.rope_freqs)
        v.push_back({"rope_freqs.weight",
                     {hp.n_rot / 2, 1, 1},
                     k::freqs,
                     -1,
                     nullptr,
                     &global_weights::rope_freqs});
    for (int il = 0; il < hp.n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        const auto add = [&](const char* name, std::array<std::int64_t, 3> ne, tensor_kind kind,
                             tensor* L::*field) {
            v.push_back({b + name, ne, kind, il, field});
        };
        add("attn_norm.weight", {E, 1, 1}, k::norm, &L::attn_norm);
        if (t.recurrent) {
            const std::int64_t I = hp.ssm_d_inner, H = hp.n_head, R = hp.ssm_n_group,
                               Cc = hp.ssm_conv_channels();
            add("ssm_in.weight", {E, hp.ssm_in_proj(), 1}, k::matrix, &L::ssm_in);
            add("ssm_conv1d.weight", {hp.ssm_d_conv, Cc, 1}, k::conv, &L::ssm_conv1d);
            add("ssm_conv1d.bias", {Cc, 1, 1}, k::bias, &L::ssm_conv1d_b);
            add("ssm_dt.bias", {H, 1, 1}, k::bias, &L::ssm_dt_b);
            add("ssm_a", {1, H, 1}, k::ssm_a, &L::ssm_a);
            add("ssm_d", {1, H, 1}, k::ssm_d, &L::ssm_d);
            add("ssm_norm.weight", {I / R, R, 1}, k::norm, &L::ssm_norm);
            add("ssm_out.weight", {I, E, 1}, k::matrix, &L::ssm_out);
            continue;
        }
        add("attn_q.weight", {E, Q, 1}, k::matrix, &L::wq);
        add("attn_k.weight", {E, K, 1}, k::matrix, &L::wk);
        add("attn_v.weight", {E, V, 1}, k::matrix, &L::wv);
        add("attn_output.weight", {O, E, 1}, k::matrix, &L::wo);
        if (t.qkv_bias) {
            add("attn_q.bias", {Q, 1, 1}, k::bias, &L::bq);
            add("attn_k.bias", {K, 1, 1}, k::bias, &L::bk);
            add("attn_v.bias", {V, 1, 1}, k::bias, &L::bv);
        }
        if (t.qk_norm) {
            add("attn_q_norm.weight", {Dk, 1, 1}, k::norm, &L::q_norm);
            add("attn_k_norm.weight", {Dk, 1, 1}, k::norm, &L::k_norm);
        }
        if (t.gemma)
            add("post_attention_norm.weight", {E, 1, 1}, k::norm, &L::attn_post_norm);
        add("ffn_norm.weight", {E, 1, 1}, k::norm, &L::ffn_norm);
        if (t.experts) {
            add("ffn_gate_inp.weight", {E, X, 1}, k::router, &L::router);
            add("ffn_gate_exps.weight", {E, G, X}, k::experts, &L::gate_exps);
            add("ffn_up_exps.weight", {E, G, X}, k::experts, &L::up_exps);
            add("ffn_down_exps.weight", {G, E, X}, k::experts, &L::down_exps);
        } else {
            add("ffn_gate.weight", {E, F, 1}, k::matrix, &L::ffn_gate);
            add("ffn_up.weight", {E, F, 1}, k::matrix, &L::ffn_up);
            add("ffn_down.weight", {F, E, 1}, k::matrix, &L::ffn_down);
        }
        if (t.gemma)
            add("post_ffw_norm.weight", {E, 1, 1}, k::norm, &L::ffn_post_norm);
    }
    v.push_back(
        {"output_norm.weight", {E, 1, 1}, k::norm, -1, nullptr, &global_weights::output_norm});
    if (opt.output && !t.gemma)
        v.push_back(
            {"output.weight", {E, hp.n_vocab, 1}, k::matrix, -1, nullptr, &global_weights::output});
    return v;
}

/// The file's tensor `e`: present, of e's shape, and of a type for its kind.
inline status check_tensor(const gguf::file& f, const expected_tensor& e) {
    const gguf::tensor_info* ti = f.find_tensor(e.name);
    if (ti == nullptr)
        return {errc::invalid_argument, "model: no tensor '" + e.name + "'"};
    const auto shape = [](std::int64_t a, std::int64_t b, std::int64_t c) {
        return "[" + std::to_string(a) + ", " + std::to_string(b) + ", " + std::to_string(c) + "]";
    };
    if (ti->ne[0] != e.ne[0] || ti->ne[1] != e.ne[1] || ti->ne[2] != e.ne[2] || ti->ne[3] != 1)
        return {errc::invalid_argument, "model: tensor '" + e.name + "' has shape " +
                                            shape(ti->ne[0], ti->ne[1], ti->ne[2]) +
                                            (ti->ne[3] != 1 ? " (4-D)" : "") + ", expected " +
                                            shape(e.ne[0], e.ne[1], e.ne[2])};
    if (e.vector() ? ti->type != elem_type::f32 : ti->type == elem_type::i32)
        return {errc::invalid_argument,
                "model: tensor '" + e.name + "' has type " + std::string(to_string(ti->type)) +
                    (e.vector() ? ", expected f32" : ", expected a float or quantized type")};
    return {};
}

} // namespace llama

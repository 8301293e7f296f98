#pragma once
// A deterministic random model of any family, written in the family's GGUF layout
// (hparams.hpp's keys, weights.hpp's tensors), so that every run has a model to load.

#include "file_type.hpp"
#include "weights.hpp"

#include <backplane/core/quantize_weights.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <numbers>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llama {

/// Llama 3.1's RoPE frequency factors for rotated dimensions n_rot: 1 for wavelengths
/// under original_context / 4, 8 above original_context, smoothly in between (factor 8,
/// low frequency factor 1, high frequency factor 4). With a short original context the
/// three regimes all occur in a small head.
inline std::vector<float> llama31_freq_factors(int n_rot, float base, float original_context) {
    constexpr float factor = 8.0f, low = 1.0f, high = 4.0f;
    std::vector<float> f(static_cast<std::size_t>(n_rot / 2));
    for (std::size_t i = 0; i < f.size(); ++i) {
        const double freq =
            std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / n_rot);
        const double wavelen = 2.0 * std::numbers::pi / freq;
        if (wavelen < original_context / high) {
            f[i] = 1.0f;
        } else if (wavelen > original_context / low) {
            f[i] = factor;
        } else {
            const double smooth = (original_context / wavelen - low) / (high - low);
            f[i] = static_cast<float>(1.0 / ((1.0 - smooth) / factor + smooth));
        }
    }
    return f;
}

/// Writes a model of family hp.family with random weights from `seed`: matrices uniform in
/// +-1/sqrt(fan in) (the router +-4/sqrt(n_embd), so that tokens prefer different
/// experts; the embeddings +-1), norms in [0.8, 1.2), biases in +-0.5, typed as file type
/// `ftype` says (file_type.hpp; vectors and the router f32); the output tied to the
/// embeddings when `tied` (always for gemma2); llama with Llama 3.1's frequency factors
/// (original context 256); mamba2's convolution taps in +-1/sqrt(conv_kernel), A in
/// [-1, -0.1) (slow decays, so that the state carries far), D in [0.8, 1.2), and the keys
/// llama.cpp's converter writes (feed_forward_length 0; head_count the heads, which
/// llama.cpp's loader reads as the heads of ssm_in, ssm_dt, ssm_a and ssm_d).
inline status write_random_model(const std::filesystem::path& path, hparams hp, const file_type& ftype,
                                 std::uint32_t seed, bool tied, const progress_fn& progress = {}) {
    hp.resolve_defaults();
    if (auto s = hp.validate(); !s)
        return s;
    if (!is_quantized(ftype.base) && ftype.base != elem_type::f32 && ftype.base != elem_type::f16 &&
        ftype.base != elem_type::bf16)
        return {errc::invalid_argument, "random model: " + std::string(to_string(ftype.base)) + " weights make no sense"};
    const arch_traits& t = hp.tr();
    gguf::writer w;
    const auto u32 = [](int x) { return static_cast<std::uint32_t>(x); };
    const auto set = [&](std::string_view name, gguf::value v) {
        return w.set(key(hp, name), std::move(v));
    };
    std::vector<status> sets{
        w.set("general.architecture", std::string(t.name)),
        w.set("general.name", "backplane random " + std::string(t.name)),
        // no tokenizer: llama.cpp requires the key and reads "none" as a vocabulary of
        // vocab_size tokens without text
        w.set("tokenizer.ggml.model", std::string("none")),
        set("context_length", u32(hp.n_ctx)),
        set("embedding_length", u32(hp.n_embd)),
        set("block_count", u32(hp.n_layer)),
    };
    const std::vector<std::pair<std::string_view, gguf::value>> keys =
        t.recurrent ? std::vector<std::pair<std::string_view, gguf::value>>{
                          {"feed_forward_length", u32(0)},
                          // llama.cpp's converter writes 0; its loader sizes mamba2's
                          // tensors by head_count (as ssm.time_step_rank): the heads
                          {"attention.head_count", u32(hp.n_head)},
                          {"ssm.conv_kernel", u32(hp.ssm_d_conv)},
                          {"ssm.inner_size", u32(hp.ssm_d_inner)},
                          {"ssm.state_size", u32(hp.ssm_d_state)},
                          {"ssm.time_step_rank", u32(hp.n_head)},
                          {"ssm.group_count", u32(hp.ssm_n_group)},
                          {"attention.layer_norm_rms_epsilon", hp.rms_eps},
                          {"vocab_size", u32(hp.n_vocab)},
                      }
                    : std::vector<std::pair<std::string_view, gguf::value>>{
                          {"feed_forward_length", u32(hp.n_ff)},
                          {"attention.head_count", u32(hp.n_head)},
                          {"attention.head_count_kv", u32(hp.n_head_kv)},
                          {"attention.key_length", u32(hp.head_dim_k)},
                          {"attention.value_length", u32(hp.head_dim_v)},
                          {"attention.layer_norm_rms_epsilon", hp.rms_eps},
                          {"rope.freq_base", hp.rope_base},
                          {"rope.dimension_count", u32(hp.n_rot)},
                          {"vocab_size", u32(hp.n_vocab)},
                      };
    for (const auto& [name, v] : keys)
        sets.push_back(set(name, v));
    if (t.experts)
        for (status s : {set("expert_count", u32(hp.n_expert)),
                         set("expert_used_count", u32(hp.n_expert_used)),
                         set("expert_feed_forward_length", u32(hp.n_ff_exp))})
            sets.push_back(s);
    if (t.gemma)
        for (status s : {set("attention.sliding_window", u32(hp.n_swa)),
                         set("attn_logit_softcapping", hp.attn_softcap),
                         set("final_logit_softcapping", hp.final_softcap)})
            sets.push_back(s);
    for (const status& s : sets)
        if (!s)
            return s;

    const std::vector<expected_tensor> tensors =
        expected_tensors(hp, {.output = !tied, .rope_freqs = t.rope_freqs});
    bool has_output = false;
    for (const expected_tensor& e : tensors)
        has_output = has_output || e.name == "output.weight";
    const auto type_of = [&](const expected_tensor& e) { return tensor_type(ftype, e, hp, !has_output); };
    for (const expected_tensor& e : tensors)
        if (const elem_type et = type_of(e); e.ne[0] % block_size(et) != 0)
            return {errc::invalid_argument,
                    "random model: the rows of '" + e.name + "' (" + std::to_string(e.ne[0]) +
                        ") must be a multiple of " + std::to_string(block_size(et)) + " for " +
                        std::string(to_string(et))};

    std::mt19937 rng(seed);
    const auto uniform = [&](float lo, float hi) { // the same on every platform
        const double u = static_cast<double>(rng() >> 8) / static_cast<double>(1u << 24);
        return static_cast<float>(lo + (hi - lo) * u);
    };
    const std::vector<float> freqs = llama31_freq_factors(hp.n_rot, hp.rope_base, 256.0f);
    std::vector<float> row;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const expected_tensor& e = tensors[i];
        context ctx(context_params{.no_alloc = true});
        tensor* tt = ctx.new_tensor(type_of(e), {e.ne[0], e.ne[1], e.ne[2]});
        tt->name = e.name;
        auto bufs = alloc_tensors(ctx, cpu_buffer_type::instance());
        if (!bufs)
            return bufs.error();
        const float a = 1.0f / std::sqrt(static_cast<float>(e.ne[0]));
        row.resize(static_cast<std::size_t>(e.ne[0]));
        for (std::int64_t r = 0; r < tt->nrows(); ++r) {
            for (std::size_t j = 0; j < row.size(); ++j) {
                switch (e.kind) {
                case tensor_kind::norm:
                    row[j] = uniform(0.8f, 1.2f);
                    break;
                case tensor_kind::bias:
                    row[j] = uniform(-0.5f, 0.5f);
                    break;
                case tensor_kind::freqs:
                    row[j] = freqs[j];
                    break;
                case tensor_kind::embedding:
                    row[j] = uniform(-1.0f, 1.0f);
                    break;
                case tensor_kind::router:
                    row[j] = uniform(-4.0f * a, 4.0f * a);
                    break;
                case tensor_kind::matrix:
                case tensor_kind::experts:
                case tensor_kind::conv:
                    row[j] = uniform(-a, a);
                    break;
                case tensor_kind::ssm_a:
                    row[j] = uniform(-1.0f, -0.1f);
                    break;
                case tensor_kind::ssm_d:
                    row[j] = uniform(0.8f, 1.2f);
                    break;
                }
            }
            // a file's bytes: llama-quantize's (iq4_nl searches its scale; convert.hpp)
            quantize_weights_row(tt->type, row.data(),
                                 static_cast<std::byte*>(tt->data) +
                                     static_cast<std::size_t>(r) * tt->nb[1],
                                 e.ne[0]);
        }
        if (auto s = w.add_tensor(*tt); !s)
            return s;
        if (progress)
            progress(i + 1, tensors.size());
    }
    return w.write(path);
}

} // namespace llama

#pragma once
// A deterministic random-weight image encoder, written in the layout of llama.cpp's vision
// projector files (hparams.hpp's keys, model.hpp's tensors), so that every run has a
// model to load. It holds the encoder only (no projector's mm.* tensors).

#include "model.hpp"

#include <backplane/core/quantize_weights.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace vit {

/// What a random model is made of, besides its shape.
struct random_model {
    elem_type wtype = elem_type::f16; ///< the projections' and the FFN's matrices
    bool class_token = true;
    std::uint32_t seed = 1;
};

/// Writes an encoder of shape hp with weights from r.seed: matrices uniform in
/// +-1/sqrt(fan in) (the patch kernel's fan in is 3 P^2), norms in [0.8, 1.2), biases in
/// +-0.2, the class token and the position embeddings in +-0.5. Matrices of type r.wtype,
/// the patch kernel f16 (f32 when r.wtype is f32: im2col unrolls into its type), the rest
/// f32. GELU (clip.use_gelu), CLIP's pixel mean and standard deviation.
/// Whether a random model of shape hp made as r says can be written.
inline status check_random_model(const hparams& hp, const random_model& r) {
    if (auto s = hp.validate(); !s)
        return s;
    const elem_type wt = r.wtype;
    if (!is_quantized(wt) && wt != elem_type::f32 && wt != elem_type::f16 && wt != elem_type::bf16)
        return {errc::invalid_argument, "random model: " + std::string(to_string(wt)) + " weights make no sense"};
    if (is_quantized(wt) && (hp.n_embd % block_size(wt) != 0 || hp.n_ff % block_size(wt) != 0))
        return {errc::invalid_argument, "random model: the width (" + std::to_string(hp.n_embd) +
                                            ") and the feed-forward length (" + std::to_string(hp.n_ff) +
                                            ") must be multiples of " + std::to_string(block_size(wt)) + " for " +
                                            std::string(to_string(wt))};
    return {};
}

inline status write_random_model(const std::filesystem::path& path, const hparams& hp, const random_model& r) {
    if (auto s = check_random_model(hp, r); !s)
        return s;
    const elem_type wt = r.wtype;
    gguf::writer w;
    const auto u32 = [](int x) { return static_cast<std::uint32_t>(x); };
    const auto vision = [](const char* name) { return std::string(key_prefix) + name; };
    const auto floats = [](const std::array<float, 3>& v) {
        gguf::array a;
        a.type = gguf::value_type::f32;
        for (float x : v)
            a.items.emplace_back(x);
        return gguf::value(std::move(a));
    };
    for (const status& s : {
             w.set("general.architecture", std::string("clip")),
             w.set("general.name", std::string("backplane random vit")),
             w.set("clip.has_vision_encoder", true),
             w.set("clip.use_gelu", hp.gelu),
             w.set(vision("image_size"), u32(hp.image_size)),
             w.set(vision("patch_size"), u32(hp.patch_size)),
             w.set(vision("embedding_length"), u32(hp.n_embd)),
             w.set(vision("feed_forward_length"), u32(hp.n_ff)),
             w.set(vision("block_count"), u32(hp.n_layer)),
             w.set(vision("attention.head_count"), u32(hp.n_head)),
             w.set(vision("attention.layer_norm_epsilon"), hp.eps),
             w.set(vision("image_mean"), floats(hp.image_mean)),
             w.set(vision("image_std"), floats(hp.image_std)),
         })
        if (!s)
            return s;

    std::mt19937 rng(r.seed);
    const auto uniform = [&](float lo, float hi) { // the same on every platform
        const double u = static_cast<double>(rng() >> 8) / static_cast<double>(1u << 24);
        return static_cast<float>(lo + (hi - lo) * u);
    };
    const std::vector<expected_tensor> tensors = expected_tensors(hp, {.class_token = r.class_token});
    std::vector<float> row;
    try {
        for (const expected_tensor& e : tensors) {
            elem_type type = elem_type::f32;
            float a = 0.0f; // the matrices' range
            if (e.kind == tensor_kind::matrix) {
                type = wt;
                a = 1.0f / std::sqrt(static_cast<float>(e.ne[0]));
            } else if (e.kind == tensor_kind::patch) {
                type = wt == elem_type::f32 ? elem_type::f32 : elem_type::f16;
                a = 1.0f / std::sqrt(static_cast<float>(e.ne[0] * e.ne[1] * e.ne[2]));
            }
            context ctx(context_params{.no_alloc = true});
            tensor* t = ctx.new_tensor(type, {e.ne[0], e.ne[1], e.ne[2], e.ne[3]});
            t->name = e.name;
            auto bufs = alloc_tensors(ctx, cpu_buffer_type::instance());
            if (!bufs)
                return bufs.error();
            row.resize(static_cast<std::size_t>(e.ne[0]));
            for (std::int64_t i = 0; i < t->nrows(); ++i) {
                for (float& x : row) {
                    switch (e.kind) {
                    case tensor_kind::norm: x = uniform(0.8f, 1.2f); break;
                    case tensor_kind::bias: x = uniform(-0.2f, 0.2f); break;
                    case tensor_kind::class_token:
                    case tensor_kind::position: x = uniform(-0.5f, 0.5f); break;
                    case tensor_kind::patch:
                    case tensor_kind::matrix: x = uniform(-a, a); break;
                    }
                }
                quantize_weights_row(type, row.data(),
                                     static_cast<std::byte*>(t->data) + static_cast<std::size_t>(i) * t->nb[1],
                                     e.ne[0]);
            }
            if (auto s = w.add_tensor(*t); !s)
                return s;
        }
    } catch (const error& e) {
        return {e.code(), e.what()};
    }
    return w.write(path);
}

} // namespace vit

#pragma once
// The hyper-parameters of examples/vit, read from a GGUF file with the keys of llama.cpp's
// vision projector files (mmproj; tools/mtmd/clip-impl.h):
//
//   clip.vision.image_size, clip.vision.patch_size, clip.vision.embedding_length,
//   clip.vision.feed_forward_length, clip.vision.block_count,
//   clip.vision.attention.head_count, clip.vision.attention.layer_norm_epsilon
//   clip.vision.attention.head_count_kv   optional; must equal head_count here
//   clip.vision.image_mean, image_std     optional arrays of 3 floats (default 0.5 each)
//   clip.use_gelu                         optional: true for GELU (tanh approximation),
//                                         else llama.cpp's default, the quick GELU
//                                         x sigmoid(1.702 x) of OpenAI's CLIP

#include <backplane/backplane.hpp>
#include <backplane/io/gguf.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <variant>

namespace vit {

using namespace backplane;

struct hparams {
    int image_size = 32; ///< the square image's side, in pixels
    int patch_size = 8;  ///< the square patch's side, in pixels (the convolution's stride)
    int n_embd = 64;
    int n_ff = 256;
    int n_layer = 2;
    int n_head = 4;
    float eps = 1e-6f;
    bool gelu = true; ///< GELU (tanh approximation); false: quick GELU
    std::array<float, 3> image_mean{0.5f, 0.5f, 0.5f};
    std::array<float, 3> image_std{0.5f, 0.5f, 0.5f};

    [[nodiscard]] std::int64_t n_side() const noexcept { return image_size / patch_size; }
    [[nodiscard]] std::int64_t n_patches() const noexcept { return n_side() * n_side(); }
    [[nodiscard]] std::int64_t head_dim() const noexcept { return n_embd / n_head; }

    [[nodiscard]] status validate() const {
        const auto bad = [](const std::string& what) { return status(errc::invalid_argument, "model: " + what); };
        if (image_size <= 0 || patch_size <= 0 || n_embd <= 0 || n_ff <= 0 || n_layer <= 0 || n_head <= 0)
            return bad("every size must be positive");
        // bounds that keep every extent and byte count far from overflowing
        if (image_size > 16384 || n_embd > 65536 || n_ff > 1048576 || n_layer > 1024)
            return bad("sizes beyond this example's bounds (image 16384, width 65536, feed-forward 1048576, "
                       "1024 blocks)");
        if (image_size % patch_size != 0)
            return bad("the image size (" + std::to_string(image_size) + ") must be a multiple of the patch size (" +
                       std::to_string(patch_size) + ")");
        if (n_embd % n_head != 0)
            return bad("the width (" + std::to_string(n_embd) + ") must be a multiple of the head count (" +
                       std::to_string(n_head) + ")");
        if (!(eps > 0.0f))
            return bad("the layer norm epsilon must be positive");
        for (float s : image_std)
            if (!(s > 0.0f))
                return bad("clip.vision.image_std must be positive");
        return {};
    }
};

inline constexpr const char* key_prefix = "clip.vision.";

/// Reads the hyper-parameters of a vision projector file (the keys above).
inline result<hparams> read_hparams(const gguf::file& f) {
    hparams hp;
    const auto get = [&]<class T>(const std::string& k, T& out, bool required) -> status {
        auto v = f.get<T>(k);
        if (v) {
            out = *v;
            return {};
        }
        if (!required && v.error().code() == errc::not_found)
            return {};
        return status(v.error().code(), "model: " + v.error().message());
    };
    const auto vision = [](const char* name) { return std::string(key_prefix) + name; };
    int n_head_kv = 0;
    for (const status& s : {
             get(vision("image_size"), hp.image_size, true),
             get(vision("patch_size"), hp.patch_size, true),
             get(vision("embedding_length"), hp.n_embd, true),
             get(vision("feed_forward_length"), hp.n_ff, true),
             get(vision("block_count"), hp.n_layer, true),
             get(vision("attention.head_count"), hp.n_head, true),
             get(vision("attention.head_count_kv"), n_head_kv, false),
             get(vision("attention.layer_norm_epsilon"), hp.eps, true),
         })
        if (!s)
            return s;
    hp.gelu = false; // llama.cpp's default for CLIP: the quick GELU
    if (auto s = get(std::string("clip.use_gelu"), hp.gelu, false); !s)
        return s;
    if (n_head_kv != 0 && n_head_kv != hp.n_head)
        return status(errc::invalid_argument, "model: " + std::to_string(n_head_kv) + " key/value heads for " +
                                                  std::to_string(hp.n_head) +
                                                  " query heads: grouped-query attention is not implemented here");
    // the normalisation of the pixels: arrays of three numbers
    for (auto [name, out] : {std::pair{"image_mean", &hp.image_mean}, std::pair{"image_std", &hp.image_std}}) {
        const gguf::value* v = f.find(vision(name));
        if (v == nullptr)
            continue;
        const auto* a = std::get_if<gguf::array>(&v->v);
        if (a == nullptr || a->items.size() != 3)
            return status(errc::invalid_argument, "model: " + vision(name) + " must be an array of 3 numbers");
        for (std::size_t c = 0; c < 3; ++c) {
            const gguf::value& x = a->items[c];
            if (const auto* fl = std::get_if<float>(&x.v))
                (*out)[c] = *fl;
            else if (const auto* d = std::get_if<double>(&x.v))
                (*out)[c] = static_cast<float>(*d);
            else
                return status(errc::invalid_argument, "model: " + vision(name) + " must hold floats");
        }
    }
    if (auto s = hp.validate(); !s)
        return s;
    return hp;
}

} // namespace vit

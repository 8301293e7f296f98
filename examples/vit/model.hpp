#pragma once
// The tensors of examples/vit, with the names and shapes of llama.cpp's vision projector
// files (tools/mtmd/clip-impl.h; E embedding_length, F feed_forward_length, P patch_size,
// N the patches, (image_size / P)^2, and C 1 with a class token, else 0):
//
//   v.patch_embd.weight [P, P, 3, E]   f32 or f16 (the convolution's kernel)
//   v.patch_embd.bias [E]              optional
//   v.class_embd [E]                   optional: the class token, first in the sequence
//   v.position_embd.weight [E, N + C]  f32 or f16, one row per position
//   v.pre_ln.weight, v.pre_ln.bias [E] optional
//   v.blk.N.ln1.weight, .bias [E]      v.blk.N.ln2.weight, .bias [E]
//   v.blk.N.attn_q.weight, attn_k, attn_v, attn_out [E, E]  (biases [E] optional)
//   v.blk.N.ffn_up.weight [E, F]       v.blk.N.ffn_down.weight [F, E]  (biases optional)
//   v.post_ln.weight, v.post_ln.bias [E] optional (as llama.cpp reads them)
//
// Vectors (norms, biases, the class token) are f32; matrices f32, f16, bf16 or a
// quantized type. The file's other tensors (a projector's mm.*, say) are not read.
// Without a device, the weights stay in the file's memory mapping; with one, every
// tensor of the file is copied into its memory.

#include "hparams.hpp"

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace vit {

struct layer_weights {
    tensor* ln1_w = nullptr;
    tensor* ln1_b = nullptr;
    tensor* q_w = nullptr;
    tensor* q_b = nullptr;
    tensor* k_w = nullptr;
    tensor* k_b = nullptr;
    tensor* v_w = nullptr;
    tensor* v_b = nullptr;
    tensor* o_w = nullptr;
    tensor* o_b = nullptr;
    tensor* ln2_w = nullptr;
    tensor* ln2_b = nullptr;
    tensor* up_w = nullptr;
    tensor* up_b = nullptr;
    tensor* down_w = nullptr;
    tensor* down_b = nullptr;
};

struct global_weights {
    tensor* patch_w = nullptr;
    tensor* patch_b = nullptr;
    tensor* class_embd = nullptr; ///< null: no class token
    tensor* pos_embd = nullptr;
    tensor* pre_ln_w = nullptr;
    tensor* pre_ln_b = nullptr;
    tensor* post_ln_w = nullptr;
    tensor* post_ln_b = nullptr;
};

/// What a tensor holds: its allowed types, and the values a random model gives it.
enum class tensor_kind { patch, position, class_token, norm, bias, matrix };

struct expected_tensor {
    std::string name;
    std::array<std::int64_t, 4> ne{1, 1, 1, 1};
    tensor_kind kind = tensor_kind::matrix;
    bool required = true;
    int layer = -1;                             ///< -1: not in a block
    tensor* layer_weights::*in_layer = nullptr; ///< its field, for a block's tensor
    tensor* global_weights::*global = nullptr;  ///< its field, otherwise
};

/// Which optional tensors a model has (a file's presence decides when loading).
struct optional_tensors {
    bool class_token = true;
    bool pre_ln = true;
    bool post_ln = true;
    bool biases = true; ///< the patch embedding's, the projections' and the FFN's
};

/// Every tensor of a model of shape hp, in file order; optional ones marked (a random
/// model writes those `opt` selects).
inline std::vector<expected_tensor> expected_tensors(const hparams& hp, const optional_tensors& opt) {
    const std::int64_t E = hp.n_embd, F = hp.n_ff, P = hp.patch_size,
                       n_pos = hp.n_patches() + (opt.class_token ? 1 : 0);
    using k = tensor_kind;
    using G = global_weights;
    using L = layer_weights;
    std::vector<expected_tensor> v;
    const auto global = [&](const char* name, std::array<std::int64_t, 4> ne, k kind, bool required,
                            tensor* G::*field) { v.push_back({name, ne, kind, required, -1, nullptr, field}); };
    global("v.patch_embd.weight", {P, P, 3, E}, k::patch, true, &G::patch_w);
    if (opt.biases)
        global("v.patch_embd.bias", {E, 1, 1, 1}, k::bias, false, &G::patch_b);
    if (opt.class_token)
        global("v.class_embd", {E, 1, 1, 1}, k::class_token, false, &G::class_embd);
    global("v.position_embd.weight", {E, n_pos, 1, 1}, k::position, true, &G::pos_embd);
    if (opt.pre_ln) {
        global("v.pre_ln.weight", {E, 1, 1, 1}, k::norm, false, &G::pre_ln_w);
        global("v.pre_ln.bias", {E, 1, 1, 1}, k::bias, false, &G::pre_ln_b);
    }
    for (int il = 0; il < hp.n_layer; ++il) {
        const std::string b = "v.blk." + std::to_string(il) + ".";
        const auto add = [&](const char* name, std::array<std::int64_t, 4> ne, k kind, bool required,
                             tensor* L::*field) { v.push_back({b + name, ne, kind, required, il, field, nullptr}); };
        const auto linear = [&](const char* name, std::int64_t in, std::int64_t out, tensor* L::*w, tensor* L::*bias) {
            add((std::string(name) + ".weight").c_str(), {in, out, 1, 1}, k::matrix, true, w);
            if (opt.biases)
                add((std::string(name) + ".bias").c_str(), {out, 1, 1, 1}, k::bias, false, bias);
        };
        add("ln1.weight", {E, 1, 1, 1}, k::norm, true, &L::ln1_w);
        add("ln1.bias", {E, 1, 1, 1}, k::bias, true, &L::ln1_b);
        linear("attn_q", E, E, &L::q_w, &L::q_b);
        linear("attn_k", E, E, &L::k_w, &L::k_b);
        linear("attn_v", E, E, &L::v_w, &L::v_b);
        linear("attn_out", E, E, &L::o_w, &L::o_b);
        add("ln2.weight", {E, 1, 1, 1}, k::norm, true, &L::ln2_w);
        add("ln2.bias", {E, 1, 1, 1}, k::bias, true, &L::ln2_b);
        linear("ffn_up", E, F, &L::up_w, &L::up_b);
        linear("ffn_down", F, E, &L::down_w, &L::down_b);
    }
    if (opt.post_ln) {
        global("v.post_ln.weight", {E, 1, 1, 1}, k::norm, false, &G::post_ln_w);
        global("v.post_ln.bias", {E, 1, 1, 1}, k::bias, false, &G::post_ln_b);
    }
    return v;
}

/// Whether a tensor of kind `k` may have type t.
inline bool type_allowed(tensor_kind k, elem_type t) {
    switch (k) {
    case tensor_kind::norm:
    case tensor_kind::bias:
    case tensor_kind::class_token:
        return t == elem_type::f32;
    case tensor_kind::patch: // im2col unrolls the image into the kernel's type
    case tensor_kind::position:
        return t == elem_type::f32 || t == elem_type::f16;
    case tensor_kind::matrix:
        return t == elem_type::f32 || t == elem_type::f16 || t == elem_type::bf16 || is_quantized(t);
    }
    return false;
}

inline const char* allowed_types(tensor_kind k) {
    switch (k) {
    case tensor_kind::norm:
    case tensor_kind::bias:
    case tensor_kind::class_token:
        return "f32";
    case tensor_kind::patch:
    case tensor_kind::position:
        return "f32 or f16";
    case tensor_kind::matrix:
        return "f32, f16, bf16 or a quantized type";
    }
    return "?";
}

/// The file's tensor `e`: present (when required), of e's shape and of a type for its kind.
/// Sets `present`.
inline status check_tensor(const gguf::file& f, const expected_tensor& e, bool& present) {
    const gguf::tensor_info* ti = f.find_tensor(e.name);
    present = ti != nullptr;
    if (ti == nullptr)
        return e.required ? status(errc::invalid_argument, "model: no tensor '" + e.name + "'") : status{};
    const auto shape = [](const auto& ne) {
        return "[" + std::to_string(ne[0]) + ", " + std::to_string(ne[1]) + ", " + std::to_string(ne[2]) + ", " +
               std::to_string(ne[3]) + "]";
    };
    for (std::size_t d = 0; d < 4; ++d)
        if (ti->ne[d] != e.ne[d])
            return {errc::invalid_argument,
                    "model: tensor '" + e.name + "' has shape " + shape(ti->ne) + ", expected " + shape(e.ne)};
    if (!type_allowed(e.kind, ti->type))
        return {errc::invalid_argument, "model: tensor '" + e.name + "' has type " + std::string(to_string(ti->type)) +
                                            ", expected " + allowed_types(e.kind)};
    return {};
}

/// A loaded model. Not movable (the weights point into its context).
class model {
  public:
    hparams hp;
    global_weights w;
    std::vector<layer_weights> layers;
    std::size_t weight_bytes = 0; ///< of the tensors read
    bool on_device = false;       ///< the weights copied into a device's memory

    model() = default;
    model(const model&) = delete;
    model& operator=(const model&) = delete;

    /// Opens `path`, checks the hyper-parameters and every tensor's name, type and shape,
    /// then maps the file (device: none) or copies its tensors into `device`'s memory.
    static result<std::unique_ptr<model>> load(const std::filesystem::path& path,
                                               std::optional<buffer_type_ref> device = std::nullopt) {
        auto m = std::make_unique<model>();
        if (auto s = m->load_from(path, device); !s)
            return s;
        return m;
    }

    [[nodiscard]] bool class_token() const noexcept { return w.class_embd != nullptr; }
    [[nodiscard]] std::int64_t n_pos() const noexcept { return hp.n_patches() + (class_token() ? 1 : 0); }

  private:
    std::optional<gguf::file> file_;
    context ctx_{context_params{.no_alloc = true}};
    gguf::loaded loaded_;

    status load_from(const std::filesystem::path& path, std::optional<buffer_type_ref> device) {
        auto f = gguf::file::open(path);
        if (!f)
            return f.error();
        file_.emplace(std::move(*f));
        auto h = read_hparams(*file_);
        if (!h)
            return h.error();
        hp = *h;
        const optional_tensors opt{.class_token = file_->find_tensor("v.class_embd") != nullptr};
        const std::vector<expected_tensor> expected = expected_tensors(hp, opt);
        std::vector<bool> present(expected.size());
        for (std::size_t i = 0; i < expected.size(); ++i) {
            bool p = false;
            if (auto s = check_tensor(*file_, expected[i], p); !s)
                return s;
            present[i] = p;
        }
        // a norm's bias without its weight (or the reverse) would be half a layer norm
        for (const char* ln : {"v.pre_ln", "v.post_ln"})
            if ((file_->find_tensor(std::string(ln) + ".weight") == nullptr) !=
                (file_->find_tensor(std::string(ln) + ".bias") == nullptr))
                return status(errc::invalid_argument,
                              "model: " + std::string(ln) + " needs both its weight and its bias");

        auto l = device ? file_->load(ctx_, *device) : file_->load(ctx_);
        if (!l)
            return l.error();
        loaded_ = std::move(*l);
        on_device = device.has_value();

        layers.resize(static_cast<std::size_t>(hp.n_layer));
        for (std::size_t i = 0; i < expected.size(); ++i) {
            if (!present[i])
                continue;
            const expected_tensor& e = expected[i];
            tensor* t = loaded_.find(e.name);
            if (t == nullptr) // checked above; a loader that dropped it is a failure
                return status(errc::failed, "model: tensor '" + e.name + "' was not loaded");
            weight_bytes += t->nbytes();
            if (e.layer >= 0)
                layers[static_cast<std::size_t>(e.layer)].*e.in_layer = t;
            else
                w.*e.global = t;
        }
        return {};
    }
};

} // namespace vit

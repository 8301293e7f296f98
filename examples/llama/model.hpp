#pragma once
// A loaded model of examples/llama (hparams.hpp: the families and their keys;
// weights.hpp: their tensors) and its KV cache.
//
// Weights on the CPU stay in the file's memory mapping (a host buffer over it: no copy);
// the weights of offloaded layers are copied into the device's memory.

#include "weights.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace llama {

/// Which weights live in a device's memory: the last `layers` layers, and the output norm
/// and matrix when `layers` exceeds the layer count (-1: everything). Without a device,
/// everything stays on the CPU. model::load resolves it into first_offloaded and output.
/// Or, with `memory`, any memory per layer (distributed.hpp).
struct placement {
    std::optional<buffer_type_ref> device;
    /// Instead of device and layers: the memory of layer il's weights and cache of a model
    /// of n_layer layers (il = n_layer: the output norm and matrix; -1: token_embd), none
    /// for the CPU (the file's mapping).
    std::function<std::optional<buffer_type_ref>(int il, int n_layer)> memory;
    /// The device's support check (any_backend::supports_op), or none: the experts of an
    /// offloaded layer stay on the CPU when it refuses their mul_mat_id, as llama.cpp keeps
    /// a weight where the op that reads it runs (else every step would copy them back).
    std::function<bool(const tensor&)> supports;
    int layers = -1;
    int first_offloaded = 0; ///< set by model::load: the first layer on the device
    bool output = false;     ///< set by model::load: the output on the device
};

/// One no_alloc context per memory, for the tensors to place there.
struct memory_contexts {
    std::vector<std::pair<buffer_type_ref, std::unique_ptr<context>>> all;

    context& of(buffer_type_ref bt) {
        for (auto& [t, ctx] : all)
            if (t == bt)
                return *ctx;
        all.emplace_back(bt, std::make_unique<context>(context_params{.no_alloc = true}));
        return *all.back().second;
    }
    /// Every context's tensors placed in buffers of its memory, appended to `out`.
    status allocate(buffer_usage usage, std::vector<buffer_list>& out) {
        for (auto& [bt, ctx] : all) {
            if (ctx->size() == 0)
                continue;
            auto bufs = alloc_tensors(*ctx, bt, usage);
            if (!bufs)
                return bufs.error();
            out.push_back(std::move(*bufs));
        }
        return {};
    }
};

/// A loaded model: hyper-parameters and weights, some over the file's mapping, some in
/// device memory. Not movable (tensors point into its contexts).
class model {
  public:
    hparams hp;
    global_weights w;
    bool tied_output = false;
    std::vector<layer_weights> layers;
    placement place;
    std::size_t device_bytes = 0; ///< weights copied into the device's memory
    std::size_t host_bytes = 0;   ///< weights read over the mapping
    bool experts_on_cpu =
        false; ///< offloaded layers' experts kept on the CPU (placement::supports)

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

    /// The memory of layer il's weights and KV cache (il = n_layer: the output norm and
    /// matrix; -1: token_embd); none: the CPU's (the file's mapping).
    [[nodiscard]] std::optional<buffer_type_ref> memory_of(int il) const {
        if (place.memory)
            return place.memory(il, hp.n_layer);
        if (il >= 0 && place.device && (il < hp.n_layer ? il >= place.first_offloaded : place.output))
            return place.device;
        return std::nullopt;
    }
    /// True when layer il's weights and KV cache are in a device's memory.
    [[nodiscard]] bool on_device(int il) const { return memory_of(il).has_value(); }

    /// How many of the file's tensors each element type holds: "f32 10, q4_K 23, q6_K 3"
    /// (in elem_type order).
    [[nodiscard]] std::string tensor_types() const {
        std::array<int, elem_type_count> n{};
        for (const gguf::tensor_info& ti : file_->tensors())
            ++n[static_cast<std::size_t>(ti.type)];
        std::string out;
        for (elem_type t : all_elem_types)
            if (const int c = n[static_cast<std::size_t>(t)]; c > 0)
                out += (out.empty() ? "" : ", ") + std::string(to_string(t)) + " " + std::to_string(c);
        return out;
    }

    /// Whether any of the file's tensors is of a type `pred` accepts.
    template <class Pred>
    [[nodiscard]] bool any_tensor_type(Pred pred) const {
        const auto& ts = file_->tensors();
        return std::any_of(ts.begin(), ts.end(), [&](const gguf::tensor_info& ti) { return pred(ti.type); });
    }

  private:
    std::optional<gguf::file> file_;

  public:
    /// Whether the device computes flash_attn_ext over a cache of `type` (asked of a node
    /// of one query over one position that is never allocated).
    [[nodiscard]] bool device_runs_flash_attn(elem_type type) const {
        if (!place.supports)
            return true;
        context probe(context_params{.no_alloc = true});
        tensor* q = probe.new_tensor(elem_type::f32, {hp.head_dim_k, 1, hp.n_head});
        tensor* k = probe.new_tensor(type, {hp.head_dim_k, 1, hp.n_head_kv});
        tensor* v = probe.new_tensor(type, {hp.head_dim_v, 1, hp.n_head_kv});
        tensor* mask = probe.new_tensor(elem_type::f16, {1, 1});
        return place.supports(*flash_attn_ext(probe, q, k, v, mask, 1.0f));
    }

  private:
    /// Whether the device computes mul_mat_id over `experts` (asked of a node of one
    /// token's product that is never allocated).
    [[nodiscard]] bool device_runs_experts(const tensor& experts) const {
        if (!place.supports)
            return true;
        context probe(context_params{.no_alloc = true});
        tensor* as = probe.new_tensor(experts.type, {experts.ne[0], experts.ne[1], experts.ne[2]});
        tensor* b = probe.new_tensor(elem_type::f32, {experts.ne[0], 1, 1});
        tensor* ids = probe.new_tensor(elem_type::i32, {hp.n_expert_used, 1});
        return place.supports(*mul_mat_id(probe, as, b, ids));
    }
    context mapped_ctx_{context_params{.no_alloc = true}};
    memory_contexts device_ctxs_;
    gguf::loaded mapped_;
    std::vector<buffer_list> device_bufs_;

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
        const optional_tensors opt{
            .output = file_->find_tensor("output.weight") != nullptr && !hp.tr().gemma,
            .rope_freqs = file_->find_tensor("rope_freqs.weight") != nullptr};
        tied_output = !opt.output;

        // every tensor present with its shape and a type the backends compute
        const std::vector<expected_tensor> expected = expected_tensors(hp, opt);
        for (const expected_tensor& e : expected)
            if (auto s = check_tensor(*file_, e); !s)
                return s;

        // everything over the mapping first: the CPU's weights are used in place
        auto mapped = file_->load(mapped_ctx_);
        if (!mapped)
            return mapped.error();
        mapped_ = std::move(*mapped);

        // the offloaded weights: device tensors of the same type and shape, filled from the
        // mapping (the output matrix of a tied model is a device copy of token_embd)
        std::vector<std::pair<const tensor*, tensor*>> copies;
        const auto layer_of = [&](const expected_tensor& e) {
            return e.layer >= 0 ? e.layer : e.name == "token_embd.weight" ? -1 : hp.n_layer;
        };
        const auto to_device = [&](const expected_tensor& e) { // token_embd stays for get_rows
            if (!on_device(layer_of(e)))
                return false;
            if (e.kind == tensor_kind::experts && !device_runs_experts(*mapped_.find(e.name))) {
                experts_on_cpu = true;
                return false;
            }
            return true;
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
                tensor* t = device_ctxs_.of(*memory_of(layer_of(e)))
                                .new_tensor(src->type, {src->ne[0], src->ne[1], src->ne[2]});
                t->name = e.name;
                copies.emplace_back(src, t);
                chosen.push_back(t);
            }
            if (tied_output && on_device(hp.n_layer)) {
                const tensor* src = mapped_.find("token_embd.weight");
                tensor* t = device_ctxs_.of(*memory_of(hp.n_layer)).new_tensor(src->type, {src->ne[0], src->ne[1]});
                t->name = "output.weight";
                copies.emplace_back(src, t);
            }
        } catch (const error& e) {
            return {e.code(), e.what()};
        }
        if (auto s = device_ctxs_.allocate(buffer_usage::weights, device_bufs_); !s)
            return s;
        std::vector<std::byte> staging;
        for (std::size_t i = 0; i < copies.size(); ++i) {
            if (auto s = tensor_copy(*copies[i].first, *copies[i].second, staging); !s)
                return s;
            device_bytes += copies[i].second->nbytes();
            if (progress)
                progress(i + 1, copies.size());
        }

        // wire the model
        layers.resize(static_cast<std::size_t>(hp.n_layer));
        for (std::size_t i = 0; i < expected.size(); ++i) {
            const expected_tensor& e = expected[i];
            tensor* t = const_cast<tensor*>(chosen[i]);
            if (e.layer >= 0)
                layers[static_cast<std::size_t>(e.layer)].*e.in_layer = t;
            else
                w.*e.global = t;
        }
        if (tied_output)
            w.output = on_device(hp.n_layer) ? copies.back().second : w.tok_embd;
        return {};
    }
};

/// The keys and values of every layer: K as [n_embd_k, n_ctx] (one row per position) and
/// V transposed as [n_ctx, n_embd_v] (one row per channel), so that attention reads both
/// as matrices without a copy; for flash attention (flash_attn) V as [n_embd_v, n_ctx], as
/// K, which flash_attn_ext reads (as llama.cpp). The cache's layout decides the attention
/// of the graphs built over it. Each layer's cache lives where its weights do.
///
/// mamba2 (recurrent) has no keys and values: the cache holds one sequence's recurrent
/// state instead, as llama.cpp's recurrent memory, its size independent of n_ctx: k[il] the
/// convolution's state f32 [conv_kernel - 1, C] (the last tokens' x, B and C), v[il] the
/// scan's state f32 [state_size, head size, heads]; both zero at the start of a sequence
/// (make, clear) and carried from step to step by the graphs.
class kv_cache {
  public:
    int n_ctx = 0;
    elem_type type = elem_type::f32;
    bool flash_attn = false;
    bool recurrent = false; ///< the recurrent state of mamba2
    /// Every layer's cache on the CPU: flash attention and a device that does not compute
    /// flash_attn_ext (the attention runs on the CPU; else it would copy the cache back
    /// every step).
    bool on_cpu = false;
    std::vector<tensor*> k, v;
    std::size_t bytes = 0;

    kv_cache() = default;
    kv_cache(const kv_cache&) = delete;
    kv_cache& operator=(const kv_cache&) = delete;

    static result<std::unique_ptr<kv_cache>> make(const model& m, int n_ctx, elem_type type,
                                                  bool flash_attn = false) {
        if (n_ctx <= 0)
            return status(errc::invalid_argument, "kv cache: n_ctx must be positive");
        if (type != elem_type::f32 && type != elem_type::f16)
            return status(errc::invalid_argument, "kv cache: type must be f32 or f16");
        auto c = std::make_unique<kv_cache>();
        c->n_ctx = n_ctx;
        c->type = type;
        c->flash_attn = flash_attn;
        c->recurrent = m.hp.tr().recurrent;
        if (c->recurrent && (flash_attn || type != elem_type::f32))
            return status(errc::invalid_argument, "recurrent state: no attention (flash attention, "
                                                  "a cache type) in " + std::string(m.hp.tr().name));
        const std::int64_t Ek = m.hp.n_embd_k(), Ev = m.hp.n_embd_v();
        c->on_cpu = flash_attn && !m.device_runs_flash_attn(type);
        try {
            for (int il = 0; il < m.hp.n_layer && c->recurrent; ++il) {
                const auto mem = m.memory_of(il);
                context& ctx = mem ? c->device_ctxs_.of(*mem) : c->host_ctx_;
                const hparams& hp = m.hp;
                tensor* rt = ctx.new_tensor(elem_type::f32, {hp.ssm_d_conv - 1, hp.ssm_conv_channels()});
                tensor* st = ctx.new_tensor(elem_type::f32, {hp.ssm_d_state, hp.ssm_head_dim(), hp.n_head});
                rt->name = "cache_r_l" + std::to_string(il);
                st->name = "cache_s_l" + std::to_string(il);
                c->k.push_back(rt);
                c->v.push_back(st);
            }
            for (int il = 0; il < m.hp.n_layer && !c->recurrent; ++il) {
                const auto mem = m.memory_of(il);
                context& ctx = mem && !c->on_cpu ? c->device_ctxs_.of(*mem) : c->host_ctx_;
                tensor* kt = ctx.new_tensor(type, {Ek, n_ctx});
                tensor* vt = flash_attn ? ctx.new_tensor(type, {Ev, n_ctx})
                                        : ctx.new_tensor(type, {n_ctx, Ev});
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
        for (auto& [bt, ctx] : c->device_ctxs_.all)
            if (auto s = place(*ctx, bt); !s)
                return s;
        return c;
    }

    /// Every cell zero again: the recurrent state of a new sequence (a KV cache needs no
    /// clearing: a sequence overwrites what it reads).
    [[nodiscard]] status clear() {
        for (buffer_list& b : bufs_)
            if (auto s = b.clear(0); !s)
                return s;
        return {};
    }

  private:
    context host_ctx_{context_params{.no_alloc = true}};
    memory_contexts device_ctxs_;
    std::vector<buffer_list> bufs_;
};

} // namespace llama

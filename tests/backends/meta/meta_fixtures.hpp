#pragma once
// Test support for the meta backend: a meta device over CPU (or Vulkan) parts, the
// llama-style split callback, and the reference llama graph on a meta device next to the
// same graph on one CPU.

#include <backplane/backends/cpu.hpp>
#include <backplane/backends/meta.hpp>
#include <backplane/backplane.hpp>

#include "../../support/llama_cpu.hpp"
#include "../../support/ref_oracle.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::test {

/// n parts, all the process's CPU.
inline std::vector<any_device> cpu_parts(int n) {
    return std::vector<any_device>(static_cast<std::size_t>(n), any_device::borrow(cpu_device::instance()));
}

inline bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// Megatron-style tensor parallelism for the reference llama graph: attention heads and
/// FFN columns split, the projections after them split along their input (row split,
/// partial sums), the vocabulary split, norms and embeddings mirrored.
inline meta::split_state split_llama(const tensor& t, int n, std::int64_t head_dim) {
    const std::int64_t q = block_size(t.type); // axis-0 cuts must keep quantization blocks whole
    const std::int64_t head_granule = head_dim % q == 0 ? head_dim : head_dim * q;
    using meta::split_state;
    if (ends_with(t.name, "attn_q.weight") || ends_with(t.name, "attn_k.weight") || ends_with(t.name, "attn_v.weight"))
        return split_state::even(1, t.ne[1], n, head_dim);
    if (ends_with(t.name, "attn_output.weight")) return split_state::even(0, t.ne[0], n, head_granule);
    if (ends_with(t.name, "ffn_gate.weight") || ends_with(t.name, "ffn_up.weight"))
        return split_state::even(1, t.ne[1], n, q);
    if (ends_with(t.name, "ffn_down.weight")) return split_state::even(0, t.ne[0], n, q);
    if (t.name == "output.weight") return split_state::even(1, t.ne[1], n);
    return split_state::mirrored();
}

/// The reference llama graph with its weights in a meta device's buffers.
struct meta_llama {
    context wctx{context_params{.no_alloc = true}};
    context gctx{context_params{.no_alloc = true}};
    llama_model model;
    llama_inputs inputs;
    graph g;
    buffer_list weights;
    std::optional<graph_allocator> ga;

    meta_llama(const llama_params& p, const meta_device& dev, meta_backend& be) {
        model = make_llama_model(wctx, p);
        weights = alloc_tensors(wctx, dev.buffer_type(), buffer_usage::weights).value();
        inputs = make_llama_inputs(gctx, p);
        g = build_llama_graph(gctx, model, inputs);
        ga.emplace(be.buffer_type());
        ga->alloc_graph(g).throw_if_failed();
    }
};

} // namespace backplane::test

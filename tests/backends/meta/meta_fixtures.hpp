#pragma once
// Test support for the meta backend: a meta device over CPU (or Vulkan) parts, the
// llama-style split callback, and the reference llama graph on a meta device next to the
// same graph on one CPU.

#include <catch2/catch.hpp>

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

/// Plans and computes the llama graph of `ml` twice: two reductions per layer and the
/// logits split over the vocabulary; the second compute reuses the plan and gives the same
/// bits. Returns the logits (empty after a failed REQUIRE).
inline std::vector<float> compute_meta_llama(meta_backend& be, meta_llama& ml, const llama_params& p) {
    auto plan = be.plan(ml.g);
    INFO(plan.error().describe());
    REQUIRE(plan.ok());
    // attention output and FFN down, none elsewhere: the logits stay split and are
    // gathered on read
    CHECK(plan->reduced.size() == 2 * static_cast<std::size_t>(p.n_layer));
    CHECK(plan->state_of(ml.g.back())->to_string().rfind("axis0", 0) == 0);
    CHECK(plan->state_of(ml.model.layers[0].wq) == nullptr); // weights are leaves

    const status st = be.compute(ml.g);
    INFO(st.describe());
    REQUIRE(st.ok());
    REQUIRE(be.synchronize().ok());
    const auto got = tensor_get_all<float>(*ml.g.back()).value();
    REQUIRE(be.compute(ml.g).ok());
    REQUIRE(be.synchronize().ok());
    CHECK(tensor_get_all<float>(*ml.g.back()).value() == got);
    CHECK(be.stats().plans == 1);
    CHECK(be.stats().reductions == 4 * static_cast<std::uint64_t>(p.n_layer));
    return got;
}

} // namespace backplane::test

#pragma once
// examples/llama over the ranks of an MPI job (--parallel tensor|pipeline under mpirun):
// every rank loads the same file and runs the same steps; each holds and computes its
// part (docs/distributed.md).
//
//   pipeline  rank k holds layers [k L / n, (k + 1) L / n) (the last rank the output too)
//             and computes them (mpi::pipeline); the activations of each step cross each
//             rank boundary once, and the logits go from the last rank to all.
//   tensor    every rank holds its share of every matrix (attention heads, FFN columns,
//             the vocabulary; the KV cache by heads) and computes its part of every node
//             (a meta device over the processes); two all-reduces per layer.
//
// Each rank computes on one CPU backend. The runners below are driven by generate() as
// a scheduler is.

#include "graph.hpp"

#include <backplane/backends/meta.hpp>
#include <backplane/mpi/pipeline.hpp>
#include <backplane/mpi/process_group.hpp>

#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llama::distributed {

/// The rank whose pipeline stage holds layer il of n_layer (il = n_layer: the output;
/// -1: token_embd, which stays in every rank's mapping).
inline int stage_of(int il, int n_layer, int n_stages) {
    if (il >= n_layer)
        return n_stages - 1;
    return il * n_stages / n_layer;
}

/// Rank k of the pipeline holds the layers that stage_of gives it, in its stage memory.
inline placement pipeline_placement(const mpi::pipeline& pipe) {
    placement p;
    p.memory = [&pipe](int il, int n_layer) -> std::optional<buffer_type_ref> {
        if (il < 0)
            return std::nullopt;
        return pipe.buffer_type(stage_of(il, n_layer, pipe.n_stages()));
    };
    return p;
}

/// Every weight and the KV cache in the meta device's memory (each rank its slices).
inline placement tensor_placement(const meta_device& dev) {
    placement p;
    p.memory = [&dev](int, int) -> std::optional<buffer_type_ref> { return buffer_type_ref(dev.buffer_type()); };
    return p;
}

inline bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// Megatron's cut of a layer over n ranks, by llama.cpp's names: the Q, K, V products
/// (and their biases) by heads, the attention output along its input, the FFN's gate
/// and up by columns and down along its input, the vocabulary of the output; the KV
/// cache by heads (V transposed unless `flash_attn`); norms, the embeddings and the
/// experts (qwen3moe; the meta backend has no partial sums of mul_mat_id) mirrored.
/// Cuts along dimension 0 keep quantization blocks whole (heads of 48 q8_0 values go in
/// pairs).
inline meta::split_state split_tensor(const tensor& t, int n, const hparams& hp, bool flash_attn) {
    using meta::split_state;
    const std::int64_t q = block_size(t.type); // cuts along dimension 0 keep blocks whole
    const auto granule = [q](std::int64_t g) { return std::lcm(g, q); };
    const std::int64_t Dk = hp.head_dim_k, Dv = hp.head_dim_v;
    for (const char* name : {"attn_q.weight", "attn_k.weight"})
        if (ends_with(t.name, name))
            return split_state::even(1, t.ne[1], n, Dk);
    if (ends_with(t.name, "attn_v.weight"))
        return split_state::even(1, t.ne[1], n, Dv);
    for (const char* name : {"attn_q.bias", "attn_k.bias"})
        if (ends_with(t.name, name))
            return split_state::even(0, t.ne[0], n, Dk);
    if (ends_with(t.name, "attn_v.bias"))
        return split_state::even(0, t.ne[0], n, Dv);
    if (ends_with(t.name, "attn_output.weight"))
        return split_state::even(0, t.ne[0], n, granule(Dv));
    for (const char* name : {"ffn_gate.weight", "ffn_up.weight"})
        if (ends_with(t.name, name))
            return split_state::even(1, t.ne[1], n, q);
    if (ends_with(t.name, "ffn_down.weight"))
        return split_state::even(0, t.ne[0], n, q);
    if (t.name == "output.weight")
        return split_state::even(1, t.ne[1], n);
    if (t.name.rfind("cache_k_l", 0) == 0)
        return split_state::even(0, t.ne[0], n, Dk);
    if (t.name.rfind("cache_v_l", 0) == 0) // [Ev, n_ctx] for flash attention, else [n_ctx, Ev]
        return flash_attn ? split_state::even(0, t.ne[0], n, Dv) : split_state::even(1, t.ne[1], n, Dv);
    return split_state::mirrored();
}

/// generate()'s scheduler face of an mpi::pipeline.
class pipeline_runner {
  public:
    explicit pipeline_runner(mpi::pipeline& p) : p_(p) {}
    [[nodiscard]] status reserve(const graph& g) { return p_.scheduler().reserve(g); }
    [[nodiscard]] auto dry_run(const graph& g) { return p_.scheduler().dry_run(g); }
    [[nodiscard]] status alloc_graph(const graph& g) { return p_.alloc_graph(g); }
    [[nodiscard]] status compute_async(const graph& g) { return p_.compute_async(g); }
    [[nodiscard]] status compute(const graph& g) { return p_.compute(g); }
    [[nodiscard]] status synchronize() { return p_.scheduler().synchronize(); }
    [[nodiscard]] std::string describe(int level) const { return p_.scheduler().describe(level); }
    [[nodiscard]] std::size_t n_backends() const { return p_.scheduler().n_backends(); }
    [[nodiscard]] std::string_view backend_name(std::size_t b) const { return p_.scheduler().backend_name(b); }
    /// Every rank gets the values of the rank that computed t.
    [[nodiscard]] result<std::vector<float>> read_all(const tensor& t) {
        std::vector<float> v(static_cast<std::size_t>(t.nelements()));
        if (auto s = p_.read(t, v.data(), 0, t.nbytes()); !s)
            return s;
        return v;
    }

  private:
    mpi::pipeline& p_;
};

/// generate()'s scheduler face of a meta backend over the processes: its graphs placed
/// in its memory, computed on all ranks together.
class meta_runner {
  public:
    explicit meta_runner(meta_backend& be) : be_(be), ga_(be.buffer_type()) {}
    [[nodiscard]] status reserve(const graph& g) { return ga_.reserve(g); }
    [[nodiscard]] status alloc_graph(const graph& g) { return ga_.alloc_graph(g); }
    [[nodiscard]] status compute_async(const graph& g) { return be_.compute(g); }
    [[nodiscard]] status compute(const graph& g) { return be_.compute(g); }
    [[nodiscard]] status synchronize() { return be_.synchronize(); }
    [[nodiscard]] std::string describe(int) const { return "the meta backend: no scheduler plan\n"; }
    /// Split outputs are gathered from every rank after each compute.
    [[nodiscard]] result<std::vector<float>> read_all(const tensor& t) { return tensor_get_all<float>(t); }

  private:
    meta_backend& be_;
    graph_allocator ga_;
};

} // namespace llama::distributed

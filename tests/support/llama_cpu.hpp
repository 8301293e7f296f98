#pragma once
// The reference llama graph (llama_graph.hpp) computed on one CPU backend: the expected
// logits of tests and benchmarks that compute it elsewhere (a device, a scheduler, a
// meta device).

#include <backplane/backends/cpu.hpp>
#include <backplane/memory/graph_alloc.hpp>
#include <backplane/memory/tensor_io.hpp>

#include "llama_graph.hpp"

#include <cstdint>
#include <vector>

namespace backplane::test {

/// A small model for backend tests: 4 layers, n_embd 128, 4 heads, n_ff 344, 8 tokens, a
/// vocabulary of 256, starting from token ids.
inline llama_params small_llama() {
    return {.n_layer = 4, .n_embd = 128, .n_head = 4, .n_ff = 344, .n_tokens = 8, .n_vocab = 256, .token_input = true};
}

/// The logits of the graph of parameters p, weights and inputs filled from `seed`
/// (fill_llama), on a CPU backend made with `params`. Throws backplane::error on failure.
inline std::vector<float> llama_on_cpu(const llama_params& p, std::uint32_t seed,
                                       cpu_backend_params params = {.n_threads = 2}) {
    llama_instance s(p);
    graph_allocator ga(cpu_buffer_type::instance());
    ga.alloc_graph(s.g).throw_if_failed();
    fill_llama(s.model, s.inputs, seed).throw_if_failed();
    cpu_backend cpu(params);
    cpu.compute(s.g).throw_if_failed();
    return tensor_get_all<float>(*s.g.back()).value();
}

} // namespace backplane::test

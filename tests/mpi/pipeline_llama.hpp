#pragma once
// The reference llama graph (tests/support/llama_graph.hpp) laid out for a pipeline
// across processes (mpi::pipeline): the layers cut into n_stages consecutive runs,
// stage k's weights in pipe.buffer_type(k); the token embeddings with stage 0, the
// output norm and projection with the last stage. Every rank builds the same.
//
//     test::llama_instance m(p, test::pipeline_stages(*pipe));

#include <backplane/mpi/pipeline.hpp>

#include "../support/llama_graph.hpp"

#include <cstdint>
#include <vector>

namespace backplane::test {

/// The first layer of stage k of n over n_layer layers, every cut moved by `shift`.
inline int first_layer(int k, int n, int n_layer, int shift = 0) {
    return k == 0 ? 0 : k == n ? n_layer : k * n_layer / n + shift;
}

/// The placement of llama_instance's weights over the stages of `pipe`; `shift` moves
/// the cuts between stages (by layers).
inline auto pipeline_stages(mpi::pipeline& pipe, int shift = 0) {
    return [&pipe, shift](const llama_model& model) {
        const int n = pipe.n_stages(), layers = model.params.n_layer;
        std::vector<buffer_ptr> buffers;
        for (int k = 0; k < n; ++k) {
            std::vector<tensor*> w = model.layer_weights(first_layer(k, n, layers, shift), first_layer(k + 1, n, layers, shift));
            if (k == 0 && model.tok_embd != nullptr) w.push_back(model.tok_embd);
            if (k == n - 1) w.insert(w.end(), {model.output_norm, model.output});
            auto buf = alloc_tensor_list(w, pipe.buffer_type(k));
            if (!buf) throw error(buf.error().message(), buf.error().code());
            buffers.push_back(std::move(*buf));
        }
        return buffers;
    };
}

/// The logits of m's graph on every rank (pipeline::read). Throws backplane::error.
inline std::vector<float> read_logits(mpi::pipeline& pipe, const llama_instance& m) {
    const tensor& out = *m.g.back();
    std::vector<float> v(static_cast<std::size_t>(out.nelements()));
    pipe.read(out, v.data(), 0, out.nbytes()).throw_if_failed();
    return v;
}

/// alloc_graph, inputs from `seed`, compute, read_logits. Throws backplane::error.
inline std::vector<float> pipeline_logits(mpi::pipeline& pipe, llama_instance& m, std::uint32_t seed) {
    pipe.alloc_graph(m.g).throw_if_failed();
    fill_llama_inputs(m.model.params, m.inputs, seed).throw_if_failed();
    pipe.compute(m.g).throw_if_failed();
    return read_logits(pipe, m);
}

} // namespace backplane::test

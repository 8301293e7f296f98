// sched/...: the scheduler's own cost on the reference llama-like decoder graph
// (tests/support/llama_graph.hpp: 32 layers, n_embd 512, 8 heads, n_ff 1376, 32 tokens,
// vocabulary 4096, f32 weights; 963 nodes).
//
//   sched/split/cpu          plan(g): placement passes and splits, CPU only
//   sched/split_alloc/cpu    alloc_graph(g): the same plus the graph allocator (replaying
//                            its plan, as every step of a generation loop does)
//   sched/split/test_cpu, sched/split_alloc/test_cpu
//                            the same over {test backend, CPU} with the weights of the
//                            first half of the layers on the test backend (private memory)
//
// Nothing is computed: these time the scheduler, not kernels. Counters: the plan's
// n_splits, its tensors copied per run (n_split_inputs) and the pipeline copies.
// Targets (half of ggml's on this machine): split <= 0.025 ms and split + alloc
// <= 0.07 ms CPU only; <= 0.165 ms and <= 0.295 ms with two backends.

#include "support.hpp"

#include "../tests/support/llama_graph.hpp"
#include "../tests/support/test_backend.hpp"

#include <backplane/sched.hpp>

#include <chrono>
#include <string>

namespace {

using namespace backplane;
using namespace backplane::test;

/// The model (weights placed, not filled: the data does not matter here) and its graph.
struct llama_setup {
    context wctx{context_params{.no_alloc = true}};
    context gctx{context_params{.no_alloc = true}};
    llama_model model;
    llama_inputs inputs;
    graph g;
    std::vector<buffer_ptr> weight_buffers;

    /// dev: the device holding the first half of the layers, or null for all on the CPU.
    explicit llama_setup(const test_device* dev) {
        model = make_llama_model(wctx, llama_params{});
        const int half = model.params.n_layer / 2;
        std::vector<tensor*> cpu_side = model.global_weights();
        for (tensor* t : model.layer_weights(dev ? half : 0, model.params.n_layer)) cpu_side.push_back(t);
        auto host = alloc_tensor_list(cpu_side, cpu_buffer_type::instance());
        if (!host) throw error(host.error().message(), host.error().code());
        weight_buffers.push_back(std::move(*host));
        if (dev != nullptr) {
            auto dw = model.layer_weights(0, half);
            auto devb = alloc_tensor_list(dw, dev->buffer_type());
            if (!devb) throw error(devb.error().message(), devb.error().code());
            weight_buffers.push_back(std::move(*devb));
        }
        inputs = make_llama_inputs(gctx, model.params);
        g = build_llama_graph(gctx, model, inputs);
    }
};

template <class Sched>
void report(benchmark::State& state, const Sched& sched, const graph& g, double seconds) {
    state.counters["us"] = state.iterations() ? 1e6 * seconds / static_cast<double>(state.iterations()) : 0.0;
    state.counters["n_splits"] = static_cast<double>(sched.n_splits());
    state.counters["n_split_inputs"] = static_cast<double>(sched.n_split_inputs());
    state.counters["n_copies"] = static_cast<double>(sched.n_copies());
    state.SetLabel(std::to_string(g.n_nodes()) + " nodes, " + std::to_string(sched.n_splits()) + " split(s), " +
                   std::to_string(sched.n_split_inputs()) + " tensor(s) copied per run, " +
                   std::to_string(sched.n_copies()) + " pipeline copy");
}

template <bool Alloc, class Sched>
void run(benchmark::State& state, Sched& sched, const graph& g) {
    const auto step = [&]() -> status { return Alloc ? sched.alloc_graph(g) : sched.plan(g); };
    if (status s = step(); !s) { // the first call sizes everything
        state.SkipWithError(s.describe().c_str());
        return;
    }
    // timed here too, so that the counter is a plain number of microseconds
    const auto start = std::chrono::steady_clock::now();
    for (auto _ : state) {
        if (status s = step(); !s) {
            state.SkipWithError(s.describe().c_str());
            break;
        }
    }
    report(state, sched, g, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

template <bool Alloc>
void sched_cpu(benchmark::State& state) {
    cpu_backend cpu;
    llama_setup setup(nullptr);
    scheduler sched(cpu);
    run<Alloc>(state, sched, setup.g);
}

template <bool Alloc>
void sched_test_cpu(benchmark::State& state) {
    test_device dev({.name = "TEST0"});
    test_backend tb = dev.make_backend();
    cpu_backend cpu;
    llama_setup setup(&dev);
    scheduler sched(tb, cpu);
    run<Alloc>(state, sched, setup.g);
}

BENCHMARK(sched_cpu<false>)->Name("sched/split/cpu")->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(sched_cpu<true>)->Name("sched/split_alloc/cpu")->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(sched_test_cpu<false>)->Name("sched/split/test_cpu")->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(sched_test_cpu<true>)->Name("sched/split_alloc/test_cpu")->Unit(benchmark::kMicrosecond)->MinTime(0.5);

} // namespace

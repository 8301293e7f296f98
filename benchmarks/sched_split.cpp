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
//   sched/split/test_cpu_cost, sched/split_alloc/test_cpu_cost
//                            the same under the cost policy (a fixed model)
//   sched/split/test_cpu_any, sched/split_alloc/test_cpu_any
//                            test_cpu through the run-time face: a dynamic_scheduler
//                            over a std::vector<any_backend> made by any_device (the
//                            same partitioner, every backend call through a table)
//
// Nothing is computed: these time the scheduler, not kernels. Counters: the plan's
// n_splits, its tensors copied per run (n_split_inputs) and the pipeline copies.
// Targets (half of ggml's on this machine): split <= 0.025 ms and split + alloc
// <= 0.07 ms CPU only; <= 0.165 ms and <= 0.295 ms with two backends.

#include "support.hpp"

#include "../tests/support/llama_graph.hpp"
#include "../tests/support/test_backend.hpp"

#include <backplane/runtime.hpp>
#include <backplane/sched.hpp>
#include <backplane/sched/cost_policy.hpp>

#include <chrono>
#include <string>

namespace {

using namespace backplane;
using namespace backplane::test;

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
    llama_instance setup(llama_params{});
    scheduler sched(cpu);
    run<Alloc>(state, sched, setup.g);
}

template <bool Alloc>
void sched_test_cpu(benchmark::State& state) {
    test_device dev({.name = "TEST0"});
    test_backend tb = dev.make_backend();
    cpu_backend cpu;
    llama_instance setup(llama_params{}, dev.buffer_type(), llama_params{}.n_layer / 2);
    scheduler sched(tb, cpu);
    run<Alloc>(state, sched, setup.g);
}

/// test_cpu through the run-time face: backends made by erased devices, in a vector.
template <bool Alloc>
void sched_test_cpu_any(benchmark::State& state) {
    test_device dev({.name = "TEST0"});
    std::vector<any_backend> backends;
    for (const any_device& d : {any_device::borrow(dev), any_device::borrow(cpu_device::instance())}) {
        auto b = d.make_backend();
        if (!b) {
            state.SkipWithError(b.error().describe().c_str());
            return;
        }
        backends.push_back(std::move(*b));
    }
    llama_instance setup(llama_params{}, dev.buffer_type(), llama_params{}.n_layer / 2);
    dynamic_scheduler sched(backends);
    run<Alloc>(state, sched, setup.g);
}

/// The same over {test backend, CPU} under the cost policy, with a fixed model (nothing
/// calibrated): the greedy passes, the placement problem and, the graph being the same
/// each step, the reuse of the last search.
template <bool Alloc>
void sched_test_cpu_cost(benchmark::State& state) {
    test_device dev({.name = "TEST0"});
    test_backend tb = dev.make_backend();
    cpu_backend cpu;
    llama_instance setup(llama_params{}, dev.buffer_type(), llama_params{}.n_layer / 2);
    cost_model m;
    backend_profile fast;
    fast.key = backend_key(tb.name(), dev.description());
    fast.mul_mat_flops *= 10;
    m.set(fast);
    cost_scheduler<test_backend, cpu_backend> sched(cost_policy(m, {.cache_path = "", .calibrate = false}), {}, tb,
                                                    cpu);
    run<Alloc>(state, sched, setup.g);
}

BENCHMARK(sched_cpu<false>)->Name("sched/split/cpu")->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(sched_cpu<true>)->Name("sched/split_alloc/cpu")->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(sched_test_cpu<false>)->Name("sched/split/test_cpu")->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(sched_test_cpu<true>)->Name("sched/split_alloc/test_cpu")->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(sched_test_cpu_any<false>)->Name("sched/split/test_cpu_any")->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(sched_test_cpu_any<true>)->Name("sched/split_alloc/test_cpu_any")->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(sched_test_cpu_cost<false>)->Name("sched/split/test_cpu_cost")->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(sched_test_cpu_cost<true>)
    ->Name("sched/split_alloc/test_cpu_cost")
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5);

} // namespace

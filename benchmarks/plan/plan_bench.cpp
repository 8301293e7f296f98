// plan/...: compute time of the reference llama graph (tests/support/llama_graph.hpp: n_embd
// 512, 8 heads, n_ff 1376, 32 tokens, vocabulary 4096, f32 weights) under the greedy and
// the cost placement policies, next to the best single-backend placements, on
//
//   plan/blas_cpu/...    {BLAS, CPU}, 32 layers, every weight in host memory
//   plan/vulkan_cpu/...  {Vulkan, CPU}, 32 layers, the weights of the first half of the
//                        layers in Vulkan memory, the rest in host memory
//   plan/test_cpu/...    {test backend, CPU}, 8 layers, the first half of the layers'
//                        weights in the test device's private memory (its kernels are
//                        the CPU's single-threaded reference kernels: a slow device)
//
// with /greedy and /cost the two policies on that placement of the weights, /cpu the
// CPU backend alone with every weight in host memory, and /vulkan the Vulkan backend
// alone with every weight in Vulkan memory. The cost policy's model comes from the
// calibration cache (cost_model::default_path(), measured on first use). Counters: ms per
// compute (best iteration), n_splits, tensors copied per run, the policy's estimate (ms).
// Inputs are written once; each iteration is one compute().

#include "../../tests/support/llama_graph.hpp"
#include "../../tests/support/test_backend.hpp"

#include <backplane/backplane.hpp>
#include <backplane/sched.hpp>
#include <backplane/sched/cost_policy.hpp>

#if BACKPLANE_BENCH_HAVE_BLAS
#include <backplane/backends/blas.hpp>
#endif
#if BACKPLANE_BENCH_HAVE_VULKAN
#include <backplane/backends/vulkan.hpp>
#endif

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace backplane;
using namespace backplane::test;

template <class Sched>
void run(benchmark::State& state, Sched& sched, llama_instance& s) {
    if (status st = sched.alloc_graph(s.g); !st) {
        state.SkipWithError(st.describe().c_str());
        return;
    }
    if (status st = fill_llama(s.model, s.inputs, 7); !st) {
        state.SkipWithError(st.describe().c_str());
        return;
    }
    if (status st = sched.compute(s.g); !st) { // warm-up: recordings, caches, buffers
        state.SkipWithError(st.describe().c_str());
        return;
    }
    double best = std::numeric_limits<double>::infinity();
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        if (status st = sched.compute(s.g); !st) {
            state.SkipWithError(st.describe().c_str());
            return;
        }
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    state.counters["ms"] = best * 1e3;
    state.counters["n_splits"] = static_cast<double>(sched.n_splits());
    state.counters["copied"] = static_cast<double>(sched.n_split_inputs());
    const double est = sched.estimated_seconds();
    if (!std::isnan(est)) state.counters["est_ms"] = est * 1e3;
    std::size_t on_first = 0;
    for (tensor* t : s.g.nodes())
        if (!is_view_op(t->op) && sched.backend_of(*t) == 0) ++on_first;
    state.counters["nodes_on_0"] = static_cast<double>(on_first);
}

llama_params layers(int n_layer) {
    llama_params p;
    p.n_layer = n_layer;
    return p;
}

// -- {test backend, CPU} -----------------------------------------------------------------

constexpr int test_layers = 8;

void test_cpu(benchmark::State& state, bool cost) {
    test_device dev({.name = "TEST0"});
    test_backend tb = dev.make_backend();
    cpu_backend cpu;
    llama_instance s(layers(test_layers), dev.buffer_type(), test_layers / 2);
    if (cost) {
        cost_scheduler<test_backend, cpu_backend> sched(cost_policy{}, {}, tb, cpu);
        run(state, sched, s);
    } else {
        scheduler sched(tb, cpu);
        run(state, sched, s);
    }
}

void cpu_only(benchmark::State& state, int n_layer) {
    cpu_backend cpu;
    llama_instance s(layers(n_layer));
    scheduler sched(cpu);
    run(state, sched, s);
}

BENCHMARK_CAPTURE(test_cpu, greedy, false)->Name("plan/test_cpu/greedy")->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(test_cpu, cost, true)->Name("plan/test_cpu/cost")->Unit(benchmark::kMillisecond)->Iterations(10);
BENCHMARK_CAPTURE(cpu_only, test_layers, test_layers)->Name("plan/test_cpu/cpu")->Unit(benchmark::kMillisecond)->Iterations(10);

// -- {BLAS, CPU} -------------------------------------------------------------------------

#if BACKPLANE_BENCH_HAVE_BLAS
void blas_cpu(benchmark::State& state, bool cost) {
    blas_backend blas;
    cpu_backend cpu;
    llama_instance s(layers(32));
    if (cost) {
        cost_scheduler<blas_backend, cpu_backend> sched(cost_policy{}, {}, blas, cpu);
        run(state, sched, s);
    } else {
        scheduler sched(blas, cpu);
        run(state, sched, s);
    }
}
BENCHMARK_CAPTURE(blas_cpu, greedy, false)->Name("plan/blas_cpu/greedy")->Unit(benchmark::kMillisecond)->Iterations(10);
BENCHMARK_CAPTURE(blas_cpu, cost, true)->Name("plan/blas_cpu/cost")->Unit(benchmark::kMillisecond)->Iterations(10);
#endif
BENCHMARK_CAPTURE(cpu_only, all, 32)->Name("plan/cpu")->Unit(benchmark::kMillisecond)->Iterations(10);

// -- {Vulkan, CPU} -----------------------------------------------------------------------

#if BACKPLANE_BENCH_HAVE_VULKAN
void vulkan_cpu(benchmark::State& state, int mode) { // 0 greedy, 1 cost, 2 Vulkan alone
    auto dev = vulkan_device::open({.index = 0});
    if (!dev) {
        state.SkipWithError(("no Vulkan device: " + dev.error().describe()).c_str());
        return;
    }
    auto be = dev->make_backend();
    if (!be) {
        state.SkipWithError(be.error().describe().c_str());
        return;
    }
    cpu_backend cpu;
    if (mode == 2) {
        llama_instance s(layers(32), dev->buffer_type(), 32, true); // nothing in host memory
        scheduler sched(*be, cpu);
        for (tensor* t : s.g.nodes())
            if (!is_view_op(t->op)) (void)sched.set_backend(*t, 0);
        run(state, sched, s);
        return;
    }
    llama_instance s(layers(32), dev->buffer_type(), 16);
    if (mode == 1) {
        cost_scheduler<vulkan_backend, cpu_backend> sched(cost_policy{}, {}, *be, cpu);
        run(state, sched, s);
    } else {
        scheduler sched(*be, cpu);
        run(state, sched, s);
    }
}
BENCHMARK_CAPTURE(vulkan_cpu, greedy, 0)->Name("plan/vulkan_cpu/greedy")->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(vulkan_cpu, cost, 1)->Name("plan/vulkan_cpu/cost")->Unit(benchmark::kMillisecond)->Iterations(10);
BENCHMARK_CAPTURE(vulkan_cpu, vulkan, 2)->Name("plan/vulkan_cpu/vulkan")->Unit(benchmark::kMillisecond)->Iterations(3);
#endif

} // namespace

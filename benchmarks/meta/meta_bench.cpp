// Meta backend benchmarks (backplane_bench_meta): the llama-like reference graph
// (tests/support/llama_graph.hpp) computed through a meta device of 1, 2 and 4 CPU parts
// (tensor parallelism, split as in the tests: tests/backends/meta/meta_fixtures.hpp),
// with the same graph on one plain CPU backend as the reference in the same run:
//
//   meta/llama/tokens:<t>/devices:<n>   the graph (4 layers, n_embd 512, 8 heads, n_ff
//                                       1376, vocabulary 4096, f32 weights, t tokens) on
//                                       a meta device of n CPU parts, each a CPU backend
//                                       with max(1, hardware threads / n) threads
//   meta/ref/cpu_llama/tokens:<t>       the same graph on one cpu_backend with every
//                                       hardware thread: the reference
//
// for t = 1 (decode-like) and 32. All parts of a meta device are this process's one CPU:
// on a machine with fewer cores than parts they share the cores, so the figures measure
// the meta backend's overhead (splitting, the all-reduces, the lanes' fork and join) and
// the bytes its collective moves, not a speedup.
//
// Counters: items are tokens (items_per_second is tokens/s), us_per_token (wall time per
// compute / tokens), bytes_moved_per_token (the growth of stats().bytes_moved over the
// timed computes / tokens computed), reductions (all-reduces per compute), threads (CPU
// threads in all). Weights and inputs are written once per data set; each iteration is
// one compute() and synchronize(). Before timing, the meta device's logits are checked
// against the plain CPU's (normalized mean squared error < 1e-6): a wrong result is
// reported as an error, never as a figure.

#include <backplane/backends/cpu.hpp>
#include <backplane/backends/meta.hpp>
#include <backplane/backplane.hpp>

#include "../../tests/backends/meta/meta_fixtures.hpp"
#include "../../tests/support/llama_graph.hpp"
#include "../support.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace backplane;

namespace {

constexpr std::uint32_t seed = 42;

test::llama_params params(int n_tokens) {
    return {.n_layer = 4, .n_embd = 512, .n_head = 8, .n_ff = 1376, .n_tokens = n_tokens, .n_vocab = 4096};
}

int hw_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

/// Runs body() once per iteration (wall-clocked as a whole) and sets the per-token
/// counters. False when body() failed (the benchmark is then skipped with its message).
template <class Body> bool timed_tokens(benchmark::State& state, int n_tokens, Body&& body) {
    const auto t0 = std::chrono::steady_clock::now();
    for (auto _ : state)
        if (status st = body(); !st) {
            state.SkipWithError(st.describe().c_str());
            return false;
        }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double tokens = static_cast<double>(state.iterations()) * n_tokens;
    state.SetItemsProcessed(state.iterations() * n_tokens); // items_per_second: tokens/s
    state.counters["us_per_token"] = tokens > 0 ? seconds * 1e6 / tokens : 0.0;
    return true;
}

/// The plain CPU's logits for `tokens`, computed once (the check before timing).
const std::vector<float>& reference_logits(int n_tokens) {
    static std::map<int, std::vector<float>> cache;
    auto it = cache.find(n_tokens);
    if (it == cache.end()) it = cache.emplace(n_tokens, test::llama_on_cpu(params(n_tokens), seed)).first;
    return it->second;
}

/// A meta device of n CPU parts, its backend and the graph with its weights in the meta
/// device's buffers. Members are destroyed in reverse: the graph before the backend
/// and the device.
struct meta_set {
    test::llama_params p;
    meta_device dev;
    meta_backend be;
    std::optional<test::meta_llama> ml;

    meta_set(const test::llama_params& lp, meta_device d)
        : p(lp), dev(std::move(d)), be(dev.make_backend().value()) {
        ml.emplace(p, dev, be);
    }
};

void meta_llama(benchmark::State& state, int n_tokens, int n_devices) {
    const int threads = std::max(1, hw_threads() / n_devices);
    const std::string key = "meta/llama/" + std::to_string(n_tokens) + "/" + std::to_string(n_devices);
    meta_set* s = nullptr;
    try {
        s = &bench::dataset_cache<meta_set>(key, [&] {
            const test::llama_params p = params(n_tokens);
            const std::int64_t head_dim = p.head_dim();
            auto dev = meta_device::make(test::cpu_parts(n_devices),
                                         {.split = [head_dim](const tensor& t,
                                                              int nd) { return test::split_llama(t, nd, head_dim); },
                                          .threads_per_device = threads})
                           .value();
            auto made = std::make_shared<meta_set>(p, std::move(dev));
            test::fill_llama(made->ml->model, made->ml->inputs, seed).throw_if_failed();
            return made;
        });
    } catch (const std::exception& e) {
        return state.SkipWithError(e.what());
    }
    auto& be = s->be;
    const graph& g = s->ml->g;

    // warm-up: the plan, each device's compute buffers; then the check against one CPU
    if (status st = be.compute(g); !st) return state.SkipWithError(st.describe().c_str());
    if (status st = be.synchronize(); !st) return state.SkipWithError(st.describe().c_str());
    auto got = tensor_get_all<float>(*g.back());
    if (!got) return state.SkipWithError(got.error().describe().c_str());
    if (const double e = test::nmse_of(reference_logits(n_tokens), *got); !(e < 1e-6))
        return state.SkipWithError(("wrong result: nmse " + std::to_string(e) + " against one CPU").c_str());

    const meta::meta_stats before = be.stats();
    const bool ok = timed_tokens(state, n_tokens, [&] {
        status st = be.compute(g);
        return st ? be.synchronize() : st;
    });
    if (!ok) return;
    const meta::meta_stats after = be.stats();

    const double tokens = static_cast<double>(state.iterations()) * n_tokens;
    const double computes = static_cast<double>(after.computes - before.computes);
    state.counters["bytes_moved_per_token"] =
        tokens > 0 ? static_cast<double>(after.bytes_moved - before.bytes_moved) / tokens : 0.0;
    state.counters["reductions"] =
        computes > 0 ? static_cast<double>(after.reductions - before.reductions) / computes : 0.0;
    state.counters["threads"] = static_cast<double>(threads * n_devices);
}

/// The same graph on one CPU backend, every weight in host memory.
struct cpu_set {
    test::llama_instance inst;
    graph_allocator ga{cpu_buffer_type::instance()};
    explicit cpu_set(const test::llama_params& p) : inst(p) {}
};

void cpu_llama(benchmark::State& state, int n_tokens) {
    const int threads = hw_threads();
    cpu_set* s = nullptr;
    try {
        s = &bench::dataset_cache<cpu_set>("meta/ref/cpu_llama/" + std::to_string(n_tokens), [&] {
            auto made = std::make_shared<cpu_set>(params(n_tokens));
            made->ga.alloc_graph(made->inst.g).throw_if_failed();
            test::fill_llama(made->inst.model, made->inst.inputs, seed).throw_if_failed();
            return made;
        });
    } catch (const std::exception& e) {
        return state.SkipWithError(e.what());
    }
    cpu_backend cpu(cpu_backend_params{.n_threads = threads});
    if (!cpu.compute(s->inst.g)) return state.SkipWithError("compute failed");
    const bool ok = timed_tokens(state, n_tokens, [&] {
        status st = cpu.compute(s->inst.g);
        return st ? cpu.synchronize() : st;
    });
    if (!ok) return;
    state.counters["bytes_moved_per_token"] = 0.0;
    state.counters["threads"] = static_cast<double>(threads);
}

const bool registered = [] {
    using benchmark::RegisterBenchmark;
    for (const int t : {1, 32}) {
        const std::string ts = "tokens:" + std::to_string(t);
        RegisterBenchmark(("meta/ref/cpu_llama/" + ts).c_str(), cpu_llama, t)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        for (const int n : {1, 2, 4})
            RegisterBenchmark(("meta/llama/" + ts + "/devices:" + std::to_string(n)).c_str(), meta_llama, t, n)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
    }
    return true;
}();

} // namespace

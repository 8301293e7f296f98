// Vulkan backend benchmarks (backplane_bench_vulkan), on Vulkan device 0 (lavapipe where
// there is no GPU). Each figure has a reference measured in the same run:
//
//   vulkan/mul_mat/<type>/1024     1024^3 product, GFLOP/s (types f32, f16, q8_0, q4_0,
//                                  q4_K, q6_K); ref: the CPU backend's f32
//                                  mul_mat (vulkan/ref/cpu_mul_mat/f32/1024)
//   vulkan/mat_vec/<type>/4096     4096x4096 weights by one vector, GB/s of weights; ref:
//                                  the CPU backend's (vulkan/ref/cpu_mat_vec/<type>/4096)
//   vulkan/dispatch/tiny           one 1-element op, compute + synchronize, time per run
//   vulkan/h2d, vulkan/d2h         64 MiB tensor_set / tensor_get, GB/s, mapped and
//                                  staged; ref: host memcpy (vulkan/ref/memcpy)
//   vulkan/llama                   the llama-like reference graph (32 layers, f32, 32
//                                  tokens), every weight in Vulkan memory, scheduled over
//                                  {vulkan, cpu}; ref: the same graph on the CPU backend
//
// Each timed iteration ends with synchronize(): the figures are completed work.

#include <backplane/backends/vulkan.hpp>
#include <backplane/backplane.hpp>
#include <backplane/sched.hpp>

#include "../../tests/support/llama_graph.hpp"
#include "../support.hpp"

#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace backplane;

namespace {

/// Device 0 (staging forced or not), opened once.
vulkan_device* device(bool staged = false) {
    static std::optional<vulkan_device> dev[2];
    static bool tried[2] = {false, false};
    const int i = staged ? 1 : 0;
    if (!tried[i]) {
        tried[i] = true;
        auto d = vulkan_device::open({.index = 0, .force_staging = staged});
        if (d) dev[i].emplace(std::move(*d));
    }
    return dev[i] ? &*dev[i] : nullptr;
}

void vulkan_mul_mat(benchmark::State& state, elem_type wt, std::int64_t M, std::int64_t N, std::int64_t K) {
    vulkan_device* dev = device();
    if (dev == nullptr) return state.SkipWithError("no Vulkan device");
    auto be = dev->make_backend();
    if (!be) return state.SkipWithError(be.error().describe().c_str());
    bench::mul_mat_case c;
    if (!c.make(dev->buffer_type(), wt, M, N, K)) return state.SkipWithError("allocation failed");
    if (!be->supports_op(*c.out)) return state.SkipWithError("mul_mat of this type is not supported");
    c.run(state, *be);
}

void cpu_mul_mat(benchmark::State& state, elem_type wt, std::int64_t M, std::int64_t N, std::int64_t K) {
    cpu_backend cpu({.n_threads = 2});
    bench::mul_mat_case c;
    if (!c.make(cpu_buffer_type::instance(), wt, M, N, K)) return state.SkipWithError("allocation failed");
    c.run(state, cpu, 0);
}

void vulkan_dispatch_tiny(benchmark::State& state) {
    vulkan_device* dev = device();
    if (dev == nullptr) return state.SkipWithError("no Vulkan device");
    auto be = dev->make_backend();
    if (!be) return state.SkipWithError(be.error().describe().c_str());
    context ctx(context_params{.no_alloc = true});
    tensor* x = ctx.new_tensor_1d(elem_type::f32, 1);
    graph g(relu(ctx, x));
    auto buf = alloc_tensors(ctx, dev->buffer_type());
    if (!buf || !tensor_memset(*x, 0, 0, 4)) return state.SkipWithError("allocation failed");
    for (auto _ : state) {
        if (!be->compute(g)) return state.SkipWithError("compute failed");
        if (!be->synchronize()) return state.SkipWithError("synchronize failed");
    }
}

void vulkan_transfer(benchmark::State& state, bool staged, bool to_device) {
    vulkan_device* dev = device(staged);
    if (dev == nullptr) return state.SkipWithError("no Vulkan device");
    constexpr std::int64_t n = 16 << 20; // 64 MiB of f32
    context ctx(context_params{.no_alloc = true});
    tensor* t = ctx.new_tensor_1d(elem_type::f32, n);
    auto buf = alloc_tensors(ctx, dev->buffer_type());
    if (!buf) return state.SkipWithError("allocation failed");
    std::vector<float> host(static_cast<std::size_t>(n), 1.0f);
    for (auto _ : state) {
        const status s = to_device ? tensor_set(*t, host.data(), 0, t->nbytes()) : tensor_get(*t, host.data(), 0, t->nbytes());
        if (!s) return state.SkipWithError(s.describe().c_str());
    }
    state.counters["GB/s"] = benchmark::Counter(static_cast<double>(t->nbytes()) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void ref_memcpy(benchmark::State& state) {
    constexpr std::size_t n = std::size_t{64} << 20;
    std::vector<std::byte> a(n, std::byte{1}), b(n);
    for (auto _ : state) {
        std::memcpy(b.data(), a.data(), n);
        benchmark::DoNotOptimize(b.data());
        benchmark::ClobberMemory();
    }
    state.counters["GB/s"] = benchmark::Counter(static_cast<double>(n) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

/// The llama-like reference graph, weights in `bt`'s memory, kept between calls.
struct llama_set {
    context w{context_params{.no_alloc = true}};
    context gctx{context_params{.no_alloc = true}};
    test::llama_model m;
    test::llama_inputs in;
    graph g;
    std::optional<buffer_list> wbuf;
};

template <class BT>
std::unique_ptr<llama_set> make_llama(const BT& bt) {
    auto s = std::make_unique<llama_set>();
    s->m = test::make_llama_model(s->w, {});
    auto b = alloc_tensors(s->w, bt, buffer_usage::weights);
    if (!b) return nullptr;
    s->wbuf.emplace(std::move(*b));
    s->in = test::make_llama_inputs(s->gctx, s->m.params);
    s->g = test::build_llama_graph(s->gctx, s->m, s->in);
    return s;
}

/// The llama graph over {vulkan, cpu}: weights, backends and scheduler made once (the
/// graph's tensors point into the scheduler's buffers, so they live together).
struct vulkan_llama_set {
    std::unique_ptr<llama_set> set;
    vulkan_backend vk;
    cpu_backend cpu{cpu_backend_params{.n_threads = 2}};
    scheduler<vulkan_backend, cpu_backend> sched{scheduler_params{}, vk, cpu};
    explicit vulkan_llama_set(vulkan_backend b) : vk(std::move(b)) {}
};

void vulkan_llama(benchmark::State& state) {
    vulkan_device* dev = device();
    if (dev == nullptr) return state.SkipWithError("no Vulkan device");
    static std::unique_ptr<vulkan_llama_set> s; // ~400 MiB of weights: made once
    if (!s) {
        auto be = dev->make_backend();
        if (!be) return state.SkipWithError(be.error().describe().c_str());
        auto made = std::make_unique<vulkan_llama_set>(std::move(*be));
        made->set = make_llama(dev->buffer_type());
        if (!made->set || !test::fill_llama_weights(made->set->m, 42)) return state.SkipWithError("weights failed");
        s = std::move(made);
    }
    auto& sched = s->sched;
    auto& set = *s->set;
    if (!sched.alloc_graph(set.g) || !test::fill_llama_inputs(set.m.params, set.in, 42) || !sched.compute(set.g))
        return state.SkipWithError("first compute failed");
    std::size_t on_vulkan = 0, nodes = 0;
    for (tensor* t : set.g.nodes()) {
        if (is_view_op(t->op)) continue;
        ++nodes;
        on_vulkan += sched.backend_of(*t) == 0 ? 1 : 0;
    }
    for (auto _ : state) {
        if (!sched.compute(set.g)) return state.SkipWithError("compute failed");
    }
    state.counters["splits"] = static_cast<double>(sched.n_splits());
    state.counters["vulkan_nodes"] = static_cast<double>(on_vulkan);
    state.counters["nodes"] = static_cast<double>(nodes);
}

void cpu_llama(benchmark::State& state) {
    struct cpu_llama_set { // the graph's tensors point into the allocator's buffers: kept together
        std::unique_ptr<llama_set> set;
        graph_allocator ga{cpu_buffer_type::instance()};
    };
    static std::unique_ptr<cpu_llama_set> s;
    if (!s) {
        auto made = std::make_unique<cpu_llama_set>();
        made->set = make_llama(cpu_buffer_type::instance());
        if (!made->set || !test::fill_llama_weights(made->set->m, 42)) return state.SkipWithError("weights failed");
        if (!made->ga.alloc_graph(made->set->g) || !test::fill_llama_inputs(made->set->m.params, made->set->in, 42))
            return state.SkipWithError("allocation failed");
        s = std::move(made);
    }
    cpu_backend cpu({.n_threads = 2});
    for (auto _ : state)
        if (!cpu.compute(s->set->g)) return state.SkipWithError("compute failed");
}

const bool registered = [] {
    using benchmark::RegisterBenchmark;
    const std::pair<const char*, elem_type> types[] = {
        {"f32", elem_type::f32},   {"f16", elem_type::f16},   {"q8_0", elem_type::q8_0},
        {"q4_0", elem_type::q4_0}, {"q4_K", elem_type::q4_K}, {"q6_K", elem_type::q6_K}};
    for (auto [name, t] : types)
        RegisterBenchmark((std::string("vulkan/mul_mat/") + name + "/1024").c_str(), vulkan_mul_mat, t, 1024, 1024, 1024)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    RegisterBenchmark("vulkan/ref/cpu_mul_mat/f32/1024", cpu_mul_mat, elem_type::f32, 1024, 1024, 1024)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    for (auto [name, t] : types) {
        RegisterBenchmark((std::string("vulkan/mat_vec/") + name + "/4096").c_str(), vulkan_mul_mat, t, 4096, 1, 4096)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
        RegisterBenchmark((std::string("vulkan/ref/cpu_mat_vec/") + name + "/4096").c_str(), cpu_mul_mat, t, 4096, 1,
                          4096)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
    }
    RegisterBenchmark("vulkan/dispatch/tiny", vulkan_dispatch_tiny)->Unit(benchmark::kMicrosecond)->UseRealTime();
    RegisterBenchmark("vulkan/h2d/mapped", vulkan_transfer, false, true)->Unit(benchmark::kMillisecond)->UseRealTime();
    RegisterBenchmark("vulkan/d2h/mapped", vulkan_transfer, false, false)->Unit(benchmark::kMillisecond)->UseRealTime();
    RegisterBenchmark("vulkan/h2d/staged", vulkan_transfer, true, true)->Unit(benchmark::kMillisecond)->UseRealTime();
    RegisterBenchmark("vulkan/d2h/staged", vulkan_transfer, true, false)->Unit(benchmark::kMillisecond)->UseRealTime();
    RegisterBenchmark("vulkan/ref/memcpy", ref_memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();
    RegisterBenchmark("vulkan/llama", vulkan_llama)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
    RegisterBenchmark("vulkan/ref/cpu_llama", cpu_llama)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
    return true;
}();

} // namespace

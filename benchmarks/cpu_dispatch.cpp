// cpu/dispatch/add_chain/10000: the CPU backend's cost per graph node when the nodes do
// almost nothing: 10,000 chained adds of 16 floats (t = add(t, c), each node reading the
// previous one). With several threads every node is a fork and a join of the pool, so
// this measures the pool's barrier as much as the per-node checks in compute().
// Targets: <= 50 ns/node at 1 thread, <= 100 ns/node at 2 threads.
//
// cpu/dispatch/add_chain_plan/10000: the same graph made into a plan once
// (cpu_backend::make_plan) and computed from it: the per-node cost of running a plan,
// without compute(g)'s checks and scheduling.

#include "support.hpp"

#include <chrono>
#include <cmath>
#include <string>

namespace {

using namespace backplane;
using namespace backplane::bench;

constexpr int chain_length = 10000;
constexpr std::int64_t width = 16;

void add_chain(benchmark::State& state, bool with_plan) {
    const int n_threads = static_cast<int>(state.range(0));
    cpu_backend backend;
    if (!set_threads(backend, n_threads, state))
        return;
    context ctx(context_params{.no_alloc = false});
    tensor* t0 = ctx.new_tensor_1d(elem_type::f32, width);
    tensor* c = ctx.new_tensor_1d(elem_type::f32, width);
    t0->name = "t0";
    c->name = "c";
    fill_random(*t0, 3);
    fill_random(*c, 4);
    tensor* t = t0;
    for (int i = 0; i < chain_length; ++i)
        t = add(ctx, t, c);
    const graph g(t);

    result<cpu_plan> plan = backend.make_plan(g);
    if (!plan) {
        state.SkipWithError(plan.error().describe().c_str());
        return;
    }
    const auto run = [&] { return with_plan ? backend.compute(*plan) : backend.compute(g); };
    if (status s = run(); !s) {
        state.SkipWithError(s.describe().c_str());
        return;
    }
    // the chain's end is t0 + 10000 c (in float: a loose tolerance)
    for (std::int64_t i = 0; i < width; ++i) {
        const float want = static_cast<const float*>(t0->data)[i] +
                           chain_length * static_cast<const float*>(c->data)[i];
        const float got = static_cast<const float*>(t->data)[i];
        if (!(std::abs(got - want) <= 1e-3f * chain_length)) {
            state.SkipWithError(("wrong result: element " + std::to_string(i) + " is " +
                                 std::to_string(got) + ", expected " + std::to_string(want))
                                    .c_str());
            return;
        }
    }
    // timed here too, so that the counter is a plain number of ns (an inverted rate
    // would print as seconds in the console)
    const auto start = std::chrono::steady_clock::now();
    for (auto _ : state) {
        if (status s = run(); !s) {
            state.SkipWithError(s.describe().c_str());
            break;
        }
        benchmark::ClobberMemory();
    }
    const std::chrono::duration<double, std::nano> elapsed =
        std::chrono::steady_clock::now() - start;
    state.counters["ns_per_node"] = elapsed.count() / (static_cast<double>(state.iterations()) *
                                                       static_cast<double>(g.n_nodes()));
    state.SetLabel(std::to_string(g.n_nodes()) + " nodes of " + std::to_string(width) + " f32");
}

[[maybe_unused]] const bool registered_dispatch = [] {
    const std::string name = "cpu/dispatch/add_chain/" + std::to_string(chain_length);
    per_thread_count(benchmark::RegisterBenchmark(name.c_str(), add_chain, false))->MinTime(0.5);
    const std::string plan_name = "cpu/dispatch/add_chain_plan/" + std::to_string(chain_length);
    per_thread_count(benchmark::RegisterBenchmark(plan_name.c_str(), add_chain, true))->MinTime(0.5);
    return true;
}();

} // namespace

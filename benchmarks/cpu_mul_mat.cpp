// cpu/mul_mat/<type>/1024: the CPU backend computing one mul_mat of 1024^3, weights of
// each type times f32 activations, through backend.compute() as a user would (so node
// dispatch, the activations' conversion and the thread pool's start are part of it).
// Compute-bound: compared with OpenBLAS sgemm and with the FMA peak of the same run.
//
//   a: weights [K = 1024, M = 1024] of the type, b: f32 [K = 1024, N = 1024]
//   out = mul_mat(a, b): f32 [M, N], 2 M N K flops per compute.

#include "support.hpp"

#include <string>

namespace {

using namespace backplane;
using namespace backplane::bench;

constexpr std::int64_t square_dim = 1024;

void mul_mat_bench(benchmark::State& state, elem_type weights) {
    const int n_threads = static_cast<int>(state.range(0));
    cpu_backend backend;
    if (!set_threads(backend, n_threads, state))
        return;
    context ctx(context_params{.no_alloc = false});
    tensor* a = ctx.new_tensor_2d(weights, square_dim, square_dim);
    tensor* b = ctx.new_tensor_2d(elem_type::f32, square_dim, square_dim);
    a->name = "weights";
    b->name = "activations";
    fill_random(*a, 1);
    fill_random(*b, 2);
    tensor* out = mul_mat(ctx, a, b);
    out->name = "out";
    const graph g(out);

    // warm-up; also proves the backend runs it and gets it right (a fast wrong kernel
    // must not pass for a fast one)
    if (status s = backend.compute(g); !s) {
        state.SkipWithError(s.describe().c_str());
        return;
    }
    if (const std::string bad = check_mul_mat(*out); !bad.empty()) {
        state.SkipWithError(bad.c_str());
        return;
    }
    for (auto _ : state) {
        if (status s = backend.compute(g); !s) {
            state.SkipWithError(s.describe().c_str());
            break;
        }
        benchmark::ClobberMemory();
    }
    state.counters["GFLOPS"] = rate(state, 2.0 * square_dim * square_dim * square_dim / 1e9);
    state.SetLabel(std::string(to_string(weights)) + " x f32, isa " +
                   std::string(cpu::to_string(cpu::active_isa())));
}

[[maybe_unused]] const bool registered_mul_mat = [] {
    for (elem_type t : {elem_type::f32, elem_type::f16, elem_type::q8_0, elem_type::q4_0, elem_type::q4_1,
                        elem_type::q5_0, elem_type::q5_1, elem_type::iq4_nl, elem_type::mxfp4, elem_type::q2_K,
                        elem_type::q3_K, elem_type::q4_K, elem_type::q6_K}) {
        const std::string name =
            "cpu/mul_mat/" + std::string(to_string(t)) + "/" + std::to_string(square_dim);
        per_thread_count(benchmark::RegisterBenchmark(name.c_str(), mul_mat_bench, t))
            ->MinTime(1.0);
    }
    return true;
}();

} // namespace

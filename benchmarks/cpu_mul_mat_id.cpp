// cpu/mul_mat_id/<type>/<threads>: the CPU backend computing one mul_mat_id of a mixture
// of experts (8 experts of [K = 2048, M = 768], 2 used by each of 512 tokens, routed at
// random, unevenly) against the dense mul_mats that do the same multiply-adds: each
// expert's matrix times the columns routed to it, 8 mul_mat nodes of those sizes in one
// graph. Both run in each iteration, alternately, so that a busy machine slows both
// alike; the time reported is mul_mat_id's, the counters give both and their ratio.
//
//   as: [2048, 768, 8] of the type, b: f32 [2048, 1, 512], ids: i32 [2, 512]
//   out = mul_mat_id(as, b, ids): f32 [768, 2, 512]; 2 K M n_used n_tokens flops

#include "support.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace {

using namespace backplane;
using namespace backplane::bench;

constexpr std::int64_t moe_k = 2048, moe_m = 768, n_expert = 8, n_used = 2, n_tokens = 512;

/// Two distinct experts per token, expert e drawn with weight e + 1 (uneven loads).
std::vector<std::int32_t> routing() {
    rng r{42};
    std::vector<std::int32_t> ids;
    const auto draw = [&] {
        const std::uint64_t total = n_expert * (n_expert + 1) / 2;
        std::uint64_t x = r.next() % total;
        std::int32_t e = 0;
        while (x >= static_cast<std::uint64_t>(e + 1)) x -= static_cast<std::uint64_t>(++e);
        return e;
    };
    for (std::int64_t t = 0; t < n_tokens; ++t) {
        const std::int32_t first = draw();
        std::int32_t second = draw();
        while (second == first) second = draw();
        ids.push_back(first);
        ids.push_back(second);
    }
    return ids;
}

/// Seconds one compute of g takes, or a negative value on failure (the reason in state).
double timed(cpu_backend& backend, const graph& g, benchmark::State& state) {
    const auto t0 = std::chrono::steady_clock::now();
    if (status s = backend.compute(g); !s) {
        state.SkipWithError(s.describe().c_str());
        return -1.0;
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void mul_mat_id_bench(benchmark::State& state, elem_type weights) {
    const int n_threads = static_cast<int>(state.range(0));
    cpu_backend backend;
    if (!set_threads(backend, n_threads, state)) return;
    context ctx(context_params{.no_alloc = false});
    const std::vector<std::int32_t> ids_v = routing();

    // the mixture of experts
    tensor* as = ctx.new_tensor_3d(weights, moe_k, moe_m, n_expert);
    tensor* b = ctx.new_tensor_3d(elem_type::f32, moe_k, 1, n_tokens);
    tensor* ids = ctx.new_tensor_2d(elem_type::i32, n_used, n_tokens);
    fill_random(*as, 1);
    fill_random(*b, 2);
    std::copy(ids_v.begin(), ids_v.end(), static_cast<std::int32_t*>(ids->data));
    const graph moe(mul_mat_id(ctx, as, b, ids));

    // the same multiply-adds as dense mul_mats: expert e's matrix times its tokens' rows
    graph dense;
    for (std::int64_t e = 0; e < n_expert; ++e) {
        std::vector<std::int64_t> tokens;
        for (std::size_t c = 0; c < ids_v.size(); ++c)
            if (ids_v[c] == e) tokens.push_back(static_cast<std::int64_t>(c) / n_used);
        if (tokens.empty()) continue;
        tensor* w = ctx.new_tensor_2d(weights, moe_k, moe_m);
        std::copy_n(static_cast<const std::byte*>(as->data) + static_cast<std::size_t>(e) * as->nb[2], as->nb[2],
                    static_cast<std::byte*>(w->data));
        tensor* x = ctx.new_tensor_2d(elem_type::f32, moe_k, static_cast<std::int64_t>(tokens.size()));
        for (std::size_t j = 0; j < tokens.size(); ++j)
            std::copy_n(static_cast<const std::byte*>(b->data) + static_cast<std::size_t>(tokens[j]) * b->nb[2],
                        b->nb[1], static_cast<std::byte*>(x->data) + j * x->nb[1]);
        dense.build_forward(mul_mat(ctx, w, x));
    }

    // warm-up; also proves that both run
    if (timed(backend, moe, state) < 0.0 || timed(backend, dense, state) < 0.0) return;
    double moe_s = 0.0, dense_s = 0.0;
    for (auto _ : state) {
        const double d = timed(backend, dense, state);
        const double m = timed(backend, moe, state);
        if (d < 0.0 || m < 0.0) break;
        dense_s += d;
        moe_s += m;
        state.SetIterationTime(m);
    }
    const auto n = static_cast<double>(state.iterations());
    const double flops = 2.0 * moe_k * moe_m * n_used * n_tokens;
    state.counters["GFLOPS"] = benchmark::Counter(flops / 1e9 * n / std::max(moe_s, 1e-12));
    state.counters["moe_ms"] = benchmark::Counter(1e3 * moe_s / std::max(n, 1.0));
    state.counters["dense_ms"] = benchmark::Counter(1e3 * dense_s / std::max(n, 1.0));
    state.counters["ratio"] = benchmark::Counter(moe_s / std::max(dense_s, 1e-12));
    state.SetLabel(std::string(to_string(weights)) + " experts x f32, isa " +
                   std::string(cpu::to_string(cpu::active_isa())));
}

[[maybe_unused]] const bool registered_mul_mat_id = [] {
    for (elem_type t : {elem_type::f32, elem_type::f16, elem_type::q8_0, elem_type::q4_K}) {
        const std::string name = "cpu/mul_mat_id/" + std::string(to_string(t));
        auto* b = benchmark::RegisterBenchmark(name.c_str(), mul_mat_id_bench, t);
        b->ArgName("threads");
        for (int n : thread_counts()) b->Arg(n);
        b->UseManualTime()->MinTime(2.0); // manual: mul_mat_id's time alone (not per_thread_count's real time)
    }
    return true;
}();

} // namespace

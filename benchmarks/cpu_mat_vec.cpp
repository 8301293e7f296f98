// cpu/mat_vec/<type>/4096: weights [4096, 4096] of each type times one f32 column, the
// shape of token generation, which is bound by how fast the weights stream from memory.
// cpu/mat_vec/<type>/2048 (q8_0, q4_0, q4_K, q6_K): the same with [2048, 2048], the rows
// of a model 2048 wide, which are short enough to change how far ahead the kernels must
// prefetch.
//
// One matrix would sit in a large last-level cache after the first run (here the LLC is
// 260 MiB), so the benchmark cycles through a rotating set of G separate weight matrices
// holding at least twice the LLC together: every compute reads its weights from DRAM.
// Each matrix has its own mul_mat graph over the same input column. The figure is weight
// bytes read per second, compared with ref/read_bandwidth of the same run.
//
// cpu/mat_vec_cached/<type>/4096: the same product over one matrix of 4096-value rows that
// fills three quarters of one core's L2 cache, computed again and again: the kernel's rate without
// DRAM, which tells whether cpu/mat_vec is bound by memory or by the kernel.

#include "support.hpp"

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace backplane;
using namespace backplane::bench;

constexpr std::int64_t dim = 4096;
constexpr std::int64_t short_dim = 2048; ///< the rows of a 2048-wide model's projections

/// G weight matrices of one type and a mul_mat graph over each.
struct weight_set {
    context ctx{context_params{.no_alloc = false}};
    std::vector<graph> graphs;
    std::size_t matrix_bytes = 0;
    bool capped = false;
    std::size_t next = 0; ///< the rotation continues across Google Benchmark's runs
};

std::shared_ptr<weight_set> make_weight_set(elem_type type, std::int64_t n) {
    auto set = std::make_shared<weight_set>();
    set->matrix_bytes = row_size(type, n) * n;
    const std::size_t want = 2 * llc_bytes();
    const std::size_t budget = available_bytes() / 2;
    std::size_t count = (want + set->matrix_bytes - 1) / set->matrix_bytes;
    if (count * set->matrix_bytes > budget) {
        count = budget / set->matrix_bytes;
        set->capped = true;
    }
    count = std::max<std::size_t>(count, 2);

    tensor* x = set->ctx.new_tensor_2d(elem_type::f32, n, 1);
    x->name = "x";
    fill_random(*x, 7);
    tensor* first = nullptr;
    for (std::size_t i = 0; i < count; ++i) {
        tensor* w = set->ctx.new_tensor_2d(type, n, n);
        w->name = "w" + std::to_string(i);
        // random data once, then copies: the values do not matter to a streaming read,
        // and quantizing ~1 GB of floats would make the set-up longer than the benchmark
        if (first == nullptr) {
            fill_random(*w, 11);
            first = w;
        } else {
            std::memcpy(w->data, first->data, set->matrix_bytes);
        }
        tensor* y = mul_mat(set->ctx, w, x);
        y->name = "y" + std::to_string(i);
        set->graphs.emplace_back(y);
    }
    return set;
}

void mat_vec_bench(benchmark::State& state, elem_type type, std::int64_t n) {
    const int n_threads = static_cast<int>(state.range(0));
    cpu_backend backend;
    if (!set_threads(backend, n_threads, state))
        return;
    weight_set& set = dataset_cache<weight_set>("cpu/mat_vec/" + std::string(to_string(type)) + "/" + std::to_string(n),
                                                [type, n] { return make_weight_set(type, n); });
    const std::size_t count = set.graphs.size();
    // warm-up: one full rotation (checks every graph runs and starts the thread pool),
    // then a spot check of the last result
    for (std::size_t i = 0; i < count; ++i) {
        if (status s = backend.compute(set.graphs[(set.next + i) % count]); !s) {
            state.SkipWithError(s.describe().c_str());
            return;
        }
    }
    if (const std::string bad = check_mul_mat(*set.graphs[(set.next + count - 1) % count].back());
        !bad.empty()) {
        state.SkipWithError(bad.c_str());
        return;
    }
    for (auto _ : state) {
        if (status s = backend.compute(set.graphs[set.next]); !s) {
            state.SkipWithError(s.describe().c_str());
            break;
        }
        set.next = set.next + 1 == count ? 0 : set.next + 1;
        benchmark::ClobberMemory();
    }
    state.counters["GBps"] = rate(state, static_cast<double>(set.matrix_bytes) / 1e9);
    state.SetLabel(std::string(to_string(type)) + ", " + std::to_string(count) + " x " +
                   mib_string(set.matrix_bytes) + " = " + mib_string(count * set.matrix_bytes) +
                   " (LLC " + mib_string(llc_bytes()) +
                   (set.capped ? ", capped by free memory)" : ")") + ", isa " +
                   std::string(cpu::to_string(cpu::active_isa())));
}

/// One L2-resident matrix (rows: a multiple of 16) and its graph.
struct cached_set {
    context ctx{context_params{.no_alloc = false}};
    std::optional<graph> g;
    std::size_t matrix_bytes = 0;
};

std::shared_ptr<cached_set> make_cached_set(elem_type type) {
    auto set = std::make_shared<cached_set>();
    const std::size_t row_bytes = row_size(type, dim);
    const auto rows = static_cast<std::int64_t>(std::max<std::size_t>(16, l2_bytes() / 4 * 3 / row_bytes / 16 * 16));
    set->matrix_bytes = row_bytes * static_cast<std::size_t>(rows);
    tensor* x = set->ctx.new_tensor_2d(elem_type::f32, dim, 1);
    fill_random(*x, 7);
    tensor* w = set->ctx.new_tensor_2d(type, dim, rows);
    fill_random(*w, 11);
    set->g.emplace(mul_mat(set->ctx, w, x));
    return set;
}

void mat_vec_cached_bench(benchmark::State& state, elem_type type) {
    cpu_backend backend;
    if (!set_threads(backend, static_cast<int>(state.range(0)), state))
        return;
    cached_set& set = dataset_cache<cached_set>("cpu/mat_vec_cached/" + std::string(to_string(type)),
                                                [type] { return make_cached_set(type); });
    if (status s = backend.compute(*set.g); !s) {
        state.SkipWithError(s.describe().c_str());
        return;
    }
    if (const std::string bad = check_mul_mat(*set.g->back()); !bad.empty()) {
        state.SkipWithError(bad.c_str());
        return;
    }
    for (auto _ : state) {
        if (status s = backend.compute(*set.g); !s) {
            state.SkipWithError(s.describe().c_str());
            break;
        }
        benchmark::ClobberMemory();
    }
    state.counters["GBps"] = rate(state, static_cast<double>(set.matrix_bytes) / 1e9);
    state.SetLabel(std::string(to_string(type)) + ", " + mib_string(set.matrix_bytes) + " (L2 " +
                   mib_string(l2_bytes()) + "), isa " + std::string(cpu::to_string(cpu::active_isa())));
}

[[maybe_unused]] const bool registered_mat_vec = [] {
    for (elem_type t : {elem_type::f32, elem_type::f16, elem_type::q8_0, elem_type::q4_0, elem_type::q4_1,
                        elem_type::q5_0, elem_type::q5_1, elem_type::iq4_nl, elem_type::mxfp4, elem_type::q2_K,
                        elem_type::q3_K, elem_type::q4_K, elem_type::q5_K, elem_type::q6_K}) {
        const std::string name =
            "cpu/mat_vec/" + std::string(to_string(t)) + "/" + std::to_string(dim);
        per_thread_count(benchmark::RegisterBenchmark(name.c_str(), mat_vec_bench, t, dim))
            ->MinTime(1.0);
        if (t == elem_type::q8_0 || t == elem_type::q4_0 || t == elem_type::q4_K || t == elem_type::q6_K) {
            const std::string short_name =
                "cpu/mat_vec/" + std::string(to_string(t)) + "/" + std::to_string(short_dim);
            per_thread_count(benchmark::RegisterBenchmark(short_name.c_str(), mat_vec_bench, t, short_dim))
                ->MinTime(1.0);
        }
        const std::string cached = "cpu/mat_vec_cached/" + std::string(to_string(t)) + "/" + std::to_string(dim);
        per_thread_count(benchmark::RegisterBenchmark(cached.c_str(), mat_vec_cached_bench, t))->MinTime(0.5);
    }
    return true;
}();

} // namespace

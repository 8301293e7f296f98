// cpu/attention/decode/{flash,unfused}: one query attending over 4096 cached positions,
// 32 heads of 128, f16 keys and values (the shape of token generation), computed two
// ways in the same run: flash_attn_ext in one node, and the unfused graph that computes
// the same thing, mul_mat(k, q), soft_max_ext, mul_mat(v^T, scores) with v stored
// transposed as an unfused KV cache keeps it. Both read the same values; the set-up
// checks that they agree. The figure is the time per compute; flash's ratio to unfused
// is docs/benchmarks.md's "CPU decode attention".

#include "support.hpp"

#include <cmath>
#include <memory>
#include <string>

namespace {

using namespace backplane;
using namespace backplane::bench;

constexpr std::int64_t head_dim = 128, n_kv = 4096, n_head = 32;

/// The query, the cache in both layouts and the two graphs.
struct attention_set {
    context ctx{context_params{.no_alloc = false}};
    graph flash, unfused;
    tensor* flash_out = nullptr;
    tensor* unfused_out = nullptr;
};

std::shared_ptr<attention_set> make_attention_set() {
    auto set = std::make_shared<attention_set>();
    context& ctx = set->ctx;
    tensor* q = ctx.new_tensor_3d(elem_type::f32, head_dim, 1, n_head);
    tensor* k = ctx.new_tensor_3d(elem_type::f16, head_dim, n_kv, n_head);
    tensor* v = ctx.new_tensor_3d(elem_type::f16, head_dim, n_kv, n_head);
    tensor* vt = ctx.new_tensor_3d(elem_type::f16, n_kv, head_dim, n_head); // v transposed, as values
    fill_random(*q, 1);
    fill_random(*k, 2);
    fill_random(*v, 3);
    const auto* vs = static_cast<const f16_t*>(v->data);
    auto* vts = static_cast<f16_t*>(vt->data);
    for (std::int64_t h = 0; h < n_head; ++h)
        for (std::int64_t j = 0; j < n_kv; ++j)
            for (std::int64_t d = 0; d < head_dim; ++d)
                vts[(h * head_dim + d) * n_kv + j] = vs[(h * n_kv + j) * head_dim + d];
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    set->flash_out = flash_attn_ext(ctx, q, k, v, nullptr, scale);
    tensor* scores = soft_max_ext(ctx, mul_mat(ctx, k, q), nullptr, scale, 0.0f); // [n_kv, 1, n_head]
    set->unfused_out = mul_mat(ctx, vt, scores);                                  // [head_dim, 1, n_head]
    set->flash.build_forward(set->flash_out);
    set->unfused.build_forward(set->unfused_out);
    return set;
}

/// Empty when both graphs' results agree (the same memory order: n_q is 1).
std::string check_agree(const attention_set& set) {
    const auto* a = static_cast<const float*>(set.flash_out->data);
    const auto* b = static_cast<const float*>(set.unfused_out->data);
    double err = 0.0, ref = 0.0;
    for (std::int64_t i = 0; i < head_dim * n_head; ++i) {
        err += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
        ref += static_cast<double>(b[i]) * b[i];
    }
    return err <= 1e-6 * ref ? std::string{} : "flash_attn_ext and the unfused graph disagree";
}

void attention_bench(benchmark::State& state, bool flash) {
    const int n_threads = static_cast<int>(state.range(0));
    cpu_backend backend;
    if (!set_threads(backend, n_threads, state))
        return;
    attention_set& set = dataset_cache<attention_set>("cpu/attention/decode", make_attention_set);
    graph& g = flash ? set.flash : set.unfused;
    for (graph* w : {&set.flash, &set.unfused}) // warm-up, and both results for the check
        if (status s = backend.compute(*w); !s) {
            state.SkipWithError(s.describe().c_str());
            return;
        }
    if (const std::string bad = check_agree(set); !bad.empty()) {
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
    const double cache_bytes = 2.0 * static_cast<double>(head_dim * n_kv * n_head) * sizeof(f16_t);
    state.counters["GBps"] = rate(state, cache_bytes / 1e9);
    state.SetLabel(std::string(flash ? "flash_attn_ext" : "mul_mat + soft_max_ext + mul_mat") + ", K and V " +
                   mib_string(static_cast<std::size_t>(cache_bytes)) + " f16 (LLC " + mib_string(llc_bytes()) +
                   "), isa " + std::string(cpu::to_string(cpu::active_isa())));
}

[[maybe_unused]] const bool registered_attention = [] {
    for (const bool flash : {true, false}) {
        const std::string name = std::string("cpu/attention/decode/") + (flash ? "flash" : "unfused") + "/" +
                                 std::to_string(n_kv);
        per_thread_count(benchmark::RegisterBenchmark(name.c_str(), attention_bench, flash))->MinTime(1.0);
    }
    return true;
}();

} // namespace

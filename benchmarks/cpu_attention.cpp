// One query attending over 4096 cached positions (the shape of token generation), heads
// of 128, f16 keys and values, computed two ways in the same run: flash_attn_ext in one
// node, and the unfused graph that computes the same thing, mul_mat(k, q), soft_max_ext,
// mul_mat(v^T, scores) with v stored transposed as an unfused KV cache keeps it. Both read
// the same values; the set-up checks that they agree. The figure is the time per layer.
//
//   cpu/attention/decode/{flash,unfused}/4096      32 heads, each its own keys and values
//       (64 MiB per layer); one layer's cache computed again and again.
//   cpu/attention/decode_gqa/{flash,unfused}/4096  32 query heads over 8 key-value heads
//       (Llama 3 8B: 16 MiB per layer); the caches of 32 layers visited in turn, as a
//       decode step visits them, so each layer's keys and values come from memory.
//
// Flash's ratio to unfused is docs/benchmarks.md's "CPU decode attention"; ref/read_bandwidth
// of the same run bounds both (bytes of K and V over it).

#include "support.hpp"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace backplane;
using namespace backplane::bench;

constexpr std::int64_t head_dim = 128, n_kv = 4096, n_head = 32;

/// A decode shape: key-value heads, and the layers whose caches are visited in turn.
struct attention_shape {
    std::int64_t n_head_kv;
    int layers;
    const char* name;
};
constexpr attention_shape mha{n_head, 1, "decode"}, gqa{8, 32, "decode_gqa"};

/// One layer: its cache in both layouts and the two graphs.
struct attention_layer {
    graph flash, unfused;
    tensor* flash_out = nullptr;
    tensor* unfused_out = nullptr;
};

/// The query and every layer.
struct attention_set {
    context ctx{context_params{.no_alloc = false}};
    std::vector<attention_layer> layers;
};

attention_layer make_layer(context& ctx, tensor* q, std::int64_t n_head_kv, std::uint32_t seed) {
    tensor* k = ctx.new_tensor_3d(elem_type::f16, head_dim, n_kv, n_head_kv);
    tensor* v = ctx.new_tensor_3d(elem_type::f16, head_dim, n_kv, n_head_kv);
    tensor* vt = ctx.new_tensor_3d(elem_type::f16, n_kv, head_dim, n_head_kv); // v transposed, as values
    fill_random(*k, seed);
    fill_random(*v, seed + 1);
    const auto* vs = static_cast<const f16_t*>(v->data);
    auto* vts = static_cast<f16_t*>(vt->data);
    for (std::int64_t h = 0; h < n_head_kv; ++h)
        for (std::int64_t j = 0; j < n_kv; ++j)
            for (std::int64_t d = 0; d < head_dim; ++d)
                vts[(h * head_dim + d) * n_kv + j] = vs[(h * n_kv + j) * head_dim + d];
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    attention_layer l;
    l.flash_out = flash_attn_ext(ctx, q, k, v, nullptr, scale);
    tensor* scores = soft_max_ext(ctx, mul_mat(ctx, k, q), nullptr, scale, 0.0f); // [n_kv, 1, n_head]
    l.unfused_out = mul_mat(ctx, vt, scores);                                      // [head_dim, 1, n_head]
    l.flash.build_forward(l.flash_out);
    l.unfused.build_forward(l.unfused_out);
    return l;
}

std::shared_ptr<attention_set> make_attention_set(const attention_shape& shape) {
    auto set = std::make_shared<attention_set>();
    tensor* q = set->ctx.new_tensor_3d(elem_type::f32, head_dim, 1, n_head);
    fill_random(*q, 1);
    for (int l = 0; l < shape.layers; ++l)
        set->layers.push_back(make_layer(set->ctx, q, shape.n_head_kv, 2 + 2 * static_cast<std::uint32_t>(l)));
    return set;
}

/// Empty when both graphs' results agree (the same memory order: n_q is 1).
std::string check_agree(const attention_layer& l) {
    const auto* a = static_cast<const float*>(l.flash_out->data);
    const auto* b = static_cast<const float*>(l.unfused_out->data);
    double err = 0.0, ref = 0.0;
    for (std::int64_t i = 0; i < head_dim * n_head; ++i) {
        err += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
        ref += static_cast<double>(b[i]) * b[i];
    }
    return err <= 1e-6 * ref ? std::string{} : "flash_attn_ext and the unfused graph disagree";
}

void attention_bench(benchmark::State& state, attention_shape shape, bool flash) {
    const int n_threads = static_cast<int>(state.range(0));
    cpu_backend backend;
    if (!set_threads(backend, n_threads, state))
        return;
    attention_set& set = dataset_cache<attention_set>(std::string("cpu/attention/") + shape.name,
                                                      [&] { return make_attention_set(shape); });
    for (graph* w : {&set.layers[0].flash, &set.layers[0].unfused}) // warm-up, and both results for the check
        if (status s = backend.compute(*w); !s) {
            state.SkipWithError(s.describe().c_str());
            return;
        }
    if (const std::string bad = check_agree(set.layers[0]); !bad.empty()) {
        state.SkipWithError(bad.c_str());
        return;
    }
    std::size_t next = 0;
    for (auto _ : state) {
        attention_layer& l = set.layers[next];
        next = next + 1 == set.layers.size() ? 0 : next + 1;
        if (status s = backend.compute(flash ? l.flash : l.unfused); !s) {
            state.SkipWithError(s.describe().c_str());
            break;
        }
        benchmark::ClobberMemory();
    }
    const double cache_bytes = 2.0 * static_cast<double>(head_dim * n_kv * shape.n_head_kv) * sizeof(f16_t);
    state.counters["GBps"] = rate(state, cache_bytes / 1e9);
    state.SetLabel(std::string(flash ? "flash_attn_ext" : "mul_mat + soft_max_ext + mul_mat") + ", " +
                   std::to_string(n_head) + " heads over " + std::to_string(shape.n_head_kv) + ", K and V " +
                   mib_string(static_cast<std::size_t>(cache_bytes)) + " f16 x " + std::to_string(shape.layers) +
                   " layers (LLC " + mib_string(llc_bytes()) + "), isa " + std::string(cpu::to_string(cpu::active_isa())));
}

[[maybe_unused]] const bool registered_attention = [] {
    for (const attention_shape& shape : {mha, gqa})
        for (const bool flash : {true, false}) {
            const std::string name = std::string("cpu/attention/") + shape.name + "/" + (flash ? "flash" : "unfused") +
                                     "/" + std::to_string(n_kv);
            per_thread_count(benchmark::RegisterBenchmark(name.c_str(), attention_bench, shape, flash))->MinTime(1.0);
        }
    return true;
}();

} // namespace

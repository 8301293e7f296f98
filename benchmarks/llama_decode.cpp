// llama/decode/<model>: the llama example's generation step (examples/llama), one token
// fed back per iteration, on the CPU backend through the scheduler, as the example runs
// it: the step's graph built, scheduled and allocated, its inputs set, computed, and the
// most likely token read from the logits. The figure is tokens per second, and the weight
// bytes each token reads per second (GBps; not for the MoE model, whose tokens read only
// their experts), compared with ref/read_bandwidth of the same run for the model larger
// than the last-level cache.
//
// llama/prompt/<model>: the prompt step of 64 tokens of the same models (tokens/s).
//
// Models (random weights, written once into the temporary directory as the example
// writes them, then read over the file's mapping):
//   llama-8x512-q8_0      the example's default model (27.8 MiB of q8_0 weights)
//   llama-16x2048-q4_0    16 layers, n_embd 2048, n_ff 5632, vocabulary 32000: ~460 MiB
//   qwen2-8x512-q8_0, qwen3-8x512-q8_0, gemma2-8x512-q8_0, qwen3moe-8x512-q4_K_M
//                         the other families at the example's default sizes
//
// Decode positions cycle through [64, 320) of a 320-position cache: each iteration's
// attention reads 64 to 320 positions (the example's --prompt 64 --gen 256).

#include "support.hpp"

#include "../examples/llama/graph.hpp"
#include "../examples/llama/writer.hpp"

#include <backplane/runtime.hpp>
#include <backplane/sched.hpp>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace llama_bench {

using namespace backplane;
using namespace backplane::bench;

constexpr int prompt_tokens = 64;
constexpr int n_ctx = 320;

struct model_spec {
    const char* name;
    llama::hparams hp;
    llama::file_type ftype;
};

llama::hparams family(llama::arch a) {
    llama::hparams hp;
    hp.family = a;
    hp.n_ctx = n_ctx;
    return hp;
}

std::vector<model_spec> specs() {
    llama::hparams big = family(llama::arch::llama);
    big.n_layer = 16;
    big.n_embd = 2048;
    big.n_head = 16;
    big.n_head_kv = 4;
    big.n_ff = 5632;
    big.n_vocab = 32000;
    const auto q8 = llama::pure_type(elem_type::q8_0);
    return {{"llama-8x512-q8_0", family(llama::arch::llama), q8},
            {"llama-16x2048-q4_0", big, llama::pure_type(elem_type::q4_0)},
            {"qwen2-8x512-q8_0", family(llama::arch::qwen2), q8},
            {"qwen3-8x512-q8_0", family(llama::arch::qwen3), q8},
            {"gemma2-8x512-q8_0", family(llama::arch::gemma2), q8},
            {"qwen3moe-8x512-q4_K_M", family(llama::arch::qwen3moe), *llama::parse_file_type("q4_K_M")}};
}

/// A model written (once) and loaded, with its KV cache.
struct loaded {
    std::unique_ptr<llama::model> m;
    std::unique_ptr<llama::kv_cache> cache;
    status error; ///< why there is no model
};

std::shared_ptr<loaded> load(const model_spec& spec) {
    auto out = std::make_shared<loaded>();
    const auto path = std::filesystem::temp_directory_path() /
                      ("backplane-bench-" + std::string(spec.name) + "-c" + std::to_string(n_ctx) + ".gguf");
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        if (auto s = llama::write_random_model(path, spec.hp, spec.ftype, 1, false); !s) {
            out->error = s;
            return out;
        }
    auto m = llama::model::load(path, llama::placement{});
    if (!m) {
        out->error = m.error();
        return out;
    }
    auto cache = llama::kv_cache::make(**m, n_ctx, elem_type::f32);
    if (!cache) {
        out->error = cache.error();
        return out;
    }
    out->m = std::move(*m);
    out->cache = std::move(*cache);
    return out;
}

/// One step of n tokens at n_past through the scheduler; the most likely last token.
/// The step at n_past for ids, computed: `st` when it serves those positions (moved
/// there), else a new one built and allocated into it; the greedy next token.
result<std::int32_t> run_step(dynamic_scheduler& sched, const loaded& l, int n_past, std::span<const std::int32_t> ids,
                              std::unique_ptr<llama::step>& st) {
    if (!st || st->n_tokens != static_cast<int>(ids.size()) || !st->move_to(n_past)) {
        st = llama::build_step(*l.m, *l.cache, n_past, static_cast<int>(ids.size()), false);
        if (auto s = sched.alloc_graph(st->g); !s) return s;
    }
    if (auto s = st->set_inputs(ids); !s) return s;
    if (auto s = sched.compute(st->g); !s) return s;
    auto logits = tensor_get_all<float>(*st->logits);
    if (!logits) return logits.error();
    return static_cast<std::int32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin());
}

/// The benchmark's model and a scheduler over a CPU backend of the instance's threads.
struct session {
    loaded* model = nullptr;
    std::vector<any_backend> backends;
    std::optional<dynamic_scheduler> sched;

    bool open(benchmark::State& state, const model_spec& spec, fusion_set fusions = {}) {
        model = &dataset_cache<loaded>("llama/" + std::string(spec.name), [&] { return load(spec); });
        if (model->m == nullptr) {
            state.SkipWithError(model->error.describe().c_str());
            return false;
        }
        auto cpu = registry::global().device("CPU");
        if (!cpu) {
            state.SkipWithError(cpu.error().describe().c_str());
            return false;
        }
        auto b = cpu->make_backend({.n_threads = static_cast<int>(state.range(0)), .fusions = fusions});
        if (!b) {
            state.SkipWithError(b.error().describe().c_str());
            return false;
        }
        backends.push_back(std::move(*b));
        sched.emplace(backends);
        return true;
    }
};

std::vector<std::int32_t> prompt(int n_vocab) {
    std::vector<std::int32_t> ids(prompt_tokens);
    for (int i = 0; i < prompt_tokens; ++i) ids[static_cast<std::size_t>(i)] = (i * 7919 + 13) % n_vocab;
    return ids;
}

void decode_bench(benchmark::State& state, const model_spec& spec, fusion_set fusions) {
    session s;
    if (!s.open(state, spec, fusions)) return;
    const loaded& l = *s.model;
    std::unique_ptr<llama::step> prompt_step, step; // the decode step is reused (step::move_to)
    auto next = run_step(*s.sched, l, 0, prompt(l.m->hp.n_vocab), prompt_step);
    int n_past = prompt_tokens;
    for (auto _ : state) {
        if (!next) {
            state.SkipWithError(next.error().describe().c_str());
            break;
        }
        const std::int32_t id = *next;
        next = run_step(*s.sched, l, n_past, std::span(&id, 1), step);
        n_past = n_past + 1 == n_ctx ? prompt_tokens : n_past + 1;
    }
    state.SetItemsProcessed(state.iterations());
    const llama::hparams& hp = l.m->hp;
    if (hp.tr().experts) { // a token reads only its experts' weights: no bytes per second
        state.SetLabel(mib_string(l.m->host_bytes) + " of weights, " + std::to_string(hp.n_expert_used) + " of " +
                       std::to_string(hp.n_expert) + " experts per token");
        return;
    }
    state.counters["GBps"] = rate(state, static_cast<double>(l.m->host_bytes) / 1e9);
    state.SetLabel(mib_string(l.m->host_bytes) + " of weights (LLC " + mib_string(llc_bytes()) + ")");
}

void prompt_bench(benchmark::State& state, const model_spec& spec) {
    session s;
    if (!s.open(state, spec)) return;
    const loaded& l = *s.model;
    const auto ids = prompt(l.m->hp.n_vocab);
    for (auto _ : state) {
        std::unique_ptr<llama::step> st; // built every time
        if (auto r = run_step(*s.sched, l, 0, ids, st); !r) {
            state.SkipWithError(r.error().describe().c_str());
            break;
        }
    }
    state.SetItemsProcessed(state.iterations() * prompt_tokens);
    state.SetLabel(mib_string(l.m->host_bytes) + " of weights, " + std::to_string(prompt_tokens) + " tokens");
}

[[maybe_unused]] const bool registered = [] {
    static const std::vector<model_spec> all = specs();
    for (const model_spec& spec : all) {
        per_thread_count(benchmark::RegisterBenchmark(("llama/decode/" + std::string(spec.name)).c_str(),
                                                      decode_bench, spec, fusion_set{}))
            ->MinTime(1.0);
        per_thread_count(benchmark::RegisterBenchmark(("llama/prompt/" + std::string(spec.name)).c_str(),
                                                      prompt_bench, spec))
            ->MinTime(0.5);
    }
    // the default model node by node: what the fused groups (docs/fusion.md) save
    per_thread_count(benchmark::RegisterBenchmark(("llama/decode_unfused/" + std::string(all.front().name)).c_str(),
                                                  decode_bench, all.front(), fusion_set::none()))
        ->MinTime(1.0);
    return true;
}();

} // namespace llama_bench

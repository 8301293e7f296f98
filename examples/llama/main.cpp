// llama: a decoder-only language model (the llama, qwen2, qwen3, gemma2 and qwen3moe
// transformer families of llama.cpp, and the mamba2 state-space family) run across the
// devices of this machine.
//
//   llama [--model FILE] [--device NAME] [--gpu-layers N] [--policy cost|greedy]
//         [--pipeline N] [--batch N] [--threads N] [--prompt N] [--gen N] [--check] ...
//   mpirun -np N llama --parallel tensor|pipeline ...
//
// 1. Reads the hyper-parameters and weights from a GGUF file with llama.cpp's keys and
//    tensor names, for six families (hparams.hpp, weights.hpp; the graph in graph.hpp).
//    Without --model it uses a file in the temporary directory, first writing a
//    deterministic random-weight model there when it is missing (--arch, --n-layer,
//    --n-embd, ... --wtype, --seed), so it always runs; --write-model (re)writes the file
//    named by --model; a --model file that does not exist is an error (exit status 2).
//    Weights left on the CPU are read in place over the file's memory mapping; the last
//    --gpu-layers layers (and the output) are copied to the device.
// 2. The device is --device NAME from the registry, else the best GPU-like one: a GPU,
//    else the first Vulkan or CUDA device, else none; a device not named (and no
//    --gpu-layers) is used only when its calibrated speed makes the model's prompt and
//    generation steps faster than on the CPU alone (devices.hpp; it says why either
//    way). The CPU backend runs the rest; a scheduler (the cost policy or ggml's
//    greedy rules) splits every step's graph between them and prints its plan: splits,
//    copies per step and their bytes, peak memory per device.
// 3. Processes a prompt of random token ids (there is no tokenizer: the model is random
//    or its vocabulary unknown here) in batches, queued asynchronously (with --pipeline
//    N > 1 the host prepares batch k + 1 while batch k runs), then generates tokens one by
//    one greedily with the KV cache, and prints tokens per second for both.
//    mamba2 has no attention and no KV cache: a recurrent state (the convolution's and
//    the scan's, per layer) carries the sequence from step to step, zero at its start;
//    --flash-attn and --cache-type, which only apply to attention, are refused for it
//    (exit status 2).
// 4. With --check, runs the whole sequence again on the CPU alone, in one batch, and
//    compares the logits of every step with it: normalized mean squared error at most
//    2e-3, else exit status 1. With --flash-attn on (attention as one flash_attn_ext
//    node), it compares with a CPU-only run of the unfused attention too.
//    With --reference FILE (another implementation's logits for fixed token ids, such as
//    llama.cpp's: reference.hpp), it runs those ids instead, the prompt in one batch
//    keeping every position's logits, then one id per step, and compares every position:
//    the same argmax and an NMSE of at most --max-nmse, else exit status 1.
// 5. With --parallel tensor|pipeline under mpirun, every rank runs the same steps on one
//    CPU backend and holds its part: a share of every layer, or a run of layers
//    (distributed.hpp; docs/distributed.md); rank 0 writes the model and prints.
//
// Exit status: 0 done, 1 failure, 2 bad command line, 77 --require-device and the device
// named by --device is missing.

#include "devices.hpp"
#include "graph.hpp"
#include "reference.hpp"
#include "writer.hpp"

#include "../common/cli.hpp"
#include "../common/report.hpp"

#if BACKPLANE_EXAMPLE_HAVE_MPI
#include "distributed.hpp"
#endif

#include <backplane/backends/cpu/profile.hpp>
#include <backplane/runtime.hpp>
#include <backplane/sched.hpp>
#include <backplane/sched/cost_policy.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace backplane;
using examples::clock_type;
using examples::mib;
using examples::seconds_since;

struct options {
    std::filesystem::path model_path;
    bool write_model = false;
    llama::hparams hp;                 // of a model written here
    llama::file_type ftype = llama::pure_type(elem_type::q8_0); // of a model written here
    std::uint32_t seed = 1;
    bool tied = false;
    int n_prompt = 64;
    int n_gen = 32;
    int batch = 0;       // 0: the whole prompt in one batch
    int gpu_layers = -1; // -1: every layer and the output
    int threads = 0;
    std::string device;
    bool require_device = false;
    std::string policy = "cost";
    int pipeline = 1;
    elem_type cache_type = elem_type::f32;
    int kv_pad = 32;
    bool flash_attn = false;
    bool attention_options = false; // --flash-attn or --cache-type given (refused for mamba2)
    bool check = false;
    std::filesystem::path reference; // another implementation's logits (reference.hpp)
    std::optional<double> max_nmse;  // ... and the largest NMSE a position may have
                                     // (default: llama::default_max_nmse)
    bool quiet = false;
    bool plan = false;
    bool profile = false;
    int repeat = 1; // timed runs of the whole sequence (> 1: after an untimed warm-up)
    bool fusion = true;
    std::string parallel; // "", "tensor" or "pipeline" (under mpirun)
};

constexpr const char* usage = R"(usage: llama [options]
model:
  --model FILE        GGUF model (llama.cpp names); it must exist unless --write-model
                      (default: a file in the temporary directory, written when missing)
  --write-model       (re)write FILE with random weights first
  --arch A            family of a written model: llama (default), qwen2, qwen3, gemma2,
                      qwen3moe, mamba2 (a file's general.architecture decides when loading)
  --n-layer N --n-embd N --n-head N --n-head-kv N --n-ff N --n-vocab N --n-ctx N
                      shape of a written model (default 8, 512, 8, 4, 1376, 4096, 2048)
  --head-dim N        its key and value head size (default n_embd / n_head)
  --n-expert N --n-expert-used N --n-ff-exp N
                      its experts (qwen3moe; default 8, 2, 256)
  --n-swa N           its sliding window (gemma2; default 32)
  --ssm-state N --ssm-groups N --ssm-conv N
                      its state size, groups and convolution kernel (mamba2; default 128,
                      1, 4); mamba2's heads are --n-head, its inner size 2 * n_embd, and
                      --n-head-kv, --n-ff and --head-dim do not apply to it
  --wtype T           every matrix of type T: f32, f16, bf16 or a quantized type (q8_0,
                      the default; q4_0, q4_1, q5_0, q5_1, q2_K ... q6_K, iq4_nl, mxfp4,
                      iq4_xs, iq3_xxs, iq3_s, iq2_s, iq1_m, tq1_0, tq2_0)
  --type F            llama.cpp's mix of types for file type F: q4_K_M, q5_K_M, q6_K,
                      q8_0, q4_0, mxfp4 (experts mxfp4, the rest q8_0), iq4_xs,
                      iq3_xxs (as llama.cpp's quantizer without an importance matrix;
                      file_type.hpp)
  --tied              no output.weight: the output reuses token_embd.weight
  --seed N            its weights' seed (default 1); also the prompt's
run:
  --device NAME       offload to this device (CPU: nothing offloaded); default: the best
                      GPU-like device (a GPU, else a Vulkan or CUDA device) when its
                      measured speed beats the CPU alone here
  --require-device    exit with status 77 when --device NAME does not exist
  --gpu-layers N      offload the last N layers (N > layers: the output too; default all)
  --policy P          cost (default) or greedy (ggml's placement rules)
  --pipeline N        pipeline copies of the scheduler (default 1)
  --parallel M        under mpirun: tensor (every rank a share of every layer) or
                      pipeline (every rank a run of layers); one CPU backend per rank
  --batch N           prompt tokens per step (default: the whole prompt)
  --threads N         CPU threads (default: the backend's)
  --cache-type T      KV cache f32 (default) or f16 (not for mamba2: no attention)
  --flash-attn on|off attention as one flash_attn_ext node (default off; not for mamba2)
  --no-fusion         every node computed on its own (no fused groups of nodes)
  --prompt N          prompt tokens (default 64)
  --gen N             generated tokens (default 32)
  --repeat N          run the prompt and generation N times after a warm-up run and print
                      the mean speeds (as llama-bench's repetitions; default 1, no warm-up)
  --check             compare the logits with a CPU-only run (NMSE <= 2e-3)
  --reference FILE    run FILE's token ids and compare every position's logits with FILE's
                      (the same argmax, NMSE at most --max-nmse; scripts/llamacpp)
  --max-nmse X        the largest NMSE --reference accepts (default by the tensor types:
                      5e-4 quantized, 2e-5 bf16, else 1e-6; examples/llama/reference.hpp)
  --plan              print the scheduler's plan of the prompt step in full
  --profile           time the generation steps: the host's work per token, and the CPU
                      backend's node by node (op, kernel, threads' work and waits)
  --quiet             no progress line
)";

int bad_usage(const std::string& what) {
    std::fprintf(stderr, "llama: %s\n%s", what.c_str(), usage);
    return 2;
}

/// Parses argv into `o`; returns a message on error.
std::optional<std::string> parse(int argc, char** argv, options& o) {
    examples::command_line cl(argc, argv);
    while (const auto option = cl.next()) {
        const std::string_view a = *option;
        std::optional<std::string> err;
        int seed = 0;
        std::string word;
        if (a == "--model") {
            err = cl.word(word, "a file");
            o.model_path = word;
        } else if (a == "--write-model")
            o.write_model = true;
        else if (a == "--arch") {
            const auto v = cl.value();
            const auto f = v ? llama::parse_arch(*v) : std::nullopt;
            if (!f)
                return "--arch needs one of " + llama::arch_names();
            o.hp.family = *f;
        } else if (a == "--head-dim")
            err = cl.number(o.hp.head_dim_k, 2);
        else if (a == "--n-expert")
            err = cl.number(o.hp.n_expert, 1);
        else if (a == "--n-expert-used")
            err = cl.number(o.hp.n_expert_used, 1);
        else if (a == "--n-ff-exp")
            err = cl.number(o.hp.n_ff_exp, 1);
        else if (a == "--n-swa")
            err = cl.number(o.hp.n_swa, 1);
        else if (a == "--ssm-state")
            err = cl.number(o.hp.ssm_d_state, 1);
        else if (a == "--ssm-groups")
            err = cl.number(o.hp.ssm_n_group, 1);
        else if (a == "--ssm-conv")
            err = cl.number(o.hp.ssm_d_conv, 2);
        else if (a == "--n-layer")
            err = cl.number(o.hp.n_layer, 1);
        else if (a == "--n-embd")
            err = cl.number(o.hp.n_embd, 1);
        else if (a == "--n-head")
            err = cl.number(o.hp.n_head, 1);
        else if (a == "--n-head-kv")
            err = cl.number(o.hp.n_head_kv, 1);
        else if (a == "--n-ff")
            err = cl.number(o.hp.n_ff, 1);
        else if (a == "--n-vocab")
            err = cl.number(o.hp.n_vocab, 1);
        else if (a == "--n-ctx")
            err = cl.number(o.hp.n_ctx, 1);
        else if (a == "--wtype") {
            elem_type t{};
            err = cl.weight_type(t);
            o.ftype = llama::pure_type(t);
        } else if (a == "--type") {
            const auto v = cl.value();
            const auto f = v ? llama::parse_file_type(*v) : std::nullopt;
            if (!f)
                err = "--type needs a file type (" + llama::file_type_names() + ")";
            else
                o.ftype = *f;
        }
        else if (a == "--tied")
            o.tied = true;
        else if (a == "--seed") {
            err = cl.number(seed, 0);
            o.seed = static_cast<std::uint32_t>(seed);
        } else if (a == "--device")
            err = cl.word(o.device, "a name");
        else if (a == "--require-device")
            o.require_device = true;
        else if (a == "--gpu-layers")
            err = cl.number(o.gpu_layers, 0);
        else if (a == "--policy")
            err = cl.one_of(o.policy, {"cost", "greedy"});
        else if (a == "--pipeline")
            err = cl.number(o.pipeline, 1);
        else if (a == "--parallel")
            err = cl.one_of(o.parallel, {"tensor", "pipeline"});
        else if (a == "--batch")
            err = cl.number(o.batch, 1);
        else if (a == "--threads")
            err = cl.number(o.threads, 1);
        else if (a == "--cache-type") {
            o.attention_options = true;
            err = cl.weight_type(o.cache_type);
            if (!err && o.cache_type != elem_type::f32 && o.cache_type != elem_type::f16)
                err = "--cache-type needs f32 or f16";
        } else if (a == "--flash-attn") {
            err = cl.one_of(word, {"on", "off"});
            o.flash_attn = word == "on";
            o.attention_options = true;
        } else if (a == "--prompt")
            err = cl.number(o.n_prompt, 1);
        else if (a == "--gen")
            err = cl.number(o.n_gen, 0);
        else if (a == "--repeat")
            err = cl.number(o.repeat, 1);
        else if (a == "--check")
            o.check = true;
        else if (a == "--reference") {
            err = cl.word(word, "a file");
            o.reference = word;
        } else if (a == "--max-nmse") {
            const auto v = cl.value();
            const std::string text(v.value_or(""));
            char* end = nullptr;
            o.max_nmse = std::strtod(text.c_str(), &end);
            if (text.empty() || end != text.c_str() + text.size() || !(*o.max_nmse >= 0))
                return "--max-nmse needs a number >= 0";
        }
        else if (a == "--plan")
            o.plan = true;
        else if (a == "--quiet")
            o.quiet = true;
        else if (a == "--profile")
            o.profile = true;
        else if (a == "--no-fusion")
            o.fusion = false;
        else if (a == "--help" || a == "-h")
            return std::string();
        else
            return "unknown option '" + std::string(a) + "'";
        if (err)
            return err;
    }
    if (!o.parallel.empty() && (!o.device.empty() || o.gpu_layers >= 0))
        return "--parallel runs one CPU backend per rank: --device and --gpu-layers do not apply";
    if (!o.reference.empty() && (o.check || !o.parallel.empty()))
        return "--reference is a check of its own: not with --check or --parallel";
    if (o.repeat > 1 && o.profile)
        return "--profile times one run: not with --repeat";
    return std::nullopt;
}

/// One line on stderr, rewritten in place (only on a terminal, and not with --quiet).
class progress_line {
  public:
    explicit progress_line(bool on) : on_(on && isatty(2) != 0) {}
    void show(const std::string& s) {
        if (!on_)
            return;
        std::fprintf(stderr, "\r\033[K%s", s.c_str());
        std::fflush(stderr);
        shown_ = true;
    }
    void clear() {
        if (on_ && shown_)
            std::fprintf(stderr, "\r\033[K");
        shown_ = false;
    }

  private:
    bool on_;
    bool shown_ = false;
};

/// Where the generation steps' time went on the host, summed over the steps (--profile).
struct host_times {
    double build_s = 0;   // the step's graph built
    double alloc_s = 0;   // the scheduler's plan and allocation
    double inputs_s = 0;  // the token and positions set
    double compute_s = 0; // the scheduler's compute
    double logits_s = 0;  // the logits read back
};

struct run_result {
    std::vector<std::int32_t> tokens;       // the prompt, then every token fed back
    std::vector<std::vector<float>> logits; // per step: the logits of its last token
                                            // (with a reference: of every position)
    double prompt_s = 0;
    double gen_s = 0;
    host_times gen_host;
    cpu::profile gen_cpu; // the CPU backend's generation computes (--profile)
};

/// The plan of a step graph in one line: splits, copies and peak memory per backend
/// (nothing for a runner without a scheduler's plan).
template <class Sched>
status print_plan(Sched& sched, const graph& g, const char* what) {
    if constexpr (requires { sched.dry_run(g); }) {
    auto p = sched.dry_run(g);
    if (!p)
        return p.error();
    std::printf("plan (%s): %zu nodes, %zu splits, %zu copies per step (%s); peak memory:", what,
                p->n_nodes, p->n_splits, p->n_copies, mib(p->copy_bytes).c_str());
    for (std::size_t b = 0; b < sched.n_backends(); ++b)
        std::printf("%s %.*s %s (weights and cache %s, compute %s)", b ? "," : "",
                    static_cast<int>(sched.backend_name(b).size()), sched.backend_name(b).data(),
                    mib(p->peak_bytes(b)).c_str(), mib(p->resident_bytes[b]).c_str(),
                    mib(p->compute_bytes[b]).c_str());
    if (!std::isnan(p->estimated_seconds))
        std::printf("; estimate %.1f ms (greedy plan %.1f ms)", 1e3 * p->estimated_seconds,
                    1e3 * p->greedy_estimated_seconds);
    std::printf("\n");
    }
    return {};
}

/// The values of t after a compute (a pipeline's from the rank that computed them).
template <class Sched>
result<std::vector<float>> read_values(Sched& sched, const tensor& t) {
    if constexpr (requires { sched.read_all(t); })
        return sched.read_all(t);
    else
        return tensor_get_all<float>(t);
}

/// Every position's logits of one computed step, appended to out as rows of n_vocab.
status append_rows(const std::vector<float>& all, int n_vocab, std::vector<std::vector<float>>& out) {
    const auto v = static_cast<std::ptrdiff_t>(n_vocab);
    if (all.size() % static_cast<std::size_t>(v) != 0)
        return status(errc::failed, "logits of " + std::to_string(all.size()) + " values are not rows of " +
                                        std::to_string(n_vocab));
    for (auto it = all.begin(); it != all.end(); it += v)
        out.emplace_back(it, it + v);
    return {};
}

/// Prompt in batches (queued without waiting), then greedy generation, on `sched`. With a
/// reference: the reference's ids, every position's logits kept, each batch waited for.
template <class Sched>
status generate(Sched& sched, const llama::model& m, llama::kv_cache& cache, const options& o,
                const llama::reference_logits* ref, cpu_backend* profiled,
                progress_line& progress, run_result& out, bool describe = true) {
    const int batch = o.batch > 0 ? std::min(o.batch, o.n_prompt) : o.n_prompt;
    const bool all_logits = ref != nullptr;
    // buffers sized once, for the largest step
    {
        auto worst = llama::build_step(m, cache, cache.n_ctx - batch, batch, all_logits, o.kv_pad);
        if (auto s = sched.reserve(worst->g); !s)
            return s;
    }
    if (describe) {
        auto first = llama::build_step(m, cache, 0, batch, all_logits, o.kv_pad);
        if (auto s =
                print_plan(sched, first->g,
                           ("prompt step, " + std::to_string(batch) + " tokens").c_str());
            !s)
            return s;
        if (o.n_gen > 0) {
            auto one = llama::build_step(m, cache, o.n_prompt, 1, false, o.kv_pad);
            if (auto s = print_plan(sched, one->g, "generation step, 1 token"); !s)
                return s;
        }
        if (o.plan) {
            if (auto s = sched.alloc_graph(first->g); !s)
                return s;
            std::printf("%s", sched.describe(1).c_str());
        }
    }

    // the prompt: every batch queued, the host preparing the next meanwhile; a recurrent
    // state starts from zero (a repeated run's too)
    if (cache.recurrent)
        if (auto s = cache.clear(); !s)
            return s;
    const auto t0 = clock_type::now();
    std::vector<std::unique_ptr<llama::step>> steps;
    for (int n_past = 0; n_past < o.n_prompt; n_past += batch) {
        const int n = std::min(batch, o.n_prompt - n_past);
        progress.show("prompt: " + std::to_string(n_past + n) + "/" + std::to_string(o.n_prompt) +
                      " tokens");
        steps.push_back(llama::build_step(m, cache, n_past, n, all_logits, o.kv_pad));
        llama::step& st = *steps.back();
        if (auto s = sched.alloc_graph(st.g); !s)
            return s;
        if (auto s = st.set_inputs(
                std::span(out.tokens)
                    .subspan(static_cast<std::size_t>(n_past), static_cast<std::size_t>(n)));
            !s)
            return s;
        if (auto s = sched.compute_async(st.g); !s)
            return s;
        if (all_logits) {
            if (auto s = sched.synchronize(); !s)
                return s;
            auto rows = read_values(sched, *st.logits);
            if (!rows)
                return rows.error();
            if (auto s = append_rows(*rows, m.hp.n_vocab, out.logits); !s)
                return s;
        }
    }
    if (auto s = sched.synchronize(); !s)
        return s;
    if (!all_logits) {
        auto logits = read_values(sched, *steps.back()->logits);
        if (!logits)
            return logits.error();
        out.logits.push_back(std::move(*logits));
    }
    out.prompt_s = seconds_since(t0);
    steps.clear();

    // generation: the most likely token, fed back one at a time
    if (profiled != nullptr)
        profiled->set_profile(&out.gen_cpu);
    const auto t1 = clock_type::now();
    host_times& ht = out.gen_host;
    std::unique_ptr<llama::step> st; // reused while the positions keep its n_kv (step::move_to)
    for (int i = 0; i < o.n_gen; ++i) {
        const std::vector<float>& last = out.logits.back();
        const auto next =
            ref ? ref->ids[static_cast<std::size_t>(o.n_prompt + i)]
                : static_cast<std::int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
        out.tokens.push_back(next);
        auto mark = clock_type::now();
        const auto lap = [&mark](double& into) {
            const auto t = clock_type::now();
            into += std::chrono::duration<double>(t - mark).count();
            mark = t;
        };
        if (!st || !st->move_to(o.n_prompt + i)) {
            st = llama::build_step(m, cache, o.n_prompt + i, 1, false, o.kv_pad);
            lap(ht.build_s);
            if (auto s = sched.alloc_graph(st->g); !s)
                return s;
            lap(ht.alloc_s);
        }
        if (auto s = st->set_inputs(std::span(&out.tokens.back(), 1)); !s)
            return s;
        lap(ht.inputs_s);
        if (auto s = sched.compute(st->g); !s)
            return s;
        lap(ht.compute_s);
        auto l = read_values(sched, *st->logits);
        if (!l)
            return l.error();
        out.logits.push_back(std::move(*l));
        lap(ht.logits_s);
        const double dt = seconds_since(t1);
        progress.show("generating: " + std::to_string(i + 1) + "/" + std::to_string(o.n_gen) +
                      " tokens, " + std::to_string(static_cast<int>((i + 1) / dt)) + " tok/s");
    }
    out.gen_s = seconds_since(t1);
    if (profiled != nullptr)
        profiled->set_profile(nullptr);
    progress.clear();
    return {};
}

/// --profile: the generation steps' host work per token, then the CPU backend's computes.
void print_profile(const run_result& run, int n_gen) {
    const host_times& h = run.gen_host;
    const double us = 1e6 / n_gen;
    std::printf("profile: per generated token %.1f us: graph built %.1f us, scheduled and "
                "allocated %.1f us, inputs set %.1f us, computed %.1f us, logits read %.1f us\n",
                run.gen_s * us, h.build_s * us, h.alloc_s * us, h.inputs_s * us, h.compute_s * us,
                h.logits_s * us);
    std::printf("profile: the CPU backend's computes, per token (work: the node's slowest "
                "thread in its kernel; busy: all its threads; wait: the barrier before it, all "
                "threads)\n%s",
                run.gen_cpu.table().c_str());
}

/// The same tokens on the CPU alone, in one batch, with flash attention or without: the
/// logits of positions n_prompt - 1 ... (every step's last token), compared with `run`'s.
status check_against_cpu(const options& o, const registry& reg, const run_result& run,
                         bool flash_attn, double& nmse) {
    auto m = llama::model::load(o.model_path, llama::placement{});
    if (!m)
        return m.error();
    const int n = static_cast<int>(run.tokens.size());
    auto cache = llama::kv_cache::make(**m, n, o.cache_type, flash_attn);
    if (!cache)
        return cache.error();
    auto cpu_dev = reg.device("CPU");
    if (!cpu_dev)
        return cpu_dev.error();
    auto cpu = cpu_dev->make_backend({.n_threads = o.threads});
    if (!cpu)
        return cpu.error();
    std::vector<any_backend> backends;
    backends.push_back(std::move(*cpu));
    dynamic_scheduler sched(backends);
    auto st = llama::build_step(**m, **cache, 0, n, true, 1);
    if (auto s = sched.alloc_graph(st->g); !s)
        return s;
    if (auto s = st->set_inputs(run.tokens); !s)
        return s;
    if (auto s = sched.compute(st->g); !s)
        return s;
    auto all = tensor_get_all<float>(*st->logits);
    if (!all)
        return all.error();
    const std::size_t V = static_cast<std::size_t>((*m)->hp.n_vocab);
    examples::nmse_sum e;
    for (std::size_t k = 0; k < run.logits.size(); ++k) {
        const std::size_t row = static_cast<std::size_t>(o.n_prompt) - 1 + k;
        e.add(run.logits[k], std::span(*all).subspan(row * V, V));
    }
    nmse = e.value();
    return {};
}

/// The file of a random model of o's shape in the temporary directory.
std::string default_model_name(const options& o) {
    const auto& h = o.hp;
    const auto n = [](int x) { return std::to_string(x); };
    std::string name = "backplane-" + std::string(h.tr().name) + "-" + n(h.n_layer) + "x" +
                       n(h.n_embd) + "-h" + n(h.n_head) + "-" + n(h.n_head_kv) + "-d" +
                       n(h.head_dim_k) + "-ff" + n(h.n_ff) + "-v" + n(h.n_vocab);
    if (h.tr().experts)
        name += "-x" + n(h.n_expert) + "-" + n(h.n_expert_used) + "-" + n(h.n_ff_exp);
    if (h.tr().gemma)
        name += "-swa" + n(h.n_swa);
    if (h.tr().recurrent) // its heads are n_head; n_head_kv, head_dim, n_ff unused
        name = "backplane-" + std::string(h.tr().name) + "-" + n(h.n_layer) + "x" + n(h.n_embd) + "-h" +
               n(h.n_head) + "-s" + n(h.ssm_d_state) + "-g" + n(h.ssm_n_group) + "-c" + n(h.ssm_d_conv) + "-v" +
               n(h.n_vocab);
    const std::string mix = o.ftype.kind == llama::file_type::mix::pure ? "" : "mix-";
    return name + "-" + mix + std::string(o.ftype.name) + (o.tied ? "-tied" : "") + "-s" +
           n(static_cast<int>(o.seed)) + ".gguf";
}

int fail(const char* what, const status& s) {
    std::fprintf(stderr, "llama: %s: %s\n", what, s.describe().c_str());
    return 1;
}

#if BACKPLANE_EXAMPLE_HAVE_MPI
/// --parallel: the MPI job and what each rank holds (distributed.hpp).
class parallel_job {
  public:
    static result<std::unique_ptr<parallel_job>> start(int* argc, char*** argv) {
        auto env = mpi::environment::init(argc, argv);
        if (!env)
            return env.error();
        auto world = mpi::communicator::world();
        if (!world)
            return world.error();
        return std::unique_ptr<parallel_job>(new parallel_job(std::move(*env), std::move(*world)));
    }
    [[nodiscard]] int rank() const { return world_.rank(); }
    [[nodiscard]] int size() const { return world_.size(); }
    [[nodiscard]] status barrier() { return world_.barrier(); }

    /// The pipeline or the meta device over the ranks, `cpu` computing this rank's part;
    /// the placement of the model's weights and cache for it.
    result<llama::placement> prepare(const options& o, any_backend& cpu, const scheduler_params& sp) {
        auto f = gguf::file::open(o.model_path);
        if (!f)
            return f.error();
        auto hp = llama::read_hparams(*f);
        if (!hp)
            return hp.error();
        if (hp->tr().recurrent) // distributed.hpp cuts attention heads and passes a KV cache
            return status(errc::invalid_argument, "--parallel: not for " + std::string(hp->tr().name) +
                                                      " (its recurrent state is not cut or passed between ranks)");
        if (o.parallel == "pipeline") {
            auto p = mpi::pipeline::make(world_, cpu, cpu, sp);
            if (!p)
                return p.error();
            pipe_ = std::move(*p);
            return llama::distributed::pipeline_placement(*pipe_);
        }
        if (!o.flash_attn) // V^T is written through a flat view of the cache, which no cut by heads lines up with
            return status(errc::invalid_argument, "--parallel tensor needs --flash-attn on (its cache of V is cut by heads)");
        if (hp->n_head_kv % size() != 0)
            return status(errc::invalid_argument, "--parallel tensor: " + std::to_string(hp->n_head_kv) +
                                                      " key/value heads do not divide among " +
                                                      std::to_string(size()) + " ranks");
        auto procs = mpi::process_group::world();
        if (!procs)
            return procs.error();
        auto split = [h = *hp, flash = o.flash_attn](const tensor& t, int n) {
            return llama::distributed::split_tensor(t, n, h, flash);
        };
        auto dev = meta_device::make({any_device::borrow(cpu_device::instance())},
                                     {.split = split, .threads_per_device = o.threads, .processes = *procs});
        if (!dev)
            return dev.error();
        meta_.emplace(std::move(*dev));
        auto be = meta_->make_backend();
        if (!be)
            return be.error();
        meta_be_.emplace(std::move(*be));
        return llama::distributed::tensor_placement(*meta_);
    }

    /// generate(runner) with the runner of the mode.
    template <class Generate>
    status run(Generate&& generate) {
        if (pipe_) {
            llama::distributed::pipeline_runner r(*pipe_);
            return generate(r);
        }
        llama::distributed::meta_runner r(*meta_be_);
        return generate(r);
    }

    /// One line: what each rank holds.
    void describe(const options& o, const llama::hparams& h) const {
        std::printf("parallel: %s over %d ranks, one CPU backend each:", o.parallel.c_str(), size());
        if (pipe_) {
            for (int k = 0; k < size(); ++k) {
                int first = h.n_layer, last = -1;
                for (int il = 0; il < h.n_layer; ++il)
                    if (llama::distributed::stage_of(il, h.n_layer, size()) == k) {
                        first = std::min(first, il);
                        last = il;
                    }
                std::printf("%s rank %d layers %d-%d%s", k ? "," : "", k, first, last, k + 1 == size() ? " and the output" : "");
            }
        } else {
            const bool experts = h.tr().experts; // repeated on every rank
            std::printf(" every rank %d of %d heads (%d of %d key/value heads), 1/%d of the %s vocabulary; an "
                        "all-reduce after the attention%s of every layer",
                        h.n_head / size(), h.n_head, h.n_head_kv / size(), h.n_head_kv, size(),
                        experts ? "" : "FFN and the", experts ? " (the experts whole on every rank)" : " and the FFN");
        }
        std::printf("\n");
    }

  private:
    parallel_job(mpi::environment env, mpi::communicator world) : env_(std::move(env)), world_(std::move(world)) {}
    mpi::environment env_;
    mpi::communicator world_;
    std::unique_ptr<mpi::pipeline> pipe_;
    std::optional<meta_device> meta_;
    std::optional<meta_backend> meta_be_;
};
#endif

int run_main(int argc, char** argv) {
    options o;
    if (auto err = parse(argc, argv, o)) {
        if (err->empty()) {
            std::printf("%s", usage);
            return 0;
        }
        return bad_usage(*err);
    }
    bool writer = true; // this process writes the model file when it is missing
#if BACKPLANE_EXAMPLE_HAVE_MPI
    std::unique_ptr<parallel_job> job;
    if (!o.parallel.empty()) {
        auto j = parallel_job::start(&argc, &argv);
        if (!j)
            return fail("starting MPI", j.error());
        job = std::move(*j);
        writer = job->rank() == 0;
        if (!writer) { // rank 0 speaks for all
            o.quiet = true;
            if (std::freopen("/dev/null", "w", stdout) == nullptr)
                return fail("silencing this rank", status(errc::failed, "cannot reopen stdout"));
        }
    }
#else
    if (!o.parallel.empty())
        return bad_usage("--parallel needs backplane built with MPI (BACKPLANE_WITH_MPI)");
#endif
    progress_line progress(!o.quiet);

    // with a reference, its ids: the prompt and the steps
    std::optional<llama::reference_logits> reference;
    if (!o.reference.empty()) {
        auto r = llama::read_reference(o.reference);
        if (!r)
            return fail("reading the reference", r.error());
        reference = std::move(*r);
        o.n_prompt = reference->n_prompt;
        o.n_gen = reference->n_steps;
        o.batch = 0; // one batch, as the reference computed it
    }

    // the model file: a file named with --model must exist unless --write-model asks for
    // a random one there (a mistyped path is an error, not a new 29 MB file); the default
    // file in the temporary directory is written when missing, so the demo always runs
    const int n_seq = o.n_prompt + o.n_gen;
    std::error_code ec;
    if (!o.model_path.empty() && !o.write_model && !std::filesystem::exists(o.model_path, ec))
        return bad_usage("--model " + o.model_path.string() + ": no such file" +
                         (ec ? " (" + ec.message() + ")" : std::string()) +
                         "; pass --write-model to write a random model there");
    if (o.model_path.empty())
        o.model_path = std::filesystem::temp_directory_path() / default_model_name(o);
    const bool written = writer && (o.write_model || !std::filesystem::exists(o.model_path, ec));
    if (written) {
        o.hp.n_ctx = std::max(o.hp.n_ctx, n_seq);
        const auto t0 = clock_type::now();
        if (auto s = llama::write_random_model(o.model_path, o.hp, o.ftype, o.seed, o.tied,
                                               [&](std::size_t i, std::size_t n) {
                                                   progress.show("writing a random model: tensor " +
                                                                 std::to_string(i) + "/" +
                                                                 std::to_string(n));
                                               });
            !s)
            return fail("writing the model", s);
        progress.clear();
        std::printf("wrote %s: random weights (seed %u) in %.2f s\n", o.model_path.string().c_str(),
                    o.seed, seconds_since(t0));
    }

    // --flash-attn and --cache-type apply to attention, which mamba2 has none of: refused
    // (the file's general.architecture decides, so it is read when they are given)
    if (o.attention_options && writer) {
        auto f = gguf::file::open(o.model_path);
        if (!f)
            return fail("reading the model", f.error());
        auto hp = llama::read_hparams(*f);
        if (!hp)
            return fail("reading the model", hp.error());
        if (hp->tr().recurrent) {
            std::fprintf(stderr, "llama: --flash-attn and --cache-type apply to attention: %s has none "
                                 "(a recurrent state, f32)\n",
                         std::string(hp->tr().name).c_str());
            return 2;
        }
    }

#if BACKPLANE_EXAMPLE_HAVE_MPI
    if (job) // the other ranks read the file rank 0 wrote
        if (auto s = job->barrier(); !s)
            return fail("waiting for the model file", s);
#endif

    // devices: the offload target and the CPU (with --parallel, the CPU alone)
    registry& reg = registry::global();
    auto dev = o.parallel.empty() ? examples::choose_device(reg, o.device)
                                  : result<std::optional<any_device>>(std::optional<any_device>());
    if (!dev) {
        if (o.require_device) {
            std::fprintf(stderr, "llama: no device '%s' here (%s): skipped\n", o.device.c_str(),
                         dev.error().describe().c_str());
            return 77;
        }
        return fail("choosing the device", dev.error());
    }
    backend_options bopts;
    bopts.n_threads = o.threads;
    if (!o.fusion) bopts.fusions = fusion_set::none();
    std::vector<any_backend> backends;
    if (*dev) {
        auto b = (*dev)->make_backend(bopts);
        if (!b)
            return fail("starting the device's backend", b.error());
        backends.push_back(std::move(*b));
    }
    {
        auto cpu_dev = reg.device("CPU");
        if (!cpu_dev)
            return fail("finding the CPU", cpu_dev.error());
        auto cpu = cpu_dev->make_backend(bopts);
        if (!cpu)
            return fail("starting the CPU backend", cpu.error());
        backends.push_back(std::move(*cpu));
    }
    // a device found (not named), with no layer count asked for: used only when measured
    // faster than the CPU alone here (devices.hpp)
    if (*dev && o.device.empty() && o.gpu_layers < 0) {
        progress.show("weighing " + std::string((*dev)->name()) + " against the CPU (calibrated speeds, cached)");
        auto advice = llama::advise_offload(backends.front(), backends.back(),
                                            {.model = o.model_path,
                                             .prompt_batch = o.batch > 0 ? std::min(o.batch, o.n_prompt) : o.n_prompt,
                                             .n_ctx = n_seq,
                                             .cache_type = o.cache_type,
                                             .flash_attn = o.flash_attn,
                                             .kv_pad = o.kv_pad});
        progress.clear();
        if (!advice)
            return fail("weighing the device", advice.error());
        std::printf("devices: %s\n", advice->why.c_str());
        if (!advice->offload) {
            backends.erase(backends.begin());
            dev->reset();
        }
    }

    // the model: the last gpu_layers layers (and the output past n_layer) on the device
    llama::placement place;
    if (*dev) {
        place.device = backends.front().buffer_type();
        place.supports = [&b = backends.front()](const tensor& t) { return b.supports_op(t); };
    }
    place.layers = o.gpu_layers;
    scheduler_params sp;
    sp.n_copies = o.pipeline;
#if BACKPLANE_EXAMPLE_HAVE_MPI
    if (job) {
        auto p = job->prepare(o, backends.back(), sp);
        if (!p)
            return fail("preparing the ranks", p.error());
        place = std::move(*p);
    }
#endif
    const auto t_load = clock_type::now();
    auto m = llama::model::load(o.model_path, place, [&](std::size_t i, std::size_t n) {
        progress.show("loading: " + std::to_string(i) + "/" + std::to_string(n) +
                      " tensors to the device");
    });
    if (!m)
        return fail("loading the model", m.error());
    progress.clear();
    const llama::model& model = **m;
    if (n_seq > model.hp.n_ctx)
        return fail("checking the lengths",
                    status(errc::invalid_argument, "prompt + generated tokens (" +
                                                       std::to_string(n_seq) +
                                                       ") exceed the model's context length " +
                                                       std::to_string(model.hp.n_ctx)));
    auto cache = llama::kv_cache::make(model, n_seq, o.cache_type, o.flash_attn);
    if (!cache)
        return fail("allocating the KV cache", cache.error());

    const auto& h = model.hp;
    if (h.tr().recurrent)
        std::printf("model: %s: %s, %d layers, n_embd %d, inner size %d in %d heads of %d, state size %d, "
                    "%d group%s, convolution kernel %d, vocabulary %d, %s output; loaded in %.2f s\n",
                    o.model_path.filename().string().c_str(), std::string(h.tr().name).c_str(), h.n_layer,
                    h.n_embd, h.ssm_d_inner, h.n_head, h.ssm_head_dim(), h.ssm_d_state, h.ssm_n_group,
                    h.ssm_n_group == 1 ? "" : "s", h.ssm_d_conv, h.n_vocab, model.tied_output ? "tied" : "separate",
                    seconds_since(t_load));
    else
    std::printf("model: %s: %s, %d layers, n_embd %d, %d heads of %d (%d for keys and values), "
                "n_ff %d, vocabulary %d, %s output; loaded in %.2f s\n",
                o.model_path.filename().string().c_str(), std::string(h.tr().name).c_str(),
                h.n_layer, h.n_embd, h.n_head, h.head_dim_k, h.n_head_kv,
                h.tr().experts ? h.n_ff_exp : h.n_ff, h.n_vocab,
                model.tied_output ? "tied" : "separate", seconds_since(t_load));
    std::printf("tensors by type: %s\n", model.tensor_types().c_str());
    if (h.tr().experts)
        std::printf("experts: %d per token of %d\n", h.n_expert_used, h.n_expert);
    if (h.tr().gemma)
        std::printf("attention: even layers in a sliding window of %d positions; soft-caps %g "
                    "(attention), %g (logits)\n",
                    h.n_swa, h.attn_softcap, h.final_softcap);
    if (*dev) {
        const int n_off = h.n_layer - model.place.first_offloaded;
        std::printf("devices: %.*s (%.*s) holds %d of %d layers%s: %s of weights copied, the CPU "
                    "%s over the "
                    "file's mapping\n",
                    static_cast<int>((*dev)->name().size()), (*dev)->name().data(),
                    static_cast<int>((*dev)->description().size()), (*dev)->description().data(),
                    n_off, h.n_layer, model.place.output ? " and the output" : "",
                    mib(model.device_bytes).c_str(), mib(model.host_bytes).c_str());
        if (model.experts_on_cpu)
            std::printf("experts: on the CPU (the device does not compute mul_mat_id)\n");
    } else {
        std::printf("devices: the CPU alone: %s of weights over the file's mapping\n",
                    mib(model.host_bytes).c_str());
    }
    if ((*cache)->recurrent)
        std::printf("recurrent state: %s per sequence (convolution and scan states, f32), no KV cache\n",
                    mib((*cache)->bytes).c_str());
    else
    std::printf("KV cache: %d positions, %s, %s; %s attention%s\n", n_seq,
                std::string(to_string(o.cache_type)).c_str(), mib((*cache)->bytes).c_str(),
                o.flash_attn ? "flash" : "unfused",
                *dev && (*cache)->on_cpu
                    ? " (on the CPU, with the cache: the device does not compute flash_attn_ext)"
                    : "");

    // the prompt: random ids from the seed, or the reference's
    run_result run;
    if (reference) {
        if (reference->n_vocab != h.n_vocab)
            return fail("checking the reference",
                        status(errc::invalid_argument, "its vocabulary has " + std::to_string(reference->n_vocab) +
                                                           " tokens, the model's " + std::to_string(h.n_vocab)));
        run.tokens.assign(reference->ids.begin(), reference->ids.begin() + o.n_prompt);
    }
    std::mt19937 rng(o.seed ^ 0x5bd1e995u);
    while (static_cast<int>(run.tokens.size()) < o.n_prompt)
        run.tokens.push_back(
            static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(h.n_vocab)));

#if BACKPLANE_EXAMPLE_HAVE_MPI
    if (job)
        job->describe(o, h);
#endif
    if (o.parallel.empty()) {
        std::printf("scheduler: %s policy, %d pipeline cop%s, backends", o.policy.c_str(), o.pipeline,
                    o.pipeline == 1 ? "y" : "ies");
        for (const any_backend& b : backends)
            std::printf(" %.*s", static_cast<int>(b.name().size()), b.name().data());
        std::printf("\n");
    }
    cpu_backend* profiled = o.profile ? backends.back().get_if<cpu_backend>() : nullptr;
    const llama::reference_logits* ref_ptr = reference ? &*reference : nullptr;
    // with --repeat: a warm-up run, then the timed ones from the same prompt, the mean kept
    const auto run_on = [&](auto& sched) -> status {
        const std::vector<std::int32_t> prompt = run.tokens;
        const int runs = o.repeat > 1 ? o.repeat + 1 : 1;
        double prompt_s = 0, gen_s = 0;
        for (int r = 0; r < runs; ++r) {
            run.tokens = prompt;
            run.logits.clear();
            if (auto st = generate(sched, model, **cache, o, ref_ptr, profiled, progress, run, r == 0); !st)
                return st;
            if (runs == 1 || r > 0) {
                prompt_s += run.prompt_s;
                gen_s += run.gen_s;
            }
        }
        run.prompt_s = prompt_s / o.repeat;
        run.gen_s = gen_s / o.repeat;
        return {};
    };
    status s;
#if BACKPLANE_EXAMPLE_HAVE_MPI
    if (job)
        s = job->run(run_on);
    else
#endif
    if (o.policy == "cost") {
        progress.show("calibrating the cost model (cached for the next run)");
        basic_scheduler<dynamic_backend_set, cost_policy> sched(backends, sp, cost_policy{});
        progress.clear();
        s = run_on(sched);
    } else {
        dynamic_scheduler sched(backends, sp);
        s = run_on(sched);
    }
    progress.clear();
    if (!s)
        return fail("running", s);

    if (o.repeat > 1)
        std::printf("speeds: the mean of %d runs after a warm-up run\n", o.repeat);
    std::printf("prompt: %d tokens in %.3f s: %.1f tokens/s\n", o.n_prompt, run.prompt_s,
                o.n_prompt / run.prompt_s);
    if (o.n_gen > 0)
        std::printf("generation: %d tokens in %.3f s: %.1f tokens/s\n", o.n_gen, run.gen_s,
                    o.n_gen / run.gen_s);
    if (o.profile && o.n_gen > 0)
        print_profile(run, o.n_gen);
    std::printf("generated ids:");
    for (std::size_t i = static_cast<std::size_t>(o.n_prompt); i < run.tokens.size(); ++i)
        std::printf(" %d", run.tokens[i]);
    const std::vector<float>& last = run.logits.back();
    std::printf(" %d\n",
                static_cast<int>(std::max_element(last.begin(), last.end()) - last.begin()));

    if (reference)
        return llama::report_reference(*reference, run.logits,
                                       o.max_nmse.value_or(llama::default_max_nmse(model)))
                   ? 0
                   : 1;

    // the check: a CPU-only run with the same attention, and with flash attention also
    // one with the unfused attention
    if (!o.check)
        return 0;
    bool ok = true;
    std::vector<bool> kinds{o.flash_attn};
    if (o.flash_attn)
        kinds.push_back(false);
    for (const bool flash : kinds) {
        progress.show("checking: the same tokens on the CPU alone");
        double nmse = 0;
        if (auto c = check_against_cpu(o, reg, run, flash, nmse); !c)
            return fail("checking against the CPU", c);
        progress.clear();
        constexpr double max_nmse = 2e-3;
        ok = ok && nmse <= max_nmse;
        std::printf("check: logits of %zu steps vs a CPU-only run in one batch (%s): "
                    "NMSE %.3g (at most %.0e): %s\n",
                    run.logits.size(),
                    model.hp.tr().recurrent ? "recurrent" : flash ? "flash attention" : "unfused attention", nmse,
                    max_nmse,
                    nmse <= max_nmse ? "ok" : "FAILED");
    }
    return ok ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) { return examples::guarded_main("llama", run_main, argc, argv); }

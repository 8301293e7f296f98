// vit: an image encoder of the CLIP / SigLIP kind (a vision transformer) run through the
// registry's devices and the scheduler.
//
//   vit [--model FILE] [--write-model] [--device NAME] [--pool cls|mean] [--check] ...
//
// 1. Reads the hyper-parameters and weights from a GGUF file laid out as llama.cpp's
//    vision projector files (mmproj: clip.vision.* keys, v.* tensors; hparams.hpp,
//    model.hpp). Without --model it uses a file in the temporary directory, first
//    writing a deterministic random-weight encoder there when it is missing (--image-size,
//    --patch-size, --n-embd, ... --wtype, --seed; small by default: a 32x32 image in
//    patches of 8, width 64, 2 blocks of 4 heads); --write-model (re)writes the file named
//    by --model; a --model file that does not exist is an error (exit status 2).
// 2. The device is --device NAME from the registry, else the best GPU-like one (a GPU,
//    else the first Vulkan or CUDA device; examples/common/devices.hpp), else the CPU
//    alone. With a device, every weight is copied into its memory; without, the weights
//    are read in place over the file's memory mapping. The CPU backend runs what the
//    device does not; a scheduler (the cost policy or ggml's greedy rules) splits the
//    graph and prints its plan: splits, copies and their bytes, peak memory per device.
// 3. Runs one random (seeded) image, its pixels in [0, 1) normalised by the file's mean
//    and standard deviation, through the encoder (graph.hpp): the patch embedding as a
//    convolution (im2col and a matrix product, stride = patch size), the class token
//    when the model has one, the position embeddings, pre-norm transformer blocks (layer
//    norm, multi-head self-attention without a mask, a GELU MLP), the last layer norm,
//    and a pooled output: the class token's row (--pool cls, the default with a class
//    token) or the mean of the patches' rows (--pool mean, the default without). Prints
//    the time, the pooled vector's first values and its norm.
// 4. With --check, runs the same image again on the CPU backend alone (the weights over
//    the mapping) and compares the pooled output and the last hidden states: normalised
//    mean squared error at most 1e-4 for each, else exit status 1.
//
// Exit status: 0 done, 1 failure (a file that is not such a model, with the tensor or key
// at fault named; a device error; a check above its bound), 2 bad command line (an
// unknown option or value, a random model's shape that cannot be, --pool cls for a model
// without a class token), 77 --require-device and the device named by --device is missing.

#include "graph.hpp"
#include "writer.hpp"

#include "../common/cli.hpp"
#include "../common/devices.hpp"
#include "../common/report.hpp"

#include <backplane/runtime.hpp>
#include <backplane/sched.hpp>
#include <backplane/sched/cost_policy.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
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
    vit::hparams hp;          // of a model written here
    vit::random_model random; // likewise
    std::string device;
    bool require_device = false;
    std::string policy = "cost";
    int threads = 0;
    std::optional<vit::pooling> pool; // default: cls with a class token, else mean
    bool check = false;
};

constexpr const char* usage = R"(usage: vit [options]
model:
  --model FILE        GGUF file laid out as llama.cpp's vision projectors (mmproj); it
                      must exist unless --write-model (default: a file in the temporary
                      directory, written when missing)
  --write-model       (re)write FILE with random weights first
  --image-size N --patch-size N --n-embd N --n-ff N --n-layer N --n-head N
                      shape of a written model (default 32, 8, 64, 256, 2, 4)
  --no-class          a written model without a class token (pooled by the mean)
  --quick-gelu        a written model with the quick GELU (clip.use_gelu false)
  --wtype T           its matrices' type: f16 (default), f32, bf16 or a quantized type
                      (q8_0, q4_0, ...); the patch kernel is f16 (f32 with f32)
  --seed N            its weights' seed (default 1); also the image's
run:
  --device NAME       the device (CPU: the CPU alone); default: the best GPU-like device
                      (a GPU, else a Vulkan or CUDA device), else the CPU alone
  --require-device    exit with status 77 when --device NAME does not exist
  --policy P          cost (default) or greedy (ggml's placement rules)
  --threads N         CPU threads (default: the backend's)
  --pool P            cls (the class token's row; the default with a class token) or
                      mean (the mean of the patches' rows; the default without)
  --check             compare the pooled output and the last hidden states with a run
                      on the CPU alone (NMSE at most 1e-4 each)
)";

int bad_usage(const std::string& what) {
    std::fprintf(stderr, "vit: %s\n%s", what.c_str(), usage);
    return 2;
}

int fail(const char* what, const status& s) {
    std::fprintf(stderr, "vit: %s: %s\n", what, s.describe().c_str());
    return 1;
}

/// Parses argv into `o`; returns a message on error (empty for --help).
std::optional<std::string> parse(int argc, char** argv, options& o) {
    examples::command_line cl(argc, argv);
    while (const auto option = cl.next()) {
        const std::string_view a = *option;
        std::optional<std::string> err;
        std::string word;
        if (a == "--model") {
            err = cl.word(word, "a file");
            o.model_path = word;
        } else if (a == "--write-model")
            o.write_model = true;
        else if (a == "--image-size")
            err = cl.number(o.hp.image_size, 1);
        else if (a == "--patch-size")
            err = cl.number(o.hp.patch_size, 1);
        else if (a == "--n-embd")
            err = cl.number(o.hp.n_embd, 1);
        else if (a == "--n-ff")
            err = cl.number(o.hp.n_ff, 1);
        else if (a == "--n-layer")
            err = cl.number(o.hp.n_layer, 1);
        else if (a == "--n-head")
            err = cl.number(o.hp.n_head, 1);
        else if (a == "--no-class")
            o.random.class_token = false;
        else if (a == "--quick-gelu")
            o.hp.gelu = false;
        else if (a == "--wtype")
            err = cl.weight_type(o.random.wtype);
        else if (a == "--seed") {
            int seed = 0;
            err = cl.number(seed, 0);
            o.random.seed = static_cast<std::uint32_t>(seed);
        } else if (a == "--device")
            err = cl.word(o.device, "a name");
        else if (a == "--require-device")
            o.require_device = true;
        else if (a == "--policy")
            err = cl.one_of(o.policy, {"cost", "greedy"});
        else if (a == "--threads")
            err = cl.number(o.threads, 1);
        else if (a == "--pool") {
            err = cl.one_of(word, {"cls", "mean"});
            o.pool = word == "cls" ? vit::pooling::cls : vit::pooling::mean;
        } else if (a == "--check")
            o.check = true;
        else if (a == "--help" || a == "-h")
            return std::string();
        else
            return "unknown option '" + std::string(a) + "'";
        if (err)
            return err;
    }
    return std::nullopt;
}

/// The file of a random model of o's shape in the temporary directory.
std::string default_model_name(const options& o) {
    const auto& h = o.hp;
    const auto n = [](int x) { return std::to_string(x); };
    return "backplane-vit-i" + n(h.image_size) + "-p" + n(h.patch_size) + "-" + n(h.n_layer) + "x" + n(h.n_embd) +
           "-h" + n(h.n_head) + "-ff" + n(h.n_ff) + (o.random.class_token ? "" : "-nocls") +
           (h.gelu ? "" : "-qgelu") + "-" + std::string(to_string(o.random.wtype)) + "-s" +
           n(static_cast<int>(o.random.seed)) + ".gguf";
}

/// A random image from `seed`: pixels uniform in [0, 1), normalised per channel by the
/// model's mean and standard deviation, laid out [width, height, channel] (ggml's).
std::vector<float> random_image(const vit::hparams& hp, std::uint32_t seed) {
    std::mt19937 rng(seed ^ 0x9e3779b9u);
    const std::size_t plane = static_cast<std::size_t>(hp.image_size) * static_cast<std::size_t>(hp.image_size);
    std::vector<float> px(3 * plane);
    for (std::size_t c = 0; c < 3; ++c)
        for (std::size_t i = 0; i < plane; ++i) {
            const float u = static_cast<float>(rng() >> 8) / static_cast<float>(1u << 24);
            px[c * plane + i] = (u - hp.image_mean[c]) / hp.image_std[c];
        }
    return px;
}

/// What one run of the encoder gives.
struct encoding {
    std::vector<float> pooled;
    std::vector<float> hidden;
    double seconds = 0; // the compute (the graph scheduled and allocated before)
};

/// The plan of the graph in one line: splits, copies and peak memory per backend.
template <class Sched>
status print_plan(Sched& sched, const graph& g) {
    auto p = sched.dry_run(g);
    if (!p)
        return p.error();
    std::printf("plan: %zu nodes, %zu splits, %zu copies (%s); peak memory:", p->n_nodes, p->n_splits, p->n_copies,
                mib(p->copy_bytes).c_str());
    for (std::size_t b = 0; b < sched.n_backends(); ++b)
        std::printf("%s %.*s %s", b ? "," : "", static_cast<int>(sched.backend_name(b).size()),
                    sched.backend_name(b).data(), mib(p->peak_bytes(b)).c_str());
    std::printf("\n");
    return {};
}

/// The image through model m on `sched`.
template <class Sched>
status encode(Sched& sched, const vit::model& m, vit::pooling pool, const std::vector<float>& image, bool describe,
              encoding& out) {
    std::unique_ptr<vit::encoder_graph> eg;
    try {
        eg = vit::build_encoder(m, pool);
    } catch (const error& e) {
        return {e.code(), std::string("building the graph: ") + e.what()};
    }
    if (describe)
        if (auto s = print_plan(sched, eg->g); !s)
            return s;
    if (auto s = sched.alloc_graph(eg->g); !s)
        return s;
    if (auto s = tensor_set(*eg->image, image); !s)
        return s;
    const auto t0 = clock_type::now();
    if (auto s = sched.compute(eg->g); !s)
        return s;
    out.seconds = seconds_since(t0);
    auto pooled = tensor_get_all<float>(*eg->pooled);
    if (!pooled)
        return pooled.error();
    auto hidden = tensor_get_all<float>(*eg->hidden);
    if (!hidden)
        return hidden.error();
    out.pooled = std::move(*pooled);
    out.hidden = std::move(*hidden);
    return {};
}

/// The same image on the CPU backend alone, the weights over the file's mapping.
status encode_on_cpu(const options& o, const registry& reg, vit::pooling pool, const std::vector<float>& image,
                     encoding& out) {
    auto m = vit::model::load(o.model_path);
    if (!m)
        return m.error();
    auto cpu_dev = reg.device("CPU");
    if (!cpu_dev)
        return cpu_dev.error();
    auto cpu = cpu_dev->make_backend({.n_threads = o.threads});
    if (!cpu)
        return cpu.error();
    std::vector<any_backend> backends;
    backends.push_back(std::move(*cpu));
    dynamic_scheduler sched(backends);
    return encode(sched, **m, pool, image, false, out);
}

double nmse(const std::vector<float>& got, const std::vector<float>& ref) {
    if (got.size() != ref.size())
        return INFINITY;
    examples::nmse_sum e;
    e.add(got, ref);
    return e.value();
}

int run_main(int argc, char** argv) {
    options o;
    if (auto err = parse(argc, argv, o)) {
        if (err->empty()) {
            std::printf("%s", usage);
            return 0;
        }
        return bad_usage(*err);
    }

    // the model file: a file named with --model must exist unless --write-model; the
    // default file in the temporary directory is written when missing
    std::error_code ec;
    if (!o.model_path.empty() && !o.write_model && !std::filesystem::exists(o.model_path, ec))
        return bad_usage("--model " + o.model_path.string() + ": no such file" +
                         (ec ? " (" + ec.message() + ")" : std::string()) +
                         "; pass --write-model to write a random model there");
    if (o.model_path.empty())
        o.model_path = std::filesystem::temp_directory_path() / default_model_name(o);
    if (o.write_model || !std::filesystem::exists(o.model_path, ec)) {
        if (auto s = vit::check_random_model(o.hp, o.random); !s) // the shape asked for
            return bad_usage(s.message());
        const auto t0 = clock_type::now();
        if (auto s = vit::write_random_model(o.model_path, o.hp, o.random); !s)
            return fail("writing the model", s);
        std::printf("wrote %s: random weights (seed %u) in %.2f s\n", o.model_path.string().c_str(), o.random.seed,
                    seconds_since(t0));
    }

    // devices: the chosen one (if any) and the CPU
    registry& reg = registry::global();
    auto dev = examples::choose_device(reg, o.device);
    if (!dev) {
        if (o.require_device) {
            std::fprintf(stderr, "vit: no device '%s' here (%s): skipped\n", o.device.c_str(),
                         dev.error().describe().c_str());
            return 77;
        }
        return fail("choosing the device", dev.error());
    }
    backend_options bopts;
    bopts.n_threads = o.threads;
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

    // the model: on the device when there is one, else over the file's mapping
    const auto t_load = clock_type::now();
    auto loaded = *dev ? vit::model::load(o.model_path, backends.front().buffer_type()) : vit::model::load(o.model_path);
    if (!loaded)
        return fail("loading the model", loaded.error());
    const vit::model& model = **loaded;
    const vit::hparams& h = model.hp;
    const vit::pooling pool = o.pool.value_or(model.class_token() ? vit::pooling::cls : vit::pooling::mean);
    if (pool == vit::pooling::cls && !model.class_token())
        return bad_usage("--pool cls: the model has no class token (v.class_embd); use --pool mean");
    std::printf("model: %s: image %dx%d in %lld patches of %dx%d%s, width %d, %d blocks of %d heads, "
                "feed-forward %d, %s; %s of weights loaded in %.2f s\n",
                o.model_path.filename().string().c_str(), h.image_size, h.image_size,
                static_cast<long long>(h.n_patches()), h.patch_size, h.patch_size,
                model.class_token() ? " and a class token" : "", h.n_embd, h.n_layer, h.n_head, h.n_ff,
                h.gelu ? "GELU" : "quick GELU", mib(model.weight_bytes).c_str(), seconds_since(t_load));
    if (*dev)
        std::printf("devices: %.*s (%.*s) holds the weights; the CPU runs what it does not\n",
                    static_cast<int>((*dev)->name().size()), (*dev)->name().data(),
                    static_cast<int>((*dev)->description().size()), (*dev)->description().data());
    else
        std::printf("devices: the CPU alone, the weights over the file's mapping\n");
    std::printf("scheduler: %s policy, backends", o.policy.c_str());
    for (const any_backend& b : backends)
        std::printf(" %.*s", static_cast<int>(b.name().size()), b.name().data());
    std::printf("\n");

    const std::vector<float> image = random_image(h, o.random.seed);
    encoding run;
    status s;
    if (o.policy == "cost") {
        basic_scheduler<dynamic_backend_set, cost_policy> sched(backends, scheduler_params{}, cost_policy{});
        s = encode(sched, model, pool, image, true, run);
    } else {
        dynamic_scheduler sched(backends);
        s = encode(sched, model, pool, image, true, run);
    }
    if (!s)
        return fail("running", s);

    double norm2 = 0;
    for (float x : run.pooled)
        norm2 += static_cast<double>(x) * x;
    std::printf("encoded: %lld positions in %.2f ms\n", static_cast<long long>(model.n_pos()), 1e3 * run.seconds);
    std::printf("pooled (%s, %zu values, norm %.4f):", pool == vit::pooling::cls ? "class token" : "mean of patches",
                run.pooled.size(), std::sqrt(norm2));
    for (std::size_t i = 0; i < std::min<std::size_t>(8, run.pooled.size()); ++i)
        std::printf(" %.4f", run.pooled[i]);
    std::printf("%s\n", run.pooled.size() > 8 ? " ..." : "");

    if (!o.check)
        return 0;
    encoding ref;
    if (auto c = encode_on_cpu(o, reg, pool, image, ref); !c)
        return fail("checking against the CPU", c);
    constexpr double max_nmse = 1e-4;
    const double e_pooled = nmse(run.pooled, ref.pooled), e_hidden = nmse(run.hidden, ref.hidden);
    const bool ok = e_pooled <= max_nmse && e_hidden <= max_nmse;
    std::printf("check: vs the CPU alone: pooled NMSE %.3g, last hidden states NMSE %.3g (at most %.0e each): %s\n",
                e_pooled, e_hidden, max_nmse, ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) { return examples::guarded_main("vit", run_main, argc, argv); }

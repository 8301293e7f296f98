// The cost placement policy, dry runs and memory caps (docs/scheduler.md, "Placement
// policies", "Dry runs and memory caps"): the cost model and its file, calibration, the
// optimiser on the reference llama graph and on random graphs, dry-run sizes against real
// allocations, and caps.

#include "../support/llama_cpu.hpp"
#include "sched_fixtures.hpp"

#include <backplane/sched/cost_policy.hpp>
#include <backplane/sched/offload_estimate.hpp>

#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>

using namespace backplane;
using namespace backplane::test;

namespace {

/// A profile `speed` times as fast as a nominal one (2 GFLOP/s, 2 GB/s, 10 us per node).
backend_profile profile(std::string key, double speed) {
    backend_profile p;
    p.key = std::move(key);
    p.node_latency = 10e-6 / speed;
    p.split_latency = 50e-6 / speed;
    p.mul_mat_flops = 2e9 * speed;
    p.mul_mat_narrow_flops = 1e9 * speed;
    p.mul_mat_bytes = 2e9 * speed;
    p.elementwise_bytes = 2e9 * speed;
    p.rows_bytes = 2e9 * speed;
    p.data_bytes = 2e9 * speed;
    return p;
}

template <class B>
std::string key_of(const B& b) {
    return backend_key(b.name(), b.device().description());
}

/// A model with `fast` for the test backend and 1 for the CPU; links both ways at
/// `bandwidth` bytes/s.
cost_model model_for(const test_backend& t, const cpu_backend& cpu, double fast, double bandwidth) {
    cost_model m;
    m.set(profile(key_of(t), fast));
    m.set(profile(key_of(cpu), 1.0));
    const std::string tb(t.device().buffer_type().name());
    const std::string hb(cpu_buffer_type::instance().name());
    m.set_link({hb, tb, 20e-6, bandwidth, false});
    m.set_link({tb, hb, 20e-6, bandwidth, false});
    return m;
}

cost_policy policy_of(cost_model m) { return cost_policy(std::move(m), {.cache_path = "", .calibrate = false}); }

std::string temp_path(const char* name) {
    std::random_device rd;
    return (std::filesystem::temp_directory_path() / (std::string("backplane-") + std::to_string(rd()) + "-" + name))
        .string();
}

std::size_t computing_on(const auto& sched, const graph& g, std::size_t b) {
    std::size_t n = 0;
    for (tensor* t : g.nodes())
        if (!is_view_op(t->op) && sched.backend_of(*t) == static_cast<int>(b)) ++n;
    return n;
}
std::size_t computing(const graph& g) {
    std::size_t n = 0;
    for (tensor* t : g.nodes()) n += is_view_op(t->op) ? 0 : 1;
    return n;
}

llama_params cost_llama() {
    llama_params p;
    p.n_layer = 4;
    p.n_embd = 64;
    p.n_head = 4;
    p.n_ff = 172;
    p.n_tokens = 8;
    p.n_vocab = 128;
    return p;
}

template <class Sched>
std::vector<float> run_llama(Sched& sched, llama_instance& s) {
    REQUIRE(sched.alloc_graph(s.g));
    REQUIRE(fill_llama(s.model, s.inputs, 7));
    const status st = sched.compute(s.g);
    INFO(st.describe());
    REQUIRE(st);
    return read_f32(*s.g.back());
}

} // namespace

// ---------------------------------------------------------------------------------------
// the model

TEST_CASE("cost model: node work, roofline seconds, keys", "[sched][cost]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 64, 32);  // K = 64, M = 32
    tensor* b = ctx.new_tensor_2d(elem_type::f32, 64, 100); // N = 100
    tensor* y = mul_mat(ctx, a, b);
    const op_work w = work_of(*y);
    CHECK(w.flops == 2.0 * 64 * 32 * 100);
    CHECK(w.bytes == static_cast<double>(a->nbytes() + b->nbytes() + y->nbytes()));
    CHECK(w.columns == 100);
    CHECK(class_of(op_kind::mul_mat) == op_class::mul_mat);
    CHECK(class_of(op_kind::silu) == op_class::elementwise);
    CHECK(class_of(op_kind::soft_max) == op_class::rows);
    CHECK(class_of(op_kind::get_rows) == op_class::data);
    CHECK(class_of(op_kind::permute) == op_class::none);
    // flash_attn_ext: the two products of every query row with every position, each
    // source read once
    tensor* q = ctx.new_tensor_3d(elem_type::f32, 128, 2, 8);
    tensor* k = ctx.new_tensor_3d(elem_type::f16, 128, 4096, 4);
    tensor* v = ctx.new_tensor_3d(elem_type::f16, 64, 4096, 4);
    tensor* fa = flash_attn_ext(ctx, q, k, v, nullptr, 0.125f);
    const op_work wa = work_of(*fa);
    CHECK(wa.flops == 2.0 * 4096 * (128 + 64) * 2 * 8);
    CHECK(wa.bytes == static_cast<double>(q->nbytes() + k->nbytes() + v->nbytes() + fa->nbytes()));
    CHECK(wa.columns == 2);
    CHECK(class_of(op_kind::flash_attn_ext) == op_class::mul_mat);

    backend_profile p = profile("x", 1.0);
    // wide products run at the wide rate, narrow ones at the narrow rate, in between
    // in between; a view costs nothing
    op_work wide{1e9, 1.0, 4096};
    op_work narrow{1e9, 1.0, 4};
    op_work mid{1e9, 1.0, 64};
    CHECK(p.seconds(op_class::mul_mat, wide) == Approx(p.node_latency + 1e9 / p.mul_mat_flops));
    CHECK(p.seconds(op_class::mul_mat, narrow) == Approx(p.node_latency + 1e9 / p.mul_mat_narrow_flops));
    CHECK(p.seconds(op_class::mul_mat, mid) < p.seconds(op_class::mul_mat, narrow));
    CHECK(p.seconds(op_class::mul_mat, mid) > p.seconds(op_class::mul_mat, wide));
    // bandwidth-bound when the weights dominate
    op_work matvec{2e6, 4e9, 1};
    CHECK(p.seconds(op_class::mul_mat, matvec) == Approx(p.node_latency + 4e9 / p.mul_mat_bytes));
    CHECK(p.seconds(*transpose(ctx, a)) == 0.0);
    CHECK(p.seconds(*add(ctx, b, b)) == Approx(p.node_latency + 3.0 * static_cast<double>(b->nbytes()) / p.elementwise_bytes));

    CHECK(backend_key("CPU", "a\tb\nc") == "CPU @ a b c");
    link_profile l{"A", "B", 1e-5, 1e9, false};
    CHECK(l.seconds(1e9) == Approx(1.0 + 1e-5));
}

TEST_CASE("cost model: the file round trip, overrides, malformed files", "[sched][cost]") {
    cost_model m;
    backend_profile p = profile("GPU @ some device", 3.0);
    p.measured = true;
    m.set(p);
    m.set(profile("CPU @ host", 1.0));
    m.set_link({"host", "gpu", 3e-6, 12e9, true});
    const std::string path = temp_path("costs/sub/model.tsv"); // directories are created
    REQUIRE(m.save(path));

    cost_model r;
    r.set(profile("CPU @ host", 7.0)); // replaced by the file's
    REQUIRE(r.load(path));
    REQUIRE(r.profiles().size() == 2);
    const backend_profile* q = r.find("GPU @ some device");
    REQUIRE(q != nullptr);
    CHECK(q->node_latency == Approx(p.node_latency).epsilon(1e-5));
    CHECK(q->mul_mat_flops == Approx(p.mul_mat_flops).epsilon(1e-5));
    CHECK(q->rows_bytes == Approx(p.rows_bytes).epsilon(1e-5));
    CHECK(q->measured);
    CHECK(r.find("CPU @ host")->mul_mat_flops == Approx(2e9).epsilon(1e-5));
    const link_profile* l = r.find_link("host", "gpu");
    REQUIRE(l != nullptr);
    CHECK(l->bandwidth == Approx(12e9).epsilon(1e-5));
    CHECK(r.find_link("gpu", "host") == nullptr);
    CHECK(r.erase("CPU @ host"));
    CHECK_FALSE(r.erase("CPU @ host"));

    // a hand-written file: fields in any order, missing ones keep their defaults
    cost_model h;
    REQUIRE(h.parse("# comment\n\nprofile\tmul_mat_flops=5e12\tkey=X @ y\n"));
    REQUIRE(h.find("X @ y") != nullptr);
    CHECK(h.find("X @ y")->mul_mat_flops == 5e12);
    CHECK(h.find("X @ y")->rows_bytes == backend_profile{}.rows_bytes);

    const auto bad = [](std::string_view text, std::string_view what) {
        cost_model b;
        const status s = b.parse(text, "f.tsv");
        INFO(s.message());
        CHECK(s.code() == errc::invalid_argument);
        CHECK(s.message().find(what) != std::string::npos);
        CHECK(b.profiles().empty()); // nothing added from a bad file
    };
    bad("profile\tkey=A\nprofile\tkey=B\tmul_mat_flops=-1\n", "f.tsv:2");
    bad("profile\tkey=A\tnode_latency=abc\n", "node_latency");
    bad("profile\tnode_latency=1\n", "key");
    bad("link\tfrom=a\n", "to=");
    bad("banana\tkey=A\n", "unknown record");

    cost_model none;
    CHECK(none.load(temp_path("absent.tsv")).code() == errc::not_found);
    CHECK(none.save("").code() == errc::invalid_argument);
    std::filesystem::remove_all(std::filesystem::path(path).parent_path().parent_path());
}

TEST_CASE("calibration measures the CPU backend and the policy caches it in its file", "[sched][cost]") {
    cpu_backend cpu;
    tuple_backend_set<cpu_backend> set(cpu);
    const backend_profile p = measure_backend(set, 0, {.repetitions = 1});
    CHECK(p.key == key_of(cpu));
    CHECK(p.measured);
    for (double v : {p.node_latency, p.split_latency, p.mul_mat_flops, p.mul_mat_narrow_flops, p.mul_mat_bytes,
                     p.elementwise_bytes, p.rows_bytes, p.data_bytes}) {
        CHECK(std::isfinite(v));
        CHECK(v > 0);
    }
    CHECK(p.mul_mat_flops > 1e8);  // any CPU does better than 0.1 GFLOP/s
    CHECK(p.mul_mat_flops < 1e14); // and no CPU 100 TFLOP/s
    CHECK(p.mul_mat_narrow_flops <= p.mul_mat_flops);

    // the policy measures what its cache lacks and writes it
    const std::string path = temp_path("cache.tsv");
    {
        policy_scheduler s(cost_policy({.cache_path = path, .calibration = {.repetitions = 1}}), cpu);
        CHECK(s.policy().profile(0).measured);
    }
    cost_model cached;
    REQUIRE(cached.load(path));
    REQUIRE(cached.find(key_of(cpu)) != nullptr);
    // the next scheduler reads the cache instead of measuring: an edited figure shows
    backend_profile edited = *cached.find(key_of(cpu));
    edited.node_latency = 0.125;
    cached.set(edited);
    REQUIRE(cached.save(path));
    {
        policy_scheduler s(cost_policy({.cache_path = path}), cpu);
        CHECK(s.policy().profile(0).node_latency == Approx(0.125));
    }
    // a profile given in the model wins over the cache
    {
        cost_model m;
        m.set(profile(key_of(cpu), 4.0));
        policy_scheduler s(cost_policy(m, {.cache_path = path}), cpu);
        CHECK(s.policy().profile(0).mul_mat_flops == Approx(8e9));
    }
    // a broken cache is ignored and rewritten with a measurement
    {
        std::ofstream(path) << "profile\tkey=\n";
        policy_scheduler s(cost_policy({.cache_path = path, .calibration = {.repetitions = 1}}), cpu);
        CHECK(s.policy().profile(0).measured);
        cost_model again;
        CHECK(again.load(path));
    }
    std::filesystem::remove(path);
}

TEST_CASE("calibration of a backend with private memory measures links both ways", "[sched][cost]") {
    test_device dev({.name = "TEST0", .async = false});
    test_backend tb = dev.make_backend();
    cpu_backend cpu;
    tuple_backend_set<test_backend, cpu_backend> set(tb, cpu);
    cost_model m;
    CHECK(calibrate(m, set, {.repetitions = 1}));
    CHECK(m.profiles().size() == 2);
    const link_profile* up = m.find_link(cpu_buffer_type::instance().name(), dev.buffer_type().name());
    const link_profile* down = m.find_link(dev.buffer_type().name(), cpu_buffer_type::instance().name());
    REQUIRE(up != nullptr);
    REQUIRE(down != nullptr);
    CHECK(up->measured);
    CHECK(down->measured);
    CHECK(up->bandwidth > 0);
    CHECK(std::isfinite(up->bandwidth));
    CHECK_FALSE(calibrate(m, set)); // nothing missing: nothing measured
}

// ---------------------------------------------------------------------------------------
// plans of the reference graph

TEST_CASE("cost policy on the llama graph: a slow test backend keeps the work on the CPU, a fast one takes it",
          "[sched][cost]") {
    const llama_params p = cost_llama();
    const std::vector<float> want = llama_on_cpu(p, 7, {.n_threads = 1, .reference = true});

    test_device dev({.name = "TEST0"});
    test_backend tb = dev.make_backend();
    cpu_backend cpu(cpu_backend_params{.n_threads = 1});

    SECTION("slow") {
        llama_instance s(p, dev.buffer_type(), p.n_layer / 2);
        scheduler greedy(tb, cpu);
        REQUIRE(greedy.plan(s.g));
        CHECK(computing_on(greedy, s.g, 0) > 0); // the greedy rules follow the weights

        policy_scheduler sched(policy_of(model_for(tb, cpu, 0.05, 2e9)), tb, cpu);
        const std::vector<float> got = run_llama(sched, s);
        INFO(sched.describe(1));
        CHECK(computing_on(sched, s.g, 0) == 0);
        CHECK(sched.n_splits() < greedy.n_splits());
        CHECK(sched.estimated_seconds() < sched.greedy_estimated_seconds());
        CHECK(nmse_of(want, got) < 1e-6);
        // the weights on the test device are copied to the CPU
        CHECK(sched.n_split_inputs() >= static_cast<std::size_t>(p.n_layer / 2) * 9);
    }
    SECTION("fast") {
        llama_instance s(p, dev.buffer_type(), p.n_layer / 2);
        policy_scheduler sched(policy_of(model_for(tb, cpu, 50.0, 100e9)), tb, cpu);
        const std::vector<float> got = run_llama(sched, s);
        INFO(sched.describe(1));
        // everything but the graph inputs' readers that cannot move is on the test backend
        CHECK(computing_on(sched, s.g, 0) >= computing(s.g) * 9 / 10);
        CHECK(sched.estimated_seconds() < sched.greedy_estimated_seconds());
        CHECK(nmse_of(want, got) < 1e-6);
        // each placement is explained with its estimates
        const tensor* node = s.g.nodes()[5];
        const std::string why = sched.explain(*node);
        INFO(why);
        CHECK(why.find("TEST0") != std::string::npos);
        CHECK(why.find("CPU") != std::string::npos);
        CHECK(why.find("(cost)") != std::string::npos);
        CHECK(sched.describe(2).find(" est ") != std::string::npos);
        CHECK(sched.describe(1).find("cost policy: estimated") != std::string::npos);
    }
    SECTION("equal speeds: no plan rated worse than the greedy one, a stable plan") {
        llama_instance s(p, dev.buffer_type(), p.n_layer / 2);
        policy_scheduler sched(policy_of(model_for(tb, cpu, 1.0, 2e9)), tb, cpu);
        REQUIRE(sched.plan(s.g));
        CHECK(sched.estimated_seconds() <= sched.greedy_estimated_seconds());
        std::vector<int> first;
        for (tensor* t : s.g.nodes()) first.push_back(sched.backend_of(*t));
        REQUIRE(sched.plan(s.g)); // the same graph again: the same plan
        std::size_t same = 0;
        for (std::size_t i = 0; i < first.size(); ++i) same += first[i] == sched.backend_of(*s.g.nodes()[i]) ? 1 : 0;
        CHECK(same == first.size());
        CHECK(nmse_of(want, run_llama(sched, s)) < 1e-6);
    }
}

// ---------------------------------------------------------------------------------------
// random graphs

namespace {

/// A random model: the test backend 0.01x to 100x the CPU's speed, links 0.1 to 100 GB/s.
cost_model random_model(std::uint32_t seed, const test_backend& tb, const cpu_backend& cpu) {
    std::mt19937 rng(seed);
    const auto logu = [&](double lo, double hi) {
        return lo * std::pow(hi / lo, std::uniform_real_distribution<double>(0, 1)(rng));
    };
    return model_for(tb, cpu, logu(0.01, 100.0), logu(1e8, 1e11));
}

} // namespace

TEST_CASE("cost policy on 200 random graphs: never rated worse than greedy, correct results, exact dry runs",
          "[sched][cost][random]") {
    for (std::uint32_t seed = 1; seed <= 200; ++seed) {
        test_device dev(random_support("TEST0", seed));
        test_backend tb = dev.make_backend();
        cpu_backend cpu(cpu_backend_params{.n_threads = 1});
        random_setup s(seed, {dev.buffer_type(), cpu_buffer_type::instance()});
        INFO("seed " << seed << ", " << s.r.g.n_nodes() << " nodes");

        policy_scheduler sched(policy_of(random_model(seed, tb, cpu)), tb, cpu);
        dev.set_fail_alloc_above(0); // a dry run allocates nothing
        auto plan = sched.dry_run(s.r.g);
        dev.set_fail_alloc_above(std::numeric_limits<std::size_t>::max());
        REQUIRE(plan);
        INFO(sched.describe(2));
        CHECK(plan->estimated_seconds <= plan->greedy_estimated_seconds * (1 + 1e-9));
        CHECK(plan->n_nodes == s.r.g.n_nodes());
        CHECK(plan->n_splits == sched.n_splits());
        CHECK(plan->n_copies == sched.n_split_inputs());
        REQUIRE(plan->assignment.size() == s.r.g.n_nodes());
        for (std::size_t i = 0; i < s.r.g.n_nodes(); ++i) {
            const tensor& n = *s.r.g.nodes()[i];
            CHECK(plan->assignment[i] == sched.backend_of(n));
            if (!is_view_op(n.op)) CHECK(sched.backends().supports_op(static_cast<std::size_t>(plan->assignment[i]), n));
        }
        CHECK(sched.buffer_size(0) == 0);
        CHECK(sched.buffer_size(1) == 0);

        // the allocation then uses exactly what the dry run said
        REQUIRE(sched.alloc_graph(s.r.g));
        CHECK(sched.buffer_size(0) == plan->compute_bytes[0]);
        CHECK(sched.buffer_size(1) == plan->compute_bytes[1]);
        fill_inputs(s.r, seed);
        const status st = sched.compute(s.r.g);
        INFO(st.describe());
        REQUIRE(st);
        const auto want = random_reference_outputs(seed, 2);
        const double limit = s.r.has_f16 ? 5e-4 : 1e-6;
        for (std::size_t i = 0; i < s.r.outputs.size(); ++i) CHECK(nmse_of(want[i], read_f32(*s.r.outputs[i])) <= limit);
    }
}

TEST_CASE("dry runs of the llama graph: sizes equal the allocation's, weights counted where they live",
          "[sched][cost]") {
    const llama_params p = cost_llama();
    test_device dev({.name = "TEST0"});
    test_backend tb = dev.make_backend();
    cpu_backend cpu(cpu_backend_params{.n_threads = 1});
    llama_instance s(p, dev.buffer_type(), p.n_layer / 2);
    std::size_t dev_weights = 0;
    for (tensor* t : s.model.layer_weights(0, p.n_layer / 2)) dev_weights += t->nbytes();

    const auto check = [&](auto& sched) {
        auto plan = sched.dry_run(s.g);
        REQUIRE(plan);
        CHECK(plan->resident_bytes[0] == dev_weights);
        CHECK(plan->resident_bytes[1] > 0);
        CHECK(plan->peak_bytes(0) == plan->compute_bytes[0] + dev_weights);
        CHECK(sched.buffer_size(0) == 0);
        REQUIRE(sched.alloc_graph(s.g));
        CHECK(sched.buffer_size(0) == plan->compute_bytes[0]);
        CHECK(sched.buffer_size(1) == plan->compute_bytes[1]);
    };
    SECTION("greedy") {
        scheduler sched(tb, cpu);
        check(sched);
        CHECK(std::isnan(sched.estimated_seconds()));
    }
    SECTION("cost") {
        policy_scheduler sched(policy_of(model_for(tb, cpu, 50.0, 100e9)), tb, cpu);
        check(sched);
    }
    SECTION("weights not loaded yet, assigned by hand") {
        context w({.no_alloc = true});
        llama_model m = make_llama_model(w, p);
        context gctx({.no_alloc = true});
        llama_inputs in = make_llama_inputs(gctx, p);
        graph g = build_llama_graph(gctx, m, in);
        scheduler sched(tb, cpu);
        std::size_t on_dev = 0;
        for (tensor* t : m.layer_weights(0, p.n_layer)) {
            REQUIRE(sched.set_backend(*t, tb));
            on_dev += t->nbytes();
        }
        auto plan = sched.dry_run(g);
        REQUIRE(plan);
        CHECK(plan->compute_bytes[0] >= on_dev); // the weights would be placed there
        CHECK(plan->resident_bytes[0] == 0);
        for (tensor* t : m.layer_weights(0, p.n_layer)) CHECK(t->data == nullptr); // nothing allocated
    }
}

// ---------------------------------------------------------------------------------------
// memory caps

TEST_CASE("memory caps: the plan moves work until the buffers fit, results unchanged", "[sched][cost]") {
    const llama_params p = cost_llama();
    const std::vector<float> want = llama_on_cpu(p, 7, {.n_threads = 1, .reference = true});
    test_device dev({.name = "TEST0"});
    test_backend tb = dev.make_backend();
    cpu_backend cpu(cpu_backend_params{.n_threads = 1});

    std::size_t free_need = 0;
    {
        llama_instance s(p, dev.buffer_type(), p.n_layer / 2);
        policy_scheduler sched(policy_of(model_for(tb, cpu, 50.0, 100e9)), tb, cpu);
        auto plan = sched.dry_run(s.g);
        REQUIRE(plan);
        free_need = plan->compute_bytes[0];
    }
    REQUIRE(free_need > 0);
    for (const std::size_t cap : {free_need * 3 / 4, free_need / 2, free_need / 8, std::size_t{1}}) {
        INFO("cap " << cap << " of " << free_need);
        SECTION("cost, cap " + std::to_string(cap)) {
            llama_instance s(p, dev.buffer_type(), p.n_layer / 2);
            policy_scheduler sched(policy_of(model_for(tb, cpu, 50.0, 100e9)),
                                   scheduler_params{.memory_caps = {cap, 0}}, tb, cpu);
            auto plan = sched.dry_run(s.g);
            REQUIRE(plan);
            CHECK(plan->compute_bytes[0] <= cap);
            const std::vector<float> got = run_llama(sched, s);
            CHECK(sched.buffer_size(0) <= cap);
            CHECK(sched.buffer_size(0) == plan->compute_bytes[0]);
            CHECK(nmse_of(want, got) < 1e-6);
            bool moved = false;
            for (tensor* t : s.g.nodes()) moved = moved || sched.cause_of(*t) == placement_cause::memory;
            CHECK(moved);
        }
        SECTION("greedy, cap " + std::to_string(cap)) {
            llama_instance s(p, dev.buffer_type(), p.n_layer / 2);
            scheduler sched(scheduler_params{.memory_caps = {cap}}, tb, cpu);
            const std::vector<float> got = run_llama(sched, s);
            CHECK(sched.buffer_size(0) <= cap);
            CHECK(nmse_of(want, got) < 1e-6);
        }
    }
    SECTION("a cap nothing can meet is an error naming the backend") {
        llama_instance s(p, dev.buffer_type(), p.n_layer / 2);
        // the graph inputs live in the CPU's compute buffer whatever the plan
        scheduler sched(scheduler_params{.memory_caps = {0, 16}}, tb, cpu);
        const status st = sched.alloc_graph(s.g);
        CHECK(st.code() == errc::alloc_failed);
        CHECK(st.message().find("'CPU'") != std::string::npos);
        CHECK(st.message().find("memory cap") != std::string::npos);
        CHECK_FALSE(sched.dry_run(s.g));
    }
}

TEST_CASE("memory caps on random graphs are never exceeded", "[sched][cost][random]") {
    for (std::uint32_t seed = 1; seed <= 60; ++seed) {
        test_device dev(random_support("TEST0", seed));
        test_backend tb = dev.make_backend();
        cpu_backend cpu(cpu_backend_params{.n_threads = 1});
        random_setup s(seed, {dev.buffer_type(), cpu_buffer_type::instance()});
        INFO("seed " << seed);
        std::size_t need = 0;
        {
            policy_scheduler free_sched(policy_of(random_model(seed, tb, cpu)), tb, cpu);
            auto plan = free_sched.dry_run(s.r.g);
            REQUIRE(plan);
            need = plan->compute_bytes[0];
        }
        const std::size_t cap = need / (1 + seed % 4) + 1;
        policy_scheduler sched(policy_of(random_model(seed, tb, cpu)), scheduler_params{.memory_caps = {cap}}, tb, cpu);
        const status st = sched.alloc_graph(s.r.g);
        if (!st) {
            CHECK(st.code() == errc::alloc_failed);
            continue;
        }
        CHECK(sched.buffer_size(0) <= cap);
        fill_inputs(s.r, seed);
        REQUIRE(sched.compute(s.r.g));
        const auto want = random_reference_outputs(seed, 2);
        const double limit = s.r.has_f16 ? 5e-4 : 1e-6;
        for (std::size_t i = 0; i < s.r.outputs.size(); ++i) CHECK(nmse_of(want[i], read_f32(*s.r.outputs[i])) <= limit);
    }
}

// ---------------------------------------------------------------------------------------
// offload estimates (examples/llama decides its device with them)

TEST_CASE("offload estimate: a slow device loses to the host, a fast one wins, refused nodes stay, copies counted",
          "[sched][cost]") {
    const llama_params p = cost_llama();
    llama_instance s(p); // the estimate needs shapes only
    const link_profile link{"host", "TEST0", 20e-6, 2e9, false};
    const auto all = [](const tensor&) { return true; };
    const auto estimate = [&](double speed, const std::function<bool(const tensor&)>& supports) {
        return estimate_offload(s.g, {profile("dev", speed), profile("cpu", 1.0), link, link}, supports);
    };

    const offload_estimate slow = estimate(0.1, all);
    INFO("slow: " << slow.offload_seconds << " s against " << slow.host_seconds << " s");
    CHECK(!slow.offload_wins());
    CHECK(slow.host_nodes == 0);
    CHECK(slow.device_nodes == computing(s.g));
    CHECK(slow.offload_seconds > 5 * slow.host_seconds); // 10 times slower, plus copies

    const offload_estimate fast = estimate(20.0, all);
    INFO("fast: " << fast.offload_seconds << " s against " << fast.host_seconds << " s");
    CHECK(fast.offload_wins());
    CHECK(fast.host_seconds == Approx(slow.host_seconds)); // the host's side does not depend on the device
    // every node on the device: the inputs go there and the output comes back, once each
    std::size_t inputs = 0, outputs = 0;
    for (const tensor* l : s.g.leafs()) inputs += l->has_flag(tensor_flag::input) ? 1 : 0;
    for (const tensor* n : s.g.nodes()) outputs += n->has_flag(tensor_flag::output) ? 1 : 0;
    REQUIRE(inputs > 0);
    CHECK(fast.copies <= inputs + std::max<std::size_t>(outputs, 1));

    // a device that refuses the products: they stay on the host, their operands cross
    const offload_estimate no_products = estimate(20.0, [](const tensor& t) { return t.op != op_kind::mul_mat; });
    CHECK(no_products.host_nodes > 0);
    CHECK(no_products.device_nodes + no_products.host_nodes == computing(s.g));
    CHECK(no_products.copies > fast.copies);
    CHECK(no_products.offload_seconds > fast.offload_seconds);

    // a device that computes nothing costs nothing but the host's time
    const offload_estimate none = estimate(20.0, [](const tensor&) { return false; });
    CHECK(none.device_nodes == 0);
    CHECK(none.copies == 0);
    CHECK(none.offload_seconds == Approx(none.host_seconds));
    CHECK(!none.offload_wins());
}

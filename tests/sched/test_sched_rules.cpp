// Each placement rule of the scheduler on a small hand-built graph, the splits and copies
// it makes, the eval callback, the plan printers, and bad use.

#include "sched_fixtures.hpp"

#include <backplane/sched/format.hpp>

#if BACKPLANE_TEST_HAVE_BLAS
#include <backplane/backends/blas.hpp>
#endif

#include <string>
#include <vector>

using namespace backplane;
using namespace backplane::test;

namespace {

/// Weights [d, d] of `type` allocated on `bt` (weights usage), filled from `seed`.
struct weight_holder {
    context ctx{context_params{.no_alloc = true}};
    buffer_list bufs;
    tensor* w = nullptr;
    weight_holder(buffer_type_ref bt, std::int64_t ne0, std::int64_t ne1, std::uint32_t seed,
                  buffer_usage usage = buffer_usage::weights) {
        w = ctx.new_tensor_2d(elem_type::f32, ne0, ne1);
        w->name = "w" + std::to_string(seed);
        auto r = alloc_tensors(ctx, bt, usage);
        REQUIRE(r);
        bufs = std::move(*r);
        fill_seeded(*w, seed);
    }
};

bool supports_all_but(const tensor& t, op_kind op) { return t.op != op; }

/// An add of a [8, 2] f32 `a` and a [3, 2] tensor, assembled by hand (the builder refuses
/// it: b cannot broadcast), named "bad".
tensor* unbroadcastable_add(context& ctx, tensor* a) {
    tensor* b = ctx.new_tensor_2d(elem_type::f32, 3, 2);
    tensor* bad = ctx.new_tensor_2d(elem_type::f32, 8, 2);
    bad->op = op_kind::add;
    bad->src[0] = a;
    bad->src[1] = b;
    bad->name = "bad";
    return bad;
}

/// A test device with its backend, and a CPU backend.
struct device_and_cpu {
    test_device dev;
    test_backend tb;
    cpu_backend cpu;
    explicit device_and_cpu(test_device_params p = {}) : dev(std::move(p)), tb(dev.make_backend()) {}
};

} // namespace

TEST_CASE("graph inputs go to the last backend, ops on weights go where the weights are", "[sched][rules]") {
    device_and_cpu f;
    auto& [dev, tb, cpu] = f;
    weight_holder wt(dev.buffer_type(), 16, 16, 1);
    context ctx(context_params{.no_alloc = true});
    tensor* x = new_input(ctx, 16, 4, "x");
    tensor* y = mul_mat(ctx, wt.w, x);
    y->name = "y";
    tensor* z = silu(ctx, y);
    z->name = "z";
    z->set_output();
    graph g(z);

    scheduler sched(tb, cpu);
    REQUIRE(sched.plan(g));
    CHECK(sched.backend_of(*x) == 1);
    CHECK(sched.cause_of(*x) == placement_cause::input);
    CHECK(sched.backend_of(*wt.w) == 0);
    CHECK(sched.cause_of(*wt.w) == placement_cause::buffer);
    CHECK(sched.cause_of(*y) == placement_cause::weights);
    CHECK(sched.backend_of(*z) == 0);
    CHECK(sched.cause_of(*z) == placement_cause::expand);
    REQUIRE(sched.n_splits() == 1);
    const split_info sp = sched.split_at(0);
    CHECK(sp.backend == 0);
    REQUIRE(sp.inputs.size() == 1);
    CHECK(sp.inputs[0] == x); // the user input is copied to the test device

    // and it computes: the result equals the CPU's
    REQUIRE(sched.alloc_graph(g));
    fill_seeded(*x, 2);
    REQUIRE(sched.compute(g));
    CHECK(tb.n_nodes_computed() == 2);
    const auto got = read_f32(*z);

    context host(context_params{.no_alloc = false});
    tensor* hw = host_filled(host, 16, 16, 1);
    tensor* hx = host_filled(host, 16, 4, 2);
    tensor* hz = silu(host, mul_mat(host, hw, hx));
    CHECK(nmse_of(reference_values(hz), got) < 1e-10);
}

TEST_CASE("op offload: a higher-priority backend takes ops on host weights it asks for, unless switched off",
          "[sched][rules]") {
    test_device dev({.name = "TEST0", .offload = true, .offload_min_batch = 8});
    test_backend tb = dev.make_backend();
    cpu_backend cpu;
    weight_holder wc(cpu.buffer_type(), 16, 16, 3);
    context ctx(context_params{.no_alloc = true});
    tensor* x_small = ctx.new_tensor_2d(elem_type::f32, 16, 4);
    tensor* x_big = ctx.new_tensor_2d(elem_type::f32, 16, 8);
    x_small->set_input();
    x_big->set_input();
    tensor* small = mul_mat(ctx, wc.w, x_small);
    tensor* big = mul_mat(ctx, wc.w, x_big);
    graph g{small, big};

    scheduler sched(tb, cpu);
    REQUIRE(sched.plan(g));
    CHECK(sched.backend_of(*small) == 1);
    CHECK(sched.cause_of(*small) == placement_cause::weights);
    CHECK(sched.backend_of(*big) == 0);
    CHECK(sched.cause_of(*big) == placement_cause::offload);

    sched.set_op_offload(false);
    REQUIRE(sched.plan(g));
    CHECK(sched.backend_of(*big) == 1);
    CHECK(sched.cause_of(*big) == placement_cause::weights);
}

TEST_CASE("user assignments are kept, set_backend refuses a backend the scheduler does not have", "[sched][rules]") {
    test_device dev({.name = "TEST0"});
    test_backend tb = dev.make_backend();
    cpu_backend cpu, other_cpu;
    weight_holder wt(dev.buffer_type(), 8, 8, 4);
    context ctx(context_params{.no_alloc = true});
    tensor* x = new_input(ctx, 8, 2);
    tensor* y = mul_mat(ctx, wt.w, x);
    tensor* z = scale(ctx, y, 2.0f);
    graph g(z);

    scheduler sched(tb, cpu);
    REQUIRE(sched.set_backend(*y, cpu));
    REQUIRE(sched.plan(g));
    CHECK(sched.backend_of(*y) == 1);
    CHECK(sched.cause_of(*y) == placement_cause::user);
    CHECK(sched.n_split_inputs() == 1); // the weight, copied to the CPU

    const status bad_index = sched.set_backend(*y, 2);
    CHECK(bad_index.code() == errc::invalid_argument);
    CHECK(bad_index.message().find("no backend 2") != std::string::npos);
    const status bad_object = sched.set_backend(*y, other_cpu);
    CHECK(bad_object.code() == errc::invalid_argument);
    CHECK(bad_object.message().find("not one of this scheduler's") != std::string::npos);

    sched.reset(); // forgets user assignments
    REQUIRE(sched.plan(g));
}

TEST_CASE("a node that a later split reads is kept in its split's view, and not fused away", "[sched][rules][fusion]") {
    test_device dev({.name = "TEST0"});
    test_backend tb = dev.make_backend();
    cpu_backend cpu;
    context ctx(context_params{.no_alloc = true});
    tensor* x = new_input(ctx, 16, 3);
    tensor* w = new_input(ctx, 16, 1, "w");
    tensor* n = rms_norm(ctx, x, 1e-5f); // mul(n, w) is an rms_norm_mul group on the CPU
    tensor* y = mul(ctx, n, w);
    tensor* z = sqr(ctx, n); // on the test device: a later split reads n
    tensor* out = add(ctx, y, z);
    out->set_output();
    graph g(out);

    scheduler sched(tb, cpu);
    for (tensor* t : {n, y, out}) REQUIRE(sched.set_backend(*t, cpu));
    REQUIRE(sched.set_backend(*z, tb));
    REQUIRE(sched.plan(g));
    REQUIRE(sched.n_splits() == 3);
    const split_info first = sched.split_at(0);
    REQUIRE(first.nodes.size() == 2);
    CHECK(first.nodes.kept(0)); // n: read by the test device's split
    CHECK(first.nodes.kept(1)); // y: read by the third split
    CHECK(sched.split_at(1).nodes.kept(0));       // z: read by the third split
    CHECK_FALSE(sched.split_at(2).nodes.kept(0)); // out: no split after it
    CHECK(find_fusions(first.nodes).empty());
    CHECK(find_fusions(graph_view(first.nodes.nodes())).size() == 1); // the split's nodes alone would fuse

    REQUIRE(sched.alloc_graph(g));
    fill_seeded(*x, 3);
    fill_seeded(*w, 4);
    REQUIRE(sched.compute(g));
    const auto got = read_f32(*out);
    context host(context_params{.no_alloc = false});
    tensor* hx = host_filled(host, 16, 3, 3);
    tensor* hw = host_filled(host, 16, 1, 4);
    tensor* hn = rms_norm(host, hx, 1e-5f);
    CHECK(nmse_of(reference_values(add(host, mul(host, hn, hw), sqr(host, hn))), got) < 1e-10);
}

TEST_CASE("expansion passes over an op the backend does not support, that node goes to the best backend",
          "[sched][rules]") {
    test_device dev({.name = "TEST0", .supports = [](const tensor& t) { return supports_all_but(t, op_kind::soft_max); }});
    test_backend tb = dev.make_backend();
    cpu_backend cpu;
    weight_holder wt(dev.buffer_type(), 8, 8, 5);
    context ctx(context_params{.no_alloc = true});
    tensor* x = new_input(ctx, 8, 3);
    tensor* a = mul_mat(ctx, wt.w, x); // weights -> TEST
    tensor* b = silu(ctx, a);          // expands down from a
    tensor* c = soft_max(ctx, b);      // not on TEST: skipped by the sweeps, then best = CPU
    tensor* d = scale(ctx, c, 3.0f);   // the down sweep goes on past c (as ggml's does)
    tensor* e = add(ctx, d, b);
    graph g(e);

    scheduler sched(tb, cpu);
    REQUIRE(sched.plan(g));
    CHECK(sched.backend_of(*a) == 0);
    CHECK(sched.cause_of(*a) == placement_cause::weights);
    CHECK(sched.backend_of(*b) == 0);
    CHECK(sched.cause_of(*b) == placement_cause::expand);
    CHECK(sched.backend_of(*c) == 1);
    CHECK(sched.cause_of(*c) == placement_cause::best);
    CHECK(sched.backend_of(*d) == 0);
    CHECK(sched.cause_of(*d) == placement_cause::expand);
    CHECK(sched.backend_of(*e) == 0);
    REQUIRE(sched.n_splits() == 3);
    // the CPU split reads b (copied from TEST), the last TEST split reads c (copied back);
    // e reads b in place on TEST
    REQUIRE(sched.split_at(1).inputs.size() == 1);
    CHECK(sched.split_at(1).inputs[0] == b);
    REQUIRE(sched.split_at(2).inputs.size() == 1);
    CHECK(sched.split_at(2).inputs[0] == c);

    REQUIRE(sched.alloc_graph(g));
    fill_seeded(*x, 6);
    REQUIRE(sched.compute(g));
    context host(context_params{.no_alloc = false});
    tensor* hw = host_filled(host, 8, 8, 5);
    tensor* hx = host_filled(host, 8, 3, 6);
    tensor* hb = silu(host, mul_mat(host, hw, hx));
    tensor* he = add(host, scale(host, soft_max(host, hb), 3.0f), hb);
    CHECK(nmse_of(reference_values(he), read_f32(*e)) < 1e-10);
}

#if BACKPLANE_TEST_HAVE_BLAS
TEST_CASE("upgrade: a node moves to a higher-priority backend that shares the buffer type", "[sched][rules]") {
    blas_backend blas(blas_backend_params{.n_threads = 1, .min_batch = 8});
    cpu_backend cpu(cpu_backend_params{.n_threads = 1});
    weight_holder wn(cpu.buffer_type(), 32, 1, 30);
    context ctx(context_params{.no_alloc = true});
    tensor* x = ctx.new_tensor_2d(elem_type::f32, 32, 16);
    tensor* w = ctx.new_tensor_2d(elem_type::f32, 32, 32);
    x->set_input();
    w->set_input();
    tensor* h = mul(ctx, x, wn.w);        // host weights, an op BLAS cannot run: the CPU
    tensor* y = mul_mat(ctx, w, h);       // expanded onto the CPU, then upgraded to BLAS
    tensor* small = mul_mat(ctx, w, view_2d(ctx, h, 32, 4, h->nb[1], 0)); // below min_batch: stays
    graph g{y, small};

    scheduler sched(blas, cpu);
    REQUIRE(sched.plan(g));
    CHECK(sched.backend_of(*h) == 1);
    CHECK(sched.cause_of(*y) == placement_cause::upgrade);
    CHECK(sched.backend_of(*small) == 1);
    CHECK(sched.n_split_inputs() == 0); // they share host memory: nothing is copied

    REQUIRE(sched.alloc_graph(g));
    fill_seeded(*x, 7);
    fill_seeded(*w, 8);
    REQUIRE(sched.compute(g));
    // the same products on the CPU alone
    context host(context_params{.no_alloc = false});
    tensor* hx = host_filled(host, 32, 16, 7);
    tensor* hw = host_filled(host, 32, 32, 8);
    tensor* hn = host_filled(host, 32, 1, 30);
    tensor* hy = mul_mat(host, hw, mul(host, hx, hn));
    REQUIRE(cpu.compute(graph(hy)));
    CHECK(nmse_of(read_f32(*hy), read_f32(*y)) < 1e-10);
}
#endif

TEST_CASE("flash_attn_ext on a KV cache in a backend that refuses it runs on the CPU, the cache copied",
          "[sched][rules]") {
    // Vulkan and CUDA refuse flash_attn_ext for now: the scheduler places it on the CPU
    test_device dev({.name = "TEST0", .supports = [](const tensor& t) {
                         return supports_all_but(t, op_kind::flash_attn_ext);
                     }});
    test_backend tb = dev.make_backend();
    cpu_backend cpu;
    weight_holder cache(dev.buffer_type(), 8, 6, 11); // k and v of one head: 6 positions of 8
    context ctx(context_params{.no_alloc = true});
    tensor* x = new_input(ctx, 8, 3);
    tensor* q = scale(ctx, x, 0.5f);
    tensor* o = flash_attn_ext(ctx, q, cache.w, cache.w, nullptr, 0.35f);
    tensor* y = scale(ctx, o, 2.0f);
    graph g(y);

    scheduler sched(tb, cpu);
    REQUIRE(sched.plan(g));
    CHECK(sched.backend_of(*o) == 1);

    REQUIRE(sched.alloc_graph(g));
    fill_seeded(*x, 12);
    REQUIRE(sched.compute(g));
    context host(context_params{.no_alloc = false});
    tensor* hc = host_filled(host, 8, 6, 11);
    tensor* hx = host_filled(host, 8, 3, 12);
    tensor* hy = scale(host, flash_attn_ext(host, scale(host, hx, 0.5f), hc, hc, nullptr, 0.35f), 2.0f);
    CHECK(nmse_of(reference_values(hy), read_f32(*y)) < 1e-10);
}

TEST_CASE("views follow their source, unassigned sources follow their consumer", "[sched][rules]") {
    device_and_cpu f;
    auto& [dev, tb, cpu] = f;
    weight_holder wt(dev.buffer_type(), 8, 8, 9);
    context ctx(context_params{.no_alloc = true});
    tensor* x = new_input(ctx, 8, 4);
    tensor* a = mul_mat(ctx, wt.w, x);
    tensor* t = transpose(ctx, a); // a view
    tensor* c = cont(ctx, t);
    tensor* k = ctx.new_tensor_1d(elem_type::f32, 4); // a constant nobody placed
    tensor* m = mul(ctx, c, k);
    graph g(m);

    scheduler sched(tb, cpu);
    REQUIRE(sched.plan(g));
    CHECK(sched.backend_of(*t) == sched.backend_of(*a));
    CHECK(sched.cause_of(*t) == placement_cause::source);
    CHECK(sched.backend_of(*k) == sched.backend_of(*m));
    CHECK(sched.cause_of(*k) == placement_cause::source);

    SECTION("a source read on two backends follows the first node that reads it") {
        weight_holder wc(cpu.buffer_type(), 8, 8, 10);
        tensor* y1 = mul(ctx, a, k);          // on the device, after a
        tensor* b = mul_mat(ctx, wc.w, y1);   // on the CPU, by its weights
        tensor* y2 = mul(ctx, b, k);          // on the CPU, after b
        graph g2(y2);
        REQUIRE(sched.plan(g2));
        REQUIRE(sched.backend_of(*y1) == 0);
        REQUIRE(sched.backend_of(*y2) == 1);
        CHECK(sched.backend_of(*k) == 0);
        CHECK(sched.cause_of(*k) == placement_cause::source);
    }
}

TEST_CASE("weights on another backend start a new split, split inputs are copied once per backend", "[sched][rules]") {
    test_device dev0({.name = "TEST0"}), dev1({.name = "TEST1"});
    test_backend t0 = dev0.make_backend(), t1 = dev1.make_backend();
    cpu_backend cpu;
    weight_holder w0(dev0.buffer_type(), 8, 8, 10), w1(dev1.buffer_type(), 8, 8, 11);
    context ctx(context_params{.no_alloc = true});
    tensor* x = new_input(ctx, 8, 2);
    tensor* a = mul_mat(ctx, w0.w, x); // TEST0
    tensor* b = mul_mat(ctx, w1.w, a); // TEST1
    tensor* c = add(ctx, b, a);        // TEST1 (expand), reads a from TEST0: the same copy
    tensor* d = mul_mat(ctx, w0.w, c); // TEST0 again
    graph g(d);

    scheduler sched(t0, t1, cpu);
    REQUIRE(sched.plan(g));
    REQUIRE(sched.n_splits() == 3);
    CHECK(sched.split_at(0).backend == 0);
    CHECK(sched.split_at(1).backend == 1);
    CHECK(sched.split_at(2).backend == 0);
    REQUIRE(sched.split_at(1).inputs.size() == 1); // a, once, though b and c read it
    CHECK(sched.split_at(1).inputs[0] == a);
    CHECK(sched.n_split_inputs() == 3); // x -> TEST0, a -> TEST1, c -> TEST0

    REQUIRE(sched.alloc_graph(g));
    fill_seeded(*x, 12);
    REQUIRE(sched.compute(g));
    CHECK(t0.n_nodes_computed() == 2);
    CHECK(t1.n_nodes_computed() == 2);
    // the copies between devices went through host memory (no peer copy) and the result
    // is the CPU's
    context host(context_params{.no_alloc = false});
    tensor* hw0 = host_filled(host, 8, 8, 10);
    tensor* hw1 = host_filled(host, 8, 8, 11);
    tensor* hx = host_filled(host, 8, 2, 12);
    tensor* ha = mul_mat(host, hw0, hx);
    tensor* hd = mul_mat(host, hw0, add(host, mul_mat(host, hw1, ha), ha));
    CHECK(nmse_of(reference_values(hd), read_f32(*d)) < 1e-10);
    // the user's graph is left as it was
    CHECK(c->src[1] == a);
    CHECK(d->src[1] == c);
}

TEST_CASE("the eval callback sees nodes in order, batches unobserved runs and cancels cleanly", "[sched][eval]") {
    device_and_cpu f;
    auto& [dev, tb, cpu] = f;
    weight_holder wt(dev.buffer_type(), 8, 8, 13);
    context ctx(context_params{.no_alloc = true});
    tensor* x = new_input(ctx, 8, 2);
    std::vector<tensor*> chain{mul_mat(ctx, wt.w, x)};
    for (int i = 0; i < 6; ++i) chain.push_back(scale(ctx, chain.back(), 1.0f + static_cast<float>(i)));
    for (std::size_t i = 0; i < chain.size(); ++i) chain[i]->name = "c" + std::to_string(i);
    graph g(chain.back());

    scheduler sched(tb, cpu);
    std::vector<std::string> asked, observed;
    std::vector<float> seen;
    sched.set_eval_callback([&](tensor& t, bool ask) {
        if (ask) {
            asked.push_back(t.name);
            return t.name == "c2" || t.name == "c5";
        }
        observed.push_back(t.name);
        seen.push_back(read_f32(t)[0]); // computed and readable now
        return true;
    });
    REQUIRE(sched.alloc_graph(g));
    fill_seeded(*x, 14);
    REQUIRE(sched.compute(g));
    CHECK(asked == std::vector<std::string>{"c0", "c1", "c2", "c3", "c4", "c5", "c6"});
    CHECK(observed == std::vector<std::string>{"c2", "c5"});
    CHECK(tb.n_computes() == 3); // c0..c2, c3..c5, c6
    CHECK(seen[1] == Approx(seen[0] * 4.0f * 5.0f * 3.0f).epsilon(1e-5));

    // cancel at c2: nothing after it runs, compute says so
    const std::uint64_t before = tb.n_nodes_computed();
    sched.set_eval_callback([&](tensor& t, bool ask) { return ask ? t.name == "c2" : false; });
    const status s = sched.compute(g);
    CHECK(s.code() == errc::aborted);
    CHECK(s.message().find("c2") != std::string::npos);
    CHECK(tb.n_nodes_computed() - before == 3);
    // and the scheduler is still usable
    sched.set_eval_callback({});
    REQUIRE(sched.compute(g));
}

TEST_CASE("a node's rule is judged once: the backends are asked only what they narrow", "[sched][rules]") {
    int asked = 0;
    const tensor* last = nullptr;
    test_device dev({.name = "TEST0", .supports = [&](const tensor& t) {
                         ++asked;
                         last = &t;
                         return true;
                     }});
    test_backend tb = dev.make_backend();
    cpu_backend cpu;
    context ctx(context_params{.no_alloc = true});
    tensor* x = new_input(ctx, 8, 2);
    tensor* y = scale(ctx, silu(ctx, x), 2.0f);
    tensor* bad = unbroadcastable_add(ctx, y);

    scheduler sched(tb, cpu);
    graph good(y);
    REQUIRE(sched.plan(good));
    CHECK(asked == 2); // silu and scale, each asked once

    asked = 0;
    graph g(bad);
    const status s = sched.plan(g);
    CHECK(s.code() == errc::not_supported);
    CHECK(s.message().find("'bad'") != std::string::npos);
    CHECK(last != bad); // its rule refused it: no backend was asked about it
}

TEST_CASE("bad use is a clear error, never an abort", "[sched][errors]") {
    test_device dev({.name = "TEST0"}), stranger({.name = "STRANGER"});
    test_backend tb = dev.make_backend();
    cpu_backend cpu;

    SECTION("a pre-allocated tensor in a buffer no backend of the scheduler can use") {
        weight_holder ws(stranger.buffer_type(), 8, 8, 15);
        context ctx(context_params{.no_alloc = true});
        tensor* x = new_input(ctx, 8, 2);
        graph g(mul_mat(ctx, ws.w, x));
        scheduler sched(tb, cpu);
        const status s = sched.alloc_graph(g);
        CHECK(s.code() == errc::not_supported);
        CHECK(s.message().find("STRANGER") != std::string::npos);
        CHECK(sched.n_splits() == 0);
    }
    SECTION("a node no backend supports") {
        context ctx(context_params{.no_alloc = true});
        graph g(unbroadcastable_add(ctx, ctx.new_tensor_2d(elem_type::f32, 8, 2)));
        scheduler sched(tb, cpu);
        const status s = sched.alloc_graph(g);
        CHECK(s.code() == errc::not_supported);
        CHECK(s.message().find("'bad'") != std::string::npos);
    }
    SECTION("compute after reset allocates the graph again") {
        context ctx(context_params{.no_alloc = true});
        tensor* x = new_input(ctx, 8, 2);
        tensor* y = scale(ctx, x, 2.0f);
        graph g(y);
        scheduler sched(tb, cpu);
        REQUIRE(sched.alloc_graph(g));
        sched.reset();
        CHECK(sched.n_splits() == 0);
        REQUIRE(sched.compute(g)); // allocates again; x holds whatever its new memory has
        CHECK(sched.n_splits() == 1);
    }
    SECTION("constructor arguments") {
        CHECK_THROWS_AS(scheduler(scheduler_params{.n_copies = 0}, tb, cpu), backplane::error);
        CHECK_THROWS_AS(dynamic_scheduler(dynamic_backend_set({backend_ref(cpu), backend_ref(tb)})), backplane::error);
        CHECK_THROWS_AS(dynamic_scheduler(dynamic_backend_set{}), backplane::error);
        CHECK_THROWS_AS(scheduler(tb, cpu).split_at(0), backplane::error);
    }
}

TEST_CASE("describe and to_dot explain the plan", "[sched][explain]") {
    device_and_cpu f;
    auto& [dev, tb, cpu] = f;
    weight_holder wt(dev.buffer_type(), 8, 8, 16);
    context ctx(context_params{.no_alloc = true});
    tensor* x = new_input(ctx, 8, 2, "x");
    tensor* y = mul_mat(ctx, wt.w, x);
    y->name = "y";
    tensor* z = soft_max(ctx, y);
    z->name = "z";
    graph g(z);
    dynamic_scheduler sched(dynamic_backend_set({backend_ref(tb), backend_ref(cpu)}));
    CHECK(sched.describe().find("no graph") != std::string::npos);
    REQUIRE(sched.alloc_graph(g));
    const std::string one = sched.describe(1);
    CHECK(one.find("split 0: TEST0") != std::string::npos);
    CHECK(one.find("'x' (CPU -> TEST0, 64 B, user input)") != std::string::npos);
    CHECK(one.find("node 0") == std::string::npos);
    const std::string two = sched.describe(2);
    CHECK(two.find("'y' mul_mat f32 [8, 2, 1, 1] -> TEST0 (weights)") != std::string::npos);
    const std::string dot = sched.to_dot();
    CHECK(dot.rfind("digraph backplane {", 0) == 0);
    CHECK(dot.find("subgraph cluster_0") != std::string::npos);
    CHECK(dot.find("label=\"copy 64 B\"") != std::string::npos);
    CHECK(dot.back() == '\n');
}

TEST_CASE("the plan prints through fmt", "[sched][explain][format]") {
    device_and_cpu f;
    auto& [dev, tb, cpu] = f;
    weight_holder wt(dev.buffer_type(), 8, 8, 17);
    context ctx(context_params{.no_alloc = true});
    tensor* x = new_input(ctx, 8, 2);
    tensor* y = mul_mat(ctx, wt.w, x);
    y->name = "y";
    graph g(y);
    scheduler sched(tb, cpu);
    REQUIRE(sched.plan(g));
    CHECK(fmt::format("{}", sched) == sched.describe(1));
    CHECK(fmt::format("{:v}", sched) == sched.describe(2));
    CHECK(fmt::format("{}", sched.cause_of(*y)) == "weights");
    dynamic_scheduler dyn(dynamic_backend_set({backend_ref(tb), backend_ref(cpu)}));
    CHECK(fmt::format("{}", dyn).find("no graph") != std::string::npos);
}

TEST_CASE("device-to-device copies go through the destination's asynchronous copy", "[sched][copies]") {
    test_device dev0({.name = "TEST0"});
    test_device dev1({.name = "TEST1", .peer_copy = true}); // reads TEST0's memory
    test_backend t0 = dev0.make_backend(), t1 = dev1.make_backend();
    cpu_backend cpu;
    weight_holder w0(dev0.buffer_type(), 8, 8, 18), w1(dev1.buffer_type(), 8, 8, 19);
    context ctx(context_params{.no_alloc = true});
    tensor* x = new_input(ctx, 8, 2);
    tensor* a = mul_mat(ctx, w0.w, x);
    tensor* b = mul_mat(ctx, w1.w, a);  // a: TEST0 -> TEST1, asynchronously
    tensor* c = mul_mat(ctx, w0.w, b);  // b: TEST1 -> TEST0, through the host
    tensor* d = add(ctx, mul_mat(ctx, w1.w, c), a); // c again to TEST1; a read from its copy
    graph g(d);
    scheduler sched(t0, t1, cpu);
    REQUIRE(sched.alloc_graph(g));
    CHECK(sched.n_splits() == 4);
    for (int run = 0; run < 3; ++run) { // the pending-copy waits across runs too
        fill_seeded(*x, 20u + static_cast<std::uint32_t>(run));
        REQUIRE(sched.compute(g));
    }
    CHECK(t1.counters().n_copies() >= 3 * 2);  // a and c, each run
    CHECK(t1.n_copy_async_refused() == 0);
    CHECK(t0.n_copy_async_refused() >= 3);     // TEST0 cannot read TEST1: the host copies b

    context host(context_params{.no_alloc = false});
    tensor* h0 = host_filled(host, 8, 8, 18);
    tensor* h1 = host_filled(host, 8, 8, 19);
    tensor* hx = host_filled(host, 8, 2, 22);
    tensor* ha = mul_mat(host, h0, hx);
    tensor* hd = add(host, mul_mat(host, h1, mul_mat(host, h0, mul_mat(host, h1, ha))), ha);
    CHECK(nmse_of(reference_values(hd), read_f32(*d)) < 1e-10);
}

// Pipeline parallelism: with 2, 3 and 4 copies, repeated computes with changing inputs
// give the same results as 1 copy, while the test device really runs behind the host
// (its worker sleeps before each work item).

#include "sched_fixtures.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

using namespace backplane;
using namespace backplane::test;

namespace {

constexpr int n_runs = 6;

/// x (user input, host) -> scale on the CPU -> two products on the test device (weights
/// there) -> add on the CPU (host weights) -> out. Results of every run with `copies`,
/// each read after its run; and the last output of runs queued back to back.
struct pipeline_result {
    std::vector<std::vector<float>> per_run;
    std::vector<float> back_to_back;
    std::size_t splits = 0;
};

pipeline_result run_pipeline(int copies) {
    // the CPU scales the input and adds the bias; the device does the rest
    test_device dev({.name = "TEST0",
                     .supports = [](const tensor& t) { return t.op != op_kind::scale && t.op != op_kind::add; },
                     .delay = std::chrono::microseconds(200)});
    test_backend tb = dev.make_backend();
    cpu_backend cpu(cpu_backend_params{.n_threads = 1});

    context wctx(context_params{.no_alloc = true});
    tensor* w1 = wctx.new_tensor_2d(elem_type::f32, 16, 16);
    tensor* w2 = wctx.new_tensor_2d(elem_type::f32, 16, 16);
    auto wbufs = alloc_tensors(wctx, dev.buffer_type(), buffer_usage::weights);
    REQUIRE(wbufs);
    fill_seeded(*w1, 21);
    fill_seeded(*w2, 22);
    context hctx(context_params{.no_alloc = false});
    tensor* bias = hctx.new_tensor_2d(elem_type::f32, 16, 1);
    fill_seeded(*bias, 23);

    context ctx(context_params{.no_alloc = true});
    tensor* x = ctx.new_tensor_2d(elem_type::f32, 16, 4);
    x->name = "x";
    x->set_input();
    tensor* h = scale(ctx, x, 0.5f, 0.25f);
    tensor* y = mul_mat(ctx, w2, silu(ctx, mul_mat(ctx, w1, h)));
    tensor* out = add(ctx, y, bias);
    out->name = "out";
    out->set_output();
    graph g(out);

    scheduler sched(scheduler_params{.n_copies = copies}, tb, cpu);
    pipeline_result r;
    for (int run = 0; run < n_runs; ++run) {
        REQUIRE(sched.alloc_graph(g));
        fill_seeded(*x, 100u + static_cast<std::uint32_t>(run));
        REQUIRE(sched.compute(g));
        r.per_run.push_back(read_f32(*out));
    }
    r.splits = sched.n_splits();
    // queued back to back: each run's input is written while earlier runs may still be
    // on the device
    for (int run = 0; run < n_runs; ++run) {
        REQUIRE(sched.alloc_graph(g));
        fill_seeded(*x, 200u + static_cast<std::uint32_t>(run));
        REQUIRE(sched.compute_async(g));
    }
    REQUIRE(sched.synchronize());
    r.back_to_back = read_f32(*out);
    return r;
}

} // namespace

TEST_CASE("pipeline copies: 2, 3 and 4 copies compute what 1 copy does", "[sched][pipeline]") {
    const pipeline_result one = run_pipeline(1);
    REQUIRE(one.splits == 3);
    for (int copies : {2, 3, 4}) {
        INFO(copies << " copies");
        const pipeline_result many = run_pipeline(copies);
        CHECK(many.splits == one.splits);
        REQUIRE(many.per_run.size() == one.per_run.size());
        for (std::size_t i = 0; i < one.per_run.size(); ++i) CHECK(many.per_run[i] == one.per_run[i]);
        CHECK(many.back_to_back == one.back_to_back);
    }
    // the runs differ from each other (the inputs changed), so equality means something
    CHECK(one.per_run[0] != one.per_run[1]);
}

TEST_CASE("pipeline copies hold separate memory per slot, and grow the buffers accordingly", "[sched][pipeline]") {
    test_device dev({.name = "TEST0"});
    test_backend tb = dev.make_backend();
    cpu_backend cpu(cpu_backend_params{.n_threads = 1});
    context wctx(context_params{.no_alloc = true});
    tensor* w = wctx.new_tensor_2d(elem_type::f32, 32, 32);
    auto wbufs = alloc_tensors(wctx, dev.buffer_type(), buffer_usage::weights);
    REQUIRE(wbufs);
    std::size_t one_copy = 0;
    for (int copies : {1, 3}) {
        // a graph of its own: tensors placed by a scheduler point into its buffers
        context ctx(context_params{.no_alloc = true});
        tensor* x = ctx.new_tensor_2d(elem_type::f32, 32, 8);
        x->set_input();
        graph g(scale(ctx, mul_mat(ctx, w, x), 2.0f));
        scheduler sched(scheduler_params{.n_copies = copies}, tb, cpu);
        std::vector<const void*> x_addresses;
        for (int run = 0; run < copies * 2; ++run) {
            REQUIRE(sched.alloc_graph(g));
            x_addresses.push_back(x->data);
        }
        CHECK(sched.n_copies() == copies);
        if (copies == 1) {
            one_copy = sched.buffer_size(0);
            CHECK(x_addresses[0] == x_addresses[1]);
        } else {
            // x rotates through `copies` places, and the device holds `copies` copies of it
            CHECK(x_addresses[0] != x_addresses[1]);
            CHECK(x_addresses[1] != x_addresses[2]);
            CHECK(x_addresses[0] == x_addresses[3]);
            CHECK(sched.buffer_size(0) >= one_copy + 2 * x->nbytes());
        }
    }
}

namespace {

/// A test device that runs behind the host and cannot scale (the CPU does), with a
/// 16 x 16 weight w and a zeroed 16 x 1 state in its memory.
struct state_rig {
    test_device dev;
    test_backend tb;
    cpu_backend cpu{cpu_backend_params{.n_threads = 1}};
    context wctx{context_params{.no_alloc = true}};
    tensor* w = wctx.new_tensor_2d(elem_type::f32, 16, 16);
    tensor* state = wctx.new_tensor_2d(elem_type::f32, 16, 1);
    std::optional<buffer_list> bufs;

    state_rig(std::uint32_t seed, bool lazy)
        : dev({.name = "TEST0",
               .supports = [](const tensor& t) { return t.op != op_kind::scale; },
               .delay = std::chrono::microseconds(300),
               .lazy = lazy}),
          tb(dev.make_backend()) {
        auto b = alloc_tensors(wctx, dev.buffer_type(), buffer_usage::weights);
        REQUIRE(b);
        bufs.emplace(std::move(*b));
        fill_seeded(*w, seed);
        REQUIRE(tensor_set(*state, std::vector<float>(16, 0.0f)));
    }
};

/// Runs queued back to back, each a graph of another shape (its own allocation plan),
/// each adding the first column of w x to a state tensor kept in device memory (as a KV
/// cache is): the state after the last run, with `copies` pipeline copies.
std::vector<float> run_changing_shapes(int copies) {
    state_rig rig(31, false);
    tensor* w = rig.w;
    tensor* state = rig.state;
    scheduler sched(scheduler_params{.n_copies = copies}, rig.tb, rig.cpu);
    std::vector<std::unique_ptr<context>> keep; // graphs in flight stay alive
    std::vector<graph> graphs;
    graphs.reserve(8);
    const int columns[] = {4, 8, 4, 2, 8, 3, 5, 1};
    for (int run = 0; run < 8; ++run) {
        keep.push_back(std::make_unique<context>(context_params{.no_alloc = true}));
        context& ctx = *keep.back();
        tensor* x = ctx.new_tensor_2d(elem_type::f32, 16, columns[run]);
        x->set_input();
        tensor* y = mul_mat(ctx, w, scale(ctx, x, 0.5f)); // the scale on the CPU: two splits
        tensor* first = view_2d(ctx, y, 16, 1, y->nb[1], 0);
        graphs.emplace_back(cpy(ctx, add(ctx, state, first), state));
        REQUIRE(sched.alloc_graph(graphs.back()));
        fill_seeded(*x, 300u + static_cast<std::uint32_t>(run));
        REQUIRE(sched.compute_async(graphs.back()));
    }
    REQUIRE(sched.synchronize());
    return read_f32(*state);
}

} // namespace

TEST_CASE("pipeline copies: runs in flight survive a graph of another shape (a new allocation plan)",
          "[sched][pipeline]") {
    // a new plan may move the input slots of runs still on the device: the scheduler lets
    // them finish first, so a state they update comes out as with one copy
    const std::vector<float> one = run_changing_shapes(1);
    CHECK(one != std::vector<float>(16, 0.0f));
    for (int copies : {2, 3}) {
        INFO(copies << " copies");
        CHECK(run_changing_shapes(copies) == one);
    }
}

namespace {

/// Runs queued back to back on a device that reads its graphs late (the test device's
/// lazy mode: it captures a graph when its worker gets to it, as the backend contract
/// allows). The input x is placed on the device, so its pipeline slots are there and the
/// device reads x, and a view of it, in place; the CPU reads a copy of x and scales. Each
/// run adds to a state kept in device memory: the state after the last run.
/// How the runs end: waited for, a plan of another graph made while they are queued, or
/// the scheduler destroyed while they are queued. Each must leave the runs reading what
/// they were handed.
enum class ending { synchronize, new_plan, destroy };

std::vector<float> run_late_reader(int copies, bool lazy, ending end = ending::synchronize) {
    state_rig rig(41, lazy);
    tensor* w = rig.w;
    tensor* state = rig.state;

    context ctx(context_params{.no_alloc = true});
    tensor* x = ctx.new_tensor_2d(elem_type::f32, 16, 4);
    x->name = "x";
    x->set_input();
    const auto column = [&](tensor* t, std::int64_t k) { return view_2d(ctx, t, 16, 1, t->nb[1], k * t->nb[1]); };
    tensor* a = scale(ctx, mul_mat(ctx, w, x), 0.5f); // the device reads x, the CPU scales
    tensor* b = silu(ctx, view_2d(ctx, x, 16, 2, x->nb[1], 2 * x->nb[1])); // a view of x, on the device
    tensor* d = scale(ctx, x, 2.0f); // the CPU reads a copy of x
    tensor* e = mul_mat(ctx, w, x);
    // the CPU's splits make the host wait for the device; the last split (on the device,
    // after them) reads x and its view while the host goes on to the next run
    tensor* sum = add(ctx, add(ctx, add(ctx, state, column(a, 0)), column(d, 3)), add(ctx, column(b, 1), column(e, 2)));
    graph g(cpy(ctx, sum, state));

    tensor* other_in = ctx.new_tensor_2d(elem_type::f32, 16, 2);
    graph other(scale(ctx, mul_mat(ctx, w, other_in), 3.0f)); // its own splits and copies

    auto sched = std::make_unique<scheduler<test_backend, cpu_backend>>(scheduler_params{.n_copies = copies}, rig.tb,
                                                                       rig.cpu);
    REQUIRE(sched->set_backend(*x, 0));
    for (int run = 0; run < 8; ++run) {
        REQUIRE(sched->alloc_graph(g));
        fill_seeded(*x, 500u + static_cast<std::uint32_t>(run));
        REQUIRE(sched->compute_async(g));
    }
    if (end == ending::destroy) {
        sched.reset(); // waits for the runs
        return read_f32(*state);
    }
    if (end == ending::new_plan) REQUIRE(sched->plan(other));
    REQUIRE(sched->synchronize());
    if (end == ending::synchronize) {
        CHECK(sched->n_splits() > 1);
        CHECK(sched->n_alloc_plans() == 1); // later runs replay the plan: they do not wait for earlier ones
    }
    return read_f32(*state);
}

} // namespace

TEST_CASE("pipeline copies: a backend that reads its graph after compute returns computes what 1 copy does",
          "[sched][pipeline]") {
    // what a run hands a backend is its pipeline slot's until the run is done: the
    // rotated input x (moved to the next slot by the next alloc_graph), its view, and the
    // copies the next plan remakes
    const std::vector<float> one = run_late_reader(1, false);
    CHECK(one != std::vector<float>(16, 0.0f));
    for (int copies : {1, 2, 3}) {
        INFO(copies << " copies");
        CHECK(run_late_reader(copies, true) == one);
    }
}

TEST_CASE("a backend that reads its graph late: a new plan and the scheduler's end leave queued runs intact",
          "[sched][pipeline]") {
    // with one slot the new plan waits for the queued runs (it remakes the copies they
    // read); with more, each slot keeps its own copies; the destructor waits for them all
    const std::vector<float> one = run_late_reader(1, false);
    for (int copies : {1, 2}) {
        INFO(copies << " copies");
        CHECK(run_late_reader(copies, true, ending::new_plan) == one);
        CHECK(run_late_reader(copies, true, ending::destroy) == one);
    }
}

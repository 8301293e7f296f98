// The lifetime contract of the scheduler (docs/lifetime.md): a graph outlives the
// scheduler that placed it and is placed again by the next one; a user's tensor whose
// buffer was freed is a clear status, never a read of freed memory; a graph rewired into
// a cycle is refused.

#include "sched_fixtures.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace backplane;
using namespace backplane::test;

namespace {

/// Weights [16, 16] on `bt` (weights usage), filled from `seed`, in a list the test frees.
struct weights {
    context ctx{context_params{.no_alloc = true}};
    buffer_list bufs;
    tensor* w = nullptr;
    weights(buffer_type_ref bt, std::uint32_t seed) {
        w = ctx.new_tensor_2d(elem_type::f32, 16, 16);
        w->name = "w" + std::to_string(seed);
        auto r = alloc_tensors(ctx, bt, buffer_usage::weights);
        REQUIRE(r);
        bufs = std::move(*r);
        fill_seeded(*w, seed);
    }
};

/// z = silu(w x) + x on whatever backends the scheduler picks; x is a graph input.
struct small_graph {
    context ctx{context_params{.no_alloc = true}};
    tensor* x = nullptr;
    tensor* y = nullptr;
    tensor* z = nullptr;
    graph g;
    explicit small_graph(tensor* w) {
        x = new_input(ctx, 16, 4, "x");
        y = mul_mat(ctx, w, x);
        y->name = "y";
        z = add(ctx, silu(ctx, y), x);
        z->name = "z";
        z->set_output();
        g = graph(z);
    }
};

/// What `z` is for these weights and this input, computed by the reference CPU kernels.
std::vector<float> expected(std::uint32_t w_seed, std::uint32_t x_seed) {
    context host;
    tensor* w = host_filled(host, 16, 16, w_seed);
    tensor* x = host_filled(host, 16, 4, x_seed);
    return reference_values(add(host, silu(host, mul_mat(host, w, x)), x));
}

template <class Sched>
std::vector<float> run(Sched& sched, small_graph& sg, std::uint32_t x_seed) {
    const status a = sched.alloc_graph(sg.g);
    INFO(a.describe());
    REQUIRE(a);
    fill_seeded(*sg.x, x_seed);
    const status c = sched.compute(sg.g);
    INFO(c.describe());
    REQUIRE(c);
    return read_f32(*sg.z);
}

bool mentions(const status& s, const std::string& what) { return s.message().find(what) != std::string::npos; }

} // namespace

TEST_CASE("scheduler lifetime: a second scheduler over the same backends places again a graph the first one placed",
          "[sched][lifetime]") {
    test_device dev;
    test_backend tb = dev.make_backend();
    cpu_backend cpu;
    weights wt(dev.buffer_type(), 1);
    small_graph sg(wt.w);
    const std::vector<float> want = expected(1, 2);

    {
        scheduler first(tb, cpu);
        CHECK(nmse_of(want, run(first, sg, 2)) < 1e-10);
    }
    // something takes the memory the first scheduler released, so the tensors' stale
    // addresses cannot land in the new buffers by chance
    std::vector<buffer_ptr> squatters;
    for (int i = 0; i < 4; ++i) squatters.push_back(buffer_type_ref(cpu.buffer_type()).allocate(4096).value());

    scheduler second(tb, cpu);
    CHECK(nmse_of(want, run(second, sg, 2)) < 1e-10);
    CHECK(second.cause_of(*sg.y) == placement_cause::weights); // not "buffer": its old memory is gone
    CHECK(second.backend_of(*sg.y) == 0);
    // and a third, after the second is gone too
    std::optional<scheduler<test_backend, cpu_backend>> third;
    third.emplace(tb, cpu);
    CHECK(nmse_of(want, run(*third, sg, 2)) < 1e-10);
}

TEST_CASE("scheduler lifetime: a scheduler over the CPU alone places again a graph of a destroyed one",
          "[sched][lifetime]") {
    cpu_backend cpu;
    weights wt(cpu.buffer_type(), 3);
    small_graph sg(wt.w);
    const std::vector<float> want = expected(3, 4);
    for (int round = 0; round < 3; ++round) {
        scheduler sched(cpu);
        CHECK(nmse_of(want, run(sched, sg, 4)) < 1e-10);
    }
}

TEST_CASE("scheduler lifetime: weights whose buffer was freed are a status naming them", "[sched][lifetime]") {
    test_device dev;
    test_backend tb = dev.make_backend();
    cpu_backend cpu;
    weights wt(dev.buffer_type(), 5);
    small_graph sg(wt.w);
    scheduler sched(tb, cpu);

    SECTION("freed before alloc_graph") {
        wt.bufs.reset();
        const status s = sched.alloc_graph(sg.g);
        INFO(s.describe());
        CHECK(s.code() == errc::invalid_argument);
        CHECK(mentions(s, "'w5'"));
        CHECK(mentions(s, "freed"));
    }
    SECTION("freed between alloc_graph and compute") {
        REQUIRE(sched.alloc_graph(sg.g));
        fill_seeded(*sg.x, 6);
        wt.bufs.reset();
        const status s = sched.compute(sg.g);
        INFO(s.describe());
        CHECK(s.code() == errc::invalid_argument);
        CHECK(mentions(s, "'w5'"));
        CHECK(mentions(s, "freed"));
    }
    SECTION("the graph computes again once the weights are placed anew") {
        wt.bufs.reset();
        CHECK(!sched.alloc_graph(sg.g));
        auto r = alloc_tensors(wt.ctx, dev.buffer_type(), buffer_usage::weights);
        REQUIRE(r);
        wt.bufs = std::move(*r);
        fill_seeded(*wt.w, 5);
        CHECK(nmse_of(expected(5, 6), run(sched, sg, 6)) < 1e-10);
    }
}

TEST_CASE("scheduler lifetime: a graph whose sources were rewired into a cycle is refused", "[sched][lifetime]") {
    cpu_backend cpu;
    context ctx(context_params{.no_alloc = true});
    tensor* x = new_input(ctx, 8, 2, "x");
    tensor* a = add(ctx, x, x);
    a->name = "a";
    tensor* b = silu(ctx, a);
    b->name = "b";
    graph g(b);
    a->src[1] = b; // a now reads b, which reads a
    scheduler sched(cpu);
    const status s = sched.alloc_graph(g);
    INFO(s.describe());
    CHECK(s.code() == errc::invalid_argument);
    CHECK(mentions(s, "cycle"));
    CHECK((mentions(s, "'a'") || mentions(s, "'b'")));
    CHECK(!sched.compute(g));
}

// Property tests of the scheduler on seeded random graphs (tests/sched/sched_fixtures.hpp):
// random op-support masks of the test devices and random weight placement, over
// {test, CPU}, {test, test, CPU} and (with BLAS) {BLAS, CPU}. For every graph: the scheduled result equals the
// CPU-only result, every node runs on a backend that supports it, no split input is
// copied to a backend that could read it in place, and the tuple and vector backend sets
// make identical plans.

#include "sched_fixtures.hpp"

#if BACKPLANE_TEST_HAVE_BLAS
#include <backplane/backends/blas.hpp>
#endif

#include <array>
#include <deque>
#include <memory>

using namespace backplane;
using namespace backplane::test;

namespace {

constexpr int graphs_per_set = 100; // x 2 sets = 200 graphs

template <class Sched>
void check_plan_invariants(Sched& sched, const random_graph& r) {
    auto& set = sched.backends();
    for (tensor* n : r.g.nodes()) {
        const int b = sched.backend_of(*n);
        REQUIRE(b >= 0);
        REQUIRE(sched.cause_of(*n) != placement_cause::none);
        if (n->op != op_kind::none && !is_view_op(n->op)) {
            INFO("node " << n->name << " (" << to_string(n->op) << ") on backend " << set.name(static_cast<std::size_t>(b)));
            CHECK(set.supports_op(static_cast<std::size_t>(b), *n));
        }
    }
    for (std::size_t k = 0; k < sched.n_splits(); ++k) {
        const split_info sp = sched.split_at(k);
        for (tensor* in : sp.inputs) {
            const int owner = sched.backend_of(*in);
            REQUIRE(owner >= 0);
            CHECK(owner != static_cast<int>(sp.backend));
            // copied: the split's backend cannot read the memory the input lives in
            const tensor* root = in->view_src ? in->view_src : in;
            const buffer_type_ref bt =
                root->buffer ? root->buffer->type() : set.buffer_type(static_cast<std::size_t>(owner));
            INFO("input " << in->name << " of split " << k);
            CHECK_FALSE(set.supports_buffer_type(sp.backend, bt));
        }
    }
}

/// The same plan: every tensor on the same backend for the same reason, the same splits.
template <class A, class B>
void check_same_plan(A& a, B& b, const random_graph& r) {
    REQUIRE(a.n_splits() == b.n_splits());
    REQUIRE(a.n_split_inputs() == b.n_split_inputs());
    for (tensor* n : r.g.nodes()) {
        CHECK(a.backend_of(*n) == b.backend_of(*n));
        CHECK(a.cause_of(*n) == b.cause_of(*n));
    }
    for (tensor* l : r.g.leafs()) CHECK(a.backend_of(*l) == b.backend_of(*l));
    for (std::size_t k = 0; k < a.n_splits(); ++k) {
        const split_info x = a.split_at(k), y = b.split_at(k);
        CHECK(x.backend == y.backend);
        CHECK(x.first == y.first);
        CHECK(x.last == y.last);
        REQUIRE(x.inputs.size() == y.inputs.size());
        for (std::size_t i = 0; i < x.inputs.size(); ++i) CHECK(x.inputs[i] == y.inputs[i]);
    }
}

/// Builds graph `seed` with weights placed on the devices of `homes` (index n_homes - 1
/// is host memory), schedules it over the tuple set and the vector set, checks the plans
/// and the result.
template <class... Bs>
void run_case(std::uint32_t seed, std::vector<buffer_type_ref> homes, Bs&... backends) {
    const int n_homes = static_cast<int>(homes.size());
    random_setup setup(seed, homes); // weights filled; inputs once allocated, below
    random_graph& r = setup.r;
    INFO("seed " << seed << ", " << r.g.n_nodes() << " nodes");

    scheduler sched(backends...);
    dynamic_scheduler dyn(dynamic_backend_set({backend_ref(backends)...}));
    REQUIRE(sched.plan(r.g));
    REQUIRE(dyn.plan(r.g));
    check_same_plan(sched, dyn, r);
    check_plan_invariants(sched, r);

    REQUIRE(sched.alloc_graph(r.g));
    fill_inputs(r, seed);
    const status s = sched.compute(r.g);
    INFO(sched.describe(2));
    REQUIRE(s);
    check_plan_invariants(sched, r);

    const auto expected = random_reference_outputs(seed, n_homes);
    REQUIRE(expected.size() == r.outputs.size());
    const double limit = r.has_f16 ? 5e-4 : 1e-6;
    for (std::size_t i = 0; i < r.outputs.size(); ++i) {
        INFO("output " << r.outputs[i]->name);
        CHECK(nmse_of(expected[i], read_f32(*r.outputs[i])) <= limit);
    }
}

} // namespace

TEST_CASE("random graphs over {test, CPU}: CPU results, supported placement, minimal copies, same plan for both sets",
          "[sched][random]") {
    for (int i = 0; i < graphs_per_set; ++i) {
        const auto seed = static_cast<std::uint32_t>(1000 + i);
        test_device dev(random_support("TEST0", seed));
        test_backend tb = dev.make_backend();
        cpu_backend cpu(cpu_backend_params{.n_threads = 2});
        run_case(seed, {buffer_type_ref(dev.buffer_type()), buffer_type_ref(cpu.buffer_type())}, tb, cpu);
    }
}

TEST_CASE("random graphs over {test, test, CPU}: CPU results, supported placement, minimal copies, same plan",
          "[sched][random]") {
    for (int i = 0; i < graphs_per_set; ++i) {
        const auto seed = static_cast<std::uint32_t>(5000 + i);
        test_device_params p1 = random_support("TEST1", seed + 1);
        p1.peer_copy = seed % 2 == 1; // half the graphs copy TEST0 -> TEST1 asynchronously
        test_device dev0(random_support("TEST0", seed));
        test_device dev1(std::move(p1));
        test_backend t0 = dev0.make_backend();
        test_backend t1 = dev1.make_backend();
        cpu_backend cpu(cpu_backend_params{.n_threads = 1});
        run_case(seed,
                 {buffer_type_ref(dev0.buffer_type()), buffer_type_ref(dev1.buffer_type()),
                  buffer_type_ref(cpu.buffer_type())},
                 t0, t1, cpu);
    }
}

#if BACKPLANE_TEST_HAVE_BLAS
TEST_CASE("random graphs over {BLAS, CPU}: the same checks, BLAS taking the products it supports", "[sched][random]") {
    for (int i = 0; i < graphs_per_set / 2; ++i) {
        const auto seed = static_cast<std::uint32_t>(9000 + i);
        blas_backend blas(blas_backend_params{.n_threads = 1, .min_batch = 0});
        cpu_backend cpu(cpu_backend_params{.n_threads = 1});
        run_case(seed, {buffer_type_ref(cpu.buffer_type())}, blas, cpu);
    }
}
#endif

// One backend takes a shorter road (the expansion and best passes in one, one split
// without a copy table, the first pass run while numbering). Its plans must be those of
// the general passes: {a test device that supports no op, CPU} runs them and has to place
// everything on the CPU for the same reasons; and a user assignment of a tensor outside
// the graph makes the one-backend scheduler run its first pass on its own.
TEST_CASE("random graphs over {CPU} alone: the same plans as the general passes", "[sched][random]") {
    int graphs_expanded = 0; // graphs where the expansion placed a node
    for (int i = 0; i < graphs_per_set; ++i) {
        const auto seed = static_cast<std::uint32_t>(12000 + i);
        // odd seeds: weights and inputs without memory or flag, so that nothing is placed
        // by the first pass and the best pass decides
        const bool bare = seed % 2 == 1;
        context graph_ctx(context_params{.no_alloc = true});
        context weight_ctx(context_params{.no_alloc = true});
        random_graph r = make_random_graph(graph_ctx, seed, 1, [&](std::int64_t ne0, std::int64_t ne1, elem_type type, int) {
            return weight_ctx.new_tensor_2d(type, ne0, ne1);
        });
        buffer_list weights;
        if (bare) {
            for (tensor* x : r.inputs) x->flags &= ~static_cast<std::uint32_t>(tensor_flag::input);
        } else {
            auto bufs = alloc_tensors(weight_ctx, cpu_buffer_type::instance(), buffer_usage::weights);
            REQUIRE(bufs);
            weights = std::move(*bufs);
        }
        INFO("seed " << seed << ", " << r.g.n_nodes() << " nodes" << (bare ? ", bare" : ""));

        cpu_backend cpu(cpu_backend_params{.n_threads = 1});
        test_device none({.name = "NONE", .supports = [](const tensor&) { return false; }});
        test_backend tb = none.make_backend();
        scheduler one(cpu);
        scheduler general(tb, cpu);
        scheduler unfused(cpu);
        tensor outside;
        REQUIRE(unfused.set_backend(outside, 0));
        REQUIRE(one.plan(r.g));
        REQUIRE(general.plan(r.g));
        REQUIRE(unfused.plan(r.g));
        REQUIRE(one.n_splits() == 1);
        REQUIRE(general.n_splits() == 1);
        CHECK(one.split_at(0).first == 0);
        CHECK(one.split_at(0).last == r.g.n_nodes());
        CHECK(one.n_split_inputs() == 0);
        bool any_best = false, any_expand = false;
        const auto same = [&](const tensor& t) {
            INFO(t.name << " (" << to_string(t.op) << ")");
            CHECK(one.backend_of(t) == 0);
            // a view of a tensor nothing placed falls back to the first backend (and its
            // source follows it): the only thing that may land on the test device
            if (general.backend_of(t) != 1)
                CHECK((general.cause_of(t) == placement_cause::fallback || general.cause_of(t) == placement_cause::source));
            CHECK(unfused.backend_of(t) == 0);
            CHECK(one.cause_of(t) != placement_cause::none);
            CHECK(one.cause_of(t) == general.cause_of(t));
            CHECK(one.cause_of(t) == unfused.cause_of(t));
            any_best = any_best || one.cause_of(t) == placement_cause::best;
            any_expand = any_expand || one.cause_of(t) == placement_cause::expand;
        };
        for (tensor* n : r.g.nodes()) same(*n);
        for (tensor* l : r.g.leafs()) same(*l);
        if (bare) CHECK(any_best); // nothing is placed first: the best pass places the rest
        CHECK_FALSE((any_best && any_expand)); // one or the other, with one backend
        graphs_expanded += any_expand ? 1 : 0;
    }
    CHECK(graphs_expanded >= graphs_per_set / 4);
}

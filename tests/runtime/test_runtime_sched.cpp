// The scheduler over a run-time std::vector<any_backend> runs the same partitioner as the
// compile-time tuple: the same random graphs give identical plans (every node on the same
// backend for the same reason, the same splits and split inputs) and identical results,
// bit for bit, both equal to the CPU reference.

#include "../sched/sched_fixtures.hpp"

#include <backplane/runtime.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <deque>
#include <memory>
#include <vector>

using namespace backplane;
using namespace backplane::test;

namespace {

/// One build of random graph `seed`, its weights placed on homes[home].
struct built_graph {
    context graph_ctx{context_params{.no_alloc = true}};
    std::deque<context> weight_ctxs;
    std::vector<buffer_list> weight_bufs;
    random_graph r;
    built_graph(std::uint32_t seed, const std::vector<buffer_type_ref>& homes) {
        r = make_random_graph(graph_ctx, seed, static_cast<int>(homes.size()),
                              [&](std::int64_t ne0, std::int64_t ne1, elem_type type, int home) {
                                  context& wc = weight_ctxs.emplace_back(context_params{.no_alloc = true});
                                  tensor* w = wc.new_tensor_2d(type, ne0, ne1);
                                  auto bufs = alloc_tensors(wc, homes[static_cast<std::size_t>(home)], buffer_usage::weights);
                                  REQUIRE(bufs);
                                  weight_bufs.push_back(std::move(*bufs));
                                  return w;
                              });
        fill_weights(r, seed);
    }
};

template <class A, class B>
void check_same_plan(A& a, B& b, const random_graph& ra, const random_graph& rb) {
    REQUIRE(a.n_splits() == b.n_splits());
    REQUIRE(a.n_split_inputs() == b.n_split_inputs());
    REQUIRE(ra.g.n_nodes() == rb.g.n_nodes());
    for (std::size_t i = 0; i < ra.g.n_nodes(); ++i) {
        INFO("node " << ra.g.nodes()[i]->name);
        CHECK(a.backend_of(*ra.g.nodes()[i]) == b.backend_of(*rb.g.nodes()[i]));
        CHECK(a.cause_of(*ra.g.nodes()[i]) == b.cause_of(*rb.g.nodes()[i]));
    }
    for (std::size_t k = 0; k < a.n_splits(); ++k) {
        const split_info x = a.split_at(k), y = b.split_at(k);
        CHECK(x.backend == y.backend);
        CHECK(x.first == y.first);
        CHECK(x.last == y.last);
        CHECK(x.inputs.size() == y.inputs.size());
    }
}

} // namespace

TEST_CASE("dynamic scheduler over any_backend: the tuple scheduler's plans and results", "[registry][sched]") {
    for (std::uint32_t i = 0; i < 60; ++i) {
        const std::uint32_t seed = 31000 + i;
        INFO("seed " << seed);
        // the static face: concrete types
        test_device dev(random_support("TEST0", seed));
        test_backend tb = dev.make_backend();
        cpu_backend cpu(cpu_backend_params{.n_threads = 2});
        // the dynamic face: the same device, erased, and backends made through it
        const any_device adev = any_device::borrow(dev);
        std::vector<any_backend> backends;
        auto ab = adev.make_backend();
        REQUIRE(ab);
        backends.push_back(std::move(*ab));
        auto acpu = any_device::borrow(cpu_device::instance()).make_backend({.n_threads = 2});
        REQUIRE(acpu);
        backends.push_back(std::move(*acpu));

        const std::vector<buffer_type_ref> homes = {dev.buffer_type(), cpu_buffer_type::instance()};
        built_graph gs(seed, homes), gd(seed, homes);
        scheduler sched(tb, cpu);
        dynamic_scheduler dyn(backends);
        REQUIRE(sched.alloc_graph(gs.r.g));
        REQUIRE(dyn.alloc_graph(gd.r.g));
        check_same_plan(sched, dyn, gs.r, gd.r);
        fill_inputs(gs.r, seed);
        fill_inputs(gd.r, seed);
        REQUIRE(sched.compute(gs.r.g));
        REQUIRE(dyn.compute(gd.r.g));

        const auto expected = random_reference_outputs(seed, 2);
        REQUIRE(gs.r.outputs.size() == gd.r.outputs.size());
        for (std::size_t o = 0; o < gs.r.outputs.size(); ++o) {
            const auto a = read_f32(*gs.r.outputs[o]), b = read_f32(*gd.r.outputs[o]);
            REQUIRE(a.size() == b.size());
            CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0); // identical, bit for bit
            CHECK(nmse_of(expected[o], b) <= (gd.r.has_f16 ? 5e-4 : 1e-6));
        }
        // the same graph again: no re-plan on either face
        REQUIRE(sched.alloc_graph(gs.r.g));
        REQUIRE(dyn.alloc_graph(gd.r.g));
        check_same_plan(sched, dyn, gs.r, gd.r);
    }
}

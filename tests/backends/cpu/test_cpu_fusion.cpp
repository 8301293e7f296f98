// Fused groups (core/fusion.hpp, backends/cpu/fused.hpp). find_fusions finds each
// pattern and refuses a group whose intermediate something else reads (a later node, the
// user through an output flag, another split through graph_view::kept), and a kind the
// fusion_set leaves out. The CPU computes each group as one step: checked against the
// same graph computed node by node (fusions off) and against reference mode, on 1 to 3
// threads with every node split, over seeded random shapes, types and operand orders.
// Also: each plan says which groups it fused; a fused plan re-scheduled into reference
// mode; a set_rows index out of range inside a fused group.

#include <backplane/backends/cpu.hpp>
#include <backplane/backends/cpu/profile.hpp>
#include <backplane/backends/cpu/weight_kernels.hpp>
#include <backplane/conformance/inputs.hpp>

#include "../../support/fusion_cases.hpp"

#include <catch2/catch.hpp>

#include "split_everything.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

using namespace backplane;

namespace fusion_test { // a unity build shares the translation unit: names of its own

using i64 = std::int64_t;

using backplane::test::split_everything;

using test::fusion_cases_detail::fill;

using test::nmse;
std::vector<float> values(const tensor& t) { return test::values_of(t); }

/// Builds a graph in ctx and returns its result, whose values are compared (a set_rows:
/// the whole cache); the same seed builds the same values.
using builder = std::function<tensor*(context& ctx, std::mt19937& rng)>;

struct outcome {
    std::vector<float> values;
    std::vector<fusion> fused; ///< the plan's groups
};

outcome run(const builder& build, std::uint32_t seed, cpu_backend_params params) {
    context ctx;
    std::mt19937 rng(seed);
    tensor* out = build(ctx, rng);
    graph g(out);
    cpu_backend backend(params);
    auto plan = backend.make_plan(g);
    INFO(plan.error().describe());
    REQUIRE(plan.ok());
    outcome o;
    for (const fused_group& grp : plan->groups()) o.fused.push_back(grp.kind);
    const status st = backend.compute(*plan);
    INFO(st.describe());
    REQUIRE(st.ok());
    o.values = values(*out);
    return o;
}

/// The graph fused (one group of kind `kind`), node by node and in reference mode, on
/// 1 to 3 threads: fused against node by node within `exact`, both against the reference
/// within `oracle`.
void check_fused(const builder& build, fusion kind, double exact, double oracle) {
    const split_everything split;
    for (int n = 1; n <= 3; ++n) {
        INFO("threads " << n << ", " << to_string(kind));
        const outcome fused = run(build, 7, {.n_threads = n});
        const outcome plain = run(build, 7, {.n_threads = n, .fusions = fusion_set::none()});
        const outcome ref = run(build, 7, {.n_threads = n, .reference = true});
        REQUIRE(fused.fused == std::vector<fusion>{kind});
        CHECK(plain.fused.empty());
        CHECK(ref.fused.empty());
        CHECK(nmse(plain.values, fused.values) <= exact);
        CHECK(nmse(ref.values, fused.values) <= oracle);
    }
}

TEST_CASE("fusion: each group is one step, as the nodes one by one compute it", "[cpu][fusion]") {
    for (const test::fusion_case& c : test::fusion_cases(101, 12)) {
        INFO(c.name);
        // the mul_mat groups quantize b (against the reference's exact product)
        const bool quantized = c.kind == fusion::mul_mat_add || c.kind == fusion::glu_pair;
        const double exact = c.kind == fusion::rope_set_rows ? 0.0 : 1e-12;
        check_fused(c.build, c.kind, exact, quantized ? 1e-3 : 1e-8);
    }
}

/// mul(rms_norm(x), w) of random x [64, 3] and w [64] (an rms_norm_mul group).
tensor* norm_mul(context& ctx, std::uint32_t seed) {
    std::mt19937 rng(seed);
    tensor* x = ctx.new_tensor_2d(elem_type::f32, 64, 3);
    tensor* w = ctx.new_tensor_1d(elem_type::f32, 64);
    fill(x, rng);
    fill(w, rng);
    return mul(ctx, rms_norm(ctx, x, 1e-5f), w);
}

TEST_CASE("fusion: a group whose intermediate is read elsewhere is not fused", "[cpu][fusion]") {
    context ctx;
    tensor* y = norm_mul(ctx, 5);
    tensor* norm = y->src[0];
    SECTION("by a later node") {
        tensor* z = add(ctx, y, norm);
        CHECK(find_fusions(graph(z)).empty());
        const graph g(z);
        cpu_backend backend({.n_threads = 2});
        auto plan = backend.make_plan(g);
        REQUIRE(plan.ok());
        CHECK(plan->groups().empty());
    }
    SECTION("by the user") {
        norm->set_output();
        CHECK(find_fusions(graph(y)).empty());
    }
    SECTION("by another split") {
        const graph g(y);
        REQUIRE(find_fusions(g).size() == 1);
        std::vector<std::uint8_t> kept(g.nodes().size(), 0);
        kept[0] = 1;
        CHECK(find_fusions(graph_view(g.nodes(), kept.data())).empty());
        kept[0] = 0;
        CHECK(find_fusions(graph_view(g.nodes(), kept.data())).size() == 1);
        CHECK(find_fusions(g.view().keep_all()).empty());
    }
    SECTION("a kind left out") {
        const graph g(y);
        CHECK(find_fusions(g, fusion_set{}.without(fusion::rms_norm_mul)).empty());
        CHECK(find_fusions(g, fusion_set::none().with(fusion::rms_norm_mul)).size() == 1);
        cpu_backend backend({.n_threads = 1});
        backend.set_fusions(fusion_set::none());
        auto plan = backend.make_plan(g);
        REQUIRE(plan.ok());
        CHECK(plan->groups().empty());
        CHECK(plan->size() == 2);
    }
}

TEST_CASE("fusion: a group computed in its operands' memory, and not fused where that would overlap them",
          "[cpu][fusion]") {
    // y = rms_norm(x) * w with x rows 0..2 of a [64, 4] buffer; y in x's place, in w's, or
    // in rows 1..3 of the buffer (overlapping x shifted by a row: fused, row 1 of x would
    // be overwritten before it is read)
    enum class place { own, x, w, shifted };
    for (const place where : {place::own, place::x, place::w, place::shifted}) {
        INFO("result placed " << static_cast<int>(where));
        context ctx;
        std::mt19937 rng(11);
        tensor* buf = ctx.new_tensor_2d(elem_type::f32, 64, 4);
        tensor* w = ctx.new_tensor_2d(elem_type::f32, 64, 3);
        fill(buf, rng, -2.0, 2.0);
        fill(w, rng);
        tensor* x = view_2d(ctx, buf, 64, 3, buf->nb[1], 0);
        tensor* y = mul(ctx, rms_norm(ctx, x, 1e-5f), w);
        context ref_ctx;
        tensor* rx = ref_ctx.new_tensor_2d(elem_type::f32, 64, 3);
        tensor* rw = ref_ctx.new_tensor_2d(elem_type::f32, 64, 3);
        std::memcpy(rx->data, x->data, rx->nbytes());
        std::memcpy(rw->data, w->data, rw->nbytes());
        tensor* ry = mul(ref_ctx, rms_norm(ref_ctx, rx, 1e-5f), rw);
        cpu_backend ref({.n_threads = 1, .reference = true});
        REQUIRE(ref.compute(graph(ry)).ok());

        if (where == place::x) y->data = x->data;
        if (where == place::w) y->data = w->data;
        if (where == place::shifted) y->data = static_cast<std::byte*>(buf->data) + buf->nb[1];
        const graph g(y);
        CHECK(find_fusions(g).size() == (where == place::shifted ? 0u : 1u));
        cpu_backend backend({.n_threads = 2});
        REQUIRE(backend.compute(g).ok());
        CHECK(nmse(values(*ry), values(*y)) <= 1e-10);
    }
}

TEST_CASE("fusion: a fused plan computed in reference mode runs the group's nodes in turn", "[cpu][fusion]") {
    const split_everything split;
    context ctx;
    std::mt19937 rng(6);
    tensor* wg = ctx.new_tensor_2d(elem_type::q8_0, 64, 40);
    tensor* wu = ctx.new_tensor_2d(elem_type::q8_0, 64, 40);
    tensor* x = ctx.new_tensor_2d(elem_type::f32, 64, 3);
    for (tensor* t : {wg, wu, x}) fill(t, rng);
    tensor* out = swiglu_split(ctx, mul_mat(ctx, wg, x), mul_mat(ctx, wu, x));
    const graph g(out);
    cpu_backend ref({.n_threads = 3, .reference = true});
    REQUIRE(ref.compute(g).ok());
    const std::vector<float> want = values(*out);

    cpu_backend backend({.n_threads = 3});
    auto plan = backend.make_plan(g);
    REQUIRE(plan.ok());
    REQUIRE(plan->groups().size() == 1);
    backend.set_reference(true);
    std::fill_n(static_cast<float*>(out->data), out->nelements(), 0.0f);
    REQUIRE(backend.compute(*plan).ok());
    CHECK(plan->reference());
    CHECK(nmse(want, values(*out)) <= 1e-12);
}

TEST_CASE("fusion: a profile times a group as one step of kernel fused", "[cpu][fusion][profile]") {
    context ctx;
    tensor* y = norm_mul(ctx, 9);
    cpu::profile prof;
    cpu_backend backend({.n_threads = 2});
    backend.set_profile(&prof);
    REQUIRE(backend.compute(graph(y)).ok());
    REQUIRE(prof.last().size() == 1);
    CHECK(prof.last()[0].node == y);
    CHECK(prof.last()[0].kernel == cpu::kernel_kind::fused);
    REQUIRE(prof.by_op().size() == 1);
    CHECK(prof.by_op()[0].op == op_kind::mul);
    CHECK(prof.by_op()[0].kernel == cpu::kernel_kind::fused);
}

TEST_CASE("fusion: a set_rows index out of range inside a fused group is a status", "[cpu][fusion]") {
    const split_everything split;
    context ctx;
    tensor* out = test::rope_set_rows_out_of_range(ctx);
    for (int n = 1; n <= 2; ++n) {
        cpu_backend backend({.n_threads = n});
        auto plan = backend.make_plan(graph(out));
        REQUIRE(plan.ok());
        REQUIRE(plan->groups().size() == 1);
        const status st = backend.compute(*plan);
        CHECK(st.code() == errc::out_of_range);
        CHECK_THAT(st.describe(), Catch::Contains("set_rows"));
    }
}

} // namespace fusion_test

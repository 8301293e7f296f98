// compute(graph_view) keeps the plans of the last graphs it computed and uses them again
// while the graph is the same (backends/cpu/plan_cache.hpp). A graph edited in place
// between computes (an output flag, a type, a shape, another source) is planned anew:
// checked against a fresh backend's result, and with the byte counts and kernels that
// a stale plan would get wrong (a fused intermediate left unwritten, a work buffer too
// small for more columns). A tensor whose buffer was freed is a status on every path.

#include "cpu_test_harness.hpp"

#include <backplane/memory/alloc_tensors.hpp>
#include <backplane/memory/tensor_io.hpp>

#include <optional>
#include <string>
#include <vector>

namespace cpu_plan_cache_test { // a unity build shares the translation unit: names of its own

using namespace cpu_test;

std::vector<float> values(const tensor& t) {
    auto v = tensor_read_f32(t);
    REQUIRE(v);
    return *v;
}

/// The result of g's last node computed by a fresh backend in reference mode.
std::vector<float> reference_of(const graph& g) {
    cpu_backend ref({.n_threads = 1, .reference = true});
    const status s = ref.compute(g);
    INFO(s.describe());
    REQUIRE(s.ok());
    return values(*g.back());
}

void poison(tensor& t) { std::memset(t.data, 0xff, t.nbytes()); } // NaN in every float

TEST_CASE("cpu plans: the same graph is planned once, another one again", "[cpu][plan]") {
    harness h(51001);
    tensor* w = h.leaf(q8_0, {64, 32, 1, 1});
    tensor* x = h.leaf(f32, {64, 3, 1, 1});
    tensor* out = scale(h.ctx, mul_mat(h.ctx, w, x), 0.5f);
    const graph g(out);
    const std::vector<float> want = reference_of(g);

    cpu_backend backend({.n_threads = 2});
    for (int i = 0; i < 3; ++i) {
        poison(*out);
        REQUIRE(backend.compute(g).ok());
        CHECK(bt::nmse_of(want, values(*out)) < 1e-4);
    }
    CHECK(backend.plans_made() == 1);

    SECTION("a graph object built again over the same nodes is the same graph") {
        REQUIRE(backend.compute(graph(out)).ok());
        CHECK(backend.plans_made() == 1);
    }
    SECTION("three graphs in turn keep their plans, six do not fit") {
        std::vector<graph> graphs;
        std::vector<std::vector<float>> wants;
        for (int k = 0; k < 6; ++k) {
            tensor* y = add(h.ctx, mul_mat(h.ctx, w, h.leaf(f32, {64, 1 + k, 1, 1})), h.leaf(f32, {32, 1, 1, 1}));
            graphs.emplace_back(y);
            wants.push_back(reference_of(graphs.back()));
        }
        const auto rotate = [&](int n, int rounds) {
            for (int r = 0; r < rounds; ++r)
                for (int k = 0; k < n; ++k) {
                    poison(*graphs[k].back());
                    REQUIRE(backend.compute(graphs[k]).ok());
                    CHECK(bt::nmse_of(wants[k], values(*graphs[k].back())) < 1e-4);
                }
        };
        rotate(3, 3);
        CHECK(backend.plans_made() == 1 + 3);
        // 4 places, the least recently used one taken: the first round finds graphs 0-2
        // and plans 3-5 (pushing out g and graphs 0-1), the second plans all six
        rotate(6, 2);
        CHECK(backend.plans_made() == 1 + 3 + 3 + 6);
    }
    SECTION("another mode or set of fusions is another plan") {
        backend.set_reference(true);
        REQUIRE(backend.compute(g).ok());
        CHECK(backend.plans_made() == 2);
        backend.set_reference(false);
        backend.set_fusions(fusion_set::none());
        REQUIRE(backend.compute(g).ok());
        CHECK(backend.plans_made() == 3);
        backend.set_fusions(fusion_set{}); // all
        REQUIRE(backend.compute(g).ok());
        CHECK(backend.plans_made() == 3); // the first plan, still kept
        CHECK(bt::nmse_of(want, values(*out)) < 1e-4);
    }
}

TEST_CASE("cpu plans: a graph edited in place between computes is planned again", "[cpu][plan]") {
    harness h(51002);
    cpu_backend backend({.n_threads = 2});

    SECTION("an output flag on a fused intermediate: it is written again") {
        tensor* x = h.leaf(f32, {64, 4, 1, 1});
        tensor* norm = rms_norm(h.ctx, x, 1e-5f);
        tensor* out = mul(h.ctx, norm, h.leaf(f32, {64, 1, 1, 1}));
        const graph g(out);
        REQUIRE(backend.compute(g).ok()); // rms_norm and mul fused: norm is never written
        const std::vector<float> want_norm = [&] {
            context c;
            tensor* alone = rms_norm(c, x, 1e-5f);
            return reference_of(graph(alone));
        }();
        norm->set_output();
        poison(*norm);
        poison(*out);
        REQUIRE(backend.compute(g).ok());
        CHECK(backend.plans_made() == 2);
        CHECK(bt::nmse_of(want_norm, values(*norm)) < 1e-10);
        CHECK(bt::nmse_of(reference_of(g), values(*out)) < 1e-10);
    }
    SECTION("more columns of b: a larger work buffer and another kernel") {
        // b and the product hold 8 columns; the graph first uses 1 of them
        tensor* w = h.leaf(q4_0, {256, 64, 1, 1});
        tensor* b = h.leaf(f32, {256, 8, 1, 1});
        tensor* mm = mul_mat(h.ctx, w, b);
        const graph g(mm);
        const auto set_columns = [&](i64 n) {
            for (tensor* t : {b, mm}) {
                t->ne[1] = n;
                t->nb[2] = t->nb[3] = t->nb[1] * static_cast<std::size_t>(n);
            }
        };
        set_columns(1);
        REQUIRE(backend.compute(g).ok());
        CHECK(bt::nmse_of(reference_of(g), values(*mm)) < 1e-4);
        set_columns(8);
        poison(*mm);
        REQUIRE(backend.compute(g).ok());
        CHECK(backend.plans_made() == 2);
        CHECK(bt::nmse_of(reference_of(g), values(*mm)) < 1e-4);
    }
    SECTION("a source's type: refused, then computed again once restored") {
        tensor* a = h.leaf(f32, {16, 2, 1, 1});
        tensor* out = add(h.ctx, a, h.leaf(f32, {16, 1, 1, 1}));
        const graph g(out);
        REQUIRE(backend.compute(g).ok());
        out->src[1]->type = i32;
        CHECK(backend.compute(g).code() == errc::not_supported);
        out->src[1]->type = f32;
        REQUIRE(backend.compute(g).ok());
        CHECK(backend.plans_made() == 2); // the refused graph took another place: the first plan is kept
    }
    SECTION("another source of the same shape: its values are read") {
        tensor* a = h.leaf(f32, {16, 2, 1, 1});
        tensor* other = h.leaf(f32, {16, 2, 1, 1});
        tensor* out = relu(h.ctx, a);
        const graph g(out);
        REQUIRE(backend.compute(g).ok());
        out->src[0] = other;
        poison(*out);
        REQUIRE(backend.compute(g).ok());
        CHECK(backend.plans_made() == 2);
        CHECK(values(*out) == reference_of(g));
    }
}

TEST_CASE("cpu plans: a tensor whose buffer was freed is a status, planned or not", "[cpu][plan][lifetime]") {
    context wctx{context_params{.no_alloc = true}};
    tensor* w = wctx.new_tensor_2d(elem_type::f32, 32, 16);
    w->name = "w";
    std::optional<buffer_list> weights(alloc_tensors(wctx, cpu_buffer_type::instance()).value());
    REQUIRE(tensor_set(*w, std::vector<float>(32 * 16, 0.25f)).ok());

    harness h(51003);
    tensor* out = mul_mat(h.ctx, w, h.leaf(f32, {32, 2, 1, 1}));
    const graph g(out);
    cpu_backend backend({.n_threads = 2});
    REQUIRE(backend.compute(g).ok());
    auto plan = backend.make_plan(g);
    REQUIRE(plan.ok());

    weights.reset();
    const status kept = backend.compute(g); // the kept plan
    INFO(kept.describe());
    CHECK(kept.code() == errc::invalid_argument);
    CHECK(kept.message().find("'w'") != std::string::npos);
    CHECK(kept.message().find("freed") != std::string::npos);
    CHECK(backend.compute(*plan).code() == errc::invalid_argument); // a plan of make_plan
    cpu_backend fresh({.n_threads = 1});
    const status planned = fresh.compute(g); // planned anew
    CHECK(planned.code() == errc::invalid_argument);
    CHECK(planned.message().find("freed") != std::string::npos);
    CHECK(fresh.make_plan(g).error().code() == errc::invalid_argument);
}

} // namespace cpu_plan_cache_test

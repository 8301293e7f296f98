// compare_backends against a deliberately broken test device (one op scaled by 1 + 2^-10),
// the conformance runner (pass, fail, NaN, unsupported), shrinking a shape-dependent bug
// to its smallest case with the same seed, the catalogue's determinism, enabled_backends.

#include "../support/llama_graph.hpp"
#include "../support/ref_oracle.hpp"
#include "../support/test_backend.hpp"

#include <backplane/backplane.hpp>
#include <backplane/conformance.hpp>
#include <backplane/enabled.hpp>
#include <backplane/sched.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

using namespace backplane;
namespace cf = backplane::conformance;
using backplane::test::test_backend;
using backplane::test::test_device;

static_assert(std::is_same_v<std::tuple_element_t<0, enabled_backends>, cpu_backend>);
static_assert(is_enabled_backend<cpu_backend>);
static_assert(!is_enabled_backend<test_backend>);
static_assert(
    std::is_same_v<with_enabled_backends<scheduler>,
                   with_enabled_backends<scheduler>>); // the scheduler over them is a type

namespace {

/// 2 layers, n_embd 64: enough nodes of every kind, quick on the reference kernels.
test::llama_params tiny_llama() {
    return {.n_layer = 2,
            .n_embd = 64,
            .n_head = 4,
            .n_ff = 160,
            .n_tokens = 4,
            .n_vocab = 96,
            .token_input = true};
}

/// Multiplies every element of nodes of op `op` by 1 + 2^-10.
std::function<void(tensor&)> scale_op(op_kind op) {
    return [op](tensor& t) {
        if (t.op != op || t.type != elem_type::f32)
            return;
        const float k = 1.0f + std::ldexp(1.0f, -10);
        for (std::int64_t i = 0; i < t.nelements(); ++i)
            static_cast<float*>(t.data)[i] *= k; // contiguous result
    };
}

/// The graph's NMSE per computed node, in the llama graph on CPU vs a test device.
/// whole_graph: compute it all at once and compare only the output.
std::vector<std::pair<std::size_t, double>> nmse_per_node(test_device& dev, compare_mode mode,
                                                          bool whole_graph = false) {
    test::llama_instance s(tiny_llama());
    graph_allocator ga(cpu_buffer_type::instance());
    REQUIRE(ga.alloc_graph(s.g).ok());
    REQUIRE(test::fill_llama(s.model, s.inputs, 9).ok());
    cpu_backend cpu({.n_threads = 1, .reference = true});
    test_backend be = dev.make_backend();
    std::vector<std::pair<std::size_t, double>> out;
    std::vector<tensor*> want;
    if (whole_graph)
        want.push_back(s.g.back());
    auto r = compare_backends(cpu, be, s.g,
                              [&](std::size_t i, const tensor& a, const tensor& b) {
                                  out.emplace_back(i, test::nmse_of(tensor_read_f32(a).value(),
                                                                    tensor_read_f32(b).value()));
                                  return true;
                              },
                              {.nodes = want, .mode = mode});
    REQUIRE(r);
    CHECK(r->compared == out.size());
    CHECK(!r->stopped);
    return out;
}

} // namespace

TEST_CASE("compare_backends: node by node, isolated, flags exactly the broken op") {
    test_device good({.name = "GOOD"});
    for (auto [i, e] : nmse_per_node(good, compare_mode::isolated))
        CHECK(e == 0.0); // the same reference kernels

    test_device bad({.name = "BAD", .fault = scale_op(op_kind::mul)});
    test::llama_instance probe(tiny_llama());
    std::set<std::size_t> muls;
    for (std::size_t i = 0; i < probe.g.n_nodes(); ++i)
        if (probe.g.nodes()[i]->op == op_kind::mul)
            muls.insert(i);
    REQUIRE(!muls.empty());
    std::set<std::size_t> flagged;
    std::size_t compared = 0;
    for (auto [i, e] : nmse_per_node(bad, compare_mode::isolated)) {
        ++compared;
        if (e > 1e-9)
            flagged.insert(i);
        if (muls.contains(i))
            CHECK(e > 1e-7); // (2^-10)^2 = 9.5e-7
    }
    CHECK(flagged == muls);
    std::size_t computing = 0;
    for (const tensor* t : probe.g.nodes())
        computing += is_view_op(t->op) ? 0 : 1;
    CHECK(compared == computing); // views skipped, everything else compared
}

TEST_CASE(
    "compare_backends: chained lets the error spread, whole-graph mode compares the listed nodes") {
    test_device bad({.name = "BAD", .fault = scale_op(op_kind::mul)});
    std::size_t flagged = 0, muls = 0;
    test::llama_instance probe(tiny_llama());
    for (const tensor* t : probe.g.nodes())
        muls += t->op == op_kind::mul ? 1 : 0;
    for (auto [i, e] : nmse_per_node(bad, compare_mode::chained))
        flagged += e > 1e-9 ? 1 : 0;
    CHECK(flagged > muls);

    const auto whole = nmse_per_node(bad, compare_mode::isolated, true);
    REQUIRE(whole.size() == 1);
    CHECK(whole[0].first == 0);
    CHECK(whole[0].second > 1e-7);
}

TEST_CASE("compare_backends: errors are statuses naming the node and backend") {
    context ctx;
    tensor* a = ctx.new_tensor(elem_type::f32, {8, 2});
    tensor* pos = ctx.new_tensor(elem_type::i32, {2});
    tensor* y = rope(ctx, reshape(ctx, a, {8, 1, 2}), pos, 8);
    graph g(y);
    test_device no_rope(
        {.name = "NOROPE", .supports = [](const tensor& t) { return t.op != op_kind::rope; }});
    test_backend be = no_rope.make_backend();
    cpu_backend cpu;
    auto res = compare_backends(cpu, be, g,
                                [](std::size_t, const tensor&, const tensor&) { return true; });
    REQUIRE(!res);
    CHECK(res.error().code() == errc::not_supported);
    CHECK_THAT(res.error().message(), Catch::Contains("NOROPE") && Catch::Contains("rope"));
}

TEST_CASE("conformance: the catalogue builds every family deterministically from its seed") {
    for (const cf::op_family& f : cf::catalogue()) {
        INFO(f.name);
        const std::vector<elem_type> types(static_cast<std::size_t>(f.n_types), elem_type::f32);
        const auto list = cf::cases_for(f, types, 3, 5);
        REQUIRE(list.size() == 3);
        CHECK(list == cf::cases_for(f, types, 3, 5));
        for (const cf::case_spec& spec : list) {
            context c1, c2;
            auto b1 = cf::build(c1, spec);
            auto b2 = cf::build(c2, spec);
            REQUIRE(b1);
            REQUIRE(b2);
            // the same inputs, bit for bit
            graph g1(b1->out), g2(b2->out);
            REQUIRE(g1.n_leafs() == g2.n_leafs());
            for (std::size_t i = 0; i < g1.n_leafs(); ++i)
                CHECK(std::memcmp(g1.leafs()[i]->data, g2.leafs()[i]->data,
                                  g1.leafs()[i]->nbytes()) == 0);
        }
    }
    // an invalid spec is invalid, not an error
    context ctx;
    CHECK(!cf::build(
        ctx,
        {"mul_mat", {elem_type::q8_0, elem_type::f32}, {33, 2, 2, 1}, 0, 1})); // not whole blocks
    CHECK(!cf::build(ctx, {"no_such_op", {elem_type::f32}, {4, 1, 1, 1}, 0, 1}));
    CHECK(
        !cf::build(ctx, {"add", {elem_type::f32}, {4, 1, 1, 1}, 0, 1})); // one type for a binary op
}

TEST_CASE("conformance: the CPU fast paths pass a slice of the catalogue, a broken backend fails") {
    cpu_backend ref({.n_threads = 1, .reference = true});
    cpu_backend fast({.n_threads = 2});
    int run = 0;
    for (const cf::op_family& f : cf::catalogue()) {
        const std::vector<elem_type> types(static_cast<std::size_t>(f.n_types), elem_type::f32);
        if (!cf::claimed(ref, f, types))
            continue;
        for (const cf::case_spec& spec : cf::cases_for(f, types, 2, 3)) {
            const cf::case_result r = cf::run_case(ref, fast, spec);
            INFO(cf::to_string(spec) << ": " << r.message);
            CHECK(r.result == cf::outcome::pass);
            ++run;
        }
    }
    CHECK(run >= 40);

    // NaN in one element: fails however small the NMSE
    test_device nan_dev({.name = "NAN", .fault = [](tensor& t) {
                             if (t.op == op_kind::sqr)
                                 static_cast<float*>(t.data)[0] =
                                     std::numeric_limits<float>::quiet_NaN();
                         }});
    test_backend nb = nan_dev.make_backend();
    const cf::case_result r =
        cf::run_case(ref, nb, {"sqr", {elem_type::f32}, {100, 3, 1, 1}, 0, 4});
    CHECK(r.result == cf::outcome::fail);
    CHECK(r.cmp.bad_values == 1);
    CHECK_THAT(r.message, Catch::Contains("NaN"));

    // unsupported is reported, not failed
    test_device no_rope(
        {.name = "NOROPE", .supports = [](const tensor& t) { return t.op != op_kind::rope; }});
    test_backend nr = no_rope.make_backend();
    CHECK(cf::run_case(ref, nr, {"rope", {elem_type::f32}, {8, 2, 3, 1}, 0, 4}).result ==
          cf::outcome::unsupported);
    CHECK(!cf::supports(nr, *cf::find_family("rope"), {elem_type::f32}));
    CHECK(cf::supports(nr, *cf::find_family("add"), {elem_type::f32, elem_type::f32}));
}

TEST_CASE("conformance: a bug in the vector tail of add is shrunk to its smallest case with the "
          "same seed") {
    // elements 8 and up of each row of add come out 0.05 too large
    test_device tail({.name = "TAIL", .fault = [](tensor& t) {
                          if (t.op != op_kind::add)
                              return;
                          auto* p = static_cast<float*>(t.data);
                          for (std::int64_t r = 0; r < t.nrows(); ++r)
                              for (std::int64_t i = 8; i < t.ne[0]; ++i)
                                  p[r * t.ne[0] + i] += 0.05f;
                      }});
    test_backend be = tail.make_backend();
    cpu_backend ref({.n_threads = 1, .reference = true});
    const cf::case_spec spec{"add", {elem_type::f32, elem_type::f32}, {65, 5, 3, 2}, 0, 1234};
    const cf::case_result r = cf::run_case(ref, be, spec);
    REQUIRE(r.result == cf::outcome::fail);
    const cf::case_spec small = cf::shrink(ref, be, spec);
    CHECK(small.ne == cf::extents{9, 1, 1, 1});
    CHECK(small.seed == spec.seed);
    CHECK(small.op == spec.op);
    CHECK(small.types == spec.types);
    CHECK(small.variant == spec.variant);
    CHECK(cf::run_case(ref, be, small).result == cf::outcome::fail);
    CHECK(cf::repro_args(small) ==
          "--op add --types f32,f32 --shape 9x1x1x1 --variant 0 --seed 1234");
    // one element fewer passes
    cf::case_spec smaller = small;
    smaller.ne[0] = 8;
    CHECK(cf::run_case(ref, be, smaller).result == cf::outcome::pass);
}

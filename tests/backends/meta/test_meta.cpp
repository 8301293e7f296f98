// The meta backend over CPU parts: split states, propagation, memory, reductions and the
// reference llama graph against one CPU.

#include "meta_fixtures.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>

using namespace backplane;
using backplane::meta::split_state;

TEST_CASE("split_state: even splits, granules, segments and weights", "[meta]") {
    const split_state s = split_state::even(1, 512, 3, 64);
    CHECK(s.is_split());
    CHECK(s.axis() == 1);
    CHECK(s.sizes() == std::vector<std::int64_t>{192, 192, 128});
    CHECK(s.start(0, 2) == 384);
    CHECK(s.local_extent(1) == 192);
    CHECK(s.to_string() == "axis1 {192, 192, 128}");

    const split_state qkv = split_state::even(1, 3 * 256, 2, 32, 3);
    CHECK(qkv.n_segments() == 3);
    CHECK(qkv.start(1, 1) == 256 + 128);
    CHECK(qkv.local_start(2, 1) == 256);
    CHECK(qkv.local_extent(0) == 384);
    CHECK(qkv.to_string() == "axis1 {3 x {128, 128}}");

    const double w[] = {3.0, 1.0};
    const split_state weighted = split_state::even(0, 64, 2, 8, 1, w);
    CHECK(weighted.sizes() == std::vector<std::int64_t>{48, 16});

    CHECK_THROWS_WITH(split_state::even(1, 100, 2, 64), Catch::Contains("not a multiple"));
    CHECK_THROWS_WITH(split_state::even(1, 128, 4, 64), Catch::Contains("cannot feed 4 devices"));
    CHECK_THROWS_WITH(split_state::even(4, 128, 2), Catch::Contains("axis 4"));
    CHECK_THROWS_WITH(split_state::split(0, 2, {3, 0}), Catch::Contains("at least 1"));

    CHECK(!s.check(elem_type::f32, {512, 512, 1, 1}, 2).ok());     // 3 devices' state on 2
    CHECK(!s.check(elem_type::f32, {512, 256, 1, 1}, 3).ok());     // wrong extent
    CHECK(split_state::even(0, 96, 2, 16).check(elem_type::q8_0, {96, 4, 1, 1}, 2).message().find("blocks") !=
          std::string::npos);
}

TEST_CASE("propagation rules cover every core op", "[meta]") {
    for (std::size_t i = 1; i < op_kind_count; ++i) {
        const auto op = static_cast<op_kind>(i);
        const bool covered = std::any_of(std::begin(meta::rules), std::end(meta::rules),
                                         [&](const meta::rule& r) { return r.op == op; });
        INFO(to_string(op));
        CHECK(covered);
    }
}

namespace {

struct meta_setup {
    meta_device dev;
    meta_backend be;
    explicit meta_setup(int n, meta::meta_params p = {})
        : dev(meta_device::make(test::cpu_parts(n), std::move(p)).value()), be(dev.make_backend().value()) {}
};

} // namespace

TEST_CASE("meta on 2, 3 and 4 CPU devices: the llama graph equals one CPU", "[meta]") {
    test::llama_params p;
    p.n_layer = 2;
    p.n_embd = 256;
    p.n_head = 8;
    p.n_ff = 384;
    p.n_tokens = 7;
    p.n_vocab = 1000;
    p.token_input = GENERATE(false, true);
    const std::uint32_t seed = 1234;
    const std::vector<float> ref = test::llama_on_cpu(p, seed);

    const int n = GENERATE(2, 3, 4);
    INFO("devices: " << n << ", token input: " << p.token_input);
    meta_setup m(n, {.split = [&](const tensor& t, int nd) { return test::split_llama(t, nd, p.head_dim()); }});
    test::meta_llama ml(p, m.dev, m.be);
    REQUIRE(test::fill_llama(ml.model, ml.inputs, seed).ok());

    auto plan = m.be.plan(ml.g);
    INFO(plan.error().describe());
    REQUIRE(plan.ok());
    // two reductions per layer (attention output, FFN down) and none elsewhere: the
    // logits stay split over the vocabulary and are gathered on read
    CHECK(plan->reduced.size() == 2 * static_cast<std::size_t>(p.n_layer));
    CHECK(plan->state_of(ml.g.back())->to_string().rfind("axis0", 0) == 0);
    CHECK(plan->state_of(ml.model.layers[0].wq) == nullptr); // weights are leaves

    const status st = m.be.compute(ml.g);
    INFO(st.describe());
    REQUIRE(st.ok());
    REQUIRE(m.be.synchronize().ok());
    const auto got = tensor_get_all<float>(*ml.g.back()).value();
    CHECK(test::nmse(got, ref) < 1e-6);

    // a second compute reuses the plan and gives the same bits
    REQUIRE(m.be.compute(ml.g).ok());
    REQUIRE(m.be.synchronize().ok());
    CHECK(tensor_get_all<float>(*ml.g.back()).value() == got);
    CHECK(m.be.stats().plans == 1);
    CHECK(m.be.stats().reductions == 4 * static_cast<std::uint64_t>(p.n_layer));
}

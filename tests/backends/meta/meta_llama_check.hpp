#pragma once
// The llama graph on a meta device, computed and checked with Catch2 (the meta tests, and
// the meta device over several processes in tests/mpi/).

#include <catch2/catch.hpp>

#include "meta_fixtures.hpp"

#include <cstdint>
#include <vector>

namespace backplane::test {

/// Plans and computes the llama graph of `ml` twice: two reductions per layer and the
/// logits split over the vocabulary; the second compute reuses the plan and gives the same
/// bits. Returns the logits (empty after a failed REQUIRE).
inline std::vector<float> compute_meta_llama(meta_backend& be, meta_llama& ml, const llama_params& p) {
    auto plan = be.plan(ml.g);
    INFO(plan.error().describe());
    REQUIRE(plan.ok());
    // attention output and FFN down, none elsewhere: the logits stay split and are
    // gathered on read
    CHECK(plan->reduced.size() == 2 * static_cast<std::size_t>(p.n_layer));
    CHECK(plan->state_of(ml.g.back())->to_string().rfind("axis0", 0) == 0);
    CHECK(plan->state_of(ml.model.layers[0].wq) == nullptr); // weights are leaves

    const status st = be.compute(ml.g);
    INFO(st.describe());
    REQUIRE(st.ok());
    REQUIRE(be.synchronize().ok());
    const auto got = tensor_get_all<float>(*ml.g.back()).value();
    REQUIRE(be.compute(ml.g).ok());
    REQUIRE(be.synchronize().ok());
    CHECK(tensor_get_all<float>(*ml.g.back()).value() == got);
    CHECK(be.stats().plans == 1);
    CHECK(be.stats().reductions == 4 * static_cast<std::uint64_t>(p.n_layer));
    return got;
}

} // namespace backplane::test

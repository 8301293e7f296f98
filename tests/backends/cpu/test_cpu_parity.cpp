// The CPU backend's fast paths against its own reference kernels, through the shared
// parity suite (tests/support/parity_suite.hpp): every op, every type combination
// supports_op claims, 20 seeded random shapes each, computed by cpu_backend (fast paths
// on) at every instruction-set level this machine has (set_isa_override) and on 1 and 2
// threads (with every node split, so the kernels' thread splits run on small shapes too).
//
// Until a fast kernel exists for an op, both sides run the same reference kernel and
// agree trivially; the suite is complete anyway, so that it checks each fast kernel the
// day it lands. The combination counts pin what the CPU claims.

#include "../../support/parity_suite.hpp"

#include <optional>
#include <string>
#include <vector>

using namespace parity;

namespace {

/// The instruction-set levels to run: portable up to what this machine has.
std::vector<cpu::isa> isa_levels() {
    std::vector<cpu::isa> v;
    for (int l = 0; l <= static_cast<int>(cpu::detected_isa()); ++l) v.push_back(static_cast<cpu::isa>(l));
    return v;
}

/// Caps the instruction set for one scope, and lifts the cap after (even on a failure).
struct isa_cap {
    explicit isa_cap(cpu::isa level) { cpu::set_isa_override(level); }
    ~isa_cap() { cpu::clear_isa_override(); }
    isa_cap(const isa_cap&) = delete;
    isa_cap& operator=(const isa_cap&) = delete;
};

/// Splits every node over all threads for one scope.
struct split_everything {
    split_everything() { cpu::set_min_work_per_thread(1); }
    ~split_everything() { cpu::reset_min_work_per_thread(); }
    split_everything(const split_everything&) = delete;
    split_everything& operator=(const split_everything&) = delete;
};

/// The fast paths at every instruction-set level, on 1 and 2 threads.
std::vector<parity_target> cpu_targets() {
    std::vector<parity_target> targets;
    for (const cpu::isa level : isa_levels())
        for (const int n_threads : {1, 2})
            targets.push_back({"cpu " + std::string(to_string(level)) + ", " + std::to_string(n_threads) + " threads",
                               [](const tensor& t) { return cpu::supports_op(t); },
                               [level, n_threads](graph& g) {
                                   isa_cap cap(level);
                                   std::optional<split_everything> split;
                                   if (n_threads > 1) split.emplace();
                                   cpu_backend fast({.n_threads = n_threads});
                                   return fast.compute(g);
                               }});
    return targets;
}

} // namespace

// ---------------------------------------------------------------------------------------

TEST_CASE("cpu parity: dup, cont and cpy for every type pair", "[cpu][parity]") {
    parity_suite ps(31001, cpu_targets());
    CHECK(copy_cases(ps) == 5 * 5 + 1 + 6); // cpy between real types, i32 to i32; dup/cont
    ps.run();
}

TEST_CASE("cpu parity: add, sub, mul, div with broadcasting for every type pair", "[cpu][parity]") {
    parity_suite ps(31002, cpu_targets());
    CHECK(binary_cases(ps) == 4 * 9);
    ps.run();
}

TEST_CASE("cpu parity: scale, sqr, sqrt, silu, gelu, relu", "[cpu][parity]") {
    parity_suite ps(31003, cpu_targets());
    CHECK(unary_cases(ps) == 6 * 3);
    ps.run();
}

TEST_CASE("cpu parity: sum_rows, argmax, norm, rms_norm", "[cpu][parity]") {
    parity_suite ps(31004, cpu_targets());
    CHECK(rows_cases(ps) == 3 + 3 + 2);
    ps.run();
}

TEST_CASE("cpu parity: soft_max without a mask and with f32 and f16 masks", "[cpu][parity]") {
    parity_suite ps(31005, cpu_targets());
    CHECK(soft_max_cases(ps) == 3);
    ps.run();
}

TEST_CASE("cpu parity: mul_mat for every weight and activation type", "[cpu][parity][mul_mat]") {
    parity_suite ps(31006, cpu_targets());
    CHECK(mul_mat_cases(ps) == 5 * 3);
    ps.run();
}

TEST_CASE("cpu parity: get_rows from every type", "[cpu][parity]") {
    parity_suite ps(31007, cpu_targets());
    CHECK(get_rows_cases(ps) == 6);
    ps.run();
}

TEST_CASE("cpu parity: rope normal and neox", "[cpu][parity]") {
    parity_suite ps(31008, cpu_targets());
    CHECK(rope_cases(ps) == 2 * 2);
    ps.run();
}

TEST_CASE("cpu parity: concat along every dimension", "[cpu][parity]") {
    parity_suite ps(31009, cpu_targets());
    CHECK(concat_cases(ps) == 4);
    ps.run();
}

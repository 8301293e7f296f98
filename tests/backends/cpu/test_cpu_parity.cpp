// The CPU backend's fast paths against its own reference kernels: the parity cases
// (tests/conformance/parity_cases.hpp) over cpu_backend with its fast paths on, at every
// instruction-set level this machine has (set_isa_override) and on 1 and 2 threads (with
// every node split, so the kernels' thread splits run on small shapes too). Every
// combination in every run, but under AddressSanitizer (cpu_targets::sampled).
//
// Until a fast kernel exists for an op, both sides run the same reference kernel and
// agree trivially; the cases are complete anyway, so that they check each fast kernel the
// day it lands. The CPU claims every combination the op table's rules define.

#include "../../support/parity_targets.hpp"
#include "split_everything.hpp"

#include <backplane/backends/cpu.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cpu_parity {

using namespace backplane;

/// Caps the instruction set for one scope, and lifts the cap after (even on a failure).
struct isa_cap {
    explicit isa_cap(cpu::isa level) { cpu::set_isa_override(level); }
    ~isa_cap() { cpu::clear_isa_override(); }
    isa_cap(const isa_cap&) = delete;
    isa_cap& operator=(const isa_cap&) = delete;
};

using backplane::test::split_everything;

} // namespace cpu_parity

/// The fast paths at every instruction-set level, portable up to what this machine has,
/// on 1 and 2 threads.
struct cpu_targets {
    static constexpr std::string_view backend = "CPU";
    static constexpr auto& expected = parity::op_table_combinations;
#if defined(__SANITIZE_ADDRESS__)
    // Under AddressSanitizer (the asan step, -O0), the families with the most combinations
    // run one in three, every one in three successive commits: the unsanitized build runs
    // every combination of every family each time (docs/testing.md, "Sampled sweeps").
    static constexpr parity::sampled_family sampled[] = {
        {"copy", 3}, {"set_rows", 3}, {"mul_mat", 3}, {"mul_mat_id", 3}};
#endif

    static parity::target_list targets() {
        using namespace backplane;
        parity::target_list list;
        for (int l = 0; l <= static_cast<int>(cpu::detected_isa()); ++l)
            for (const int n_threads : {1, 2}) {
                const auto level = static_cast<cpu::isa>(l);
                list.targets.push_back(
                    {"cpu " + std::string(to_string(level)) + ", " + std::to_string(n_threads) + " threads",
                     [](const tensor& t) { return cpu::supports_op(t); },
                     [level, n_threads](graph& g) {
                         cpu_parity::isa_cap cap(level);
                         std::optional<cpu_parity::split_everything> split;
                         if (n_threads > 1)
                             split.emplace();
                         cpu_backend fast({.n_threads = n_threads});
                         return fast.compute(g);
                     }});
            }
        return list;
    }
};

#define BACKPLANE_PARITY_PROVIDERS cpu_targets
#if defined(__SANITIZE_ADDRESS__)
#define BACKPLANE_PARITY_SAMPLING_PROVIDERS cpu_targets
#endif
#include "../../conformance/parity_cases.hpp"

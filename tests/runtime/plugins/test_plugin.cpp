// A backend plugin for the registry tests: the test backend (tests/support/test_backend.hpp,
// private non-host memory, a worker thread per stream) as libbackplane-test*.so. Built in
// variants that differ by score and name only in their feature list:
//   BP_TEST_PLUGIN_SCORE    its score (0: "cannot run here")
//   BP_TEST_PLUGIN_VARIANT  a word the "variant" feature reports
// Two devices, TEST0 and TEST1.

#include "../../support/test_backend.hpp"

#include <backplane/runtime/plugin.hpp>

#include <memory>
#include <string>
#include <vector>

#ifndef BP_TEST_PLUGIN_SCORE
#define BP_TEST_PLUGIN_SCORE 10
#endif
#ifndef BP_TEST_PLUGIN_VARIANT
#define BP_TEST_PLUGIN_VARIANT "default"
#endif

namespace {

backplane::backend_reg make_reg() {
    using namespace backplane;
    return {"Test",
            []() -> result<std::vector<any_device>> {
                std::vector<any_device> out;
                for (int i = 0; i < 2; ++i) {
                    test::test_device_params p;
                    p.name = "TEST" + std::to_string(i);
                    p.description = std::string("plugin test device ") + std::to_string(i) + " (" BP_TEST_PLUGIN_VARIANT ")";
                    out.push_back(any_device::make(std::shared_ptr<const test::test_device>(
                        std::make_shared<test::test_device>(std::move(p)))));
                }
                return out;
            },
            [] {
                return std::vector<feature>{{"variant", BP_TEST_PLUGIN_VARIANT},
                                            {"score", std::to_string(BP_TEST_PLUGIN_SCORE)}};
            }};
}

int score() { return BP_TEST_PLUGIN_SCORE; }

} // namespace

BACKPLANE_PLUGIN("Test", make_reg, score)

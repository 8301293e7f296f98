// A backend plugin for the registry tests: the test backend (tests/support/test_backend.hpp,
// private non-host memory, a worker thread per stream) as libbackplane-test*.so. This file
// is compiled once; each variant links it with its own test_plugin_variant.cpp, which
// gives the score and the word the "variant" feature reports. Two devices, TEST0 and
// TEST1.

#include "../../support/test_backend.hpp"

#include <backplane/runtime/plugin.hpp>

#include <memory>
#include <string>
#include <vector>

int bp_test_plugin_score();            // test_plugin_variant.cpp
const char* bp_test_plugin_variant(); // test_plugin_variant.cpp

namespace {

backplane::backend_reg make_reg() {
    using namespace backplane;
    return {"Test",
            []() -> result<std::vector<any_device>> {
                std::vector<any_device> out;
                for (int i = 0; i < 2; ++i) {
                    test::test_device_params p;
                    p.name = "TEST" + std::to_string(i);
                    p.description = std::string("plugin test device ") + std::to_string(i) + " (" + bp_test_plugin_variant() + ")";
                    out.push_back(any_device::make(std::shared_ptr<const test::test_device>(
                        std::make_shared<test::test_device>(std::move(p)))));
                }
                return out;
            },
            [](const std::vector<any_device>&) {
                return std::vector<feature>{{"variant", bp_test_plugin_variant()},
                                            {"score", std::to_string(bp_test_plugin_score())}};
            }};
}

int score() { return bp_test_plugin_score(); }

} // namespace

BACKPLANE_PLUGIN("Test", make_reg, score)

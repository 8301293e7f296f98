#pragma once
// The Vulkan parity targets shared by the Vulkan op tests: physical device 0 with its
// memory mapped and with every transfer forced through staging, each computing a
// host-memory graph relocated into one device buffer (tests/support/device_mirror.hpp).

#include <backplane/backends/vulkan.hpp>

#include "../../support/device_mirror.hpp"
#include "../../support/parity_suite.hpp"

#include <memory>
#include <string>
#include <vector>

namespace parity {

/// A device opened one way and a backend on it.
struct vulkan_target_state {
    vulkan_device dev;
    vulkan_backend be;
};

/// Physical device 0 with its memory mapped and with staging forced; empty (and a
/// warning) when this machine has no Vulkan.
inline std::vector<parity_target> vulkan_targets() {
    std::vector<parity_target> targets;
    for (const bool staging : {false, true}) {
        auto dev = vulkan_device::open({.index = 0, .force_staging = staging});
        if (!dev) {
            WARN("no Vulkan device, skipping: " << dev.error().describe());
            return {};
        }
        auto be = dev->make_backend();
        REQUIRE(be);
        const std::string name = std::string(dev->name()) + (staging ? " staged" : " mapped");
        auto state = std::make_shared<vulkan_target_state>(vulkan_target_state{std::move(*dev), std::move(*be)});
        targets.push_back({name, [state](const tensor& t) { return state->be.supports_op(t); },
                           [state](graph& g) { return backplane::test::compute_on_device(state->be, g); }});
    }
    return targets;
}

} // namespace parity

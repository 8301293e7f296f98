#pragma once
// The Vulkan parity targets shared by the Vulkan op tests: physical device 0 with its
// memory mapped and with every transfer forced through staging, each computing a
// host-memory graph relocated into one device buffer (tests/support/device_mirror.hpp).

#include <backplane/backends/vulkan.hpp>

#include "../../support/device_mirror.hpp"
#include "../../support/parity_targets.hpp"
#include "../../support/vulkan_test_support.hpp" // the validation layer is on (before main)

#include <memory>
#include <string>
#include <utility>

namespace parity {

/// Under AddressSanitizer (the asan step, after the default step ran the same rotation and
/// filled the shader cache), the sampled Vulkan sweeps keep one in this many of their
/// sample's combinations (conformance::batch::sample's `thin`): they check the backend's
/// host code there, and the kernels' every combination is in the unsanitized runs.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr int sanitized_thin = 3;
#else
inline constexpr int sanitized_thin = 1;
#endif

/// A device opened one way and a backend on it.
struct vulkan_target_state {
    backplane::vulkan_device dev;
    backplane::vulkan_backend be;
};

/// Physical device 0 with its memory mapped and with staging forced; none, and why, when
/// this machine has no Vulkan.
inline target_list open_vulkan_targets() {
    using namespace backplane;
    static_cast<void>(test::vulkan_validation_asked);
    target_list list;
    for (const bool staging : {false, true}) {
        auto dev = vulkan_device::open({.index = 0, .force_staging = staging});
        if (!dev)
            return {{}, "no Vulkan device: " + dev.error().describe()};
        auto be = dev->make_backend();
        if (!be)
            return {{}, "no Vulkan backend on " + std::string(dev->name()) + ": " + be.error().describe()};
        const std::string name = std::string(dev->name()) + (staging ? " staged" : " mapped");
        auto state = std::make_shared<vulkan_target_state>(vulkan_target_state{std::move(*dev), std::move(*be)});
        list.targets.push_back({name, [state](const tensor& t) { return state->be.supports_op(t); },
                                [state](graph& g) { return test::compute_on_device(state->be, g); }});
    }
    return list;
}

} // namespace parity

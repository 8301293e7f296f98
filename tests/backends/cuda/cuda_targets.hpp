#pragma once
// The CUDA parity targets shared by the CUDA op tests: device 0 with mul_mat through
// cuBLAS (when the kernels were built with it) and with the own kernels only, each
// computing a host-memory graph relocated into one device buffer
// (tests/support/device_mirror.hpp). Each target computes the graph three times: when
// the buffer comes back at the same address (as cudaMalloc tends to give it), the second
// compute captures a CUDA graph and the third replays it; the last results are compared.

#include <backplane/backends/cuda.hpp>

#include "../../support/device_mirror.hpp"
#include "../../support/parity_suite.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace parity {

/// The device, or a warning saying why there is none (then the caller skips).
inline std::optional<cuda_device> cuda_device_or_skip() {
    auto dev = cuda_device::open({.index = 0});
    if (!dev) {
        WARN("no usable CUDA device, skipping: " << dev.error().describe());
        return std::nullopt;
    }
    return std::move(*dev);
}

/// Device 0 with cuBLAS (when built in) and without; empty (and a warning) without a GPU.
inline std::vector<parity_target> cuda_targets() {
    auto dev = cuda_device_or_skip();
    if (!dev) return {};
    std::vector<parity_target> targets;
    for (const bool cublas : {true, false}) {
        if (cublas && !cuda::detail::kernel_table_instance().with_cublas) continue;
        auto be = dev->make_backend({.cublas = cublas, .cuda_graphs = true});
        REQUIRE(be);
        auto state = std::make_shared<cuda_backend>(std::move(*be));
        const std::string name = std::string(dev->name()) + (cublas ? " cuBLAS" : " own kernels");
        targets.push_back({name, [state](const tensor& t) { return state->supports_op(t); },
                           [state](graph& g) {
                               for (int run = 0; run < 2; ++run)
                                   if (status s = backplane::test::compute_on_device(*state, g); !s) return s;
                               return backplane::test::compute_on_device(*state, g);
                           }});
    }
    return targets;
}

} // namespace parity

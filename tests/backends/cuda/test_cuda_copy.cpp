// The copy utilities and the conformance runner on a CUDA device: tensor_copy in
// every direction among host data, a CPU buffer, CUDA and the non-host test device,
// strided views into device memory, tensor_copy_async on the CUDA stream, graph_copy
// of the llama reference graph onto CUDA, compare_backends CPU vs CUDA, and a
// slice of the catalogue (tests/support/device_copy_cases.hpp). Skips with a message
// where no device exists.

#include "../../support/device_copy_cases.hpp"

#include <backplane/backends/cuda.hpp>
#include <backplane/enabled.hpp>

#include <catch2/catch.hpp>

#include <optional>

using namespace backplane;

static_assert(is_enabled_backend<cuda_backend>);

namespace {

std::optional<cuda_device> open_device() {
    auto dev = cuda_device::open({.index = 0});
    if (!dev) {
        WARN("no usable CUDA device, skipping: " << dev.error().describe());
        return std::nullopt;
    }
    return std::move(*dev);
}

} // namespace

TEST_CASE("cuda: tensor_copy in every direction among host data, CPU, CUDA and the test device") {
    if (auto dev = open_device())
        test::copies_every_direction(*dev, "CUDA");
}

TEST_CASE("cuda: tensor_copy_async on the CUDA stream") {
    if (auto dev = open_device())
        test::copy_async_on_stream(*dev, "CUDA");
}

TEST_CASE(
    "cuda: graph_copy of the llama reference graph computes the same logits, node by node too") {
    if (auto dev = open_device())
        test::llama_graph_copy(*dev, "CUDA");
}

TEST_CASE("cuda: a slice of the catalogue passes against the reference") {
    if (auto dev = open_device())
        test::catalogue_slice(*dev, "CUDA");
}

// The NCCL collective (backends/cuda/nccl.hpp): a meta device of CUDA parts reduces with
// NCCL and computes the llama-like graph as one CPU does (on up to two GPUs; NCCL takes
// each device once); parts that are not all CUDA devices get the generic collective.
// What needs a GPU skips with a message where the driver reports none.
#include <catch2/catch.hpp>

#include <backplane/backends/cuda.hpp>
#include <backplane/backends/cuda/nccl.hpp>

#include "../meta/meta_llama_check.hpp"

#include <algorithm>
#include <vector>

using namespace backplane;

namespace cuda_nccl_test {

TEST_CASE("nccl collective: a meta device of CUDA parts, the llama graph equals one CPU", "[cuda][nccl]") {
    auto all = cuda_device::all();
    if (!all || all->empty()) {
        WARN("no usable CUDA device, skipping: " << (all ? std::string("the driver reports none") : all.error().describe()));
        return;
    }
    const std::size_t n = std::min<std::size_t>(2, all->size());
    std::vector<any_device> parts;
    for (std::size_t i = 0; i < n; ++i) parts.push_back(any_device::make(std::move((*all)[i])));
    test::llama_params p{.n_layer = 2, .n_embd = 256, .n_head = 8, .n_ff = 384, .n_tokens = 7, .n_vocab = 1000};
    const std::uint32_t seed = 99;
    const std::vector<float> ref = test::llama_on_cpu(p, seed);
    auto dev = meta_device::make(parts, {.split = [&](const tensor& t, int nd) { return test::split_llama(t, nd, p.head_dim()); },
                                         .make_collective = cuda::nccl_collective::factory()});
    REQUIRE(dev);
    auto be = dev->make_backend();
    REQUIRE(be);
    INFO(n << " CUDA parts");
    CHECK(be->collective().name() == "nccl");
    CHECK_FALSE(be->collective().spans_processes());
    test::meta_llama ml(p, *dev, *be);
    REQUIRE(test::fill_llama(ml.model, ml.inputs, seed).ok());
    CHECK(test::nmse_of(ref, test::compute_meta_llama(*be, ml, p)) < 1e-6);
    CHECK(be->collective().stats().calls == 4 * static_cast<std::uint64_t>(p.n_layer));
}

TEST_CASE("nccl collective: parts that are not all CUDA devices get the generic collective", "[cuda][nccl]") {
    auto dev = meta_device::make(test::cpu_parts(2), {.make_collective = cuda::nccl_collective::factory()});
    REQUIRE(dev);
    auto be = dev->make_backend();
    REQUIRE(be);
    CHECK(be->collective().name() == "generic");
    CHECK(cuda::nccl_check("a call", ncclInvalidArgument).code() == errc::device_error);
    CHECK_THAT(cuda::nccl_check("a call", ncclInvalidArgument).message(), Catch::Contains("nccl: a call: "));
}

} // namespace cuda_nccl_test

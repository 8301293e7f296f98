// The NCCL collective across processes (mpi/nccl.hpp): each rank's meta device part is its
// own GPU, the llama-like graph equals one CPU and every rank reads the same logits. NCCL
// takes each GPU once, so this needs as many GPUs as ranks; with fewer it skips with a
// message, after checking that the ranks fall back together to the host path when the
// parts are not CUDA devices.
#include <catch2/catch.hpp>

#include <backplane/backends/cuda.hpp>
#include <backplane/mpi/nccl.hpp>

#include "../backends/meta/meta_llama_check.hpp"

#include <vector>

using namespace backplane;

namespace mpi_nccl_test {

TEST_CASE("mpi nccl: CPU parts fall back to the generic collective on every rank", "[mpi][nccl]") {
    auto procs = mpi::process_group::world().value();
    auto dev = meta_device::make(test::cpu_parts(1), {.make_collective = mpi::nccl_factory(procs), .processes = procs});
    REQUIRE(dev);
    auto be = dev->make_backend();
    REQUIRE(be);
    CHECK(be->collective().name() == "generic");
}

TEST_CASE("mpi nccl: one GPU per rank, the llama graph equals one CPU on every rank", "[mpi][nccl]") {
    auto procs = mpi::process_group::world().value();
    auto all = cuda_device::all();
    const std::size_t gpus = all ? all->size() : 0;
    if (gpus < static_cast<std::size_t>(procs->size())) { // the same answer on every rank of one machine
        WARN("rank " << procs->rank() << ": " << gpus << " CUDA devices for " << procs->size()
                     << " ranks (NCCL takes each GPU once), skipping");
        return;
    }
    std::vector<any_device> parts;
    parts.push_back(any_device::make(std::move((*all)[static_cast<std::size_t>(procs->rank())])));
    test::llama_params p{.n_layer = 2, .n_embd = 256, .n_head = 8, .n_ff = 384, .n_tokens = 7, .n_vocab = 1000};
    const std::uint32_t seed = 77;
    const std::vector<float> ref = test::llama_on_cpu(p, seed);
    auto dev = meta_device::make(parts, {.split = [&](const tensor& t, int nd) { return test::split_llama(t, nd, p.head_dim()); },
                                         .make_collective = mpi::nccl_factory(procs),
                                         .processes = procs});
    REQUIRE(dev);
    auto be = dev->make_backend();
    REQUIRE(be);
    CHECK(be->collective().name() == "nccl");
    CHECK(be->collective().spans_processes());
    test::meta_llama ml(p, *dev, *be);
    REQUIRE(test::fill_llama(ml.model, ml.inputs, seed).ok());
    CHECK(test::nmse_of(ref, test::compute_meta_llama(*be, ml, p)) < 1e-6);
}

} // namespace mpi_nccl_test

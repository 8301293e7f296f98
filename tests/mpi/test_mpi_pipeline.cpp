// Pipeline parallelism across processes (mpi::pipeline): the llama graph cut by layers
// into one stage per rank equals one CPU, gives the same bits on every rank and in every
// compute, and keeps several graphs in flight with pipeline copies; what lives on
// another rank cannot be read directly; a rank that planned the graph otherwise is an
// error where its message arrives.
#include <catch2/catch.hpp>

#include <backplane/backends/cpu.hpp>
#include <backplane/mpi/pipeline.hpp>

#include "../support/llama_cpu.hpp"
#include "../support/ref_oracle.hpp"
#include "hash.hpp"
#include "pipeline_llama.hpp"

#include <mpi.h>

#include <cstdint>
#include <vector>

using namespace backplane;

namespace mpi_pipeline_test {

mpi::communicator world() {
    auto c = mpi::communicator::world({.timeout = std::chrono::seconds(60)});
    REQUIRE(c);
    return std::move(*c);
}

/// The same bits on every rank.
void check_same_on_every_rank(mpi::communicator& c, const std::vector<float>& v) {
    std::uint64_t h = test::fnv(v.data(), v.size() * sizeof(float));
    std::vector<std::uint64_t> all(static_cast<std::size_t>(c.size()));
    REQUIRE(c.all_gather(std::as_bytes(std::span(&h, 1)), std::as_writable_bytes(std::span(all))));
    for (std::uint64_t x : all) CHECK(x == h);
}

test::llama_params params_for(int n_stages) {
    return {.n_layer = 2 * n_stages, .n_embd = 128, .n_head = 4, .n_ff = 256, .n_tokens = 7, .n_vocab = 300};
}

TEST_CASE("pipeline over processes: the llama graph cut by layers equals one CPU, the same bits on every rank and in "
          "every compute",
          "[mpi][pipeline]") {
    auto c = world();
    test::llama_params p = params_for(c.size());
    p.token_input = GENERATE(false, true);
    INFO("rank " << c.rank() << " of " << c.size() << ", token input " << p.token_input);
    const std::uint32_t seed = 777;
    const std::vector<float> ref = test::llama_on_cpu(p, seed);

    cpu_backend cpu({.n_threads = 1});
    auto pipe = mpi::pipeline::make(c, cpu, cpu);
    REQUIRE(pipe);
    test::llama_instance m(p, test::pipeline_stages(**pipe));
    REQUIRE(test::fill_llama_weights(m.model, seed));
    const std::vector<float> got = test::pipeline_logits(**pipe, m, seed);
    CHECK(test::nmse_of(ref, got) < 1e-6);
    check_same_on_every_rank(c, got);
    CHECK(test::pipeline_logits(**pipe, m, seed) == got); // again: the same bits

    // one split per stage, each in its rank's order; the activations crossed
    auto& sched = (*pipe)->scheduler();
    CHECK(sched.n_splits() == static_cast<std::size_t>(c.size()));
    for (std::size_t k = 0; k < sched.n_splits(); ++k) CHECK(sched.split_at(k).backend == k);
    const std::uint64_t activations = static_cast<std::uint64_t>(p.n_embd * p.n_tokens) * 4;
    const mpi::mailbox_stats st = (*pipe)->stats();
    if (c.rank() + 1 < c.size()) CHECK(st.bytes_sent >= 2 * activations);
    if (c.rank() > 0) CHECK(st.bytes_received >= 2 * activations);
    CHECK((*pipe)->owner(*m.g.back()) == c.size() - 1);
    CHECK((*pipe)->owner(*m.inputs.pos) == -1);
}

TEST_CASE("pipeline over processes: several graphs in flight with pipeline copies, the last one's logits as one CPU's",
          "[mpi][pipeline]") {
    auto c = world();
    const test::llama_params p = params_for(c.size());
    cpu_backend cpu({.n_threads = 1});
    auto pipe = mpi::pipeline::make(c, cpu, cpu, {.n_copies = 3});
    REQUIRE(pipe);
    test::llama_instance m(p, test::pipeline_stages(**pipe));
    REQUIRE(test::fill_llama_weights(m.model, 5));
    // four computes queued one after another: each rank's stage starts the next while
    // the later stages still compute the earlier ones
    for (std::uint32_t seed = 10; seed < 14; ++seed) {
        REQUIRE((*pipe)->alloc_graph(m.g));
        REQUIRE(test::fill_llama_inputs(p, m.inputs, seed));
        REQUIRE((*pipe)->compute_async(m.g));
    }
    const std::vector<float> got = test::read_logits(**pipe, m);
    // the reference: weights from seed 5, inputs from seed 13
    test::llama_instance ref(p);
    graph_allocator ga(cpu_buffer_type::instance());
    REQUIRE(ga.alloc_graph(ref.g));
    REQUIRE(test::fill_llama_weights(ref.model, 5));
    REQUIRE(test::fill_llama_inputs(p, ref.inputs, 13));
    REQUIRE(cpu.compute(ref.g));
    CHECK(test::nmse_of(tensor_get_all<float>(*ref.g.back()).value(), got) < 1e-6);
    check_same_on_every_rank(c, got);
    REQUIRE((*pipe)->synchronize());
}

TEST_CASE("pipeline over processes: another rank's tensors are not readable directly, but through read on every rank",
          "[mpi][pipeline]") {
    auto c = world();
    const test::llama_params p = params_for(c.size());
    cpu_backend cpu({.n_threads = 1});
    auto pipe = mpi::pipeline::make(c, cpu, cpu);
    REQUIRE(pipe);
    test::llama_instance m(p, test::pipeline_stages(**pipe));
    REQUIRE(test::fill_llama_weights(m.model, 1));
    (void)test::pipeline_logits(**pipe, m, 1);
    // the output projection lives on the last rank only
    const auto w = tensor_get_all<float>(*m.model.output);
    if (c.rank() == c.size() - 1) {
        CHECK(w);
    } else {
        REQUIRE_FALSE(w);
        CHECK(w.error().code() == errc::not_supported);
        CHECK_THAT(w.error().message(), Catch::Contains("lives on rank " + std::to_string(c.size() - 1)));
    }
    // a weight is read from its rank by every rank
    std::vector<float> first(4);
    REQUIRE((*pipe)->read(*m.model.output, first.data(), 0, 16));
    check_same_on_every_rank(c, first);
}

TEST_CASE("pipeline over processes: a rank that planned the graph otherwise is an error where its tensors arrive",
          "[mpi][pipeline]") {
    auto c = world();
    if (c.size() < 2) return;
    // ranks 0 and 1 only: the others would wait for rank 1, which stops at the error
    MPI_Comm pair = MPI_COMM_NULL;
    REQUIRE(MPI_Comm_split(c.native(), c.rank() < 2 ? 0 : MPI_UNDEFINED, c.rank(), &pair) == MPI_SUCCESS);
    if (pair != MPI_COMM_NULL) {
        {
            auto two = mpi::communicator::from(pair, {.timeout = std::chrono::seconds(60)});
            REQUIRE(two);
            const test::llama_params p = params_for(2);
            cpu_backend cpu({.n_threads = 1});
            auto pipe = mpi::pipeline::make(*two, cpu, cpu);
            REQUIRE(pipe);
            // rank 0 gives stage 0 one layer more than rank 1 thinks
            test::llama_instance m(p, test::pipeline_stages(**pipe, c.rank() == 0 ? 1 : 0));
            REQUIRE(test::fill_llama_weights(m.model, 1));
            REQUIRE((*pipe)->alloc_graph(m.g));
            REQUIRE(test::fill_llama_inputs(p, m.inputs, 1));
            const status s = (*pipe)->compute(m.g);
            if (c.rank() == 1) {
                REQUIRE_FALSE(s);
                CHECK(s.code() == errc::failed);
                CHECK_THAT(s.message(), Catch::Contains("rank 1 got from rank 0 a tensor of another plan"));
            } else {
                CHECK(s);
            }
        }
        MPI_Comm_free(&pair);
    }
    REQUIRE(c.barrier());
}

} // namespace mpi_pipeline_test

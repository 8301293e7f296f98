// A meta device whose devices live in several processes (meta_params::processes over
// mpi::process_group), on every rank of the job: the llama graph split over the ranks
// (one or two CPU parts each) equals one CPU, gives the same bits on every rank and in
// every compute; what cannot be read across processes, and a mismatch of the processes'
// part counts, are statuses; with a Vulkan part per rank, the partial sums go through
// host memory (the part's pinned host buffer).
#include <catch2/catch.hpp>

#include <backplane/mpi/process_group.hpp>
#if BACKPLANE_TEST_HAVE_VULKAN
#include <backplane/backends/vulkan.hpp>
#endif

#include "../backends/meta/meta_llama_check.hpp"
#include "hash.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

using namespace backplane;

namespace mpi_meta_test {

std::shared_ptr<mpi::process_group> processes() {
    auto pg = mpi::process_group::world({.timeout = std::chrono::seconds(60)});
    REQUIRE(pg);
    return *pg;
}

struct distributed_meta {
    std::shared_ptr<mpi::process_group> pg;
    meta_device dev;
    meta_backend be;
    distributed_meta(std::shared_ptr<mpi::process_group> p, int parts, meta::split_callback split)
        : pg(std::move(p)),
          dev(meta_device::make(test::cpu_parts(parts), {.split = std::move(split), .threads_per_device = 1, .processes = pg})
                  .value()),
          be(dev.make_backend().value()) {}
};

TEST_CASE("meta over processes: the llama graph equals one CPU, the same bits on every rank and in every compute",
          "[mpi][meta]") {
    test::llama_params p{.n_layer = 2, .n_embd = 256, .n_head = 8, .n_ff = 384, .n_tokens = 7, .n_vocab = 1000};
    p.token_input = GENERATE(false, true);
    const int parts = GENERATE(1, 2);
    const std::uint32_t seed = 4321;
    const std::vector<float> ref = test::llama_on_cpu(p, seed);
    auto pg = processes();
    INFO("rank " << pg->rank() << " of " << pg->size() << ", " << parts << " parts per rank, token input " << p.token_input);
    distributed_meta m(pg, parts, [&](const tensor& t, int n) { return test::split_llama(t, n, p.head_dim()); });
    CHECK(m.dev.n_devices() == parts);
    CHECK(m.dev.n_total_devices() == parts * pg->size());
    CHECK(m.dev.first_device() == parts * pg->rank());
    test::meta_llama ml(p, m.dev, m.be);
    REQUIRE(test::fill_llama(ml.model, ml.inputs, seed).ok());

    const auto got = test::compute_meta_llama(m.be, ml, p); // logits gathered from every rank
    CHECK(test::nmse_of(ref, got) < 1e-6);
    const std::uint64_t activations = static_cast<std::uint64_t>(p.n_embd * p.n_tokens) * 4;
    CHECK(m.be.stats().process_bytes >= 2 * 2 * static_cast<std::uint64_t>(p.n_layer) * activations);

    std::uint64_t h = test::fnv(got.data(), got.size() * 4);
    std::vector<std::uint64_t> all(static_cast<std::size_t>(pg->size()));
    REQUIRE(pg->all_gather(std::as_bytes(std::span(&h, 1)), std::as_writable_bytes(std::span(all))));
    for (std::uint64_t x : all) CHECK(x == h);
}

TEST_CASE("meta over processes: another process's slice of a weight cannot be read, and partial sums are not summed "
          "on read",
          "[mpi][meta]") {
    auto pg = processes();
    const std::int64_t rows = 4 * pg->size();
    distributed_meta m(pg, 1, [](const tensor& t, int n) {
        if (t.name == "w") return meta::split_state::even(1, t.ne[1], n);
        if (t.name == "p") return meta::split_state::partial();
        return meta::split_state::mirrored();
    });
    context wctx({.no_alloc = true});
    tensor* w = wctx.new_tensor(elem_type::f32, {8, rows});
    w->name = "w";
    tensor* part = wctx.new_tensor(elem_type::f32, {8});
    part->name = "p";
    auto bufs = alloc_tensors(wctx, m.dev.buffer_type(), buffer_usage::weights);
    REQUIRE(bufs);
    std::vector<float> values(static_cast<std::size_t>(8 * rows));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
    REQUIRE(tensor_set(*w, values)); // every rank writes its own rows
    // this rank's own rows read back; the whole tensor needs the others'
    const std::size_t row = 8 * 4, mine = static_cast<std::size_t>(pg->rank()) * row * 4;
    std::vector<float> own(row);
    REQUIRE(w->buffer->get_tensor(*w, own.data(), mine, row * 4));
    CHECK(std::memcmp(own.data(), values.data() + mine / 4, row * 4) == 0);
    const auto whole = tensor_get_all<float>(*w);
    REQUIRE_FALSE(whole);
    CHECK(whole.error().code() == errc::not_supported);
    CHECK_THAT(whole.error().message(), Catch::Contains("lives in another process"));

    std::vector<float> one(8, 1.0f);
    REQUIRE(meta_set_partial(*part, one.data(), meta::partial_write::divide));
    const auto sum = tensor_get_all<float>(*part);
    REQUIRE_FALSE(sum);
    CHECK(sum.error().code() == errc::not_supported);
}

TEST_CASE("meta over processes: every process must hold as many parts", "[mpi][meta]") {
    auto pg = processes();
    const int parts = pg->rank() == 0 ? 1 : 2;
    auto dev = meta_device::make(test::cpu_parts(parts), {.processes = pg});
    REQUIRE_FALSE(dev);
    CHECK(dev.error().code() == errc::invalid_argument);
    CHECK_THAT(dev.error().message(), Catch::Contains("every process must have as many"));
}

#if BACKPLANE_TEST_HAVE_VULKAN
TEST_CASE("meta over processes with a Vulkan part per rank: the llama graph equals one CPU, the partial sums staged "
          "through host memory",
          "[mpi][meta][vulkan]") {
    auto vk = vulkan_device::open({.index = 0});
    std::uint64_t have = vk ? 1 : 0;
    auto pg = processes();
    REQUIRE(pg->comm().all_reduce_sum(std::span(&have, 1)));
    if (have != static_cast<std::uint64_t>(pg->size())) {
        WARN("not every rank has a Vulkan device, skipping"
             << (vk ? std::string() : ": " + vk.error().describe()));
        return;
    }
    test::llama_params p{.n_layer = 1, .n_embd = 128, .n_head = 4, .n_ff = 256, .n_tokens = 5, .n_vocab = 512};
    const std::uint32_t seed = 99;
    const std::vector<float> ref = test::llama_on_cpu(p, seed);
    auto dev = meta_device::make({any_device::make(std::move(*vk))},
                                 {.split = [&](const tensor& t, int n) { return test::split_llama(t, n, p.head_dim()); },
                                  .processes = pg})
                   .value();
    auto be = dev.make_backend().value();
    test::meta_llama ml(p, dev, be);
    REQUIRE(test::fill_llama(ml.model, ml.inputs, seed));
    const auto got = test::compute_meta_llama(be, ml, p);
    CHECK(test::nmse_of(ref, got) < 1e-6);
    CHECK(be.stats().process_bytes > 0);
}
#endif

} // namespace mpi_meta_test

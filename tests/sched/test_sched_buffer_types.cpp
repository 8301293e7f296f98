// scheduler_params::buffer_types: a per-backend override of the buffer type of the
// scheduler's compute buffers (ggml's `bufts`), e.g. pinned host memory for the CPU when a
// GPU is present. Here a second host buffer type (the counting test buffer type) stands
// in for the pinned one, beside a test device whose memory is private.

#include "sched_fixtures.hpp"

#include "../support/alloc_failing_buffer_type.hpp"

#include <optional>
#include <string>
#include <vector>

using namespace backplane;
using namespace backplane::test;

namespace {

/// x (input) -> mul_mat with weights on TEST0 -> soft_max, which TEST0 refuses: so x is
/// copied CPU -> TEST0 and the product TEST0 -> CPU.
struct offload_graph {
    test_device dev{{.name = "TEST0", .supports = [](const tensor& t) { return t.op != op_kind::soft_max; }}};
    test_backend tb = dev.make_backend();
    cpu_backend cpu;
    context wctx{context_params{.no_alloc = true}};
    buffer_list wbufs;
    context ctx{context_params{.no_alloc = true}};
    tensor* w = nullptr;
    tensor* x = nullptr;
    tensor* y = nullptr;
    tensor* z = nullptr;

    offload_graph() {
        w = wctx.new_tensor_2d(elem_type::f32, 8, 8);
        w->name = "w";
        auto r = alloc_tensors(wctx, dev.buffer_type(), buffer_usage::weights);
        REQUIRE(r);
        wbufs = std::move(*r);
        fill_seeded(*w, 31);
        x = new_input(ctx, 8, 2, "x");
        y = mul_mat(ctx, w, x);
        y->name = "y";
        z = soft_max(ctx, y);
        z->name = "z";
        z->set_output();
    }

    /// The result computed on the host alone.
    static std::vector<float> expected() {
        context host(context_params{.no_alloc = false});
        tensor* hw = host_filled(host, 8, 8, 31);
        tensor* hx = host_filled(host, 8, 2, 32);
        return reference_values(soft_max(host, mul_mat(host, hw, hx)));
    }
};

} // namespace

TEST_CASE("a buffer type override holds the backend's compute buffer and the split inputs copied to it",
          "[sched][buffer_types]") {
    offload_graph f;
    failing_buffer_type pinned({.name = "pinned"}); // a second host buffer type
    scheduler sched(scheduler_params{.buffer_types = {std::nullopt, buffer_type_ref(pinned)}}, f.tb, f.cpu);
    CHECK(sched.buffer_type(0) == buffer_type_ref(f.dev.buffer_type()));
    CHECK(sched.buffer_type(1) == buffer_type_ref(pinned));

    REQUIRE(sched.alloc_graph(graph(f.z)));
    REQUIRE(sched.n_splits() == 2);
    REQUIRE(sched.split_at(1).backend == 1);
    // the CPU's nodes, its graph input and the copy of y it reads live in the override
    CHECK(pinned.live_buffers() >= 1);
    REQUIRE(f.z->buffer != nullptr);
    CHECK(f.z->buffer->type() == buffer_type_ref(pinned));
    REQUIRE(f.x->buffer != nullptr);
    CHECK(f.x->buffer->type() == buffer_type_ref(pinned));
    const auto cpu_inputs = sched.split_at(1).inputs;
    REQUIRE(cpu_inputs.size() == 1);
    CHECK(cpu_inputs[0] == f.y);
    // the plan names the override beside the CPU's buffer only
    const std::string plan = sched.describe(1);
    CHECK(plan.find("'y' (TEST0 -> CPU") != std::string::npos);
    CHECK(plan.find("(pinned)") != std::string::npos);
    CHECK(plan.find("(TEST0)") == std::string::npos);

    // the copy of y that z reads (z's shadow in the split the CPU computes): in the
    // override too; z itself still reads y
    const graph g(f.z);
    REQUIRE(sched.alloc_graph(g));
    const tensor* copy = nullptr;
    for (std::size_t k = 0; k < sched.n_splits(); ++k) {
        const split_info sp = sched.split_at(k);
        for (std::size_t i = sp.first; i < sp.last; ++i)
            if (g.nodes()[i] == f.z) copy = sp.nodes[i - sp.first]->src[0];
    }
    REQUIRE(copy != nullptr);
    CHECK(copy != f.y);
    CHECK(f.z->src[0] == f.y);
    REQUIRE(copy->buffer != nullptr);
    CHECK(copy->buffer->type() == buffer_type_ref(pinned));
    // the user's graph is never rewired, not even while it computes
    const tensor* z_reads = nullptr;
    sched.set_eval_callback([&](tensor& t, bool ask) {
        if (!ask && &t == f.z) z_reads = t.src[0];
        return true;
    });
    fill_seeded(*f.x, 32);
    REQUIRE(sched.compute(g));
    CHECK(z_reads == f.y);
    CHECK(nmse_of(offload_graph::expected(), read_f32(*f.z)) < 1e-10);
    // the device's compute buffer keeps the device's own type
    CHECK(f.y->buffer->type() == buffer_type_ref(f.dev.buffer_type()));
}

TEST_CASE("without an override the compute buffers have the backends' default types", "[sched][buffer_types]") {
    offload_graph f;
    failing_buffer_type pinned({.name = "pinned"});
    scheduler sched(scheduler_params{.buffer_types = {std::nullopt}}, f.tb, f.cpu); // an entry may be empty
    CHECK(sched.buffer_type(1) == buffer_type_ref(f.cpu.buffer_type()));
    REQUIRE(sched.alloc_graph(graph(f.z)));
    CHECK(f.z->buffer->type() == buffer_type_ref(f.cpu.buffer_type()));
    CHECK(pinned.attempts() == 0);
    CHECK(sched.describe(1).find("(CPU)") == std::string::npos);
}

TEST_CASE("a buffer type override its backend cannot use is a clear error", "[sched][buffer_types]") {
    offload_graph f;
    failing_buffer_type pinned({.name = "pinned"});
    auto message = [](auto&& make) -> std::string {
        try {
            make();
        } catch (const backplane::error& e) {
            CHECK(e.code() == errc::invalid_argument);
            return e.what();
        }
        FAIL("no error");
        return {};
    };
    // the CPU cannot read the test device's private memory
    std::string m = message([&] {
        scheduler s(scheduler_params{.buffer_types = {std::nullopt, buffer_type_ref(f.dev.buffer_type())}}, f.tb,
                    f.cpu);
    });
    CHECK_THAT(m, Catch::Contains("backend 1 ('CPU')") && Catch::Contains("buffer type 'TEST0'"));
    // the test device uses only its own memory
    m = message([&] { scheduler s(scheduler_params{.buffer_types = {buffer_type_ref(pinned)}}, f.tb, f.cpu); });
    CHECK_THAT(m, Catch::Contains("backend 0 ('TEST0')") && Catch::Contains("buffer type 'pinned'"));
    // one entry per backend at most
    m = message([&] {
        scheduler s(scheduler_params{.buffer_types = {std::nullopt, std::nullopt, std::nullopt}}, f.tb, f.cpu);
    });
    CHECK_THAT(m, Catch::Contains("3 buffer type overrides for 2 backend(s)"));
    // the run-time backend set validates the same way
    m = message([&] {
        dynamic_scheduler s(dynamic_backend_set({backend_ref(f.tb), backend_ref(f.cpu)}),
                            scheduler_params{.buffer_types = {std::nullopt, buffer_type_ref(f.dev.buffer_type())}});
    });
    CHECK_THAT(m, Catch::Contains("does not support buffer type 'TEST0'"));
    CHECK(pinned.attempts() == 0);
}

TEST_CASE("a node that reads a copy and is changed after alloc_graph computes as changed", "[sched][shadows]") {
    offload_graph f; // z (on the CPU) reads the copy of y: it runs as its shadow
    scheduler sched(f.tb, f.cpu);
    const graph g(f.z);
    REQUIRE(sched.alloc_graph(g));
    fill_seeded(*f.x, 32);
    REQUIRE(sched.compute(g));
    CHECK(nmse_of(offload_graph::expected(), read_f32(*f.z)) < 1e-10);

    f.z->set_param<float>(0, 2.0f); // soft_max's scale
    fill_seeded(*f.x, 32);
    REQUIRE(sched.compute(g));
    context host(context_params{.no_alloc = false});
    tensor* hw = host_filled(host, 8, 8, 31);
    tensor* hx = host_filled(host, 8, 2, 32);
    const std::vector<float> want = reference_values(soft_max(host, mul_mat(host, hw, hx), nullptr, 2.0f));
    CHECK(nmse_of(want, read_f32(*f.z)) < 1e-10);
    CHECK(nmse_of(offload_graph::expected(), read_f32(*f.z)) > 1e-4);
}

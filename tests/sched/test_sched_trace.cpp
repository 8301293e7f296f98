// Execution traces (scheduler_params::trace): one compute event per split and one copy
// event per split with inputs, in order and not overlapping, with the right counts and
// bytes; the Chrome trace JSON and the per-backend table name every backend.

#include "sched_fixtures.hpp"

#include <algorithm>
#include <string>

using namespace backplane;
using namespace backplane::test;

namespace {

/// x (host input) -> scale on the CPU -> mul_mat on the test device (its weights) ->
/// add on the CPU (host bias): three splits, the last two with inputs.
struct traced_graph {
    test_device dev{{.name = "TEST0", .supports = [](const tensor& t) { return t.op != op_kind::scale && t.op != op_kind::add; }}};
    test_backend tb = dev.make_backend();
    cpu_backend cpu{cpu_backend_params{.n_threads = 1}};
    context wctx{context_params{.no_alloc = true}};
    context hctx{context_params{.no_alloc = false}};
    context ctx{context_params{.no_alloc = true}};
    tensor* w = wctx.new_tensor_2d(elem_type::f32, 16, 16);
    buffer_list wbufs;
    tensor* x = nullptr;
    tensor* out = nullptr;
    graph g;

    traced_graph() {
        auto b = alloc_tensors(wctx, dev.buffer_type(), buffer_usage::weights);
        REQUIRE(b);
        wbufs = std::move(*b);
        fill_seeded(*w, 1);
        tensor* bias = hctx.new_tensor_2d(elem_type::f32, 16, 1);
        fill_seeded(*bias, 2);
        x = ctx.new_tensor_2d(elem_type::f32, 16, 4);
        x->set_input();
        out = add(ctx, mul_mat(ctx, w, scale(ctx, x, 0.5f, 0.0f)), bias);
        out->set_output();
        g = graph(out);
    }
};

} // namespace

TEST_CASE("sched trace: every split's copies and compute, in order, with counts and bytes", "[sched][trace]") {
    traced_graph t;
    scheduler sched(scheduler_params{.trace = true}, t.tb, t.cpu);
    REQUIRE(sched.alloc_graph(t.g));
    fill_seeded(*t.x, 3);
    REQUIRE(sched.compute(t.g));
    REQUIRE(sched.n_splits() == 3);
    const auto events = sched.trace();
    std::size_t computes = 0, copies = 0, nodes = 0;
    std::int64_t last_end = 0;
    for (const trace_event& e : events) {
        INFO("split " << e.split << (e.what == trace_event::kind::copy ? " copy" : " compute"));
        CHECK(e.start_ns >= last_end); // the pieces follow one another
        CHECK(e.end_ns >= e.start_ns);
        last_end = e.end_ns;
        const split_info sp = sched.split_at(e.split);
        CHECK(e.backend == sp.backend);
        if (e.what == trace_event::kind::copy) {
            ++copies;
            CHECK(e.items == sp.inputs.size());
            std::size_t bytes = 0;
            for (const tensor* in : sp.inputs) bytes += in->nbytes();
            CHECK(e.bytes == bytes);
        } else {
            ++computes;
            CHECK(e.items == sp.last - sp.first);
            nodes += e.items;
        }
    }
    CHECK(computes == 3);
    std::size_t with_inputs = 0;
    for (std::size_t k = 0; k < sched.n_splits(); ++k) with_inputs += sched.split_at(k).inputs.empty() ? 0 : 1;
    CHECK(copies == with_inputs);
    CHECK(nodes == t.g.n_nodes());

    const std::string json = sched.trace_json();
    CHECK(json.starts_with("{\"displayTimeUnit\":\"ms\",\"traceEvents\":["));
    CHECK(json.find("\"TEST0\"") != std::string::npos);
    CHECK(json.find("\"CPU\"") != std::string::npos);
    CHECK(static_cast<std::size_t>(std::count(json.begin(), json.end(), '{')) ==
          static_cast<std::size_t>(std::count(json.begin(), json.end(), '}')));
    CHECK(static_cast<std::size_t>(std::count(json.begin(), json.end(), '"')) % 2 == 0);
    CHECK(static_cast<std::size_t>(std::count(json.begin(), json.end(), 'X')) >= events.size()); // "ph":"X" each
    const std::string table = sched.trace_table();
    CHECK(table.find("TEST0") != std::string::npos);
    CHECK(table.find("CPU") != std::string::npos);
    CHECK(table.find("total:") != std::string::npos);

    // the next compute starts a new trace; the results are those of an untraced scheduler
    REQUIRE(sched.compute(t.g));
    CHECK(sched.trace().size() == events.size());
    const auto traced = read_f32(*t.out);
    traced_graph u;
    scheduler plain(u.tb, u.cpu);
    REQUIRE(plain.alloc_graph(u.g));
    fill_seeded(*u.x, 3);
    REQUIRE(plain.compute(u.g));
    CHECK(read_f32(*u.out) == traced);
    CHECK(plain.trace().empty());
}

TEST_CASE("sched trace: JSON strings are escaped", "[sched][trace]") {
    const std::vector<trace_event> events = {{trace_event::kind::compute, 0, 0, 1, 0, 0, 1000}};
    const std::vector<std::string> names = {"a \"quoted\"\\name\n"};
    const std::string json = trace_to_chrome_json(events, names);
    CHECK(json.find("a \\\"quoted\\\"\\\\name\\n") != std::string::npos);
    CHECK(json.find("\"dur\":1.000") != std::string::npos);
}

// The copy utilities and the conformance runner, on the host and the non-host test device:
// tensor_copy and tensor_copy_async in every direction among host data, CPU buffers and
// test devices (strided views whose holes must survive, staged chunks, errors);
// graph_copy (views, one buffer, fill bytes, guards, allocation failure, the llama graph
// on another backend); compare_backends against a deliberately broken test device (one
// op scaled by 1 + 2^-10); the conformance runner (pass, fail, NaN, unsupported),
// shrinking a shape-dependent bug to its smallest case with the same seed, the
// catalogue's determinism; enabled_backends.

#include "../support/device_copy_cases.hpp"
#include "../support/llama_cpu.hpp"
#include "../support/llama_graph.hpp"
#include "../support/ref_oracle.hpp"
#include "../support/test_backend.hpp"

#include <backplane/backplane.hpp>
#include <backplane/conformance.hpp>
#include <backplane/enabled.hpp>
#include <backplane/sched.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

using namespace backplane;
using backplane::test::bytes_of;
using backplane::test::random_bytes;
namespace cf = backplane::conformance;
using backplane::test::test_backend;
using backplane::test::test_device;

namespace {

enum class where { host_data, cpu_buffer, device_a, device_b };
const char* name_of(where w) {
    switch (w) {
    case where::host_data:
        return "host data";
    case where::cpu_buffer:
        return "CPU buffer";
    case where::device_a:
        return "test device A";
    case where::device_b:
        return "test device B";
    }
    return "?";
}

/// Tensors placed where a test asks, each in a buffer of its own.
struct places {
    test_device dev_a{{.name = "TA"}};
    test_device dev_b{{.name = "TB"}};
    context host;
    context meta{context_params{.no_alloc = true}};
    std::vector<buffer_ptr> buffers;

    tensor* make(where w, elem_type t, const std::array<std::int64_t, 4>& ne) {
        if (w == where::host_data)
            return host.new_tensor(t, std::span<const std::int64_t>(ne));
        tensor* x = meta.new_tensor(t, std::span<const std::int64_t>(ne));
        buffer_type_ref bt = w == where::cpu_buffer ? buffer_type_ref(cpu_buffer_type::instance())
                             : w == where::device_a ? buffer_type_ref(dev_a.buffer_type())
                                                    : buffer_type_ref(dev_b.buffer_type());
        auto buf = bt.allocate(bt.alloc_size(*x) + 256);
        REQUIRE(buf);
        tensor_allocator ta(**buf);
        REQUIRE(ta.allocate(*x).ok());
        buffers.push_back(std::move(*buf));
        return x;
    }
};

} // namespace

TEST_CASE(
    "tensor_copy: contiguous tensors in every direction among host data, CPU and device buffers") {
    const where all[] = {where::host_data, where::cpu_buffer, where::device_a, where::device_b};
    for (const elem_type type : {elem_type::f32, elem_type::q8_0, elem_type::f16})
        for (where from : all)
            for (where to : all) {
                INFO(name_of(from) << " -> " << name_of(to) << ", " << to_string(type));
                places p;
                tensor* src = p.make(from, type, {64, 5, 3, 1});
                tensor* dst = p.make(to, type, {64, 5, 3, 1});
                const auto data = random_bytes(src->nbytes(), 7);
                REQUIRE(tensor_set(*src, data.data(), 0, data.size()).ok());
                p.dev_a.reset_counters();
                REQUIRE(tensor_copy(*src, *dst).ok());
                if (from == where::device_a &&
                    to == where::device_a) { // the device-side path, no host staging
                    CHECK(p.dev_a.counters().n_copies() == 1);
                    CHECK(p.dev_a.counters().n_gets() == 0);
                }
                CHECK(bytes_of(*dst) == data);
            }
}

TEST_CASE("tensor_copy: strided views copy their elements and leave the holes alone") {
    for (where to : {where::host_data, where::cpu_buffer, where::device_a})
        for (std::size_t max_runs :
             {std::size_t{1}, std::size_t{1000}}) { // read-modify-write, then run by run
            INFO("to " << name_of(to) << ", max_device_runs " << max_runs);
            places p;
            tensor* sroot = p.make(where::device_b, elem_type::f32, {9, 7, 2, 1});
            tensor* droot = p.make(to, elem_type::f32, {9, 7, 2, 1});
            const auto data = random_bytes(sroot->nbytes(), 3);
            REQUIRE(tensor_set(*sroot, data.data(), 0, data.size()).ok());
            const std::vector<std::uint8_t> fill(droot->nbytes(), 0x5a);
            REQUIRE(tensor_set(*droot, fill.data(), 0, fill.size()).ok());
            // the transposed [7, 9] views of rows 0 of both, and strided rows
            tensor* sv =
                transpose(p.meta, view_3d(p.meta, sroot, 9, 7, 1, sroot->nb[1], sroot->nb[2], 0));
            tensor* dv =
                transpose(p.meta, view_3d(p.meta, droot, 9, 7, 1, droot->nb[1], droot->nb[2], 0));
            REQUIRE(init_view(*sv).ok());
            if (dv->data == nullptr)
                REQUIRE(init_view(*dv).ok());
            REQUIRE(tensor_copy(*sv, *dv, {.max_device_runs = max_runs}).ok());
            const auto got = bytes_of(*droot);
            // batch 0 copied, batch 1 (the hole of the view) still 0x5a
            const std::size_t half = droot->nbytes() / 2;
            CHECK(std::equal(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(half),
                             data.begin()));
            CHECK(std::all_of(got.begin() + static_cast<std::ptrdiff_t>(half), got.end(),
                              [](std::uint8_t b) { return b == 0x5a; }));

            // every other row of batch 1: the rows between keep their bytes
            tensor* srows = view_2d(p.meta, sroot, 9, 3, 2 * sroot->nb[1], sroot->nb[2]);
            tensor* drows = view_2d(p.meta, droot, 9, 3, 2 * droot->nb[1], droot->nb[2]);
            REQUIRE(init_view(*srows).ok());
            if (drows->data == nullptr)
                REQUIRE(init_view(*drows).ok());
            REQUIRE(tensor_copy(*srows, *drows, {.max_device_runs = max_runs}).ok());
            const auto got2 = bytes_of(*droot);
            const std::size_t row = 9 * 4;
            for (std::size_t r = 0; r < 7; ++r) {
                const std::size_t at = half + r * row;
                const bool copied = r % 2 == 0 && r / 2 < 3;
                INFO("row " << r);
                if (copied)
                    CHECK(std::equal(got2.begin() + static_cast<std::ptrdiff_t>(at),
                                     got2.begin() + static_cast<std::ptrdiff_t>(at + row),
                                     data.begin() + static_cast<std::ptrdiff_t>(at)));
                else
                    CHECK(std::all_of(got2.begin() + static_cast<std::ptrdiff_t>(at),
                                      got2.begin() + static_cast<std::ptrdiff_t>(at + row),
                                      [](std::uint8_t b) { return b == 0x5a; }));
            }
        }
}

TEST_CASE("tensor_copy: device to device through a bounded staging area") {
    places p;
    tensor* src = p.make(where::device_a, elem_type::f32, {1000, 3, 1, 1});
    tensor* dst = p.make(where::device_b, elem_type::f32, {1000, 3, 1, 1});
    const auto data = random_bytes(src->nbytes(), 11);
    REQUIRE(tensor_set(*src, data.data(), 0, data.size()).ok());
    p.dev_a.reset_counters();
    REQUIRE(tensor_copy(*src, *dst, {.staging_chunk = 1000}).ok());
    CHECK(bytes_of(*dst) == data);
    CHECK(p.dev_a.counters().n_gets() == 12); // 12000 bytes in chunks of 1000
}

TEST_CASE("tensor_copy: errors are statuses") {
    places p;
    tensor* a = p.make(where::host_data, elem_type::f32, {16, 4, 1, 1});
    tensor* b = p.make(where::device_a, elem_type::f32, {16, 2, 2, 1});
    status s = tensor_copy(*a, *b);
    CHECK(s.code() == errc::invalid_argument);
    CHECK_THAT(s.message(), Catch::Contains("layouts differ") && Catch::Contains("cpy"));

    tensor* c = p.make(where::device_a, elem_type::f16, {16, 4, 1, 1});
    CHECK(tensor_copy(*a, *c).code() == errc::invalid_argument);

    tensor* unplaced = p.meta.new_tensor(elem_type::f32, {16, 4});
    s = tensor_copy(*a, *unplaced);
    CHECK(s.code() == errc::invalid_argument);
    CHECK_THAT(s.message(), Catch::Contains("no data"));

    // overlapping views of one tensor
    tensor* v0 = view_1d(p.host, a, 32, 0);
    tensor* v1 = view_1d(p.host, a, 32, 16);
    s = tensor_copy(*v0, *v1);
    CHECK(s.code() == errc::invalid_argument);
    CHECK_THAT(s.message(), Catch::Contains("overlap"));
    // a tensor onto itself: nothing to do
    CHECK(tensor_copy(*a, *a).ok());
}

TEST_CASE("tensor_copy_async: queued on the destination's stream, or the synchronous fallback") {
    places p;
    test_backend ba = p.dev_a.make_backend();
    test_backend bb = p.dev_b.make_backend();
    cpu_backend cpu;
    tensor* h = p.make(where::host_data, elem_type::f32, {256, 4, 1, 1});
    tensor* a = p.make(where::device_a, elem_type::f32, {256, 4, 1, 1});
    tensor* b = p.make(where::device_b, elem_type::f32, {256, 4, 1, 1});
    const auto data = random_bytes(h->nbytes(), 5);
    std::memcpy(h->data, data.data(), data.size());

    ba.pause(); // queued, so nothing happens before the stream runs
    REQUIRE(tensor_copy_async(cpu, ba, *h, *a).ok());
    CHECK(ba.counters().n_copies() == 0);
    REQUIRE(ba.synchronize().ok());
    CHECK(ba.counters().n_copies() == 1);
    CHECK(bytes_of(*a) == data);

    // device A -> device B: B's stream cannot read A's memory (no peer copy): both
    // streams are synchronized and the copy is staged through the host at once
    REQUIRE(tensor_copy_async(ba, bb, *a, *b).ok());
    CHECK(bb.counters().n_copy_async_refused() == 1);
    CHECK(bytes_of(*b) == data);

    CHECK(tensor_copy_async(ba, bb, *h, *p.make(where::device_b, elem_type::f32, {4, 4, 1, 1}))
              .code() == errc::invalid_argument);
}

namespace {

/// x [64, 6] f32, w [64, 5] f16 (weights), a transposed view and its cont, a mul_mat.
struct small_graph {
    context ctx;
    tensor* x;
    tensor* w;
    tensor* y;
    graph g;
    small_graph() {
        x = ctx.new_tensor(elem_type::f32, {64, 6});
        w = ctx.new_tensor(elem_type::f16, {64, 5});
        x->name = "x";
        w->name = "w";
        std::mt19937 rng(1);
        test::fill_random(*x, rng);
        test::fill_random(*w, rng);
        tensor* xt = cont(ctx, transpose(ctx, x)); // [6, 64]
        tensor* back = cont(ctx, transpose(ctx, xt));
        y = mul_mat(ctx, w, back); // [5, 6]
        y->name = "y";
        g.build_forward(y);
    }
};

} // namespace

TEST_CASE("graph_copy: one buffer, views on their copied sources, data copied, same result on "
          "another backend") {
    small_graph s;
    test_device dev({.name = "TD"});
    test_backend be = dev.make_backend();
    auto copy = graph_copy(be, s.g);
    REQUIRE(copy);
    CHECK(dev.live_buffers() == 1);
    const graph& g2 = copy->graph();
    REQUIRE(g2.n_nodes() == s.g.n_nodes());
    REQUIRE(g2.n_leafs() == s.g.n_leafs());
    for (std::size_t i = 0; i < s.g.n_nodes(); ++i) {
        const tensor* o = s.g.nodes()[i];
        const tensor* c = g2.nodes()[i];
        INFO(o->name << " " << to_string(o->op));
        CHECK(copy->find(o) == c);
        CHECK(c->op == o->op);
        CHECK(same_layout(*c, *o));
        CHECK(c->buffer == copy->buffer());
        if (o->view_src != nullptr) {
            CHECK(c->view_src == copy->find(o->view_src));
            CHECK(c->view_offs == o->view_offs);
        }
        for (std::size_t j = 0; j < max_srcs; ++j)
            CHECK(c->src[j] == copy->find(o->src[j]));
    }
    CHECK(bytes_of(copy->at(*s.x)) == bytes_of(*s.x));
    CHECK(bytes_of(copy->at(*s.w)) == bytes_of(*s.w));
    CHECK(bytes_of(copy->at(*s.y)) == bytes_of(*s.y)); // every tensor with data: its bytes

    cpu_backend cpu;
    REQUIRE(cpu.compute(s.g).ok());
    REQUIRE(be.compute(g2).ok());
    REQUIRE(be.synchronize().ok());
    CHECK(test::nmse_of(tensor_read_f32(*s.y).value(), tensor_read_f32(copy->at(*s.y)).value()) <
          1e-10);
    copy = result<copied_graph>(status(errc::invalid_argument, "gone"));
    CHECK(dev.live_buffers() == 0); // freed as one object
}

TEST_CASE("graph_copy: guard bytes name a tensor written past its end") {
    small_graph s;
    test_device dev({.name = "TD"});
    auto copy = graph_copy(dev.buffer_type(), s.g, {.guard_bytes = 64});
    REQUIRE(copy);
    CHECK(copy->guard_count() == 2 * (s.g.n_leafs() + 3)); // x, w and three computed nodes
    REQUIRE(copy->check_guards().ok());
    // a rogue write of 8 bytes just past w's copy
    tensor& w2 = copy->at(*s.w);
    context rogue;
    tensor* past = rogue.new_tensor(elem_type::f32, {2});
    place_like(*past, w2, static_cast<std::byte*>(w2.data) + w2.nbytes());
    const float junk[2] = {1.0f, 2.0f};
    REQUIRE(tensor_set(*past, junk, 0, sizeof junk).ok());
    const status g = copy->check_guards();
    CHECK(g.code() == errc::out_of_range);
    CHECK_THAT(g.message(), Catch::Contains("after") && Catch::Contains("'w'"));
}

TEST_CASE("graph_copy: an allocation failure is a status and nothing leaks") {
    small_graph s;
    test_device dev({.name = "TD", .fail_alloc_above = 64});
    auto copy = graph_copy(dev.buffer_type(), s.g);
    REQUIRE(!copy);
    CHECK(copy.error().code() == errc::alloc_failed);
    CHECK_THAT(copy.error().message(), Catch::Contains("graph_copy") && Catch::Contains("bytes"));
    CHECK(dev.live_buffers() == 0);
}

TEST_CASE("graph_copy: the llama reference graph, computed on CPU, copied onto the test device "
          "computes the same") {
    const auto p = test::small_llama();
    test::llama_instance s(p);
    test_device dev({.name = "TD"});
    test_backend be = dev.make_backend();
    {
        // uncomputed and unallocated: the weights come along, the rest holds the fill byte
        auto blank = graph_copy(be, s.g);
        REQUIRE(blank);
        const auto logits = tensor_read_f32(blank->at(*s.g.back())).value();
        CHECK(std::all_of(logits.begin(), logits.end(), [](float v) { return std::isnan(v); }));
        const tensor* w = s.model.global_weights().front();
        CHECK(bytes_of(blank->at(*w)) == bytes_of(*w));
        CHECK(blank->at(*w).buffer == blank->buffer());
    }
    graph_allocator ga(cpu_buffer_type::instance());
    REQUIRE(ga.alloc_graph(s.g).ok());
    REQUIRE(test::fill_llama(s.model, s.inputs, 42).ok());
    cpu_backend cpu({.n_threads = 2});
    REQUIRE(cpu.compute(s.g).ok());
    const auto expected = tensor_get_all<float>(*s.g.back()).value();

    auto copy = graph_copy(be, s.g); // a computed graph: the logits come along too
    REQUIRE(copy);
    CHECK(tensor_get_all<float>(copy->at(*s.g.back())).value() == expected);
    // wipe the copied logits, compute on the test device
    tensor& out = copy->at(*s.g.back());
    REQUIRE(tensor_memset(out, 0xff, 0, out.nbytes()).ok());
    REQUIRE(be.compute(copy->graph()).ok());
    REQUIRE(be.synchronize().ok());
    CHECK(test::nmse_of(expected, tensor_get_all<float>(out).value()) < 1e-10);
}

static_assert(std::is_same_v<std::tuple_element_t<std::tuple_size_v<enabled_backends> - 1, enabled_backends>, cpu_backend>);
static_assert(is_enabled_backend<cpu_backend>);
static_assert(!is_enabled_backend<test_backend>);
static_assert(sizeof(with_enabled_backends<scheduler>) > 0); // the CPU last: a valid scheduler

namespace {

/// 2 layers, n_embd 64: enough nodes of every kind, quick on the reference kernels.
test::llama_params tiny_llama() {
    return {.n_layer = 2,
            .n_embd = 64,
            .n_head = 4,
            .n_ff = 160,
            .n_tokens = 4,
            .n_vocab = 96,
            .token_input = true};
}

/// Multiplies every element of nodes of op `op` by 1 + 2^-10.
std::function<void(tensor&)> scale_op(op_kind op) {
    return [op](tensor& t) {
        if (t.op != op || t.type != elem_type::f32)
            return;
        const float k = 1.0f + std::ldexp(1.0f, -10);
        for (std::int64_t i = 0; i < t.nelements(); ++i)
            static_cast<float*>(t.data)[i] *= k; // contiguous result
    };
}

/// The graph's NMSE per computed node, in the llama graph on CPU vs a test device.
/// whole_graph: compute it all at once and compare only the output.
std::vector<std::pair<std::size_t, double>> nmse_per_node(test_device& dev, compare_mode mode,
                                                          bool whole_graph = false) {
    test::llama_instance s(tiny_llama());
    graph_allocator ga(cpu_buffer_type::instance());
    REQUIRE(ga.alloc_graph(s.g).ok());
    REQUIRE(test::fill_llama(s.model, s.inputs, 9).ok());
    cpu_backend cpu({.n_threads = 1, .reference = true});
    test_backend be = dev.make_backend();
    std::vector<std::pair<std::size_t, double>> out;
    std::vector<tensor*> want;
    if (whole_graph)
        want.push_back(s.g.back());
    auto r = compare_backends(cpu, be, s.g,
                              [&](std::size_t i, const tensor& a, const tensor& b) {
                                  out.emplace_back(i, test::nmse_of(tensor_read_f32(a).value(),
                                                                    tensor_read_f32(b).value()));
                                  return true;
                              },
                              {.nodes = want, .mode = mode});
    REQUIRE(r);
    CHECK(r->compared == out.size());
    CHECK(!r->stopped);
    return out;
}

} // namespace

TEST_CASE("compare_backends: node by node, isolated, flags exactly the broken op") {
    test_device good({.name = "GOOD"});
    for (auto [i, e] : nmse_per_node(good, compare_mode::isolated))
        CHECK(e == 0.0); // the same reference kernels

    test_device bad({.name = "BAD", .fault = scale_op(op_kind::mul)});
    test::llama_instance probe(tiny_llama());
    std::set<std::size_t> muls;
    for (std::size_t i = 0; i < probe.g.n_nodes(); ++i)
        if (probe.g.nodes()[i]->op == op_kind::mul)
            muls.insert(i);
    REQUIRE(!muls.empty());
    std::set<std::size_t> flagged;
    std::size_t compared = 0;
    for (auto [i, e] : nmse_per_node(bad, compare_mode::isolated)) {
        ++compared;
        if (e > 1e-9)
            flagged.insert(i);
        if (muls.contains(i))
            CHECK(e > 1e-7); // (2^-10)^2 = 9.5e-7
    }
    CHECK(flagged == muls);
    std::size_t computing = 0;
    for (const tensor* t : probe.g.nodes())
        computing += is_view_op(t->op) ? 0 : 1;
    CHECK(compared == computing); // views skipped, everything else compared
}

TEST_CASE(
    "compare_backends: chained lets the error spread, whole-graph mode compares the listed nodes") {
    test_device bad({.name = "BAD", .fault = scale_op(op_kind::mul)});
    std::size_t flagged = 0, muls = 0;
    test::llama_instance probe(tiny_llama());
    for (const tensor* t : probe.g.nodes())
        muls += t->op == op_kind::mul ? 1 : 0;
    for (auto [i, e] : nmse_per_node(bad, compare_mode::chained))
        flagged += e > 1e-9 ? 1 : 0;
    CHECK(flagged > muls);

    const auto whole = nmse_per_node(bad, compare_mode::isolated, true);
    REQUIRE(whole.size() == 1);
    CHECK(whole[0].first == 0);
    CHECK(whole[0].second > 1e-7);
}

TEST_CASE("compare_backends: errors are statuses naming the node and backend") {
    context ctx;
    tensor* a = ctx.new_tensor(elem_type::f32, {8, 2});
    tensor* pos = ctx.new_tensor(elem_type::i32, {2});
    tensor* y = rope(ctx, reshape(ctx, a, {8, 1, 2}), pos, 8);
    graph g(y);
    test_device no_rope(
        {.name = "NOROPE", .supports = [](const tensor& t) { return t.op != op_kind::rope; }});
    test_backend be = no_rope.make_backend();
    cpu_backend cpu;
    auto res = compare_backends(cpu, be, g,
                                [](std::size_t, const tensor&, const tensor&) { return true; });
    REQUIRE(!res);
    CHECK(res.error().code() == errc::not_supported);
    CHECK_THAT(res.error().message(), Catch::Contains("NOROPE") && Catch::Contains("rope"));
}

TEST_CASE("conformance: the catalogue builds every family deterministically from its seed") {
    for (const cf::op_cases& f : cf::catalogue()) {
        INFO(f.name);
        const std::vector<elem_type> types = cf::plain_types(f);
        const auto list = cf::cases_for(f, types, 3, 5);
        REQUIRE(list.size() == 3);
        CHECK(list == cf::cases_for(f, types, 3, 5));
        for (const cf::case_spec& spec : list) {
            context c1, c2;
            auto b1 = cf::build(c1, spec);
            auto b2 = cf::build(c2, spec);
            REQUIRE(b1);
            REQUIRE(b2);
            // the same inputs, bit for bit
            graph g1(b1->out), g2(b2->out);
            REQUIRE(g1.n_leafs() == g2.n_leafs());
            for (std::size_t i = 0; i < g1.n_leafs(); ++i)
                CHECK(std::memcmp(g1.leafs()[i]->data, g2.leafs()[i]->data,
                                  g1.leafs()[i]->nbytes()) == 0);
        }
    }
    // an invalid spec is invalid, not an error
    context ctx;
    CHECK(!cf::build(
        ctx,
        {"mul_mat", {elem_type::q8_0, elem_type::f32}, {33, 2, 2, 1}, 0, 1})); // not whole blocks
    CHECK(!cf::build(ctx, {"no_such_op", {elem_type::f32}, {4, 1, 1, 1}, 0, 1}));
    CHECK(
        !cf::build(ctx, {"add", {elem_type::f32}, {4, 1, 1, 1}, 0, 1})); // one type for a binary op
}

TEST_CASE("conformance: the CPU fast paths pass a slice of the catalogue, a broken backend fails") {
    cpu_backend ref({.n_threads = 1, .reference = true});
    cpu_backend fast({.n_threads = 2});
    int run = 0;
    for (const cf::op_cases& f : cf::catalogue()) {
        const std::vector<elem_type> types = cf::plain_types(f);
        if (!cf::claimed(ref, f, types))
            continue;
        for (const cf::case_spec& spec : cf::cases_for(f, types, 2, 3)) {
            const cf::case_result r = cf::run_case(ref, fast, spec);
            INFO(cf::to_string(spec) << ": " << r.message);
            CHECK(r.result == cf::outcome::pass);
            ++run;
        }
    }
    CHECK(run >= 40);

    // NaN in one element: fails however small the NMSE
    test_device nan_dev({.name = "NAN", .fault = [](tensor& t) {
                             if (t.op == op_kind::sqr)
                                 static_cast<float*>(t.data)[0] =
                                     std::numeric_limits<float>::quiet_NaN();
                         }});
    test_backend nb = nan_dev.make_backend();
    const cf::case_result r =
        cf::run_case(ref, nb, {"sqr", {elem_type::f32}, {100, 3, 1, 1}, 0, 4});
    CHECK(r.result == cf::outcome::fail);
    CHECK(r.cmp.bad_values == 1);
    CHECK_THAT(r.message, Catch::Contains("NaN"));

    // unsupported is reported, not failed
    test_device no_rope(
        {.name = "NOROPE", .supports = [](const tensor& t) { return t.op != op_kind::rope; }});
    test_backend nr = no_rope.make_backend();
    CHECK(cf::run_case(ref, nr, {"rope", {elem_type::f32}, {8, 2, 3, 1}, 0, 4}).result ==
          cf::outcome::unsupported);
    CHECK(!cf::supports(nr, *cf::find_family("rope"), {elem_type::f32}));
    CHECK(cf::supports(nr, *cf::find_family("add"), {elem_type::f32, elem_type::f32}));
}

TEST_CASE("conformance: a bug in the vector tail of add is shrunk to its smallest case with the "
          "same seed") {
    // elements 8 and up of each row of add come out 0.05 too large
    test_device tail({.name = "TAIL", .fault = [](tensor& t) {
                          if (t.op != op_kind::add)
                              return;
                          auto* p = static_cast<float*>(t.data);
                          for (std::int64_t r = 0; r < t.nrows(); ++r)
                              for (std::int64_t i = 8; i < t.ne[0]; ++i)
                                  p[r * t.ne[0] + i] += 0.05f;
                      }});
    test_backend be = tail.make_backend();
    cpu_backend ref({.n_threads = 1, .reference = true});
    const cf::case_spec spec{"add", {elem_type::f32, elem_type::f32}, {65, 5, 3, 2}, 0, 1234};
    const cf::case_result r = cf::run_case(ref, be, spec);
    REQUIRE(r.result == cf::outcome::fail);
    const cf::case_spec small = cf::shrink(ref, be, spec);
    CHECK(small.ne == cf::extents{9, 1, 1, 1});
    CHECK(small.seed == spec.seed);
    CHECK(small.op == spec.op);
    CHECK(small.types == spec.types);
    CHECK(small.variant == spec.variant);
    CHECK(cf::run_case(ref, be, small).result == cf::outcome::fail);
    CHECK(cf::repro_args(small) ==
          "--op add --types f32,f32 --shape 9x1x1x1 --variant 0 --seed 1234");
    // one element fewer passes
    cf::case_spec smaller = small;
    smaller.ne[0] = 8;
    CHECK(cf::run_case(ref, be, smaller).result == cf::outcome::pass);
}

TEST_CASE("conformance: a thinned sample is a subset of the plain one, and its rotations keep each combination once") {
    namespace cf = backplane::conformance;
    constexpr int every = 3, thin = 2, n = 40;
    // the combinations (0 ... n - 1) whose case the batch keeps
    const auto kept = [](int rotation, int th) {
        cf::batch b(7, {});
        b.sample(every, rotation, th);
        std::vector<int> out;
        for (int k = 0; k < n; ++k) {
            b.combination();
            const std::size_t before = b.cases();
            b.add(b.leaf(backplane::elem_type::f32, {4, 1, 1, 1}));
            if (b.cases() > before)
                out.push_back(k);
        }
        return out;
    };
    std::vector<int> times(n, 0);
    for (int rotation = -every * thin; rotation < every * thin; ++rotation) {
        INFO("rotation " << rotation);
        const std::vector<int> plain = kept(rotation, 1), thinned = kept(rotation, thin);
        CHECK(std::includes(plain.begin(), plain.end(), thinned.begin(), thinned.end()));
        // one in `thin`, rounded either way
        CHECK(thinned.size() * thin > plain.size() - thin);
        CHECK(thinned.size() * thin < plain.size() + thin);
        if (rotation >= 0)
            for (int k : thinned)
                ++times[k];
    }
    for (int k = 0; k < n; ++k) {
        INFO("combination " << k);
        CHECK(times[k] == 1);
    }
}

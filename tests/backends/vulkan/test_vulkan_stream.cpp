// The Vulkan stream (label vulkan): asynchronous transfers, events, barriers only between
// dependent dispatches, recordings reused when a graph runs again, two logical devices
// with copies between them, and the scheduler over {vulkan, cpu} and {vulkan, vulkan,
// cpu} on the llama-like reference graph against the CPU alone. Staging forced on and
// off. Every validation-layer message fails the test. Then the copy utilities and the
// conformance runner on the device (tensor_copy, graph_copy, compare_backends, a slice of
// the catalogue).

#include <backplane/backends/vulkan.hpp>
#include <backplane/backplane.hpp>
#include <backplane/enabled.hpp>
#include <backplane/sched.hpp>

#include "../../support/device_copy_cases.hpp"
#include "../../support/llama_cpu.hpp"
#include "../../support/ref_oracle.hpp"

#include <catch2/catch.hpp>

#include "../../support/vulkan_test_support.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace backplane;
using backplane::test::open_or_skip;
using backplane::test::check_validation;

namespace {

std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(test::uniform01(rng)) * 2.0f - 1.0f;
    return v;
}

std::vector<float> read(const tensor& t) {
    std::vector<float> v(static_cast<std::size_t>(t.nelements()));
    REQUIRE(tensor_get(t, v.data(), 0, v.size() * sizeof(float)));
    return v;
}

} // namespace

TEST_CASE("vulkan stream: async set, copy and get run in order and finish in synchronize", "[vulkan][stream]") {
    for (const bool staging : {false, true}) {
        auto dev = open_or_skip(staging);
        if (!dev) return;
        INFO("staging forced: " << staging);
        auto be = dev->make_backend();
        REQUIRE(be);
        context ctx(context_params{.no_alloc = true});
        tensor* a = ctx.new_tensor_1d(elem_type::f32, 3000);
        tensor* b = ctx.new_tensor_1d(elem_type::f32, 3000);
        tensor* c = ctx.new_tensor_1d(elem_type::f32, 3000);
        auto bufs = alloc_tensors(ctx, dev->buffer_type());
        REQUIRE(bufs);
        const auto v = random_floats(3000, 5);
        std::vector<float> out(3000, 7.0f);
        // set a, b = a, c = relu(b) on the device, read c: one stream, in order
        REQUIRE(be->set_tensor_async(*a, v.data(), 0, v.size() * sizeof(float)));
        REQUIRE(be->copy_tensor_async(*a, *b));
        context gctx(context_params{.no_alloc = true});
        tensor* r = relu(gctx, b);
        tensor* rc = cpy(gctx, r, c);
        graph g(rc);
        auto gbufs = alloc_tensors(gctx, dev->buffer_type());
        REQUIRE(gbufs);
        REQUIRE(be->compute(g));
        REQUIRE(be->get_tensor_async(*c, out.data(), 0, out.size() * sizeof(float)));
        CHECK(out[0] == 7.0f); // the bytes arrive in synchronize()
        REQUIRE(be->synchronize());
        for (std::size_t i = 0; i < v.size(); ++i) REQUIRE(out[i] == std::max(v[i], 0.0f));
        // a byte range at an odd offset
        std::vector<std::uint8_t> part(11);
        REQUIRE(be->get_tensor_async(*a, part.data(), 13, 11));
        REQUIRE(be->synchronize());
        CHECK(std::memcmp(part.data(), reinterpret_cast<const std::uint8_t*>(v.data()) + 13, 11) == 0);

        SECTION("errors") {
            CHECK(be->set_tensor_async(*a, v.data(), 4, v.size() * sizeof(float)).code() == errc::out_of_range);
            CHECK(be->get_tensor_async(*a, out.data(), 12001, 0).code() == errc::out_of_range);
            context hctx(context_params{.no_alloc = false});
            tensor* h = hctx.new_tensor_1d(elem_type::f32, 3000);
            CHECK(be->set_tensor_async(*h, v.data(), 0, 4).code() == errc::invalid_argument);
            CHECK_FALSE(be->copy_tensor_async(*h, *a)); // host memory: the caller copies
            tensor* small = ctx.new_tensor_1d(elem_type::f32, 10);
            CHECK_FALSE(be->copy_tensor_async(*a, *small)); // sizes differ
        }
    }
    check_validation();
}

TEST_CASE("vulkan stream: barriers only between dependent dispatches, recordings are reused", "[vulkan][stream]") {
    auto dev = open_or_skip(false);
    if (!dev) return;
    auto be = dev->make_backend();
    REQUIRE(be);
    context ctx(context_params{.no_alloc = true});
    std::vector<tensor*> xs;
    for (int i = 0; i < 4; ++i) xs.push_back(ctx.new_tensor_2d(elem_type::f32, 100, 3));
    // four independent nodes, then a chain of four
    std::vector<tensor*> outs;
    for (tensor* x : xs) outs.push_back(relu(ctx, x));
    tensor* chain = xs[0];
    for (int i = 0; i < 4; ++i) chain = scale(ctx, chain, 2.0f, 1.0f);
    graph independent;
    for (tensor* o : outs) independent.build_forward(o);
    graph dependent(chain);
    auto bufs = alloc_tensors(ctx, dev->buffer_type());
    REQUIRE(bufs);
    std::vector<std::vector<float>> in;
    for (std::size_t i = 0; i < xs.size(); ++i) {
        in.push_back(random_floats(300, 40 + static_cast<std::uint32_t>(i)));
        REQUIRE(tensor_set(*xs[i], in.back().data(), 0, 1200));
    }

    REQUIRE(be->compute(independent));
    auto s = be->stats();
    CHECK(s.dispatches == 4);
    CHECK(s.barriers == 0);
    REQUIRE(be->compute(dependent));
    s = be->stats();
    CHECK(s.dispatches == 8);
    CHECK(s.barriers == 3);
    CHECK(s.recorded == 2);
    REQUIRE(be->synchronize());
    for (std::size_t i = 0; i < 4; ++i) {
        const auto got = read(*outs[i]);
        for (std::size_t k = 0; k < got.size(); ++k) REQUIRE(got[k] == std::max(in[i][k], 0.0f));
    }

    // the same graphs again, on new data: nothing is recorded, the results follow the data
    in[0] = random_floats(300, 99);
    REQUIRE(tensor_set(*xs[0], in[0].data(), 0, 1200));
    REQUIRE(be->compute(dependent));
    REQUIRE(be->compute(independent));
    REQUIRE(be->compute(dependent));
    REQUIRE(be->synchronize());
    s = be->stats();
    CHECK(s.computes == 5);
    CHECK(s.recorded == 2);
    const auto got = read(*chain);
    for (std::size_t k = 0; k < got.size(); ++k) {
        float want = in[0][k];
        for (int i = 0; i < 4; ++i) want = want * 2.0f + 1.0f;
        REQUIRE(got[k] == want);
    }
    // a graph that writes what an earlier node read needs a barrier too (write after read)
    context ctx2(context_params{.no_alloc = true});
    tensor* y = relu(ctx2, xs[1]);
    tensor* back = cpy(ctx2, scale(ctx2, xs[2], 1.0f, 0.0f), xs[1]); // overwrites relu's source
    graph war;
    war.build_forward(y);
    war.build_forward(back);
    auto bufs2 = alloc_tensors(ctx2, dev->buffer_type());
    REQUIRE(bufs2);
    const auto before = be->stats().barriers;
    REQUIRE(be->compute(war));
    REQUIRE(be->synchronize());
    CHECK(be->stats().barriers - before >= 1);
    const auto ry = read(*y);
    for (std::size_t k = 0; k < ry.size(); ++k) REQUIRE(ry[k] == std::max(in[1][k], 0.0f));
    check_validation();
}

TEST_CASE("vulkan stream: events order two streams of one device, and the host", "[vulkan][stream][events]") {
    auto dev = open_or_skip(false);
    if (!dev) return;
    auto b1 = dev->make_backend();
    auto b2 = dev->make_backend();
    REQUIRE(b1);
    REQUIRE(b2);
    context ctx(context_params{.no_alloc = true});
    tensor* x = ctx.new_tensor_1d(elem_type::f32, 1 << 16);
    tensor* y = scale(ctx, x, 3.0f, 0.0f);
    tensor* z = scale(ctx, y, 0.5f, 1.0f);
    graph g1(y);
    auto bufs = alloc_tensors(ctx, dev->buffer_type());
    REQUIRE(bufs);
    auto e = b1->make_event();
    REQUIRE(e);
    REQUIRE(e->synchronize()); // never recorded: already reached
    for (int round = 0; round < 3; ++round) {
        // stream 2 computes z from y only after stream 1 wrote y (new data each round)
        const auto w = random_floats(1 << 16, 3 + static_cast<std::uint32_t>(round));
        REQUIRE(tensor_set(*x, w.data(), 0, w.size() * sizeof(float)));
        REQUIRE(b1->compute(g1));
        REQUIRE(b1->record(*e));
        REQUIRE(b2->wait(*e));
        std::vector<tensor*> nodes{z};
        REQUIRE(b2->compute(graph_view(std::span<tensor* const>(nodes))));
        REQUIRE(e->synchronize());
        REQUIRE(b2->synchronize());
        const auto got = read(*z);
        for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == (w[i] * 3.0f) * 0.5f + 1.0f);
    }
    check_validation();
}

TEST_CASE("vulkan: two logical devices copy tensors between them", "[vulkan][multi]") {
    for (const bool staging : {false, true}) {
        auto d0 = open_or_skip(staging, "VulkanA");
        auto d1 = open_or_skip(!staging, "VulkanB");
        if (!d0 || !d1) return;
        CHECK(d0->name() != d1->name());
        context c0(context_params{.no_alloc = true});
        context c1(context_params{.no_alloc = true});
        tensor* a = c0.new_tensor_2d(elem_type::f32, 333, 5);
        tensor* b = c1.new_tensor_2d(elem_type::f32, 333, 5);
        auto b0 = alloc_tensors(c0, d0->buffer_type());
        auto b1 = alloc_tensors(c1, d1->buffer_type());
        REQUIRE(b0);
        REQUIRE(b1);
        const auto v = random_floats(333 * 5, 11);
        REQUIRE(tensor_set(*a, v.data(), 0, v.size() * sizeof(float)));
        REQUIRE(b->buffer->copy_tensor(*a, *b));
        CHECK(read(*b) == v);
        // a stream of device B does not copy from device A's memory itself
        auto be = d1->make_backend();
        REQUIRE(be);
        CHECK_FALSE(be->copy_tensor_async(*a, *b));
        // an event of device A waited for by a stream of device B: on the host
        auto ba = d0->make_backend();
        REQUIRE(ba);
        auto e = ba->make_event();
        REQUIRE(e);
        context g(context_params{.no_alloc = true});
        graph ga(relu(g, a));
        auto gb = alloc_tensors(g, d0->buffer_type());
        REQUIRE(gb);
        REQUIRE(ba->compute(ga));
        REQUIRE(ba->record(*e));
        REQUIRE(be->wait(*e));
        const auto r = read(*ga.back());
        for (std::size_t i = 0; i < r.size(); ++i) REQUIRE(r[i] == std::max(v[i], 0.0f));
    }
    check_validation();
}

namespace {

struct llama_run {
    std::vector<float> logits;
    std::size_t splits = 0;
    std::size_t on_vulkan = 0; // nodes the scheduler placed on a Vulkan backend
};

/// Layers [0, split) and the global weights on `first`'s memory, the rest on `second`'s;
/// scheduled over `backends`.
template <class BT1, class BT2, class... B>
llama_run llama_scheduled(const test::llama_params& p, const BT1& first, const BT2& second, int split,
                          B&... backends) {
    context w({.no_alloc = true});
    test::llama_model m = test::make_llama_model(w, p);
    std::vector<tensor*> one = m.global_weights();
    for (tensor* t : m.layer_weights(0, split)) one.push_back(t);
    auto b0 = test::alloc_tensor_list(one, first);
    REQUIRE(b0);
    auto b1 = test::alloc_tensor_list(m.layer_weights(split, p.n_layer), second);
    REQUIRE(b1);
    context gctx({.no_alloc = true});
    test::llama_inputs in = test::make_llama_inputs(gctx, p);
    graph g = test::build_llama_graph(gctx, m, in);
    scheduler sched(scheduler_params{}, backends...);
    llama_run r;
    for (int run = 0; run < 2; ++run) { // the second run reuses the recordings
        REQUIRE(sched.alloc_graph(g));
        REQUIRE(test::fill_llama(m, in, 7));
        const status s = sched.compute(g);
        INFO(s.describe());
        REQUIRE(s);
        r.logits = read(*g.back());
    }
    r.splits = sched.n_splits();
    for (tensor* t : g.nodes())
        if (!is_view_op(t->op) && sched.backend_name(static_cast<std::size_t>(sched.backend_of(*t))).starts_with("Vulkan"))
            ++r.on_vulkan;
    return r;
}

void check_close(const std::vector<float>& want, const std::vector<float>& got) {
    REQUIRE(want.size() == got.size());
    for (float v : got) REQUIRE(std::isfinite(v));
    const double e = test::nmse_of(want, got);
    INFO("nmse " << e);
    CHECK(e <= 1e-6);
}

} // namespace

TEST_CASE("vulkan + scheduler: the llama graph with weights split between Vulkan and the CPU equals the CPU",
          "[vulkan][sched][llama]") {
    const test::llama_params p = test::small_llama();
    const auto expected = test::llama_on_cpu(p, 7);
    for (const bool staging : {false, true}) {
        auto dev = open_or_skip(staging);
        if (!dev) return;
        INFO("staging forced: " << staging);
        auto vk = dev->make_backend();
        REQUIRE(vk);
        cpu_backend cpu({.n_threads = 2});
        // half the layers on each
        const llama_run half = llama_scheduled(p, dev->buffer_type(), cpu_buffer_type::instance(), 2, *vk, cpu);
        check_close(expected, half.logits);
        CHECK(half.on_vulkan > 0);
        // everything on Vulkan
        const llama_run all = llama_scheduled(p, dev->buffer_type(), dev->buffer_type(), p.n_layer, *vk, cpu);
        check_close(expected, all.logits);
        CHECK(all.on_vulkan > half.on_vulkan);
        CHECK(vk->stats().recorded < vk->stats().computes); // second runs reused the recordings
    }
    check_validation();
}

TEST_CASE("vulkan + scheduler: the llama graph over two logical Vulkan devices and the CPU equals the CPU",
          "[vulkan][sched][llama][multi]") {
    const test::llama_params p = test::small_llama();
    const auto expected = test::llama_on_cpu(p, 7);
    auto d0 = open_or_skip(false, "VulkanA");
    auto d1 = open_or_skip(true, "VulkanB");
    if (!d0 || !d1) return;
    auto v0 = d0->make_backend();
    auto v1 = d1->make_backend();
    REQUIRE(v0);
    REQUIRE(v1);
    cpu_backend cpu({.n_threads = 2});
    const llama_run r = llama_scheduled(p, d0->buffer_type(), d1->buffer_type(), 2, *v0, *v1, cpu);
    check_close(expected, r.logits);
    CHECK(v0->stats().computes > 0);
    CHECK(v1->stats().computes > 0);
    check_validation();
}

TEST_CASE("vulkan stream: one graph queued several times without waiting runs in order", "[vulkan][stream]") {
    auto dev = open_or_skip(false);
    if (!dev) return;
    auto be = dev->make_backend();
    REQUIRE(be);
    context ctx(context_params{.no_alloc = true});
    tensor* x = ctx.new_tensor_1d(elem_type::f32, 1 << 14);
    tensor* step = cpy(ctx, scale(ctx, x, 2.0f, 1.0f), x); // x = 2x + 1, in x's memory
    graph g(step);
    auto bufs = alloc_tensors(ctx, dev->buffer_type());
    REQUIRE(bufs);
    const auto v = random_floats(1 << 14, 8);
    REQUIRE(tensor_set(*x, v.data(), 0, v.size() * sizeof(float)));
    for (int i = 0; i < 4; ++i) REQUIRE(be->compute(g)); // one recording, submitted 4 times
    REQUIRE(be->synchronize());
    CHECK(be->stats().recorded == 1);
    CHECK(be->stats().computes == 4);
    const auto got = read(*x);
    for (std::size_t i = 0; i < got.size(); ++i) {
        float want = v[i];
        for (int k = 0; k < 4; ++k) want = want * 2.0f + 1.0f;
        REQUIRE(got[i] == want);
    }
    check_validation();
}

// ---------------------------------------------------------------------------------------
// The copy utilities and the conformance runner on this device
// (tests/support/device_copy_cases.hpp): tensor_copy in every direction,
// tensor_copy_async, graph_copy of the llama graph, compare_backends, a slice of the
// catalogue.

static_assert(is_enabled_backend<vulkan_backend>);
static_assert(sizeof(with_enabled_backends<scheduler>) > 0); // Vulkan before the CPU, which is last

TEST_CASE(
    "vulkan: tensor_copy in every direction among host data, CPU, Vulkan and the test device") {
    if (auto dev = open_or_skip(false))
        test::copies_every_direction(*dev, "Vulkan");
}

TEST_CASE("vulkan: tensor_copy_async on the Vulkan stream") {
    if (auto dev = open_or_skip(false))
        test::copy_async_on_stream(*dev, "Vulkan");
}

TEST_CASE(
    "vulkan: graph_copy of the llama reference graph computes the same logits, node by node too") {
    if (auto dev = open_or_skip(false))
        test::llama_graph_copy(*dev, "Vulkan");
}

TEST_CASE("vulkan: a slice of the catalogue passes against the reference") {
    if (auto dev = open_or_skip(false))
        test::catalogue_slice(*dev, "Vulkan");
}

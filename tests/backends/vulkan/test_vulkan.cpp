// The Vulkan backend (label vulkan): devices, memory with and without staging, every op
// it computes against the CPU backend's reference kernels on seeded random shapes, and
// errors as statuses. Runs on whatever Vulkan driver is present (lavapipe in CI); skips
// with a message where there is none. Every validation-layer message fails the test.

#include <backplane/backends/vulkan.hpp>
#include <backplane/backplane.hpp>

#include "../../support/ref_oracle.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace backplane;

namespace {

// The validation layer is on for this program whenever it is installed (before the
// instance is made, i.e. before main): its messages are counted and fail the tests.
const bool validation_asked = [] { return ::setenv("BACKPLANE_VULKAN_VALIDATION", "1", 0) == 0; }();

/// Physical device 0 opened with `staging` forced or not; null (and a warning) when this
/// machine has no Vulkan.
std::optional<vulkan_device> open_or_skip(bool force_staging) {
    auto dev = vulkan_device::open({.index = 0, .force_staging = force_staging});
    if (!dev) {
        WARN("no Vulkan device, skipping: " << dev.error().describe());
        return std::nullopt;
    }
    return std::move(*dev);
}

/// One op case: builds its graph from source tensors in `ctx` and returns the node.
using builder = std::function<tensor*(context&, std::vector<tensor*>&, std::mt19937&)>;

struct op_case {
    std::string name;
    int n_sources;
    double lo, hi; // source values
    builder build;
};

std::int64_t dim(std::mt19937& rng, std::int64_t max) { return 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(max)); }

/// Random extents; sometimes large enough for a 2-D dispatch-free but multi-group run.
std::array<std::int64_t, 4> shape(std::mt19937& rng) {
    return {dim(rng, 70), dim(rng, 9), dim(rng, 4), dim(rng, 3)};
}

tensor* new_src(context& ctx, std::vector<tensor*>& srcs, std::array<std::int64_t, 4> ne) {
    tensor* t = ctx.new_tensor_4d(elem_type::f32, ne[0], ne[1], ne[2], ne[3]);
    t->name = "s" + std::to_string(srcs.size());
    srcs.push_back(t);
    return t;
}

std::vector<op_case> op_cases() {
    std::vector<op_case> cases;
    const auto binary = [&](std::string name, tensor* (*f)(context&, tensor*, tensor*), float lo, float hi) {
        cases.push_back({name, 2, lo, hi, [f](context& ctx, std::vector<tensor*>& s, std::mt19937& rng) {
                             const auto ne = shape(rng);
                             auto bne = ne;
                             for (auto& n : bne) // b broadcast along some dimensions
                                 if (rng() % 3 == 0) n = 1;
                             tensor* a = new_src(ctx, s, ne);
                             tensor* b = new_src(ctx, s, bne);
                             return f(ctx, a, b);
                         }});
    };
    binary("add", &add, -2, 2);
    binary("sub", &sub, -2, 2);
    binary("mul", &mul, -2, 2);
    binary("div", &div, 0.5f, 2);
    const auto unary = [&](std::string name, tensor* (*f)(context&, tensor*), float lo, float hi) {
        cases.push_back({name, 1, lo, hi, [f](context& ctx, std::vector<tensor*>& s, std::mt19937& rng) {
                             tensor* a = new_src(ctx, s, shape(rng));
                             // half the cases read a transposed (non-contiguous) view
                             return f(ctx, rng() % 2 ? transpose(ctx, a) : a);
                         }});
    };
    unary("sqr", &sqr, -2, 2);
    unary("sqrt", &backplane::sqrt, 0, 4);
    unary("silu", &silu, -4, 4);
    unary("gelu", &gelu, -4, 4);
    unary("relu", &relu, -2, 2);
    unary("cont", &cont, -2, 2);
    unary("dup", &dup, -2, 2);
    cases.push_back({"scale", 1, -2, 2, [](context& ctx, std::vector<tensor*>& s, std::mt19937& rng) {
                         tensor* a = new_src(ctx, s, shape(rng));
                         return scale(ctx, a, 0.25f + static_cast<float>(rng() % 8), -0.5f);
                     }});
    cases.push_back({"cpy", 1, -2, 2, [](context& ctx, std::vector<tensor*>& s, std::mt19937& rng) {
                         const auto ne = shape(rng);
                         tensor* a = new_src(ctx, s, ne);
                         tensor* b = ctx.new_tensor_2d(elem_type::f32, ne[0] * ne[1], ne[2] * ne[3]); // reshaped
                         b->name = "dst";
                         s.push_back(b);
                         return cpy(ctx, transpose(ctx, a), b);
                     }});
    return cases;
}

/// Runs case c with `seed` on the Vulkan backend (everything in its memory) and checks
/// the output against the reference oracle (tests/support/ref_oracle.hpp) with the CPU
/// tests' thresholds.
void run_case(const op_case& c, std::uint32_t seed, vulkan_device& dev, vulkan_backend& be) {
    // the graph in host memory: random sources and the expected output
    context hctx(context_params{.no_alloc = false});
    std::mt19937 hrng(seed);
    std::vector<tensor*> hsrcs;
    tensor* hout = c.build(hctx, hsrcs, hrng);
    for (tensor* t : hsrcs) test::fill_random(*t, hrng, c.lo, c.hi);
    const test::ref_tensor expected = test::ref_forward(*hout);

    // the same graph in the device's memory, with the same source values
    context ctx(context_params{.no_alloc = true});
    std::mt19937 rng(seed);
    std::vector<tensor*> srcs;
    tensor* out = c.build(ctx, srcs, rng);
    graph g(out);
    INFO(c.name << " seed " << seed << ": " << backplane::detail::describe(out));
    REQUIRE(be.supports_op(*out));
    REQUIRE(out->is_contiguous());
    auto bufs = alloc_tensors(ctx, dev.buffer_type());
    REQUIRE(bufs);
    for (std::size_t i = 0; i < srcs.size(); ++i) REQUIRE(tensor_set(*srcs[i], hsrcs[i]->data, 0, hsrcs[i]->nbytes()));
    REQUIRE(be.compute(g));
    REQUIRE(be.synchronize());
    REQUIRE(tensor_get(*out, hout->data, 0, out->nbytes())); // the device's result, read as the host node's
    const double e = test::nmse(expected, *hout);
    INFO("nmse " << e);
    CHECK(e <= test::default_max_nmse(*hout));
}

} // namespace

TEST_CASE("vulkan: the instance lists its devices and each one opens", "[vulkan]") {
    auto list = vulkan::physical_devices();
    if (!list) {
        WARN("no Vulkan here, skipping: " << list.error().describe());
        return;
    }
    REQUIRE_FALSE(list->empty());
    for (const auto& info : *list) {
        auto dev = vulkan_device::open({.index = info.index});
        REQUIRE(dev);
        CHECK(dev->name() == "Vulkan" + std::to_string(info.index));
        CHECK(dev->description().find(info.name) != std::string_view::npos);
        CHECK(dev->kind() == info.kind);
        CHECK(dev->memory().total > 0);
        CHECK(dev->buffer_type().name() == dev->name());
        CHECK_FALSE(dev->buffer_type().is_host());
        CHECK(dev->host_buffer_type().is_host());
        CHECK(dev->supports_buffer_type(buffer_type_ref(dev->buffer_type())));
        CHECK_FALSE(dev->supports_buffer_type(buffer_type_ref(cpu_buffer_type::instance())));
    }
    auto missing = vulkan_device::open({.index = list->size()});
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code() == errc::not_supported);
    CHECK(vulkan::validation_message_count() == 0);
}

TEST_CASE("vulkan: memory round trips, mapped and staged", "[vulkan]") {
    for (const bool staging : {false, true}) {
        auto dev = open_or_skip(staging);
        if (!dev) return;
        INFO("staging forced: " << staging);
        if (staging) CHECK_FALSE(dev->maps_device_memory());
        context ctx(context_params{.no_alloc = true});
        tensor* a = ctx.new_tensor_1d(elem_type::f32, 1000);
        tensor* b = ctx.new_tensor_1d(elem_type::f32, 1000);
        auto bufs = alloc_tensors(ctx, dev->buffer_type());
        REQUIRE(bufs);
        std::vector<float> v(1000), w(1000);
        std::mt19937 rng(1);
        for (float& x : v) x = static_cast<float>(test::uniform01(rng)) - 0.5f;
        REQUIRE(tensor_set(*a, v.data(), 0, 4000));
        REQUIRE(tensor_get(*a, w.data(), 0, 4000));
        CHECK(v == w);
        // a byte range, unaligned
        REQUIRE(tensor_get(*a, w.data(), 6, 13));
        CHECK(std::memcmp(reinterpret_cast<const std::byte*>(v.data()) + 6, w.data(), 13) == 0);
        // memset on and off 4-byte boundaries
        REQUIRE(tensor_memset(*b, 0, 0, 4000));
        REQUIRE(tensor_memset(*b, 0x3f, 5, 7));
        std::vector<std::uint8_t> bytes(4000);
        REQUIRE(tensor_get(*b, bytes.data(), 0, 4000));
        for (std::size_t i = 0; i < 4000; ++i) CHECK(bytes[i] == (i >= 5 && i < 12 ? 0x3f : 0));
        // device-side copy
        REQUIRE(b->buffer->copy_tensor(*a, *b));
        REQUIRE(tensor_get(*b, w.data(), 0, 4000));
        CHECK(v == w);
        // out of range is a status
        CHECK(tensor_get(*a, w.data(), 3990, 20).code() == errc::out_of_range);
    }
    CHECK(vulkan::validation_message_count() == 0);
}

TEST_CASE("vulkan: every op it computes equals the CPU reference on 20 random shapes", "[vulkan][ops]") {
    for (const bool staging : {false, true}) {
        auto dev = open_or_skip(staging);
        if (!dev) return;
        auto be = dev->make_backend();
        REQUIRE(be);
        INFO("staging forced: " << staging);
        for (const op_case& c : op_cases())
            for (std::uint32_t k = 0; k < 20; ++k) run_case(c, 1000u * static_cast<std::uint32_t>(c.name.size()) + k, *dev, *be);
    }
    INFO(vulkan::validation_messages().size());
    CHECK(vulkan::validation_message_count() == 0);
}

TEST_CASE("vulkan: errors are statuses", "[vulkan][errors]") {
    auto dev = open_or_skip(false);
    if (!dev) return;
    auto be = dev->make_backend();
    REQUIRE(be);
    SECTION("a node whose tensors are in host memory") {
        context ctx(context_params{.no_alloc = false});
        tensor* a = ctx.new_tensor_1d(elem_type::f32, 8);
        graph g(relu(ctx, a));
        const status s = be->compute(g);
        CHECK(s.code() == errc::invalid_argument);
        CHECK(s.message().find("not in this device's memory") != std::string::npos);
    }
    SECTION("an op it does not compute") {
        context ctx(context_params{.no_alloc = true});
        tensor* a = ctx.new_tensor_2d(elem_type::f32, 8, 8);
        tensor* b = ctx.new_tensor_2d(elem_type::f32, 8, 2);
        tensor* y = mul_mat(ctx, a, b);
        graph g(y);
        auto bufs = alloc_tensors(ctx, dev->buffer_type());
        REQUIRE(bufs);
        if (!be->supports_op(*y)) CHECK(be->compute(g).code() == errc::not_supported);
    }
    SECTION("a buffer larger than the device's memory") {
        auto r = dev->buffer_type().allocate(std::size_t{1} << 50);
        REQUIRE_FALSE(r);
        CHECK(r.error().code() == errc::alloc_failed);
    }
    CHECK(vulkan::validation_message_count() == 0);
}

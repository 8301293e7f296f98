// The lifetime contract of buffers and the tensors placed in them (docs/lifetime.md):
// a tensor never trusts memory its owner released. The graph allocator places again what
// a destroyed allocator placed; a user's tensor whose buffer was freed is a clear status
// for the allocator and for reads and writes; typed accessors check the element type;
// range messages never print a wrapped-around offset.

#include <backplane/backends/cpu.hpp>
#include <backplane/core.hpp>
#include <backplane/memory/alloc_tensors.hpp>
#include <backplane/memory/graph_alloc.hpp>
#include <backplane/memory/tensor_io.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

using namespace backplane;

namespace {

buffer_type_ref cpu_type() { return cpu_buffer_type::instance(); }

bool mentions(const status& s, const std::string& what) { return s.message().find(what) != std::string::npos; }

/// out = silu(w * x) + b, with w and b the user's (in `weights`) and x a graph input.
struct net {
    context wctx{context_params{.no_alloc = true}};
    context ctx{context_params{.no_alloc = true}};
    buffer_list weights;
    tensor* w = nullptr;
    tensor* b = nullptr;
    tensor* x = nullptr;
    tensor* out = nullptr;
    graph g;

    net() {
        w = wctx.new_tensor_2d(elem_type::f32, 8, 8);
        w->name = "w";
        b = wctx.new_tensor_1d(elem_type::f32, 8);
        b->name = "b";
        place_weights();
        x = ctx.new_tensor_2d(elem_type::f32, 8, 3);
        x->name = "x";
        x->set_input();
        tensor* h = silu(ctx, mul_mat(ctx, w, x));
        h->name = "h";
        out = add(ctx, h, b);
        out->name = "out";
        out->set_output();
        g = graph(out);
    }
    void place_weights() {
        auto r = alloc_tensors(wctx, cpu_type(), buffer_usage::weights);
        REQUIRE(r);
        weights = std::move(*r);
        std::vector<float> wv(64), bv(8);
        for (std::size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
        for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(i) * 0.5f;
        REQUIRE(tensor_set(*w, wv));
        REQUIRE(tensor_set(*b, bv));
    }
    /// Writes x, computes on the CPU and returns out.
    std::vector<float> compute() {
        std::vector<float> xv(24);
        for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i % 5) - 2.0f;
        const status s = tensor_set(*x, xv);
        INFO(s.describe());
        REQUIRE(s);
        cpu_backend cpu;
        const status c = cpu.compute(g);
        INFO(c.describe());
        REQUIRE(c);
        auto r = tensor_get_all<float>(*out);
        REQUIRE(r);
        return *r;
    }
};

/// Buffers that take the host memory just released, so that tensors' stale addresses
/// cannot point into the next allocator's buffers by chance.
std::vector<buffer_ptr> squat(std::size_t n, std::size_t bytes) {
    std::vector<buffer_ptr> v;
    for (std::size_t i = 0; i < n; ++i) v.push_back(cpu_type().allocate(bytes).value());
    return v;
}

} // namespace

TEST_CASE("lifetime: a new graph allocator places again the tensors a destroyed one placed", "[alloc][lifetime]") {
    net n;
    std::vector<float> first;
    {
        graph_allocator ga(cpu_type());
        REQUIRE(ga.alloc_graph(n.g));
        first = n.compute();
    }
    const auto squatters = squat(8, 4096);
    graph_allocator ga(cpu_type());
    const status s = ga.alloc_graph(n.g);
    INFO(s.describe());
    REQUIRE(s);
    for (const tensor* t : n.g.nodes()) {
        INFO(t->name);
        CHECK(ga.owns(t->buffer)); // placed in the new allocator's memory, not left dangling
    }
    CHECK(ga.owns(n.x->buffer));
    CHECK(n.w->buffer == &n.weights[0]); // the user's weights stay where they are
    CHECK(n.compute() == first);
}

TEST_CASE("lifetime: a user's tensor whose buffer was freed is a status for the graph allocator",
          "[alloc][lifetime]") {
    net n;
    graph_allocator ga(cpu_type());
    REQUIRE(ga.alloc_graph(n.g));
    n.weights.reset();
    const auto squatters = squat(8, 4096);
    const status s = ga.alloc_graph(n.g);
    INFO(s.describe());
    CHECK(s.code() == errc::invalid_argument);
    CHECK((mentions(s, "'w'") || mentions(s, "'b'")));
    CHECK(mentions(s, "freed"));
    // placed again, the weights make the graph usable again
    n.place_weights();
    REQUIRE(ga.alloc_graph(n.g));
    CHECK(n.compute().size() == 24);
}

TEST_CASE("lifetime: reads and writes of a tensor whose buffer was freed are statuses", "[alloc][lifetime]") {
    context ctx({.no_alloc = true});
    tensor* t = ctx.new_tensor_1d(elem_type::f32, 16);
    t->name = "gone";
    std::optional<buffer_list> bufs(alloc_tensors(ctx, cpu_type()).value());
    std::vector<float> v(16, 1.0f);
    REQUIRE(tensor_set(*t, v));
    bufs.reset();
    const auto squatters = squat(4, 64);

    const status w = tensor_set(*t, v.data(), 0, 64);
    INFO(w.describe());
    CHECK(w.code() == errc::invalid_argument);
    CHECK(mentions(w, "'gone'"));
    CHECK(mentions(w, "freed"));
    const status r = tensor_get(*t, v.data(), 0, 64);
    CHECK(r.code() == errc::invalid_argument);
    CHECK(mentions(r, "freed"));
    CHECK(tensor_memset(*t, 0, 0, 64).code() == errc::invalid_argument);
    CHECK(mentions(tensor_get_all<float>(*t).error(), "freed"));
    CHECK(mentions(tensor_read_f32(*t).error(), "freed"));
}

TEST_CASE("lifetime: typed accessors require the tensor's element type", "[alloc][lifetime]") {
    context ctx;
    tensor* f = ctx.new_tensor_1d(elem_type::f32, 8);
    f->name = "floats";
    tensor* i = ctx.new_tensor_1d(elem_type::i32, 4);
    i->name = "ints";
    REQUIRE(tensor_set(*f, std::vector<float>(8, 2.0f)));
    REQUIRE(tensor_set(*i, std::vector<std::int32_t>{1, 2, 3, 4}));

    const auto d = tensor_get_all<double>(*f); // 32 bytes are 4 doubles: no longer accepted
    REQUIRE(!d);
    CHECK(d.error().code() == errc::invalid_argument);
    CHECK(mentions(d.error(), "'floats'"));
    CHECK(mentions(d.error(), "f32"));
    const auto as_float = tensor_get_all<float>(*i);
    REQUIRE(!as_float);
    CHECK(mentions(as_float.error(), "i32"));
    const status w = tensor_set(*f, std::vector<std::int32_t>(8, 1));
    CHECK(w.code() == errc::invalid_argument);
    CHECK(mentions(w, "f32"));

    CHECK(tensor_get_all<float>(*f).value() == std::vector<float>(8, 2.0f));
    CHECK(tensor_get_all<std::int32_t>(*i).value() == std::vector<std::int32_t>{1, 2, 3, 4});
    CHECK(tensor_get_all<std::byte>(*f).value().size() == 32); // raw bytes, said so
}

TEST_CASE("lifetime: range errors name the offset and size without wrapping around", "[alloc][lifetime]") {
    context host;
    tensor* h = host.new_tensor_1d(elem_type::f32, 8);
    h->name = "h";
    context dev({.no_alloc = true});
    tensor* d = dev.new_tensor_1d(elem_type::f32, 8);
    d->name = "d";
    const buffer_list bufs = alloc_tensors(dev, cpu_type()).value();
    constexpr std::size_t huge = std::numeric_limits<std::size_t>::max() - 31;
    float junk[8] = {};
    for (tensor* t : {h, d}) {
        INFO(t->name);
        const status s = tensor_set(*t, junk, huge, 32);
        INFO(s.describe());
        CHECK(s.code() == errc::out_of_range);
        CHECK(mentions(s, "offset " + std::to_string(huge) + " + size 32"));
        CHECK(mentions(s, "32 bytes"));
        CHECK(!mentions(s, "[" + std::to_string(huge) + ", 0)"));
        const status g = tensor_get(*t, junk, 8, 32);
        CHECK(mentions(g, "offset 8 + size 32 exceeds"));
    }
}

TEST_CASE("lifetime: buffers have distinct serials, alive while they exist", "[alloc][lifetime]") {
    context ctx({.no_alloc = true});
    tensor* t = ctx.new_tensor_1d(elem_type::f32, 16);
    t->name = "t";
    tensor* v = ctx.new_tensor_1d(elem_type::f32, 16);
    CHECK(buffer_alive(*t)); // no buffer: nothing to lose
    CHECK(live_buffer(*t) == nullptr);

    buffer_ptr a = cpu_type().allocate(64).value();
    buffer_ptr b = cpu_type().allocate(64).value();
    CHECK(a->serial() != 0);
    CHECK(a->serial() != b->serial());
    place_tensor(*t, *a, a->base());
    CHECK(t->buffer == a.get());
    CHECK(t->buffer_serial == a->serial());
    CHECK(t->placer == placed_by::user);
    CHECK(buffer_alive(*t));
    CHECK(live_buffer(*t) == a.get());
    place_like(*v, *t, t->data); // a view's placement: the same buffer and serial
    CHECK(v->buffer_serial == a->serial());

    const std::uint64_t old = a->serial();
    a.reset();
    CHECK(!buffer_alive(*t));
    CHECK(!buffer_alive(*v));
    CHECK(live_buffer(*t) == nullptr);
    CHECK(t->buffer_serial == old);

    unplace_tensor(*t);
    CHECK(t->buffer == nullptr);
    CHECK(t->data == nullptr);
    CHECK(buffer_alive(*t));
}

TEST_CASE("lifetime: a buffer at the address of a freed one is not the tensor's buffer", "[alloc][lifetime]") {
    context ctx({.no_alloc = true});
    tensor* t = ctx.new_tensor_1d(elem_type::f32, 16);
    t->name = "stale";
    buffer_ptr now = cpu_type().allocate(64).value();
    // as if t had been placed in a buffer freed before `now` took its address
    t->set_placement(now.get(), now->serial() + 1000, now->base());
    CHECK(!buffer_alive(*t));
    float junk[16] = {};
    const status direct = now->set_tensor(*t, junk, 0, sizeof junk); // through the new buffer itself
    CHECK(direct.code() == errc::invalid_argument);
    CHECK(mentions(direct, "earlier buffer"));
    CHECK(mentions(tensor_get(*t, junk, 0, sizeof junk), "freed"));
    // a buffer pointer assigned by hand (serial 0) is never trusted
    t->set_placement(now.get(), 0, now->base());
    CHECK(!buffer_alive(*t));
    CHECK(mentions(tensor_set(*t, junk, 0, sizeof junk), "place_tensor"));
}

TEST_CASE("lifetime: a graph allocator that grew places again the tensors of its old buffers", "[alloc][lifetime]") {
    context ctx({.no_alloc = true});
    tensor* x = ctx.new_tensor_1d(elem_type::f32, 16);
    x->set_input();
    tensor* y = relu(ctx, x);
    y->set_output();
    graph small(y);
    graph_allocator ga(cpu_type());
    REQUIRE(ga.alloc_graph(small));
    CHECK(y->placer == placed_by::allocator);
    const std::uint64_t first = y->buffer_serial;
    tensor* big_x = ctx.new_tensor_1d(elem_type::f32, 4096);
    big_x->set_input();
    tensor* big = relu(ctx, big_x);
    graph g2(big);
    REQUIRE(ga.alloc_graph(g2)); // grows: the first buffer is released
    CHECK(!buffer_alive(*y));
    REQUIRE(ga.alloc_graph(small));
    CHECK(buffer_alive(*y));
    CHECK(ga.holds(*y));
    CHECK(y->buffer_serial != first);
    REQUIRE(tensor_set(*x, std::vector<float>(16, -1.0f)));
}

TEST_CASE("lifetime: alloc_tensors places again the tensors whose buffer was freed", "[alloc][lifetime]") {
    context ctx({.no_alloc = true});
    tensor* w = ctx.new_tensor_2d(elem_type::f32, 4, 4);
    tensor* v = view_1d(ctx, w, 4, 16);
    auto first = alloc_tensors(ctx, cpu_type()).value();
    CHECK(alloc_tensors(ctx, cpu_type()).value().empty()); // nothing left to place
    first.reset();
    CHECK(!buffer_alive(*w));
    auto second = alloc_tensors(ctx, cpu_type()).value();
    REQUIRE(second.size() == 1);
    CHECK(w->buffer == &second[0]);
    CHECK(v->buffer == &second[0]);
    CHECK(v->data == static_cast<std::byte*>(w->data) + 16);
    CHECK(buffer_alive(*v));
}

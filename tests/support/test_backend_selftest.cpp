// The test backend itself (tests/support/test_backend.hpp): private memory behind the
// buffer handle, copies, compute parity with the CPU backend, real asynchrony, events,
// refusals, failure injection. The scheduler's tests rely on every one of these.

#include "ref_oracle.hpp"
#include "require_ok.hpp"
#include "test_backend.hpp"

#include <backplane/backplane.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace backplane;
using backplane::test::test_backend;
using backplane::test::test_device;
using backplane::test::test_device_params;
using backplane::test::test_event;
using backplane::test::nmse_of;
using backplane::test::require_ok;

// The adapters' conformance, proved again where the tests see it.
static_assert(backplane::buffer<test::test_buffer>);
static_assert(backplane::copy_buffer<test::test_buffer>);
static_assert(backplane::buffer_type<test::test_buffer_type>);
static_assert(!backplane::host_buffer_type<test::test_buffer_type>);
static_assert(backplane::event<test_event>);
static_assert(backplane::device<test_device>);
static_assert(backplane::offload_device<test_device>);
static_assert(backplane::backend<test_backend>);
static_assert(backplane::async_backend<test_backend>);
static_assert(backplane::event_backend<test_backend>);
static_assert(backplane::offload_backend<test_backend>);
static_assert(!backplane::host_backend<test_backend>);
static_assert(backplane::backend<test::plain_backend<test_backend>>);
static_assert(!backplane::async_backend<test::plain_backend<test_backend>>);
static_assert(!backplane::event_backend<test::plain_backend<test_backend>>);

namespace {

std::vector<float> iota_floats(std::size_t n, float start = 0.0f) {
    std::vector<float> v(n);
    std::iota(v.begin(), v.end(), start);
    return v;
}

std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::vector<float> v(n);
    for (float& x : v) x = lo + (hi - lo) * static_cast<float>(rng() >> 8) / static_cast<float>(1u << 24);
    return v;
}


template <class T = float>
std::vector<T> read_all(const tensor& t) {
    auto r = tensor_get_all<T>(t);
    INFO(r.error().describe());
    REQUIRE(r.ok());
    return std::move(*r);
}

template <class T>
void write_all(tensor& t, const std::vector<T>& v) {
    const status s = tensor_set(t, v);
    INFO(s.describe());
    REQUIRE(s.ok());
}

/// The permissions field of the /proc/self/maps line whose range holds p ("" if none).
std::string mapping_perms(const void* p) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        std::istringstream in(line);
        std::string range, perms;
        in >> range >> perms;
        const auto dash = range.find('-');
        const auto lo = std::stoull(range.substr(0, dash), nullptr, 16);
        const auto hi = std::stoull(range.substr(dash + 1), nullptr, 16);
        if (a >= lo && a < hi) return perms;
    }
    return "";
}

/// One small tensor in a buffer of `bt`.
struct one_tensor {
    context ctx{context_params{.no_alloc = true}};
    tensor* t = nullptr;
    buffer_list bufs;
    one_tensor(buffer_type_ref bt, elem_type type, std::int64_t n0, std::int64_t n1 = 1, const char* name = "t") {
        t = ctx.new_tensor_2d(type, n0, n1);
        t->name = name;
        auto r = alloc_tensors(ctx, bt);
        REQUIRE(r.ok());
        bufs = std::move(*r);
    }
};

} // namespace

TEST_CASE("test buffer: set/get round trips with offsets, through the buffer handle", "[sched][test_backend]") {
    test_device dev;
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 16, 4);
    a->name = "a";
    tensor* b = ctx.new_tensor_1d(elem_type::i32, 10);
    b->name = "b";
    auto bufs = alloc_tensors(ctx, dev.buffer_type());
    REQUIRE(bufs.ok());
    REQUIRE(a->buffer != nullptr);
    CHECK_FALSE(a->buffer->is_host());
    CHECK(a->buffer->type() == buffer_type_ref(dev.buffer_type()));
    CHECK(a->buffer->type().name() == "TEST0");
    CHECK(dev.live_buffers() == 1);

    // a fresh buffer holds the fill byte: -1 as i32, NaN as f32
    CHECK(read_all<std::int32_t>(*b) == std::vector<std::int32_t>(10, -1));
    CHECK(std::isnan(read_all(*a)[0]));

    const auto v = iota_floats(64);
    write_all(*a, v);
    const float patch[3] = {100, 101, 102};
    require_ok(tensor_set(*a, patch, 5 * sizeof(float), sizeof patch));
    auto expected = v;
    std::copy(std::begin(patch), std::end(patch), expected.begin() + 5);
    CHECK(read_all(*a) == expected);

    float part[2] = {};
    require_ok(tensor_get(*a, part, 6 * sizeof(float), sizeof part));
    CHECK(part[0] == 101.0f);
    CHECK(part[1] == 102.0f);

    const std::vector<std::int32_t> ints = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    write_all(*b, ints);
    CHECK(read_all<std::int32_t>(*b) == ints);

    const auto& c = dev.counters();
    CHECK(c.n_sets() == 3);
    CHECK(c.bytes_set() == 256 + 12 + 40);
    CHECK(c.bytes_get() == 40 + 256 + 256 + 8 + 40);
}

TEST_CASE("test buffer: base() is an aligned address range the host cannot touch", "[sched][test_backend]") {
    for (std::size_t alignment : {std::size_t{64}, std::size_t{1} << 16}) {
        test_device dev({.alignment = alignment});
        auto buf = buffer_type_ref(dev.buffer_type()).allocate(1000);
        REQUIRE(buf.ok());
        void* base = (*buf)->base();
        REQUIRE(base != nullptr);
        CHECK(reinterpret_cast<std::uintptr_t>(base) % alignment == 0);
        CHECK((*buf)->size() == 1000);
        // reserved with PROT_NONE: any host access faults (and ASan reports it)
        CHECK(mapping_perms(base) == "---p");
        CHECK(mapping_perms(static_cast<std::byte*>(base) + 999) == "---p");
        // the private bytes are elsewhere
        auto* tb = (*buf)->get_if<test::test_buffer>();
        REQUIRE(tb != nullptr);
        CHECK(static_cast<void*>(tb->storage().data()) != base);
        CHECK(tb->storage().size() == 1000);
    }
    // and a host access really faults: a child process that reads base() dies
    {
        test_device dev;
        auto buf = buffer_type_ref(dev.buffer_type()).allocate(256);
        REQUIRE(buf.ok());
        const auto* p = static_cast<const volatile unsigned char*>((*buf)->base());
        std::fflush(nullptr);
        const pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            // the fault is expected: no report from Catch's or ASan's handler, just death
            const int devnull = ::open("/dev/null", O_WRONLY);
            if (devnull >= 0) {
                ::dup2(devnull, 1);
                ::dup2(devnull, 2);
            }
            std::signal(SIGSEGV, SIG_DFL);
            std::signal(SIGBUS, SIG_DFL);
            const unsigned char c = *p;
            ::_exit(c == 0xff ? 0 : 3); // reached only if the read did not fault
        }
        int wstatus = 0;
        REQUIRE(::waitpid(child, &wstatus, 0) == child);
        const bool faulted = WIFSIGNALED(wstatus) || (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0 &&
                                                      WEXITSTATUS(wstatus) != 3);
        CHECK(faulted);
    }
    // the CPU's kernels refuse to read such a tensor: its buffer is not host memory
    test_device dev;
    one_tensor x(dev.buffer_type(), elem_type::f32, 8);
    context ctx;
    tensor* y = add(ctx, x.t, x.t);
    cpu_backend cpu({.n_threads = 1});
    CHECK(cpu.compute(graph(y)).code() == errc::invalid_argument);
}

TEST_CASE("test buffer: out-of-range accesses are statuses", "[sched][test_backend]") {
    test_device dev;
    one_tensor a(dev.buffer_type(), elem_type::f32, 16, 1, "a");
    const auto v = iota_floats(32);
    std::vector<float> out(32);
    CHECK(tensor_set(*a.t, v.data(), 60, 8).code() == errc::out_of_range);
    CHECK(tensor_set(*a.t, v.data(), 0, 65).code() == errc::out_of_range);
    CHECK(tensor_get(*a.t, out.data(), 64, 1).code() == errc::out_of_range);
    CHECK(tensor_memset(*a.t, 0, 32, 33).code() == errc::out_of_range);
    CHECK(tensor_set(*a.t, v.data(), 64, 0).ok()); // empty at the end is fine

    // a tensor of another buffer
    one_tensor other(dev.buffer_type(), elem_type::f32, 16, 1, "other");
    CHECK(a.t->buffer->set_tensor(*other.t, v.data(), 0, 4).code() == errc::invalid_argument);
    CHECK(dev.counters().n_sets() == 0); // nothing reached the buffer
}

TEST_CASE("test buffer: memset_tensor and clear", "[sched][test_backend]") {
    test_device dev;
    one_tensor a(dev.buffer_type(), elem_type::f32, 8);
    write_all(*a.t, iota_floats(8, 1.0f));
    require_ok(tensor_memset(*a.t, 0, 2 * sizeof(float), 2 * sizeof(float)));
    CHECK(read_all(*a.t) == std::vector<float>{1, 2, 0, 0, 5, 6, 7, 8});
    require_ok(a.bufs.clear(0));
    CHECK(read_all(*a.t) == std::vector<float>(8, 0.0f));
    CHECK(dev.counters().n_memsets() == 2);
}

TEST_CASE("test buffer: copy_tensor within a device and from host memory, never across devices",
          "[sched][test_backend]") {
    test_device d0({.name = "T0"});
    test_device d1({.name = "T1"});
    test_device peer({.name = "T2", .peer_copy = true});
    one_tensor src(d0.buffer_type(), elem_type::f32, 8, 2, "src");
    one_tensor dst(d0.buffer_type(), elem_type::f32, 8, 2, "dst");
    one_tensor far(d1.buffer_type(), elem_type::f32, 8, 2, "far");
    one_tensor near(peer.buffer_type(), elem_type::f32, 8, 2, "near");
    one_tensor host(cpu_buffer_type::instance(), elem_type::f32, 8, 2, "host");
    context hctx; // context host data, no buffer
    tensor* plain = hctx.new_tensor_2d(elem_type::f32, 8, 2);
    const auto v = iota_floats(16, 1.0f);
    write_all(*src.t, v);

    // same device: a device-side copy
    CHECK(dst.t->buffer->copy_tensor(*src.t, *dst.t));
    CHECK(read_all(*dst.t) == v);
    CHECK(d0.counters().n_copies() == 1);
    CHECK(d0.counters().bytes_copied() == 64);

    // another test device: refused (the generic layer stages through the host)
    CHECK_FALSE(far.t->buffer->copy_tensor(*src.t, *far.t));
    CHECK(d1.counters().n_copy_refused() == 1);
    CHECK(std::isnan(read_all(*far.t)[0]));
    // ... unless that device does peer copies
    CHECK(near.t->buffer->copy_tensor(*src.t, *near.t));
    CHECK(read_all(*near.t) == v);

    // host memory to the device: from a host buffer and from context data
    const auto w = iota_floats(16, 50.0f);
    write_all(*host.t, w);
    CHECK(dst.t->buffer->copy_tensor(*host.t, *dst.t));
    CHECK(read_all(*dst.t) == w);
    std::memcpy(plain->data, v.data(), 64);
    CHECK(dst.t->buffer->copy_tensor(*plain, *dst.t));
    CHECK(read_all(*dst.t) == v);

    // the host cannot read the device: the CPU buffer refuses
    CHECK_FALSE(host.t->buffer->copy_tensor(*src.t, *host.t));

    // different layouts that are not both contiguous: refused
    context vctx;
    tensor* wide = vctx.new_tensor_2d(elem_type::f32, 16, 2);
    tensor* strided = view_2d(vctx, wide, 8, 2, wide->nb[1], 0);
    CHECK_FALSE(dst.t->buffer->copy_tensor(*strided, *dst.t));
}

namespace {

/// A graph of most ops, built the same way in any no_alloc context.
struct op_graph {
    context ctx{context_params{.no_alloc = true}};
    tensor *x, *w, *w16, *bias, *pos, *mask, *idx, *kv;
    std::vector<tensor*> outputs;
    graph g;

    op_graph() {
        x = ctx.new_tensor_2d(elem_type::f32, 64, 8);
        w = ctx.new_tensor_2d(elem_type::f32, 64, 48);
        w16 = ctx.new_tensor_2d(elem_type::f16, 64, 48);
        bias = ctx.new_tensor_1d(elem_type::f32, 48);
        pos = ctx.new_tensor_1d(elem_type::i32, 8);
        mask = ctx.new_tensor_2d(elem_type::f32, 8, 8);
        idx = ctx.new_tensor_1d(elem_type::i32, 5);
        kv = ctx.new_tensor_2d(elem_type::f32, 48, 16);
        for (tensor* t : {x, w, w16, bias, pos, mask, idx, kv}) t->set_input();

        tensor* h = mul_mat(ctx, w, x);                 // [48, 8]
        h = add(ctx, h, bias);                          // broadcast
        tensor* n = rms_norm(ctx, h, 1e-5f);
        tensor* s = silu(ctx, n);
        tensor* r = rope(ctx, reshape(ctx, s, {16, 3, 8}), pos, 16); // [16, 3, 8]
        tensor* p = permute(ctx, r, 0, 2, 1, 3);        // [16, 8, 3]
        tensor* kq = mul_mat(ctx, p, p);                // [8, 8, 3]
        tensor* sm = soft_max(ctx, kq, mask, 0.25f);
        tensor* tr = cont(ctx, transpose(ctx, sm));     // [8, 8, 3]
        tensor* h16 = mul_mat(ctx, w16, x);             // [48, 8], f16 weights
        tensor* prod = mul(ctx, h16, gelu(ctx, h));
        tensor* rows = scale(ctx, get_rows(ctx, w, idx), 0.5f, 0.25f); // [64, 5]
        tensor* slot = view_2d(ctx, kv, 48, 8, kv->nb[1], 8 * kv->nb[1]);
        tensor* stored = cpy(ctx, s, slot);             // into the second half of kv
        tensor* sums = sum_rows(ctx, sqr(ctx, prod));
        tensor* best = argmax(ctx, prod);
        tensor* joined = concat(ctx, h, sub(ctx, h, n), 1);
        outputs = {tr, prod, rows, stored, sums, best, joined};
        for (tensor* o : outputs) o->set_output();
        for (tensor* o : outputs) g.build_forward(o);
    }

    void fill() {
        write_all(*x, random_floats(64 * 8, 1));
        write_all(*w, random_floats(64 * 48, 2, -0.2f, 0.2f));
        const auto w16f = random_floats(64 * 48, 3, -0.2f, 0.2f);
        std::vector<f16_t> w16v(w16f.size());
        for (std::size_t i = 0; i < w16f.size(); ++i) w16v[i] = f32_to_f16(w16f[i]);
        write_all(*w16, w16v);
        write_all(*bias, random_floats(48, 4));
        write_all(*pos, std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7});
        std::vector<float> m(64);
        for (int q = 0; q < 8; ++q)
            for (int k = 0; k < 8; ++k) m[static_cast<std::size_t>(q * 8 + k)] = k <= q ? 0.0f : -INFINITY;
        write_all(*mask, m);
        write_all(*idx, std::vector<std::int32_t>{3, 0, 47, 12, 3});
        write_all(*kv, random_floats(48 * 16, 5));
    }
};

} // namespace

TEST_CASE("test backend: a graph of most ops equals the CPU backend", "[sched][test_backend]") {
    op_graph on_cpu, on_test;
    graph_allocator ga_cpu(cpu_buffer_type::instance());
    require_ok(ga_cpu.alloc_graph(on_cpu.g));
    on_cpu.fill();
    cpu_backend cpu({.n_threads = 2});
    require_ok(cpu.compute(on_cpu.g));

    test_device dev;
    test_backend b = dev.make_backend();
    graph_allocator ga_test(dev.buffer_type());
    require_ok(ga_test.alloc_graph(on_test.g));
    for (tensor* t : on_test.g.nodes()) {
        INFO(t->name);
        CHECK(t->buffer->type() == buffer_type_ref(dev.buffer_type()));
    }
    on_test.fill();
    require_ok(b.compute(on_test.g));
    require_ok(b.synchronize());

    CHECK(b.n_computes() == 1);
    std::size_t computing = 0;
    for (tensor* t : on_test.g.nodes()) computing += is_view_op(t->op) ? 0 : 1;
    CHECK(b.n_nodes_computed() == computing);

    for (std::size_t i = 0; i < on_cpu.outputs.size(); ++i) {
        const tensor& c = *on_cpu.outputs[i];
        const tensor& t = *on_test.outputs[i];
        INFO("output " << i << " (" << to_string(c.op) << ")");
        if (c.type == elem_type::i32) {
            CHECK(read_all<std::int32_t>(c) == read_all<std::int32_t>(t));
        } else {
            const auto e = read_all(c);
            const auto a = read_all(t);
            for (float f : a) REQUIRE(std::isfinite(f));
            CHECK(nmse_of(e, a) <= 1e-6);
        }
    }
    // the cpy wrote into the second half of kv and left the first half alone
    auto kv_cpu = read_all(*on_cpu.kv);
    auto kv_test = read_all(*on_test.kv);
    CHECK(nmse_of(kv_cpu, kv_test) <= 1e-6);
}

TEST_CASE("test backend: set_async, compute, get_async run in order, after the calls return",
          "[sched][test_backend]") {
    test_device dev;
    context ctx({.no_alloc = true});
    tensor* x = ctx.new_tensor_1d(elem_type::f32, 256);
    x->set_input();
    tensor* y = add(ctx, mul(ctx, x, x), x);
    y->set_output();
    graph g(y);
    graph_allocator ga(dev.buffer_type());
    require_ok(ga.alloc_graph(g));
    test_backend b = dev.make_backend();

    const auto xin = iota_floats(256, -100.0f);
    std::vector<float> out(256, -7.0f);
    b.pause(); // nothing starts: the calls below must not wait for their work
    require_ok(b.set_tensor_async(*x, xin.data(), 0, 1024));
    require_ok(b.compute(g));
    require_ok(b.get_tensor_async(*y, out.data(), 0, 1024));
    CHECK(b.bytes_set() == 0);
    CHECK(b.n_nodes_computed() == 0);
    CHECK(out == std::vector<float>(256, -7.0f)); // not written yet
    require_ok(b.synchronize());                  // resumes the stream
    for (std::size_t i = 0; i < 256; ++i) REQUIRE(out[i] == xin[i] * xin[i] + xin[i]);
    CHECK(b.bytes_set() == 1024);
    CHECK(b.bytes_get() == 1024);
    CHECK(b.n_computes() == 1);
    CHECK(b.n_nodes_computed() == 2);
    CHECK(dev.counters().bytes_set() == 0); // the synchronous path was not used

    // many steps back to back on a slow stream: each get sees its own step's result
    test_device slow({.name = "SLOW", .delay = std::chrono::microseconds(200)});
    context sctx({.no_alloc = true});
    tensor* sx = sctx.new_tensor_1d(elem_type::f32, 64);
    sx->set_input();
    tensor* sy = scale(sctx, sx, 2.0f, 1.0f);
    sy->set_output();
    graph sg(sy);
    graph_allocator sga(slow.buffer_type());
    require_ok(sga.alloc_graph(sg));
    test_backend sb = slow.make_backend();
    std::vector<std::vector<float>> ins, outs(8, std::vector<float>(64));
    for (int step = 0; step < 8; ++step) ins.push_back(iota_floats(64, static_cast<float>(step * 1000)));
    for (int step = 0; step < 8; ++step) {
        const auto k = static_cast<std::size_t>(step);
        require_ok(sb.set_tensor_async(*sx, ins[k].data(), 0, 256));
        require_ok(sb.compute(sg));
        require_ok(sb.get_tensor_async(*sy, outs[k].data(), 0, 256));
    }
    require_ok(sb.synchronize());
    for (std::size_t k = 0; k < 8; ++k)
        for (std::size_t i = 0; i < 64; ++i) REQUIRE(outs[k][i] == ins[k][i] * 2.0f + 1.0f);
}

TEST_CASE("test backend: async copies within a device and from the host, refused across devices",
          "[sched][test_backend]") {
    test_device d0({.name = "T0"});
    test_device d1({.name = "T1"});
    one_tensor a(d0.buffer_type(), elem_type::f32, 32, 1, "a");
    one_tensor b(d0.buffer_type(), elem_type::f32, 32, 1, "b");
    one_tensor far(d1.buffer_type(), elem_type::f32, 32, 1, "far");
    context hctx;
    tensor* h = hctx.new_tensor_1d(elem_type::f32, 32);
    const auto v = iota_floats(32, 3.0f);
    std::memcpy(h->data, v.data(), 128);

    test_backend s0 = d0.make_backend();
    test_backend s1 = d1.make_backend();
    CHECK(s0.copy_tensor_async(*h, *a.t)); // host to device
    CHECK(s0.copy_tensor_async(*a.t, *b.t)); // device to device, after it in the stream
    CHECK_FALSE(s1.copy_tensor_async(*a.t, *far.t)); // another device: refused
    CHECK_FALSE(s0.copy_tensor_async(*a.t, *h));     // the destination is not this device's
    require_ok(s0.synchronize());
    require_ok(s1.synchronize());
    CHECK(read_all(*b.t) == v);
    CHECK(s0.bytes_copied() == 256);
    CHECK(s0.counters().n_copies() == 2);
    CHECK(s0.n_copy_async_refused() == 1);
    CHECK(s1.n_copy_async_refused() == 1);
    CHECK(s1.bytes_copied() == 0);
}

TEST_CASE("test backend: a stream waits for another stream's event on the device", "[sched][test_backend]") {
    test_device dev({.record_nodes = true});
    context ctx({.no_alloc = true});
    tensor* x = ctx.new_tensor_1d(elem_type::f32, 64);
    x->set_input();
    tensor* y = scale(ctx, x, 3.0f);
    y->set_output();
    tensor* z = add(ctx, y, y);
    z->set_output();
    graph g(z);
    REQUIRE(g.n_nodes() == 2);
    graph_allocator ga(dev.buffer_type());
    require_ok(ga.alloc_graph(g));

    test_backend b0 = dev.make_backend();
    test_backend b1 = dev.make_backend();
    auto e = b0.make_event();
    REQUIRE(e.ok());
    CHECK(e->query()); // never recorded: complete
    require_ok(e->synchronize());

    const auto xin = iota_floats(64, 1.0f);
    std::vector<float> out(64, 0.0f);
    b0.pause();
    require_ok(b0.set_tensor_async(*x, xin.data(), 0, 256));
    require_ok(b0.compute(g.view(0, 1))); // y on b0
    require_ok(b0.record(*e));
    require_ok(b1.wait(*e)); // returns at once: the wait is queued on b1
    require_ok(b1.compute(g.view(1, 2))); // z on b1, reading y
    require_ok(b1.get_tensor_async(*z, out.data(), 0, 256));
    CHECK_FALSE(e->query());
    CHECK(b1.n_nodes_computed() == 0); // b1 is held by the event, b0 is paused
    b0.resume();
    require_ok(b1.synchronize());
    for (std::size_t i = 0; i < 64; ++i) REQUIRE(out[i] == 6.0f * xin[i]);
    require_ok(e->synchronize());
    CHECK(e->query());
    require_ok(b0.synchronize());
    CHECK(b0.counters().n_records() == 1);
    CHECK(b1.counters().n_waits() == 1);
    CHECK(b0.n_nodes_computed() == 1);
    CHECK(b1.n_nodes_computed() == 1);
    CHECK(b0.computed_nodes() == std::vector<const tensor*>{y});
    CHECK(b1.computed_nodes() == std::vector<const tensor*>{z});
    b1.clear_computed_nodes();
    CHECK(b1.computed_nodes().empty());
}

TEST_CASE("test backend: events across devices, with a peer copy", "[sched][test_backend]") {
    test_device d0({.name = "T0"});
    test_device d1({.name = "T1", .peer_copy = true});
    one_tensor a(d0.buffer_type(), elem_type::f32, 16, 1, "a");
    context ctx1({.no_alloc = true});
    tensor* a1 = ctx1.new_tensor_1d(elem_type::f32, 16);
    a1->set_input();
    tensor* sq = sqr(ctx1, a1);
    sq->set_output();
    graph g1(sq);
    graph_allocator ga(d1.buffer_type());
    require_ok(ga.alloc_graph(g1));

    test_backend b0 = d0.make_backend();
    test_backend b1 = d1.make_backend();
    auto e = b0.make_event();
    REQUIRE(e.ok());
    const auto v = iota_floats(16, 1.0f);
    std::vector<float> out(16);
    b0.pause();
    require_ok(b0.set_tensor_async(*a.t, v.data(), 0, 64));
    require_ok(b0.record(*e));
    require_ok(b1.wait(*e));
    CHECK(b1.copy_tensor_async(*a.t, *a1)); // peer copy, after the wait
    require_ok(b1.compute(g1));
    require_ok(b1.get_tensor_async(*sq, out.data(), 0, 64));
    b0.resume();
    require_ok(b1.synchronize());
    for (std::size_t i = 0; i < 16; ++i) REQUIRE(out[i] == v[i] * v[i]);
    require_ok(b0.synchronize());

    // an event is recorded only by backends of its own device
    CHECK(b1.record(*e).code() == errc::invalid_argument);
}

TEST_CASE("test backend: a wait that is never satisfied times out", "[sched][test_backend]") {
    test_device dev({.wait_timeout = std::chrono::milliseconds(50)});
    test_backend b0 = dev.make_backend();
    test_backend b1 = dev.make_backend();
    auto e = b0.make_event();
    REQUIRE(e.ok());
    b0.pause();
    require_ok(b0.record(*e));
    require_ok(b1.wait(*e));
    CHECK(b1.synchronize().code() == errc::device_error);
    CHECK(e->synchronize().code() == errc::device_error);
    b0.resume();
    require_ok(e->synchronize());
    require_ok(b0.synchronize());
    require_ok(b1.synchronize()); // the error was reported once
}

TEST_CASE("test backend: an unsupported node is refused before anything runs", "[sched][test_backend]") {
    test_device dev({.supports = [](const tensor& t) { return t.op != op_kind::soft_max; }});
    context ctx({.no_alloc = true});
    tensor* x = ctx.new_tensor_2d(elem_type::f32, 8, 4);
    x->set_input();
    tensor* a = add(ctx, x, x);
    a->name = "a";
    a->set_output();
    tensor* s = soft_max(ctx, a);
    s->name = "the_soft_max";
    graph g(s);
    graph_allocator ga(dev.buffer_type());
    require_ok(ga.alloc_graph(g));
    write_all(*x, iota_floats(32));

    test_backend b = dev.make_backend();
    CHECK(b.supports_op(*a));
    CHECK_FALSE(b.supports_op(*s));
    CHECK(dev.supports_op(*reshape(ctx, x, {32}))); // views are always supported
    const status st = b.compute(g);
    CHECK(st.code() == errc::not_supported);
    CHECK(st.message().find("the_soft_max") != std::string::npos);
    require_ok(b.synchronize());
    CHECK(b.n_computes() == 0);
    CHECK(b.n_nodes_computed() == 0);
    CHECK(std::isnan(read_all(*a)[0])); // the add before it did not run either
}

TEST_CASE("test backend: a node or source outside the device's memory is invalid_argument",
          "[sched][test_backend]") {
    test_device dev;
    test_device other({.name = "OTHER"});
    context wctx({.no_alloc = true});
    tensor* hx = wctx.new_tensor_1d(elem_type::f32, 16);
    hx->name = "host_x";
    auto hb = alloc_tensors(wctx, cpu_buffer_type::instance());
    REQUIRE(hb.ok());
    one_tensor ox(other.buffer_type(), elem_type::f32, 16, 1, "other_x");

    test_backend b = dev.make_backend();
    for (tensor* src : {hx, ox.t}) {
        context ctx({.no_alloc = true});
        tensor* y = add(ctx, src, src);
        graph g(y);
        graph_allocator ga(dev.buffer_type());
        require_ok(ga.alloc_graph(g)); // y on the device, its source elsewhere
        const status st = b.compute(g);
        CHECK(st.code() == errc::invalid_argument);
        CHECK(st.message().find(src->name) != std::string::npos);
    }
    // a node without data
    context ctx({.no_alloc = true});
    one_tensor x(dev.buffer_type(), elem_type::f32, 16, 1, "x");
    tensor* y = add(ctx, x.t, x.t);
    y->name = "unallocated";
    const status st = b.compute(graph(y));
    CHECK(st.code() == errc::invalid_argument);
    CHECK(st.message().find("unallocated") != std::string::npos);
    require_ok(b.synchronize());
    CHECK(b.n_nodes_computed() == 0);

    CHECK(b.supports_buffer_type(dev.buffer_type()));
    CHECK_FALSE(b.supports_buffer_type(other.buffer_type()));
    CHECK_FALSE(b.supports_buffer_type(cpu_buffer_type::instance()));
}

TEST_CASE("test backend: errors while running come from synchronize, and skip the work after them",
          "[sched][test_backend]") {
    test_device dev;
    context ctx({.no_alloc = true});
    tensor* w = ctx.new_tensor_2d(elem_type::f32, 4, 3);
    tensor* idx = ctx.new_tensor_1d(elem_type::i32, 2);
    for (tensor* t : {w, idx}) t->set_input();
    tensor* rows = get_rows(ctx, w, idx);
    rows->set_output();
    graph g(rows);
    graph_allocator ga(dev.buffer_type());
    require_ok(ga.alloc_graph(g));
    write_all(*w, iota_floats(12));
    write_all(*idx, std::vector<std::int32_t>{0, 7}); // row 7 of 3

    test_backend b = dev.make_backend();
    std::vector<float> out(8, 5.0f);
    b.pause();
    require_ok(b.compute(g)); // queued: the index is only seen when it runs
    require_ok(b.get_tensor_async(*rows, out.data(), 0, 32));
    CHECK(b.synchronize().code() == errc::out_of_range);
    CHECK(out == std::vector<float>(8, 5.0f)); // skipped after the error
    require_ok(b.synchronize());               // reported once

    // inline: the same error straight from compute
    test_device sync_dev({.async = false});
    context sctx({.no_alloc = true});
    tensor* sw = sctx.new_tensor_2d(elem_type::f32, 4, 3);
    tensor* sidx = sctx.new_tensor_1d(elem_type::i32, 2);
    tensor* srows = get_rows(sctx, sw, sidx);
    graph sg(srows);
    graph_allocator sga(sync_dev.buffer_type());
    require_ok(sga.alloc_graph(sg));
    write_all(*sw, iota_floats(12));
    write_all(*sidx, std::vector<std::int32_t>{2, -1});
    test_backend sb = sync_dev.make_backend();
    CHECK(sb.compute(sg).code() == errc::out_of_range);
    require_ok(sb.synchronize());
}

TEST_CASE("test backend: with async = false everything runs inline", "[sched][test_backend]") {
    test_device dev({.async = false, .events = false});
    CHECK_FALSE(dev.caps().async);
    CHECK_FALSE(dev.caps().events);
    CHECK(dev.kind() == device_kind::gpu);
    context ctx({.no_alloc = true});
    tensor* x = ctx.new_tensor_1d(elem_type::f32, 16);
    tensor* y = relu(ctx, x);
    graph g(y);
    graph_allocator ga(dev.buffer_type());
    require_ok(ga.alloc_graph(g));
    test_backend b = dev.make_backend();
    const auto v = iota_floats(16, -8.0f);
    require_ok(b.set_tensor_async(*x, v.data(), 0, 64));
    CHECK(b.bytes_set() == 64); // already done
    require_ok(b.compute(g));
    CHECK(b.n_nodes_computed() == 1);
    std::vector<float> out(16);
    require_ok(b.get_tensor_async(*y, out.data(), 0, 64));
    for (std::size_t i = 0; i < 16; ++i) CHECK(out[i] == std::max(v[i], 0.0f));
    require_ok(b.synchronize());
    CHECK(b.make_event().error().code() == errc::not_supported);
}

TEST_CASE("test backend: async transfers check their tensor", "[sched][test_backend]") {
    test_device dev;
    one_tensor a(dev.buffer_type(), elem_type::f32, 8);
    one_tensor host(cpu_buffer_type::instance(), elem_type::f32, 8);
    test_backend b = dev.make_backend();
    std::vector<float> v(16);
    CHECK(b.set_tensor_async(*a.t, v.data(), 4, 32).code() == errc::out_of_range);
    CHECK(b.get_tensor_async(*a.t, v.data(), 33, 0).code() == errc::out_of_range);
    CHECK(b.set_tensor_async(*host.t, v.data(), 0, 32).code() == errc::invalid_argument);
    require_ok(b.synchronize());
    CHECK(b.bytes_set() == 0);
}

TEST_CASE("test device: allocation failures are statuses (injection, max_size, device memory)",
          "[sched][test_backend]") {
    test_device dev({.fail_alloc_above = 1024});
    const buffer_type_ref bt(dev.buffer_type());
    CHECK(bt.allocate(2048).error().code() == errc::alloc_failed);
    {
        auto ok = bt.allocate(1024);
        REQUIRE(ok.ok());
        CHECK(dev.live_buffers() == 1);
    }
    CHECK(dev.live_buffers() == 0);
    context ctx({.no_alloc = true});
    ctx.new_tensor_1d(elem_type::f32, 1024); // 4 KiB
    auto r = alloc_tensors(ctx, bt);
    CHECK(r.error().code() == errc::alloc_failed);
    INFO(r.error().describe());
    CHECK(r.error().message().find("injected") != std::string::npos);
    context gctx({.no_alloc = true});
    tensor* big = gctx.new_tensor_1d(elem_type::f32, 4096);
    graph g(relu(gctx, big));
    graph_allocator ga(bt);
    CHECK(ga.alloc_graph(g).code() == errc::alloc_failed);
    dev.set_fail_alloc_above(std::numeric_limits<std::size_t>::max());
    CHECK(alloc_tensors(ctx, bt).ok());

    test_device small({.max_buffer_size = 4096, .memory_size = 10000});
    const buffer_type_ref sbt(small.buffer_type());
    CHECK(sbt.max_size() == 4096);
    CHECK(sbt.allocate(4097).error().code() == errc::alloc_failed);
    auto b1 = sbt.allocate(4096);
    auto b2 = sbt.allocate(4096);
    REQUIRE(b1.ok());
    REQUIRE(b2.ok());
    CHECK(small.memory().total == 10000);
    CHECK(small.memory().free == 10000 - 8192);
    CHECK(sbt.allocate(4096).error().code() == errc::alloc_failed); // out of device memory
    CHECK(small.buffer_type().n_failed_allocations() == 2);
}

TEST_CASE("test device: offload_op, names, moves and the plain wrapper", "[sched][test_backend]") {
    test_device off({.name = "OFF", .offload = true});
    test_device plain_dev({.name = "PLAIN"});
    context ctx;
    tensor* w = ctx.new_tensor_2d(elem_type::f32, 16, 16);
    tensor* big = mul_mat(ctx, w, ctx.new_tensor_2d(elem_type::f32, 16, 32));
    tensor* small = mul_mat(ctx, w, ctx.new_tensor_2d(elem_type::f32, 16, 8));
    CHECK(off.offload_op(*big));
    CHECK_FALSE(off.offload_op(*small));
    CHECK_FALSE(off.offload_op(*add(ctx, w, w)));
    CHECK_FALSE(plain_dev.offload_op(*big));
    test_backend ob = off.make_backend();
    CHECK(ob.offload_op(*big));
    CHECK(ob.name() == "OFF");
    CHECK(&ob.device() == &off);
    CHECK(&ob.buffer_type() == &off.buffer_type());
    CHECK(off.buffer_type().name() == "OFF");
    CHECK(off.buffer_type().alignment() == 64);
    CHECK_FALSE(off.buffer_type().is_host());

    // moves: the stream moves along, the old one reports its misuse
    test_backend moved = std::move(ob);
    CHECK(moved.name() == "OFF");
    CHECK(ob.synchronize().code() == errc::invalid_argument); // NOLINT: use after move, on purpose
    require_ok(moved.synchronize());

    // the plain wrapper computes on the same stream
    context gctx({.no_alloc = true});
    tensor* x = gctx.new_tensor_1d(elem_type::f32, 4);
    tensor* y = sqrt(gctx, x);
    graph g(y);
    graph_allocator ga(plain_dev.buffer_type());
    require_ok(ga.alloc_graph(g));
    write_all(*x, std::vector<float>{1, 4, 9, 16});
    test::plain_backend<test_backend> pb(plain_dev.make_backend());
    require_ok(pb.compute(g));
    require_ok(pb.synchronize());
    CHECK(read_all(*y) == std::vector<float>{1, 2, 3, 4});
    CHECK(pb.inner().n_nodes_computed() == 1);
}

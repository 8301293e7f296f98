// Device timestamps of Vulkan computes (label vulkan): vulkan_backend models
// timed_backend. Nothing while timing is off; with it on, the span of the latest compute
// after synchronize: ordered, within the host's wall time around it, longer for more
// work, fresh when a kept recording runs again, the latest one's when several computes
// are queued before one synchronize (more than the stream's ring of query pairs too); in
// a scheduler's trace, the device spans of its Vulkan splits.
// Every validation-layer message fails the test.

#include <backplane/backends/vulkan.hpp>
#include <backplane/backplane.hpp>
#include <backplane/sched.hpp>

#include <catch2/catch.hpp>

#include "../../support/vulkan_test_support.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace backplane;
using backplane::test::check_validation;

namespace {

static_assert(timed_backend<vulkan_backend>);

std::uint64_t length(const device_span& s) { return s.end_ns - s.start_ns; }

/// A device, a stream on it, and three graphs in its memory: a tiny one (relu of 16
/// floats), a big one (a 512 x 512 x 512 f32 mul_mat) and one that queues nothing (a
/// view), with their inputs set.
struct fixture {
    vulkan_device dev;
    vulkan_backend be;
    context ctx{context_params{.no_alloc = true}};
    tensor* x = nullptr;
    graph tiny, big, empty;
    std::optional<buffer_list> bufs;

    fixture(vulkan_device d, vulkan_backend b) : dev(std::move(d)), be(std::move(b)) {
        x = ctx.new_tensor_1d(elem_type::f32, 16);
        tensor* a = ctx.new_tensor_2d(elem_type::f32, 512, 512);
        tensor* m = ctx.new_tensor_2d(elem_type::f32, 512, 512);
        tiny = graph(relu(ctx, x));
        big = graph(mul_mat(ctx, a, m));
        empty = graph(reshape(ctx, x, {4, 4})); // a view: computes nothing
        auto r = alloc_tensors(ctx, dev.buffer_type());
        REQUIRE(r);
        bufs.emplace(std::move(*r));
        std::mt19937 rng(3);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        for (tensor* t : {x, a, m}) {
            std::vector<float> v(static_cast<std::size_t>(t->nelements()));
            for (float& f : v) f = u(rng);
            REQUIRE(tensor_set(*t, v.data(), 0, v.size() * sizeof(float)));
        }
    }
};

/// Whether f's stream can time (set_timing(true) looked it up); a warning when not.
bool can_time_or_warn(const fixture& f) {
    if (f.be.timing_supported()) return true;
    WARN("Vulkan device '" << f.dev.description()
                           << "' cannot write timestamps on its compute queue (timestampValidBits 0), skipping");
    return false;
}

/// A fixture on physical device 0 with timing turned on, or nothing (and a warning) when
/// there is no Vulkan or its queue cannot write timestamps.
std::unique_ptr<fixture> timed_or_skip() {
    auto dev = vulkan_device::open({.index = 0});
    if (!dev) {
        WARN("no Vulkan device, skipping: " << dev.error().describe());
        return nullptr;
    }
    auto be = dev->make_backend();
    REQUIRE(be);
    auto f = std::make_unique<fixture>(std::move(*dev), std::move(*be));
    f->be.set_timing(true);
    if (!can_time_or_warn(*f)) return nullptr;
    return f;
}

/// Runs g and waits for it; the host's wall time around both, in nanoseconds.
std::uint64_t run_and_wait(vulkan_backend& be, graph& g) {
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(be.compute(g));
    REQUIRE(be.synchronize());
    const auto t1 = std::chrono::steady_clock::now();
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
}

// A device's span may exceed the host's measure of the same work by the granularity of
// the two clocks (a few device ticks, a host clock read).
constexpr std::uint64_t slack_ns = 100'000;

} // namespace

TEST_CASE("vulkan timing: nothing while off, with it on, a span within the host's wall time, longer for more work",
          "[vulkan][timing]") {
    auto dev = vulkan_device::open({.index = 0});
    if (!dev) {
        WARN("no Vulkan device, skipping: " << dev.error().describe());
        return;
    }
    auto be = dev->make_backend();
    REQUIRE(be);
    fixture f(std::move(*dev), std::move(*be));
    CHECK_FALSE(f.be.last_compute_time());
    // off: no span and no timed submission; these also record both graphs and make
    // their pipelines, so the timed runs below measure the work alone
    (void)run_and_wait(f.be, f.tiny);
    (void)run_and_wait(f.be, f.big);
    CHECK_FALSE(f.be.last_compute_time());
    CHECK(f.be.stats().timed == 0);
    CHECK_FALSE(f.be.timing_supported()); // not looked up before timing is asked for

    f.be.set_timing(true);
    if (!can_time_or_warn(f)) return;
    CHECK_FALSE(f.be.last_compute_time()); // no compute since timing was turned on

    const std::uint64_t tiny_wall = run_and_wait(f.be, f.tiny);
    const auto tiny = f.be.last_compute_time();
    REQUIRE(tiny);
    CHECK(tiny->end_ns >= tiny->start_ns);
    CHECK(length(*tiny) <= tiny_wall + slack_ns);
    CHECK(f.be.last_compute_time()->start_ns == tiny->start_ns); // asking again reads the same

    const std::uint64_t big_wall = run_and_wait(f.be, f.big);
    const auto big = f.be.last_compute_time();
    REQUIRE(big);
    INFO("tiny: " << length(*tiny) << " ns of " << tiny_wall << " ns wall; big: " << length(*big) << " ns of "
                  << big_wall << " ns wall");
    CHECK(big->end_ns >= big->start_ns);
    CHECK(length(*big) > length(*tiny));
    CHECK(length(*big) <= big_wall + slack_ns);
    CHECK(big->start_ns >= tiny->end_ns);
    // the stamps frame the work itself: most of the host's wait for the big graph
    CHECK(length(*big) * 4 >= big_wall);
    CHECK(f.be.stats().timed == 2);
    check_validation();
}

TEST_CASE("vulkan timing: successive computes, kept recordings run again, give fresh ordered spans",
          "[vulkan][timing]") {
    auto f = timed_or_skip();
    if (!f) return;
    auto& be = f->be;
    std::optional<device_span> prev;
    // tiny, big, tiny, big, tiny: the third and later reuse the recordings
    for (int i = 0; i < 5; ++i) {
        INFO("compute " << i);
        graph& g = i % 2 == 0 ? f->tiny : f->big;
        (void)run_and_wait(be, g);
        const auto s = be.last_compute_time();
        REQUIRE(s);
        CHECK(s->end_ns >= s->start_ns);
        if (prev) {
            CHECK(s->start_ns >= prev->end_ns);
            CHECK(s->start_ns > prev->start_ns); // a fresh span, not the recording's last one
        }
        prev = s;
    }
    CHECK(be.stats().recorded == 2);
    CHECK(be.stats().computes == 5);
    CHECK(be.stats().timed == 5);
    // the same recording twice in a row
    (void)run_and_wait(be, f->tiny);
    const auto a = be.last_compute_time();
    (void)run_and_wait(be, f->tiny);
    const auto b = be.last_compute_time();
    REQUIRE(a);
    REQUIRE(b);
    CHECK(a->start_ns >= prev->end_ns);
    CHECK(b->start_ns >= a->end_ns);
    CHECK(b->start_ns > a->start_ns);
    check_validation();
}

TEST_CASE("vulkan timing: several computes queued before one synchronize give the latest one's span",
          "[vulkan][timing]") {
    auto f = timed_or_skip();
    if (!f) return;
    auto& be = f->be;
    // warm up both graphs, and measure the big one alone: its shortest of a few runs (the
    // first runs of a software device can be much slower than the later ones)
    (void)run_and_wait(be, f->tiny);
    std::uint64_t big = UINT64_MAX;
    for (int i = 0; i < 3; ++i) {
        (void)run_and_wait(be, f->big);
        const auto s = be.last_compute_time();
        REQUIRE(s);
        big = std::min(big, length(*s));
    }
    (void)run_and_wait(be, f->tiny);
    const auto before = be.last_compute_time();
    REQUIRE(before);

    // big, big, tiny queued, then one synchronize: the tiny one's span, which starts
    // after the two big ones ran
    REQUIRE(be.compute(f->big));
    REQUIRE(be.compute(f->big));
    REQUIRE(be.compute(f->tiny));
    {
        // before synchronize: nothing, or (already done) the latest compute's span, never
        // an earlier one's
        const auto early = be.last_compute_time();
        if (early) CHECK(early->start_ns >= before->end_ns + big);
    }
    REQUIRE(be.synchronize());
    const auto latest = be.last_compute_time();
    REQUIRE(latest);
    INFO("big alone: " << big << " ns; latest: " << length(*latest) << " ns, starting "
                       << latest->start_ns - before->end_ns << " ns after the previous span");
    CHECK(length(*latest) < big / 2);
    // the two big ones ran in between (each about as long as the one measured alone)
    CHECK(latest->start_ns - before->end_ns >= big);

    // tiny, tiny, big: the big one's
    REQUIRE(be.compute(f->tiny));
    REQUIRE(be.compute(f->tiny));
    REQUIRE(be.compute(f->big));
    REQUIRE(be.synchronize());
    const auto last_big = be.last_compute_time();
    REQUIRE(last_big);
    CHECK(last_big->start_ns >= latest->end_ns);
    CHECK(length(*last_big) > length(*latest));
    CHECK(length(*last_big) * 2 >= big);

    // more computes in flight than the stream has query pairs: the oldest pairs are
    // waited for before they are reset, the latest span is still the last compute's
    for (int i = 0; i < 80; ++i) REQUIRE(be.compute(i % 2 == 0 ? f->tiny : f->empty));
    REQUIRE(be.compute(f->tiny));
    REQUIRE(be.synchronize());
    const auto many = be.last_compute_time();
    REQUIRE(many);
    CHECK(many->start_ns >= last_big->end_ns);
    CHECK(many->end_ns >= many->start_ns);
    CHECK(be.stats().recorded == 2);
    check_validation();
}

TEST_CASE("vulkan timing: off again gives nothing, on again forgets earlier spans, empty computes have none",
          "[vulkan][timing]") {
    auto f = timed_or_skip();
    if (!f) return;
    auto& be = f->be;
    (void)run_and_wait(be, f->tiny);
    const auto first = be.last_compute_time();
    REQUIRE(first);

    be.set_timing(false);
    CHECK_FALSE(be.last_compute_time());
    const auto timed = be.stats().timed;
    (void)run_and_wait(be, f->tiny);
    (void)run_and_wait(be, f->big);
    CHECK_FALSE(be.last_compute_time());
    CHECK(be.stats().timed == timed); // no stamps written while off

    be.set_timing(true);
    be.set_timing(true); // already on: changes nothing
    CHECK_FALSE(be.last_compute_time());
    (void)run_and_wait(be, f->tiny);
    const auto again = be.last_compute_time();
    REQUIRE(again);
    CHECK(again->start_ns > first->end_ns);
    CHECK(be.stats().timed == timed + 1);

    // a compute that queues nothing (a view) has no span, the next real one has
    (void)run_and_wait(be, f->empty);
    CHECK_FALSE(be.last_compute_time());
    (void)run_and_wait(be, f->tiny);
    REQUIRE(be.last_compute_time());

    // done once an event recorded after it is reached, without the stream's synchronize
    REQUIRE(be.compute(f->big));
    auto e = be.make_event();
    REQUIRE(e);
    REQUIRE(be.record(*e));
    REQUIRE(e->synchronize());
    const auto by_event = be.last_compute_time();
    REQUIRE(by_event);
    CHECK(by_event->start_ns >= again->end_ns);
    CHECK(length(*by_event) > 0);
    REQUIRE(be.synchronize());

    // a moved-from backend has nothing and ignores set_timing
    vulkan_backend moved = std::move(be);
    CHECK_FALSE(be.last_compute_time()); // NOLINT(bugprone-use-after-move): its defined state
    be.set_timing(true);                 // NOLINT(bugprone-use-after-move)
    CHECK_FALSE(be.timing_supported());  // NOLINT(bugprone-use-after-move)
    CHECK(moved.last_compute_time());
    check_validation();
}

TEST_CASE("vulkan timing in scheduler traces: device spans on the trace clock, inside the host's", "[vulkan][timing]") {
    auto dev = vulkan_device::open({.index = 0});
    if (!dev) {
        WARN("no Vulkan device, skipping: " << dev.error().describe());
        return;
    }
    auto be = dev->make_backend();
    REQUIRE(be);
    cpu_backend cpu;
    // a product on the device, element-wise work on the CPU
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 256, 256);
    tensor* x = ctx.new_tensor_2d(elem_type::f32, 256, 64);
    x->set_input();
    auto wb = alloc_tensors(ctx, dev->buffer_type(), buffer_usage::weights); // a: the weights
    REQUIRE(wb);
    context gctx({.no_alloc = true});
    tensor* y = mul_mat(gctx, a, x);
    tensor* z = mul_mat(gctx, a, scale(gctx, y, 0.5f));
    tensor* out = relu(gctx, z);
    out->set_output();
    graph g(out);
    scheduler sched(scheduler_params{.trace = true}, *be, cpu);
    REQUIRE(sched.alloc_graph(g));
    std::vector<float> ones(static_cast<std::size_t>(a->nelements()), 0.01f);
    REQUIRE(tensor_set(*a, ones.data(), 0, ones.size() * sizeof(float)));
    REQUIRE(tensor_set(*x, ones.data(), 0, static_cast<std::size_t>(x->nelements()) * sizeof(float)));
    REQUIRE(sched.compute(g));
    if (!be->timing_supported()) {
        WARN("Vulkan device '" << dev->description() << "' cannot write timestamps, skipping");
        return;
    }
    std::size_t timed = 0;
    for (const trace_event& e : sched.trace()) {
        INFO("split " << e.split << " on backend " << e.backend);
        if (e.what == trace_event::kind::copy || e.backend != 0) {
            CHECK_FALSE(e.has_device_time); // copies and the CPU have host times only
            continue;
        }
        REQUIRE(e.has_device_time);
        ++timed;
        CHECK(e.device_end_ns >= e.device_start_ns);
        CHECK(e.device_end_ns <= e.end_ns); // placed so that no span ends after the host saw it
        CHECK(e.device_end_ns - e.device_start_ns <= e.end_ns - e.start_ns + static_cast<std::int64_t>(slack_ns));
    }
    CHECK(timed >= 1);
    const std::string json = sched.trace_json();
    CHECK(json.find(std::string(be->name()) + " (device)") != std::string::npos);
    CHECK(json.find("on the device") != std::string::npos);
    const std::string table = sched.trace_table();
    CHECK(table.find("device ms") != std::string::npos);
    check_validation();
}

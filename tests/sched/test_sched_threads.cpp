// The scheduler and threads: a scheduler used from a second thread while one is inside
// refuses the call (errc::busy) instead of deadlocking or corrupting its plan; separate
// schedulers with their own backends run on separate threads at once; and the
// constructor's parameter checks (pipeline copies) throw backplane::error only.

#include "../support/deadline.hpp"
#include "sched_fixtures.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace backplane;
using namespace backplane::test;
using namespace std::chrono_literals;

namespace {

// Catch2 v2's assertions are not thread-safe: code that runs on several threads at once
// fills and reads tensors with these, which throw instead.
void fill(tensor& t, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(static_cast<std::size_t>(t.nelements()));
    for (auto& x : v) x = u(rng);
    tensor_set(t, v.data(), 0, v.size() * sizeof(float)).throw_if_failed();
}
std::vector<float> values(const tensor& t) {
    std::vector<float> v(static_cast<std::size_t>(t.nelements()));
    tensor_get(t, v.data(), 0, v.size() * sizeof(float)).throw_if_failed();
    return v;
}

/// x (user input) -> scale on the CPU -> two products on the test device (weights there)
/// -> add on the CPU -> out: two backends, copies both ways, events.
struct two_backend_setup {
    test_device dev{test_device_params{.name = "TEST0",
                                       .supports = [](const tensor& t) {
                                           return t.op != op_kind::scale && t.op != op_kind::add;
                                       }}};
    test_backend tb = dev.make_backend();
    cpu_backend cpu{cpu_backend_params{.n_threads = 2}};
    context wctx{context_params{.no_alloc = true}};
    context hctx{context_params{.no_alloc = false}};
    context ctx{context_params{.no_alloc = true}};
    buffer_list wbufs;
    tensor* x = nullptr;
    tensor* out = nullptr;
    graph g;

    explicit two_backend_setup(std::uint32_t seed) {
        tensor* w1 = wctx.new_tensor_2d(elem_type::f32, 16, 16);
        tensor* w2 = wctx.new_tensor_2d(elem_type::f32, 16, 16);
        wbufs = alloc_tensors(wctx, dev.buffer_type(), buffer_usage::weights).value();
        fill(*w1, seed);
        fill(*w2, seed + 1);
        tensor* bias = hctx.new_tensor_2d(elem_type::f32, 16, 1);
        fill(*bias, seed + 2);
        x = new_input(ctx, 16, 4);
        tensor* h = scale(ctx, x, 0.5f, 0.25f);
        out = add(ctx, mul_mat(ctx, w2, silu(ctx, mul_mat(ctx, w1, h))), bias);
        out->name = "out";
        out->set_output();
        g = graph(out);
    }
};

/// out of `s` for input seed `in`, computed by a fresh scheduler on this thread.
std::vector<float> expected_out(std::uint32_t seed, std::uint32_t in) {
    two_backend_setup s(seed);
    scheduler sched(s.tb, s.cpu);
    REQUIRE(sched.alloc_graph(s.g));
    fill(*s.x, in);
    REQUIRE(sched.compute(s.g));
    return values(*s.out);
}

} // namespace

TEST_CASE("scheduler: a call from a second thread while one computes is refused with errc::busy",
          "[sched][threads][busy]") {
    const auto expected = expected_out(5, 50);
    two_backend_setup s(5);
    scheduler sched(scheduler_params{.n_copies = 2}, s.tb, s.cpu);
    REQUIRE(sched.alloc_graph(s.g));
    fill(*s.x, 50);
    std::atomic<bool> inside{false}, done{false};
    sched.set_eval_callback([&](tensor&, bool ask) {
        if (!ask && !inside.exchange(true)) (void)eventually([&] { return done.load(); }, 10000ms);
        return true;
    });

    within(60s, "two threads on one scheduler", [&] {
        status a;
        std::vector<std::pair<std::string, status>> b;
        std::vector<std::string> b_threw;
        std::thread ta([&] { a = sched.compute(s.g); });
        REQUIRE(eventually([&] { return inside.load(); }));
        std::thread tb([&] {
            b.emplace_back("compute", sched.compute(s.g));
            b.emplace_back("compute_async", sched.compute_async(s.g));
            b.emplace_back("alloc_graph", sched.alloc_graph(s.g));
            b.emplace_back("reserve", sched.reserve(s.g));
            b.emplace_back("plan", sched.plan(s.g));
            b.emplace_back("dry_run", sched.dry_run(s.g).error());
            b.emplace_back("synchronize", sched.synchronize());
            b.emplace_back("set_backend", sched.set_backend(*s.out, 0));
            auto throws_busy = [&](const char* what, auto&& f) {
                try {
                    f();
                } catch (const error& e) {
                    if (e.code() == errc::busy) b_threw.emplace_back(what);
                }
            };
            throws_busy("reset", [&] { sched.reset(); });
            throws_busy("set_eval_callback", [&] { sched.set_eval_callback({}); });
            throws_busy("set_op_offload", [&] { sched.set_op_offload(false); });
            done = true;
        });
        tb.join();
        ta.join();
        REQUIRE(a.ok());
        for (const auto& [call, st] : b) {
            INFO(call << ": " << st.describe());
            CHECK(st.code() == errc::busy);
            CHECK(st.message().find("scheduler: " + call + " called while another thread is using this scheduler") !=
                  std::string::npos);
        }
        CHECK(b_threw == std::vector<std::string>{"reset", "set_eval_callback", "set_op_offload"});
    });
    // nothing the refused calls asked for happened
    CHECK(values(*s.out) == expected);
    CHECK(sched.op_offload());
    CHECK(sched.backend_of(*s.out) == 1);
    // used from another thread afterwards (one at a time): fine
    sched.set_eval_callback({});
    std::thread later([&] {
        fill(*s.x, 50);
        CHECK(sched.compute(s.g).ok());
    });
    later.join();
    CHECK(values(*s.out) == expected);
}

TEST_CASE("scheduler: two threads computing in a loop on one scheduler never deadlock", "[sched][threads][busy]") {
    const auto expected = expected_out(7, 70);
    two_backend_setup s(7);
    scheduler sched(scheduler_params{.n_copies = 2}, s.tb, s.cpu);
    REQUIRE(sched.alloc_graph(s.g));
    fill(*s.x, 70);
    std::atomic<int> ok{0}, busy{0}, other{0};
    within(120s, "two threads computing in a loop on one scheduler", [&] {
        auto loop = [&] {
            for (int i = 0; i < 100; ++i) {
                const status st = sched.compute(s.g);
                (st.ok() ? ok : st.code() == errc::busy ? busy : other).fetch_add(1);
            }
        };
        std::thread t1(loop), t2(loop);
        t1.join();
        t2.join();
    });
    CHECK(ok.load() + busy.load() == 200);
    CHECK(other.load() == 0);
    CHECK(ok.load() > 0);
    CHECK(values(*s.out) == expected);
}

TEST_CASE("scheduler: schedulers with their own backends compute on separate threads at once",
          "[sched][threads][pipeline]") {
    constexpr int n_threads = 3, n_runs = 8;
    std::vector<std::vector<float>> expected;
    for (int t = 0; t < n_threads; ++t) expected.push_back(expected_out(10u + t, 100u + t));
    std::vector<std::vector<float>> got(n_threads);
    std::vector<int> failures(n_threads, 0);
    within(120s, "schedulers on separate threads", [&] {
        std::vector<std::thread> threads;
        for (int t = 0; t < n_threads; ++t)
            threads.emplace_back([&, t] {
                two_backend_setup s(10u + static_cast<std::uint32_t>(t));
                scheduler sched(scheduler_params{.n_copies = 3}, s.tb, s.cpu);
                for (int run = 0; run < n_runs; ++run) {
                    if (!sched.alloc_graph(s.g)) ++failures[t];
                    fill(*s.x, 100u + static_cast<std::uint32_t>(t));
                    if (!sched.compute_async(s.g)) ++failures[t];
                }
                if (!sched.synchronize()) ++failures[t];
                got[t] = values(*s.out);
            });
        for (auto& th : threads) th.join();
    });
    for (int t = 0; t < n_threads; ++t) {
        CHECK(failures[t] == 0);
        CHECK(got[t] == expected[t]);
    }
}

TEST_CASE("scheduler: pipeline copies outside [1, max_copies] and extra memory caps are a backplane::error",
          "[sched][threads][params]") {
    test_device dev({.name = "TEST0"});
    test_backend tb = dev.make_backend();
    cpu_backend cpu(cpu_backend_params{.n_threads = 1});
    auto code_of = [&](scheduler_params p) {
        try {
            scheduler sched(std::move(p), tb, cpu);
            return errc::ok;
        } catch (const error& e) {
            return e.code();
        } // anything else (std::bad_alloc) fails the test
    };
    CHECK(code_of({.n_copies = 1 << 30}) == errc::invalid_argument);
    CHECK(code_of({.n_copies = scheduler_params::max_copies + 1}) == errc::invalid_argument);
    CHECK(code_of({.n_copies = 0}) == errc::invalid_argument);
    CHECK(code_of({.n_copies = -5}) == errc::invalid_argument);
    CHECK(code_of({.n_copies = scheduler_params::max_copies}) == errc::ok);
    CHECK(code_of({.memory_caps = {1, 2, 3}}) == errc::invalid_argument);
    CHECK(code_of({.memory_caps = {1, 2}}) == errc::ok);
    try {
        scheduler sched(scheduler_params{.n_copies = 1 << 30}, tb, cpu);
    } catch (const error& e) {
        CHECK(std::string(e.what()) ==
              "scheduler: n_copies must be between 1 and 64 (scheduler_params::max_copies), got 1073741824");
    }
}

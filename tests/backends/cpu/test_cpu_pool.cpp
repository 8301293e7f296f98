// The CPU backend used from several threads: a backend used from two threads at once
// refuses the second (errc::busy) instead of deadlocking; a thread pool shared by several
// backends (ggml's threadpool) serialises their computes, pauses and resumes, and lives
// as long as any backend holds it.

#include "../../support/deadline.hpp"

#include <backplane/backplane.hpp>

#include <catch2/catch.hpp>

#include "split_everything.hpp"

#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace backplane;
using backplane::test::eventually;
using backplane::test::within;
using namespace std::chrono_literals;

namespace {

using backplane::test::split_everything;

/// out = soft_max(w x) * 0.5 + x': a few nodes, each split over every thread.
struct small_graph {
    context ctx;
    tensor* x = nullptr;
    tensor* out = nullptr;
    graph g;

    explicit small_graph(std::uint32_t seed) {
        tensor* w = ctx.new_tensor_2d(elem_type::f32, 48, 48);
        x = ctx.new_tensor_2d(elem_type::f32, 48, 24);
        fill(*w, seed);
        fill(*x, seed + 1);
        tensor* y = soft_max(ctx, mul_mat(ctx, w, x));
        out = add(ctx, scale(ctx, y, 0.5f, 0.0f), x);
        g = graph(out);
    }
    static void fill(tensor& t, std::uint32_t seed) {
        std::mt19937 rng(seed);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        auto* p = static_cast<float*>(t.data);
        for (std::int64_t i = 0; i < t.nelements(); ++i) p[i] = u(rng);
    }
    [[nodiscard]] std::vector<float> values() const {
        std::vector<float> v(static_cast<std::size_t>(out->nelements()));
        std::memcpy(v.data(), out->data, v.size() * sizeof(float));
        return v;
    }
    void poison() { std::memset(out->data, 0xff, out->nbytes()); }
};

/// out's values computed by a backend with its own pool of n threads.
std::vector<float> private_result(small_graph& s, int n) {
    cpu_backend own({.n_threads = n});
    REQUIRE(own.compute(s.g).ok());
    return s.values();
}

/// CPU time this process used so far, in seconds.
double process_cpu_seconds() {
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// Holds thread A inside a compute (in a callback it calls) until thread B has made its
/// calls: A signals `inside`, B runs, then sets `done`.
struct rendezvous {
    std::atomic<bool> inside{false};
    std::atomic<bool> done{false};
    /// Called on A: the first time, waits for B (at most 10 s).
    void hold() {
        if (inside.exchange(true)) return;
        (void)eventually([&] { return done.load(); }, 10000ms);
    }
};

} // namespace

// ---------------------------------------------------------------------------------------
// One backend, two threads

TEST_CASE("cpu backend: a compute from a second thread while one runs is refused with errc::busy",
          "[cpu][threads][busy]") {
    split_everything all;
    small_graph s(7);
    const auto expected = private_result(s, 2);
    cpu_backend cpu({.n_threads = 2});
    rendezvous r;
    cpu.set_abort_callback([&] {
        r.hold();
        return false;
    });

    within(60s, "two threads computing on one CPU backend", [&] {
        status a, b, b_threads, b_pool, b_plan;
        bool b_reference_threw = false;
        std::thread ta([&] { a = cpu.compute(s.g); });
        REQUIRE(eventually([&] { return r.inside.load(); }));
        std::thread tb([&] {
            b = cpu.compute(s.g);
            b_threads = cpu.set_n_threads(3);
            b_pool = cpu.set_thread_pool(std::make_shared<cpu::thread_pool>(2));
            b_plan = cpu.make_plan(s.g).error();
            try {
                cpu.set_reference(true);
            } catch (const error& e) {
                b_reference_threw = e.code() == errc::busy;
            }
            r.done = true;
        });
        tb.join();
        ta.join();
        REQUIRE(a.ok());
        CHECK(b.code() == errc::busy);
        CHECK(b.message().find("cpu backend: compute called while another thread is using this cpu backend") !=
              std::string::npos);
        CHECK(b_threads.code() == errc::busy);
        CHECK(b_pool.code() == errc::busy);
        CHECK(b_plan.code() == errc::busy);
        CHECK(b_reference_threw);
    });
    // the refused calls changed nothing, and the first compute is right
    CHECK(cpu.n_threads() == 2);
    CHECK_FALSE(cpu.reference());
    CHECK(s.values() == expected);
    // used from another thread afterwards (one at a time): fine
    cpu.set_abort_callback({});
    s.poison();
    std::thread later([&] { CHECK(cpu.compute(s.g).ok()); });
    later.join();
    CHECK(s.values() == expected);
}

TEST_CASE("cpu backend: two threads computing in a loop on one backend never deadlock", "[cpu][threads][busy]") {
    split_everything all;
    small_graph s(11);
    const auto expected = private_result(s, 2);
    cpu_backend cpu({.n_threads = 2});
    std::atomic<int> ok{0}, busy{0}, other{0};
    within(120s, "two threads computing in a loop on one CPU backend", [&] {
        auto loop = [&] {
            for (int i = 0; i < 200; ++i) {
                const status st = cpu.compute(s.g);
                (st.ok() ? ok : st.code() == errc::busy ? busy : other).fetch_add(1);
            }
        };
        std::thread t1(loop), t2(loop);
        t1.join();
        t2.join();
    });
    CHECK(ok.load() + busy.load() == 400);
    CHECK(other.load() == 0);
    CHECK(ok.load() > 0); // a refusal means the other thread was computing
    CHECK(s.values() == expected);
}

TEST_CASE("cpu backend: the abort callback calling back into its own backend is refused, not a deadlock",
          "[cpu][threads][busy]") {
    small_graph s(3);
    cpu_backend cpu({.n_threads = 2});
    status inner;
    bool set_threw = false;
    cpu.set_abort_callback([&] {
        if (inner.ok() && inner.message().empty()) {
            inner = cpu.compute(s.g);
            try {
                cpu.set_abort_callback({});
            } catch (const error& e) {
                set_threw = e.code() == errc::busy;
            }
        }
        return false;
    });
    within(30s, "a CPU backend re-entered from its abort callback", [&] {
        const status st = cpu.compute(s.g);
        INFO(st.describe());
        REQUIRE(st.ok());
    });
    CHECK(inner.code() == errc::busy);
    CHECK(inner.message().find("from inside the abort callback") != std::string::npos);
    CHECK(set_threw);
}

// ---------------------------------------------------------------------------------------
// The pool itself, from several threads

TEST_CASE("cpu thread_pool: jobs from two threads take turns, each with all its threads", "[cpu][threads][pool]") {
    cpu::thread_pool pool(3);
    struct job {
        cpu::thread_pool* pool;
        int slots[3]{};
        int errors = 0; // thread 0 only
        static void run(void* ctx, int ith) noexcept {
            auto& j = *static_cast<job*>(ctx);
            j.slots[ith] += 1;
            j.pool->barrier();
            if (ith == 0)
                for (int t = 1; t < j.pool->job_threads(); ++t)
                    if (j.slots[t] != j.slots[0]) ++j.errors;
            j.pool->barrier();
        }
    };
    job a{&pool}, b{&pool};
    within(60s, "two threads running jobs on one pool", [&] {
        status sa, sb;
        std::thread ta([&] {
            for (int i = 0; i < 300 && sa.ok(); ++i) sa = pool.run(&job::run, &a);
        });
        std::thread tb([&] {
            for (int i = 0; i < 300 && sb.ok(); ++i) sb = pool.run(&job::run, &b);
        });
        ta.join();
        tb.join();
        CHECK(sa.ok());
        CHECK(sb.ok());
    });
    CHECK(a.errors == 0);
    CHECK(b.errors == 0);
    for (int t = 0; t < 3; ++t) {
        CHECK(a.slots[t] == 300);
        CHECK(b.slots[t] == 300);
    }
}

TEST_CASE("cpu thread_pool: a job using its own pool again is refused, not a deadlock", "[cpu][threads][pool]") {
    cpu::thread_pool pool(2);
    struct job {
        cpu::thread_pool* pool;
        status inner[2];
        static void nothing(void*, int) noexcept {}
        static void run(void* ctx, int ith) noexcept {
            auto& j = *static_cast<job*>(ctx);
            j.inner[ith] = j.pool->run(&nothing, nullptr);
        }
    };
    job j{&pool, {}};
    within(30s, "a job running a job on its own pool", [&] { REQUIRE(pool.run(&job::run, &j).ok()); });
    CHECK(j.inner[0].code() == errc::busy); // the calling thread
    CHECK(j.inner[1].code() == errc::busy); // a worker
    auto lease = pool.acquire();
    REQUIRE(lease);
    CHECK(pool.acquire().error().code() == errc::busy); // this thread holds it already
    CHECK(pool.set_n_threads(1).code() == errc::busy);
}

// ---------------------------------------------------------------------------------------
// A pool shared by several backends

TEST_CASE("cpu shared pool: two backends computing alternately equal a private pool", "[cpu][threads][pool]") {
    split_everything all;
    small_graph s1(21), s2(22);
    const auto e1 = private_result(s1, 3);
    const auto e2 = private_result(s2, 3);
    auto pool = std::make_shared<cpu::thread_pool>(3);
    cpu_backend a({.pool = pool});
    cpu_backend b({.n_threads = 3});
    REQUIRE(b.set_thread_pool(pool).ok());
    CHECK(a.n_threads() == 3); // the pool's size
    CHECK(a.thread_pool() == pool);
    CHECK(b.thread_pool() == pool);
    for (int i = 0; i < 20; ++i) {
        s1.poison();
        s2.poison();
        REQUIRE(a.compute(s1.g).ok());
        REQUIRE(b.compute(s2.g).ok());
        CHECK(s1.values() == e1);
        CHECK(s2.values() == e2);
    }
    CHECK(pool->n_workers() == 2); // one set of workers for both

    SECTION("a backend asking for more threads than the pool has uses the pool's") {
        REQUIRE(a.set_n_threads(8).ok());
        CHECK(pool->n_threads() == 3); // a shared pool is not resized by a backend
        s1.poison();
        REQUIRE(a.compute(s1.g).ok());
        CHECK(s1.values() == e1);
    }
    SECTION("the pool resized by its owner between computes") {
        REQUIRE(pool->set_n_threads(2).ok());
        s1.poison();
        REQUIRE(a.compute(s1.g).ok());
        CHECK(s1.values() == e1);
        CHECK(pool->n_workers() == 1);
    }
    SECTION("back to a private pool") {
        REQUIRE(a.set_thread_pool(nullptr).ok());
        CHECK(a.thread_pool() != pool);
        REQUIRE(a.thread_pool() != nullptr);
        s1.poison();
        REQUIRE(a.compute(s1.g).ok());
        CHECK(s1.values() == e1);
    }
}

TEST_CASE("cpu shared pool: two backends computing from two threads at once take turns", "[cpu][threads][pool]") {
    split_everything all;
    small_graph s1(31), s2(32);
    const auto e1 = private_result(s1, 2);
    const auto e2 = private_result(s2, 2);
    auto pool = std::make_shared<cpu::thread_pool>(2);
    cpu_backend a({.pool = pool});
    cpu_backend b({.pool = pool});
    within(120s, "two backends sharing a pool, computing from two threads", [&] {
        int bad_a = 0, bad_b = 0;
        status sa, sb;
        std::thread ta([&] {
            for (int i = 0; i < 150 && sa.ok(); ++i) {
                sa = a.compute(s1.g);
                if (s1.values() != e1) ++bad_a;
            }
        });
        std::thread tb([&] {
            for (int i = 0; i < 150 && sb.ok(); ++i) {
                sb = b.compute(s2.g);
                if (s2.values() != e2) ++bad_b;
            }
        });
        ta.join();
        tb.join();
        CHECK(sa.ok());
        CHECK(sb.ok());
        CHECK(bad_a == 0);
        CHECK(bad_b == 0);
    });
}

TEST_CASE("cpu shared pool: an abort callback computing on another backend of the same pool is refused",
          "[cpu][threads][pool]") {
    small_graph s(41);
    auto pool = std::make_shared<cpu::thread_pool>(2);
    cpu_backend a({.pool = pool});
    cpu_backend b({.pool = pool});
    status inner;
    bool asked = false;
    a.set_abort_callback([&] {
        if (!asked) inner = b.compute(s.g); // b waits for the pool a holds: refused
        asked = true;
        return false;
    });
    within(30s, "a compute on a pool from inside another compute on it", [&] { REQUIRE(a.compute(s.g).ok()); });
    CHECK(inner.code() == errc::busy);
    CHECK(inner.message().find("cpu thread pool") != std::string::npos);
}

TEST_CASE("cpu shared pool: pause parks the workers, resume wakes them, a compute resumes a paused pool",
          "[cpu][threads][pool]") {
    split_everything all;
    small_graph s(51);
    const auto expected = private_result(s, 3);
    // workers poll for 10 s after each job unless paused: the difference shows
    auto pool = std::make_shared<cpu::thread_pool>(cpu::thread_pool_params{.n_threads = 3, .poll = 10s});
    cpu_backend cpu({.pool = pool});
    REQUIRE(cpu.compute(s.g).ok());
    REQUIRE(pool->n_workers() == 2);
    CHECK(pool->n_sleeping() == 0); // polling for the next job

    REQUIRE(pool->pause().ok());
    CHECK(pool->paused());
    CHECK(eventually([&] { return pool->n_sleeping() == 2; }));
    // parked: asleep in the kernel, no CPU time (a polling worker would use ~100 ms)
    const double t0 = process_cpu_seconds();
    std::this_thread::sleep_for(100ms);
    CHECK(process_cpu_seconds() - t0 < 0.03);

    REQUIRE(pool->resume().ok());
    CHECK_FALSE(pool->paused());
    CHECK(pool->n_sleeping() == 0); // every worker woke and polls again

    REQUIRE(pool->pause().ok());
    CHECK(eventually([&] { return pool->n_sleeping() == 2; }));
    s.poison();
    REQUIRE(cpu.compute(s.g).ok()); // as ggml: a compute on a paused pool resumes it
    CHECK_FALSE(pool->paused());
    CHECK(s.values() == expected);

    REQUIRE(pool->pause().ok()); // destroyed while paused: the workers are woken and joined
}

TEST_CASE("cpu shared pool: it lives while any backend holds it, in any destruction order", "[cpu][threads][pool]") {
    small_graph s(61);
    const auto expected = private_result(s, 2);
    std::weak_ptr<cpu::thread_pool> watch;
    {
        auto a = std::make_unique<cpu_backend>(cpu_backend_params{.n_threads = 2});
        {
            auto pool = std::make_shared<cpu::thread_pool>(2);
            watch = pool;
            REQUIRE(a->set_thread_pool(pool).ok());
        } // the creator's handle goes first
        cpu_backend b({.pool = a->thread_pool()});
        s.poison();
        REQUIRE(a->compute(s.g).ok());
        a.reset(); // then one backend
        CHECK_FALSE(watch.expired());
        s.poison();
        REQUIRE(b.compute(s.g).ok());
        CHECK(s.values() == expected);
    } // then the last one
    CHECK(watch.expired());

    // a moved-from backend that shared a pool starts a private one
    auto pool = std::make_shared<cpu::thread_pool>(2);
    cpu_backend c({.pool = pool});
    cpu_backend d(std::move(c));
    CHECK(d.thread_pool() == pool);
    s.poison();
    REQUIRE(c.compute(s.g).ok()); // NOLINT(bugprone-use-after-move): the documented reuse
    CHECK(s.values() == expected);
    CHECK(c.thread_pool() != pool);
}

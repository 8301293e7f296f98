// The CPU backend's runtime: the thread pool and its barriers, the schedule (threads per
// node, barriers only where needed), results independent of the thread count, changing
// the thread count between computes, the abort callback, errors inside multi-threaded
// nodes, plans, and moving backends.

#include "cpu_test_harness.hpp"

#include <backplane/backends/cpu/profile.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace cpu_test;

static_assert(backplane::backend<cpu_backend>);
static_assert(backplane::plan_backend<cpu_backend>);
static_assert(std::is_same_v<cpu_backend::plan_t, cpu_plan>);
static_assert(std::is_nothrow_move_constructible_v<cpu_backend>);
static_assert(std::is_nothrow_move_assignable_v<cpu_backend>);
static_assert(!std::is_copy_constructible_v<cpu_backend>);

namespace {

/// Threads of this process (Linux), -1 where /proc is not there.
int process_threads() {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
    return -1;
}

/// Every byte of every element of t set to 0xff: NaN for the float types (f16 and bf16
/// too, and the scale of a quantized block), -1 for i32. A node that leaves an element
/// unwritten shows.
void poison(tensor& t) {
    bt::for_each_index(t.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        if (i0 % block_size(t.type) != 0) return;
        std::memset(static_cast<std::byte*>(t.data) + t.offset_of(i0, i1, i2, i3), 0xff, type_size(t.type));
    });
}

/// The values of every node that computes something, in graph order.
std::vector<bt::ref_tensor> node_values(const graph& g) {
    std::vector<bt::ref_tensor> v;
    for (const tensor* n : g.nodes())
        if (!is_view_op(n->op)) v.push_back(bt::read(*n));
    return v;
}

void poison_nodes(const graph& g) {
    for (tensor* n : g.nodes())
        if (!is_view_op(n->op)) poison(*n);
}

/// A small transformer block, big enough that some nodes are split across threads at the
/// default threshold and others are not: embedding lookup, rms_norm, q/k/v projections
/// with quantized and f16 weights, rope, masked soft_max over heads, attention output,
/// silu gate, residual adds, argmax.
struct block_graph {
    static constexpr i64 d_model = 128, n_head = 4, head_dim = 32, n_tok = 40, n_vocab = 96;
    harness h{424242};
    tensor* tokens = nullptr;
    tensor* embed = nullptr;
    tensor* out = nullptr;
    graph g;

    block_graph() {
        embed = h.leaf(q8_0, {d_model, n_vocab, 1, 1});
        tokens = h.leaf(i32, {n_tok, 1, 1, 1}, 0, n_vocab - 1);
        tensor* norm_w = h.leaf(f32, {d_model, 1, 1, 1});
        tensor* wq = h.leaf(q4_0, {d_model, d_model, 1, 1});
        tensor* wk = h.leaf(q8_0, {d_model, d_model, 1, 1});
        tensor* wv = h.leaf(f16, {d_model, d_model, 1, 1});
        tensor* wo = h.leaf(bf16, {d_model, d_model, 1, 1});
        tensor* w_up = h.leaf(f32, {d_model, 2 * d_model, 1, 1});
        tensor* pos = h.leaf(i32, {n_tok, 1, 1, 1}, 0, 4096);
        tensor* mask = h.leaf(f16, {n_tok, n_tok, 1, 1}, -1, 1);
        for (i64 i = 0; i < n_tok; ++i)
            for (i64 j = i + 1; j < n_tok; ++j) bt::set(*mask, j, i, 0, 0, -std::numeric_limits<double>::infinity());

        auto& c = h.ctx;
        tensor* x = get_rows(c, embed, tokens); // [d_model, n_tok]
        tensor* hn = mul(c, rms_norm(c, x, 1e-5f), norm_w);
        tensor* q = rope(c, reshape(c, mul_mat(c, wq, hn), {head_dim, n_head, n_tok}), pos,
                         static_cast<int>(head_dim), rope_mode::neox);
        tensor* k = rope(c, reshape(c, mul_mat(c, wk, hn), {head_dim, n_head, n_tok}), pos,
                         static_cast<int>(head_dim), rope_mode::normal);
        tensor* v = reshape(c, mul_mat(c, wv, hn), {head_dim, n_head, n_tok});
        tensor* kq = soft_max(c, mul_mat(c, permute(c, k, 0, 2, 1, 3), permute(c, q, 0, 2, 1, 3)), mask, 0.125f);
        tensor* vt = cont(c, permute(c, v, 1, 2, 0, 3));
        tensor* att = cont(c, permute(c, mul_mat(c, vt, kq), 0, 2, 1, 3));
        tensor* y = add(c, mul_mat(c, wo, reshape(c, att, {d_model, n_tok})), x);
        tensor* up = mul_mat(c, w_up, rms_norm(c, y, 1e-5f)); // [2 d_model, n_tok]
        tensor* gate = silu(c, view_2d(c, up, d_model, n_tok, up->nb[1], 0));
        tensor* lin = view_2d(c, up, d_model, n_tok, up->nb[1], static_cast<std::size_t>(d_model) * sizeof(float));
        tensor* z = add(c, mul_mat(c, wo, mul(c, gate, lin)), y);
        out = argmax(c, scale(c, z, 0.5f, 0.25f));
        g = graph(out);
        for (tensor* t : g.nodes()) t->set_output(); // every node is compared: none fused away
    }
};

} // namespace

// ---------------------------------------------------------------------------------------
// The pool itself

TEST_CASE("cpu thread_pool: every thread runs, barriers order memory, subsets wait alone", "[cpu][threads]") {
    cpu::thread_pool pool(4);
    CHECK(pool.n_threads() == 4);
    CHECK(pool.n_workers() == 0); // workers start with the first job

    struct job {
        cpu::thread_pool* pool;
        int slots[8]{};     // plain ints: only the barriers order them (TSan checks)
        int round = 0;
        std::atomic<int> errors{0};
        std::atomic<int> ran{0};
        static void run(void* ctx, int ith) noexcept {
            auto& j = *static_cast<job*>(ctx);
            const int n = j.pool->n_threads();
            j.ran.fetch_add(1, std::memory_order_relaxed);
            j.slots[ith] = j.round * 10 + ith;
            j.pool->barrier();
            for (int t = 0; t < n; ++t)
                if (j.slots[t] != j.round * 10 + t) j.errors.fetch_add(1, std::memory_order_relaxed);
            j.pool->barrier();
            // threads 0 and 1 only: a barrier among them, the others go straight on
            const int m = n < 2 ? n : 2;
            if (ith < m) {
                if (ith == m - 1) j.slots[7] = j.round;
                j.pool->barrier(m);
                if (j.slots[7] != j.round) j.errors.fetch_add(1, std::memory_order_relaxed);
            }
            j.pool->barrier();
        }
    };
    job j{&pool};
    for (int round = 1; round <= 200; ++round) {
        j.round = round;
        REQUIRE(pool.run(&job::run, &j).ok());
    }
    CHECK(pool.n_workers() == 3);
    CHECK(j.ran.load() == 4 * 200);
    CHECK(j.errors.load() == 0);

    SECTION("shrinking joins workers, growing starts them with the next job") {
        REQUIRE(pool.set_n_threads(2).ok());
        CHECK(pool.n_workers() == 1);
        j.ran = 0;
        REQUIRE(pool.run(&job::run, &j).ok());
        CHECK(j.ran.load() == 2);
        REQUIRE(pool.set_n_threads(7).ok());
        CHECK(pool.n_workers() == 1);
        REQUIRE(pool.run(&job::run, &j).ok());
        CHECK(pool.n_workers() == 6);
        CHECK(j.ran.load() == 2 + 7);
        REQUIRE(pool.set_n_threads(0).ok()); // at least one thread
        CHECK(pool.n_threads() == 1);
        CHECK(pool.n_workers() == 0);
        REQUIRE(pool.run(&job::run, &j).ok());
        CHECK(j.ran.load() == 2 + 7 + 1);
        CHECK(j.errors.load() == 0);
    }
}

// ---------------------------------------------------------------------------------------
// Schedule

TEST_CASE("cpu plan: small nodes run on the calling thread without barriers, big ones are split",
          "[cpu][threads][plan]") {
    harness h(1);
    cpu_backend backend({.n_threads = 4});

    SECTION("a chain of tiny nodes: one thread each, no barrier at all") {
        tensor* x = h.leaf(f32, {16, 1, 1, 1});
        tensor* b = h.leaf(f32, {16, 1, 1, 1});
        for (int i = 0; i < 100; ++i) x = add(h.ctx, x, b);
        x = reshape(h.ctx, x, {4, 4}); // a view: not a step
        x = relu(h.ctx, x);
        auto plan = backend.make_plan(graph(x));
        REQUIRE(plan.ok());
        CHECK(plan->size() == 101);
        CHECK(plan->max_nth() == 1);
        CHECK(plan->n_barriers() == 0);
        CHECK(plan->n_threads() == 4);
    }
    SECTION("barriers exactly where a multi-threaded node begins or ends") {
        tensor* small = h.leaf(f32, {16, 1, 1, 1});
        tensor* big = h.leaf(f32, {1024, 256, 1, 1}); // 256K elements
        tensor* s1 = scale(h.ctx, small, 2.0f);
        tensor* s2 = scale(h.ctx, s1, 2.0f);
        tensor* b1 = scale(h.ctx, big, 2.0f);
        tensor* b2 = sqr(h.ctx, b1);
        tensor* s3 = add(h.ctx, s2, s2);
        tensor* s4 = relu(h.ctx, s3);
        auto plan = backend.make_plan(graph{s4, b2});
        REQUIRE(plan.ok());
        std::vector<int> nth;
        std::vector<bool> barrier;
        for (const cpu::plan_step& s : plan->steps()) {
            nth.push_back(s.nth);
            barrier.push_back(s.barrier_before);
        }
        // graph order: s1, s2, s3, s4 (the first output), then b1, b2
        CHECK(nth == std::vector<int>{1, 1, 1, 1, 4, 4});
        CHECK(barrier == std::vector<bool>{false, false, false, false, true, true});
        CHECK(plan->n_barriers() == 2);
        CHECK(plan->max_nth() == 4);
    }
    SECTION("each step records its kernel, chosen again when the plan is re-scheduled for another mode") {
        using K = cpu::kernel_kind;
        tensor* a = h.leaf(f32, {8, 64, 1, 1});
        tensor* w = h.leaf(f32, {64, 32, 1, 1});
        tensor* y = add(h.ctx, a, a);                      // f32 rows: the fast row kernel
        tensor* n = neg(h.ctx, transpose(h.ctx, y));       // strided rows: the reference kernel
        tensor* m = mul_mat(h.ctx, w, n);             // f32 weights: the fast gemm
        tensor* c = cont(h.ctx, transpose(h.ctx, m)); // a copy (the transpose is no step)
        auto plan = backend.make_plan(graph(c));
        REQUIRE(plan.ok());
        const auto kernels = [&] {
            std::vector<K> k;
            for (const cpu::plan_step& s : plan->steps()) k.push_back(s.kernel);
            return k;
        };
        CHECK(kernels() == std::vector<K>{K::fast_rowwise, K::unary, K::fast_mul_mat, K::copy});
        for (const cpu::plan_step& s : plan->steps()) CHECK(s.kernel == cpu::choose_kernel(*s.node, false));
        backend.set_reference(true);
        REQUIRE(backend.compute(*plan).ok());
        CHECK(plan->reference());
        CHECK(kernels() == std::vector<K>{K::binary, K::unary, K::mul_mat, K::copy});
    }
    SECTION("n_tasks: views compute nothing, rows bound the split") {
        tensor* a = h.leaf(f32, {1 << 20, 1, 1, 1}); // one row: the reference kernels split rows
        CHECK(cpu::n_tasks(*reshape(h.ctx, a, {1024, 1024}), 8) == 0);
        CHECK(cpu::n_tasks(*sum_rows(h.ctx, a), 8) == 1);
        tensor* r = h.leaf(f32, {1024, 3, 1, 1});
        {
            split_threshold all(1);
            CHECK(cpu::n_tasks(*scale(h.ctx, r, 2.0f), 8) == 3);
            CHECK(cpu::n_tasks(*scale(h.ctx, r, 2.0f), 2) == 2);
            CHECK(cpu::n_tasks(*scale(h.ctx, r, 2.0f), 1) == 1);
        }
        CHECK(cpu::n_tasks(*scale(h.ctx, r, 2.0f), 8) == 1); // 3K elements: not worth a barrier
        CHECK(cpu::work_size(*scale(h.ctx, r, 2.0f), 4, false) == 0);
    }
}

// ---------------------------------------------------------------------------------------
// Results do not depend on the thread count

TEST_CASE("cpu threads: a transformer block is bit-identical on 1, 2, 3, 4 and 7 threads",
          "[cpu][threads]") {
    block_graph b;
    for (const bool reference : {false, true}) {
        for (const std::int64_t threshold : {cpu::detail::default_min_work_per_thread, std::int64_t{1}}) {
            split_threshold st(threshold);
            cpu_backend one({.n_threads = 1, .reference = reference});
            poison_nodes(b.g);
            REQUIRE(one.compute(b.g).ok());
            const auto expected = node_values(b.g);
            std::size_t nans = 0;
            for (const bt::ref_tensor& v : expected)
                for (double x : v.v) nans += std::isnan(x) ? 1 : 0;
            REQUIRE(nans == 0);
            for (int n : {2, 3, 4, 7}) {
                cpu_backend many({.n_threads = n, .reference = reference});
                auto plan = many.make_plan(b.g);
                REQUIRE(plan.ok());
                INFO("reference " << reference << ", threshold " << threshold << ", threads " << n);
                CHECK(plan->max_nth() > 1); // some nodes really are split
                poison_nodes(b.g);
                REQUIRE(many.compute(*plan).ok());
                const auto got = node_values(b.g);
                REQUIRE(got.size() == expected.size());
                for (std::size_t k = 0; k < got.size(); ++k) {
                    INFO("node " << k);
                    CHECK(bt::compare(expected[k], got[k]).mismatches == 0);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Thread count changes

TEST_CASE("cpu threads: set_n_threads between computes, up and down, leaks no thread", "[cpu][threads]") {
    split_threshold all(1); // every node uses every thread it can
    block_graph b;
    // ThreadSanitizer's runtime starts a thread of its own with the program's first one:
    // count from after it
    std::thread([] {}).join();
    const int base = process_threads();
    std::vector<bt::ref_tensor> expected;
    {
        cpu_backend one({.n_threads = 1});
        REQUIRE(one.compute(b.g).ok());
        expected = node_values(b.g);
    }
    {
        cpu_backend backend({.n_threads = 1});
        const int counts[] = {2, 7, 1, 3, 4, 2, 5, 1, 8, 3, 1, 6, 2, 4, 1};
        for (int round = 0; round < 3; ++round)
            for (int n : counts) {
                REQUIRE(backend.set_n_threads(n).ok());
                CHECK(backend.n_threads() == n);
                poison_nodes(b.g);
                REQUIRE(backend.compute(b.g).ok());
                if (base > 0) CHECK(process_threads() == base + n - 1);
                const auto got = node_values(b.g);
                for (std::size_t k = 0; k < got.size(); ++k) CHECK(bt::compare(expected[k], got[k]).mismatches == 0);
            }
        CHECK(backend.set_n_threads(0).code() == errc::invalid_argument);
        CHECK(backend.set_n_threads(-3).code() == errc::invalid_argument);
        CHECK(backend.n_threads() == 1);
        REQUIRE(backend.set_n_threads(4).ok());
        REQUIRE(backend.compute(b.g).ok());
    }
    if (base > 0) CHECK(process_threads() == base); // the backend joined its workers
    CHECK(cpu_backend().n_threads() == cpu::hardware_threads());
    CHECK(cpu_backend({.n_threads = -2}).n_threads() == cpu::hardware_threads());
}

// ---------------------------------------------------------------------------------------
// Abort callback

TEST_CASE("cpu threads: the abort callback stops every thread between nodes", "[cpu][threads][abort]") {
    harness h(7);
    // six nodes, each big enough to be split at the default threshold on 4 threads
    tensor* x = h.leaf(f32, {512, 256, 1, 1});
    std::vector<tensor*> nodes;
    tensor* cur = x;
    for (int i = 0; i < 6; ++i) nodes.push_back(cur = scale(h.ctx, cur, 1.0f, 1.0f));
    graph g(cur);
    float expected5 = static_cast<float*>(x->data)[5];
    for (int i = 0; i < 6; ++i) expected5 = expected5 * 1.0f + 1.0f;

    for (int n_threads : {1, 2, 4}) {
        for (const bool tiny_region : {false, true}) {
            INFO(n_threads << " threads" << (tiny_region ? ", small nodes" : ""));
            cpu_backend backend({.n_threads = n_threads});
            graph gg = g;
            std::vector<tensor*> ns = nodes;
            harness small(8);
            if (tiny_region) { // the same on a chain of small nodes, run by thread 0 alone
                tensor* s = small.leaf(f32, {8, 1, 1, 1});
                ns.clear();
                for (int i = 0; i < 6; ++i) ns.push_back(s = scale(small.ctx, s, 1.0f, 1.0f));
                gg = graph(s);
            }
            for (int stop_at : {1, 3, 6}) { // the call that says stop: before node stop_at - 1
                for (tensor* t : ns) poison(*t);
                int calls = 0;
                backend.set_abort_callback([&] { return ++calls >= stop_at; });
                const status st = backend.compute(gg);
                INFO("stop at call " << stop_at);
                CHECK(st.code() == errc::aborted);
                CHECK(calls == stop_at); // asked once per node until it said stop
                for (int i = 0; i < 6; ++i) {
                    const bool ran = i < stop_at - 1;
                    INFO("node " << i);
                    CHECK(std::isnan(bt::get(*ns[static_cast<std::size_t>(i)], 5)) == !ran);
                }
            }
            // removed: the next compute runs to the end
            backend.set_abort_callback({});
            REQUIRE(backend.compute(gg).ok());
            if (!tiny_region) CHECK(bt::get(*ns[5], 5) == static_cast<double>(expected5));
            for (tensor* t : ns) CHECK(!std::isnan(bt::get(*t, 5)));
            // an exception from the callback counts as a stop
            backend.set_abort_callback([&]() -> bool { throw std::runtime_error("user"); });
            CHECK(backend.compute(gg).code() == errc::aborted);
            backend.set_abort_callback([] { return false; });
            CHECK(backend.compute(gg).ok());
        }
    }
}

// ---------------------------------------------------------------------------------------
// A failing node inside a multi-threaded region

TEST_CASE("cpu threads: an index out of range in a worker's rows stops the graph after that node",
          "[cpu][threads]") {
    harness h(9);
    tensor* table = h.leaf(f32, {256, 64, 1, 1});
    tensor* idx = h.leaf(i32, {256, 1, 1, 1}, 0, 63);
    tensor* rows = get_rows(h.ctx, table, idx); // 64K elements: split on 4 threads
    rows->name = "picked";
    tensor* after = scale(h.ctx, rows, 2.0f);
    graph g(after);
    cpu_backend backend({.n_threads = 4});
    auto plan = backend.make_plan(g);
    REQUIRE(plan.ok());
    REQUIRE(plan->steps()[0].nth > 1);
    for (const i64 bad_row : {i64{255}, i64{0}, i64{130}}) { // a worker's share, thread 0's
        bt::set(*idx, bad_row, 0, 0, 0, 64);
        poison(*after);
        const status st = backend.compute(*plan);
        INFO("bad index at " << bad_row);
        CHECK(st.code() == errc::out_of_range);
        CHECK_THAT(st.message(), Catch::Contains("picked"));
        CHECK(std::isnan(bt::get(*after, 0, 0)));
        bt::set(*idx, bad_row, 0, 0, 0, 3);
        REQUIRE(backend.compute(*plan).ok());
        CHECK(bt::get(*after, 7, bad_row) == static_cast<double>(static_cast<float>(bt::get(*table, 7, 3)) * 2.0f));
    }
}

// ---------------------------------------------------------------------------------------
// Plans

TEST_CASE("cpu plan: made once, computed many times on changing data, equals compute(graph)",
          "[cpu][threads][plan]") {
    block_graph b;
    cpu_backend backend({.n_threads = 3});
    auto plan = backend.make_plan(b.g);
    REQUIRE(plan.ok());
    CHECK(plan->n_threads() == 3);
    CHECK_FALSE(plan->reference());
    cpu_backend other({.n_threads = 3});
    std::mt19937 rng(5);
    for (int round = 0; round < 6; ++round) {
        bt::fill_random(*b.embed, rng);
        bt::fill_random(*b.tokens, rng, 0, block_graph::n_vocab - 1);
        if (round == 2) REQUIRE(backend.set_n_threads(2).ok()); // the plan is re-scheduled
        if (round == 4) backend.set_reference(true);
        REQUIRE(other.set_n_threads(backend.n_threads()).ok());
        other.set_reference(backend.reference());
        poison_nodes(b.g);
        REQUIRE(other.compute(b.g).ok());
        const auto expected = node_values(b.g);
        poison_nodes(b.g);
        REQUIRE(backend.compute(*plan).ok());
        CHECK(plan->n_threads() == backend.n_threads());
        CHECK(plan->reference() == backend.reference());
        const auto got = node_values(b.g);
        INFO("round " << round);
        for (std::size_t k = 0; k < got.size(); ++k) CHECK(bt::compare(expected[k], got[k]).mismatches == 0);
    }
    // a plan is computed by any CPU backend
    REQUIRE(other.compute(*plan).ok());
    // an empty plan computes nothing
    cpu_plan empty;
    CHECK(backend.compute(empty).ok());
    auto none = backend.make_plan(graph_view{});
    REQUIRE(none.ok());
    CHECK(none->empty());
    CHECK(backend.compute(*none).ok());
}

TEST_CASE("cpu profile: every node of every compute timed, results unchanged, off when unset",
          "[cpu][threads][profile]") {
    block_graph b;
    for (const int n_threads : {1, 2}) {
        INFO(n_threads << " threads");
        cpu_backend backend({.n_threads = n_threads});
        auto plan = backend.make_plan(b.g);
        REQUIRE(plan.ok());
        poison_nodes(b.g);
        REQUIRE(backend.compute(*plan).ok());
        const auto expected = node_values(b.g);

        cpu::profile prof;
        backend.set_profile(&prof);
        CHECK(backend.profile() == &prof);
        constexpr int computes = 3;
        for (int i = 0; i < computes; ++i) {
            poison_nodes(b.g);
            REQUIRE(backend.compute(*plan).ok());
        }
        const auto got = node_values(b.g);
        for (std::size_t k = 0; k < got.size(); ++k) CHECK(bt::compare(expected[k], got[k]).mismatches == 0);

        CHECK(prof.computes() == computes);
        const auto steps = plan->steps();
        const auto last = prof.last();
        REQUIRE(last.size() == steps.size());
        std::int64_t work = 0;
        for (std::size_t k = 0; k < steps.size(); ++k) {
            INFO("step " << k << ": " << to_string(steps[k].node->op));
            CHECK(last[k].node == steps[k].node);
            CHECK(last[k].kernel == steps[k].kernel);
            CHECK(last[k].nth == steps[k].nth);
            CHECK(last[k].work_ns > 0); // every step computes something
            CHECK(last[k].busy_ns >= last[k].work_ns);
            CHECK(last[k].busy_ns <= last[k].nth * last[k].work_ns);
            CHECK(last[k].wait_ns >= 0);
            if (!steps[k].barrier_before) CHECK(last[k].wait_ns == 0);
            work += last[k].work_ns;
        }
        // nodes do not overlap: their slowest threads' times fit in the compute
        CHECK(work <= prof.last_wall_ns());
        CHECK(prof.work_ns() <= prof.wall_ns());
        CHECK(prof.wall_ns() >= prof.last_wall_ns());

        std::size_t counted = 0;
        bool mul_mat_seen = false;
        for (const cpu::op_time& t : prof.by_op()) {
            counted += t.count;
            mul_mat_seen = mul_mat_seen || (t.op == op_kind::mul_mat && t.kernel == cpu::kernel_kind::fast_mul_mat);
        }
        CHECK(counted == computes * steps.size());
        CHECK(mul_mat_seen);
        const std::string table = prof.table();
        CHECK(table.find("fast_mul_mat") != std::string::npos);
        CHECK(table.find("3 computes") != std::string::npos);

        backend.set_profile(nullptr);
        REQUIRE(backend.compute(*plan).ok());
        CHECK(prof.computes() == computes);
        prof.clear();
        CHECK(prof.computes() == 0);
        CHECK(prof.last().empty());
        CHECK(prof.by_op().empty());
    }
}

TEST_CASE("cpu kernel_kind: every kernel has its own name", "[cpu][profile]") {
    std::vector<std::string_view> names;
    for (std::size_t k = 0; k < cpu::kernel_kind_count; ++k)
        names.push_back(cpu::to_string(static_cast<cpu::kernel_kind>(k)));
    CHECK(names[static_cast<std::size_t>(cpu::kernel_kind::fast_mul_mat)] == "fast_mul_mat");
    CHECK(names[static_cast<std::size_t>(cpu::kernel_kind::fast_attention)] == "fast_attention");
    std::sort(names.begin(), names.end());
    CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
    CHECK(std::find(names.begin(), names.end(), "unknown") == names.end());
}

TEST_CASE("cpu plan: make_plan reports unsupported and unallocated graphs", "[cpu][plan]") {
    harness h(11);
    cpu_backend backend({.n_threads = 2});
    SECTION("an unsupported node") {
        tensor* out = add(h.ctx, h.leaf(f32, {8, 2, 1, 1}), h.leaf(f32, {8, 1, 1, 1}));
        out->src[1]->type = i32;
        auto plan = backend.make_plan(graph(out));
        REQUIRE_FALSE(plan.ok());
        CHECK(plan.error().code() == errc::not_supported);
    }
    SECTION("tensors without data") {
        context meta{context_params{.no_alloc = true}};
        tensor* y = silu(meta, meta.new_tensor(f32, {4, 4}));
        auto plan = backend.make_plan(graph(y));
        REQUIRE_FALSE(plan.ok());
        CHECK(plan.error().code() == errc::invalid_argument);
        CHECK_THAT(plan.error().message(), Catch::Contains("no data"));
    }
    SECTION("an index out of range is found when computing") {
        tensor* idx = h.leaf(i32, {2, 1, 1, 1});
        bt::set(*idx, 1, 0, 0, 0, 9);
        auto plan = backend.make_plan(graph(get_rows(h.ctx, h.leaf(f32, {4, 3, 1, 1}), idx)));
        REQUIRE(plan.ok());
        CHECK(backend.compute(*plan).code() == errc::out_of_range);
    }
}

// ---------------------------------------------------------------------------------------
// Tiny chains

TEST_CASE("cpu threads: a chain of 10,000 small adds computes correctly on 1 and 2 threads",
          "[cpu][threads]") {
    harness h(13);
    tensor* b = h.leaf(f32, {16, 1, 1, 1});
    tensor* x = h.leaf(f32, {16, 1, 1, 1});
    tensor* cur = x;
    for (int i = 0; i < 10000; ++i) cur = add(h.ctx, cur, b);
    graph g(cur);
    std::vector<float> expected(16);
    for (int j = 0; j < 16; ++j) {
        float e = static_cast<float*>(x->data)[j];
        const float bj = static_cast<float*>(b->data)[j];
        for (int i = 0; i < 10000; ++i) e = e + bj;
        expected[static_cast<std::size_t>(j)] = e;
    }
    for (int n : {1, 2}) {
        cpu_backend backend({.n_threads = n});
        for (const bool reference : {false, true}) {
            backend.set_reference(reference);
            poison(*cur);
            REQUIRE(backend.compute(g).ok());
            CHECK(std::memcmp(cur->data, expected.data(), sizeof(float) * 16) == 0);
            auto plan = backend.make_plan(g);
            REQUIRE(plan.ok());
            CHECK(plan->n_barriers() == 0);
            poison(*cur);
            REQUIRE(backend.compute(*plan).ok());
            CHECK(std::memcmp(cur->data, expected.data(), sizeof(float) * 16) == 0);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Moving

TEST_CASE("cpu backend: moved, move-assigned, returned by the device, kept in a vector", "[cpu][threads]") {
    split_threshold all(1);
    block_graph b;
    cpu_backend one({.n_threads = 1});
    REQUIRE(one.compute(b.g).ok());
    const auto expected = node_values(b.g);
    auto same = [&] {
        const auto got = node_values(b.g);
        for (std::size_t k = 0; k < got.size(); ++k)
            if (bt::compare(expected[k], got[k]).mismatches != 0) return false;
        return true;
    };

    cpu_backend a({.n_threads = 3});
    a.set_abort_callback([] { return false; });
    REQUIRE(a.compute(b.g).ok());
    cpu_backend moved(std::move(a));
    CHECK(moved.n_threads() == 3);
    poison_nodes(b.g);
    REQUIRE(moved.compute(b.g).ok());
    CHECK(same());

    // the moved-from backend can still compute (a new pool) and be assigned to
    poison_nodes(b.g);
    REQUIRE(a.compute(b.g).ok()); // NOLINT(bugprone-use-after-move): allowed, documented
    CHECK(same());
    a = cpu_backend({.n_threads = 2, .reference = true});
    CHECK(a.n_threads() == 2);
    CHECK(a.reference());
    poison_nodes(b.g);
    REQUIRE(a.compute(b.g).ok());
    moved = std::move(a); // the old pool of `moved` is joined
    poison_nodes(b.g);
    REQUIRE(moved.compute(b.g).ok());
    CHECK(moved.reference());

    cpu_backend d = cpu_device::instance().make_backend({.n_threads = 2});
    CHECK(d.n_threads() == 2);
    CHECK_FALSE(d.reference());
    CHECK(cpu_device::instance().make_backend().n_threads() == cpu::hardware_threads());

    std::vector<cpu_backend> many;
    for (int n = 1; n <= 4; ++n) many.push_back(cpu_device::instance().make_backend({.n_threads = n}));
    for (cpu_backend& m : many) {
        poison_nodes(b.g);
        REQUIRE(m.compute(b.g).ok());
        CHECK(same());
    }
}

// The graph allocator: liveness-based reuse, in-place reuse, reserve/replay, several
// buffer ids, max_size chunks, and failures. Correctness is judged by independent checks
// (tests/support/alloc_graph_checks.hpp), never by comparing with recorded addresses.

#include <backplane/core.hpp>
#include <backplane/memory/alloc_tensors.hpp>
#include <backplane/memory/graph_alloc.hpp>
#include <backplane/memory/host_buffer.hpp>

#include "../support/alloc_failing_buffer_type.hpp"
#include "../support/alloc_graph_checks.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

using namespace backplane;
using test::failing_buffer_type;

namespace {

const buffer_type_ref cpu_bt() {
    return cpu_buffer_type::instance();
}

context no_alloc_context() {
    return context({.no_alloc = true});
}

/// Everything the independent checks need, for one allocator and one graph.
/// `buffer_id_of` gives the buffer id of a non-view tensor (0 when absent).
struct checker {
    const graph_allocator& ga;
    std::unordered_set<const tensor*> external; // tensors that had data before allocation
    std::unordered_map<const tensor*, int> ids;

    checker(const graph_allocator& a, const graph& g) : ga(a) {
        for (const tensor* t : test::detail_checks::all_tensors(g))
            if (t->data != nullptr) external.insert(t);
    }
    void set_ids(const graph& g, std::span<const int> node_ids, std::span<const int> leaf_ids) {
        for (std::size_t i = 0; i < node_ids.size(); ++i) ids[g.nodes()[i]] = node_ids[i];
        for (std::size_t i = 0; i < leaf_ids.size(); ++i) ids[g.leafs()[i]] = leaf_ids[i];
    }
    [[nodiscard]] int id_of(const tensor& t) const {
        const auto it = ids.find(&t);
        return it == ids.end() ? 0 : it->second;
    }
    [[nodiscard]] bool owns(const buffer_handle* b) const {
        for (std::size_t id = 0; id < ga.n_buffers(); ++id)
            for (std::size_t c = 0; c < ga.n_chunks(static_cast<int>(id)); ++c)
                if (b != nullptr && ga.buffer(static_cast<int>(id), c) == b) return true;
        return false;
    }
    [[nodiscard]] test::alloc_check_context context() const {
        test::alloc_check_context cx;
        cx.external = [this](const tensor& t) { return external.contains(&t); };
        cx.alloc_size = [this](const tensor& t) {
            return t.buffer != nullptr ? t.buffer->type().alloc_size(t) : t.nbytes();
        };
        cx.owned_buffer = [this](const buffer_handle* b) { return owns(b); };
        cx.alignment = [](const tensor& t) { return t.buffer != nullptr ? t.buffer->type().alignment() : 1; };
        return cx;
    }
    /// Every check: placement and overlap, the pattern simulation, and each non-view
    /// tensor in a buffer of its own buffer id.
    void check_all(const graph& g) const {
        const auto cx = context();
        CHECK(test::check_graph_allocation(g, cx) == "");
        CHECK(test::simulate_compute(g, cx) == "");
        for (const tensor* t : test::detail_checks::all_tensors(g)) {
            if (t->view_src != nullptr || external.contains(t) || t->data == nullptr) continue;
            const int id = id_of(*t);
            bool in_own = false;
            for (std::size_t c = 0; c < ga.n_chunks(id); ++c) in_own = in_own || ga.buffer(id, c) == t->buffer;
            CHECK(in_own);
        }
    }
};

/// Bytes a tensor takes in a buffer type with this alignment.
std::size_t padded(const tensor& t, buffer_type_ref bt) {
    const std::size_t a = bt.alignment();
    return (std::max<std::size_t>(bt.alloc_size(t), 1) + a - 1) / a * a;
}

// -----------------------------------------------------------------------------------------
// The in-place rule, restated from the graph's structure (positions instead of counters).

struct inplace_oracle {
    const graph& g;
    const checker& ck;
    std::function<std::size_t(int)> pool_of = [](int id) { return static_cast<std::size_t>(id); };

    [[nodiscard]] int reads(const tensor* t, std::size_t from, std::size_t to) const { // nodes [from, to)
        int n = 0;
        for (std::size_t i = from; i < to && i < g.n_nodes(); ++i)
            for (const tensor* s : g.nodes()[i]->src) n += s == t;
        return n;
    }
    [[nodiscard]] std::vector<const tensor*> views_of(const tensor* r) const {
        std::vector<const tensor*> v;
        for (const tensor* t : test::detail_checks::all_tensors(g))
            if (t->view_src == r) v.push_back(t);
        return v;
    }
    [[nodiscard]] bool pinned(const tensor* r) const {
        auto flagged = [](const tensor* t) {
            return t->has_flag(tensor_flag::input) || t->has_flag(tensor_flag::output);
        };
        if (flagged(r)) return true;
        for (const tensor* v : views_of(r))
            if (flagged(v)) return true;
        return false;
    }
    // a view still counts as live at step i unless all its readers ran before i
    [[nodiscard]] bool view_live(const tensor* v, std::size_t i) const {
        if (reads(v, 0, g.n_nodes()) == 0) return true;
        return reads(v, i, g.n_nodes()) > 0;
    }
    [[nodiscard]] bool expect(std::size_t i) const {
        const tensor* n = g.nodes()[i];
        const tensor* p = n->src[0];
        if (!can_inplace(n->op) || n->view_src != nullptr || p == nullptr || !same_layout(*n, *p) ||
            n->has_flag(tensor_flag::input))
            return false;
        if (reads(p, i, i + 1) != 1 || reads(p, i + 1, g.n_nodes()) != 0) return false;
        const tensor* r = p->view_src ? p->view_src : p;
        if (ck.external.contains(r) || pinned(r)) return false;
        if (pool_of(ck.id_of(*r)) != pool_of(ck.id_of(*n))) return false;
        if (p->view_src != nullptr) {
            if (p->view_offs != 0) return false;
            if (reads(r, i, g.n_nodes()) > 0) return false; // r's own readers must be done
            for (const tensor* v : views_of(r))
                if (v != p && view_live(v, i)) return false;
        } else {
            for (const tensor* v : views_of(r))
                if (view_live(v, i)) return false;
        }
        return true;
    }
    /// Checks every node: in place exactly when the rule says so.
    void check() const {
        for (std::size_t i = 0; i < g.n_nodes(); ++i) {
            const tensor* n = g.nodes()[i];
            if (n->view_src != nullptr || n->src[0] == nullptr) continue;
            INFO("node " << i << " " << n->name << " (" << to_string(n->op) << ")");
            CHECK((n->data == n->src[0]->data) == expect(i));
        }
    }
};

// -----------------------------------------------------------------------------------------
// Random graphs.

struct random_graph {
    context ctx = no_alloc_context();
    graph g;
    int n_ops = 0;
};

/// A random DAG of the core ops on f32 tensors. `weights` (a no_alloc context whose
/// tensors are allocated by the caller) receives the mul_mat weights when given; they are
/// then pre-allocated tensors the graph allocator must leave alone.
std::unique_ptr<random_graph> make_random_graph(std::uint32_t seed, context* weights = nullptr,
                                                std::vector<tensor*>* new_weights = nullptr) {
    auto rg = std::make_unique<random_graph>();
    context& ctx = rg->ctx;
    std::mt19937 rng(seed);
    auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    auto chance = [&](unsigned percent) { return rng() % 100 < percent; };
    constexpr std::int64_t widths[] = {4, 8, 12, 16, 32};

    std::vector<tensor*> pool; // operands
    std::unordered_set<tensor*> read;
    int leaf_no = 0, op_no = 0;
    auto leaf = [&](std::array<std::int64_t, 4> ne, elem_type type = elem_type::f32) {
        tensor* t = ctx.new_tensor(type, {ne[0], ne[1], ne[2], ne[3]});
        t->name = "leaf" + std::to_string(leaf_no++);
        if (chance(35)) t->set_input();
        return t;
    };
    auto use = [&](tensor* t) {
        read.insert(t);
        return t;
    };
    for (int i = 0, n = 2 + static_cast<int>(pick(4)); i < n; ++i)
        pool.push_back(
            leaf({widths[pick(5)], 1 + static_cast<std::int64_t>(pick(6)), 1 + static_cast<std::int64_t>(pick(3)), 1}));

    const int n_ops = 10 + static_cast<int>(pick(50));
    rg->n_ops = n_ops;
    for (int k = 0; k < n_ops; ++k) {
        // prefer recent tensors: longer chains, more in-place chances
        tensor* a =
            chance(60) ? pool[pool.size() - 1 - pick(std::min<std::size_t>(pool.size(), 4))] : pool[pick(pool.size())];
        tensor* r = nullptr;
        switch (pick(20)) {
        case 0:
        case 1:
        case 2:
        case 3: { // binary, with broadcasting
            tensor* b = nullptr;
            const auto choice = pick(3);
            if (choice == 0) {
                b = a; // the same tensor twice
            } else if (choice == 1) {
                for (tensor* t : pool)
                    if (t != a && t->ne == a->ne && chance(50)) b = t;
            }
            if (b == nullptr) {
                std::array<std::int64_t, 4> ne = a->ne;
                for (auto& e : ne)
                    if (chance(40)) e = 1;
                b = leaf(ne);
            }
            constexpr op_kind ops[] = {op_kind::add, op_kind::sub, op_kind::mul, op_kind::div};
            const op_kind op = ops[pick(4)];
            use(a);
            use(b);
            r = op == op_kind::add   ? add(ctx, a, b)
                : op == op_kind::sub ? sub(ctx, a, b)
                : op == op_kind::mul ? mul(ctx, a, b)
                                     : div(ctx, a, b);
            break;
        }
        case 4: r = scale(ctx, use(a), 0.5f); break;
        case 5: r = sqr(ctx, use(a)); break;
        case 6: r = sqrt(ctx, use(a)); break;
        case 7: r = chance(50) ? silu(ctx, use(a)) : gelu(ctx, use(a)); break;
        case 8: r = relu(ctx, use(a)); break;
        case 9: r = rms_norm(ctx, use(a)); break;
        case 10: {
            tensor* mask = chance(50) ? use(leaf({a->ne[0], a->ne[1], 1, 1})) : nullptr;
            r = soft_max(ctx, use(a), mask, 0.125f);
            break;
        }
        case 11: r = chance(50) ? sum_rows(ctx, use(a)) : norm(ctx, use(a)); break;
        case 12: { // mul_mat with a weight (pre-allocated when a weights context is given)
            const std::int64_t m = widths[pick(5)];
            tensor* w = nullptr;
            if (weights != nullptr) {
                w = weights->new_tensor_2d(elem_type::f32, a->ne[0], m);
                w->name = "weight" + std::to_string(op_no);
                new_weights->push_back(w);
            } else {
                w = leaf({a->ne[0], m, 1, 1});
            }
            r = mul_mat(ctx, use(w), use(a));
            break;
        }
        case 13: { // views of contiguous tensors
            if (!a->is_contiguous()) {
                r = cont(ctx, use(a));
                break;
            }
            const std::int64_t n = a->nelements();
            if (chance(50)) {
                const std::int64_t len = 1 + static_cast<std::int64_t>(pick(static_cast<std::size_t>(n)));
                const std::int64_t off =
                    chance(40) ? 0 : static_cast<std::int64_t>(pick(static_cast<std::size_t>(n - len + 1)));
                r = view_1d(ctx, use(a), len, static_cast<std::size_t>(off) * sizeof(float));
            } else if (chance(50)) {
                r = reshape(ctx, use(a), {a->ne[0] * a->ne[1], a->ne[2] * a->ne[3]});
            } else {
                const std::int64_t rows = 1 + static_cast<std::int64_t>(pick(static_cast<std::size_t>(a->nrows())));
                r = view_2d(ctx, use(a), a->ne[0], rows, a->nb[1],
                            chance(50) ? 0 : a->nb[1] * static_cast<std::size_t>(a->nrows() - rows));
            }
            break;
        }
        case 14: r = chance(50) ? transpose(ctx, use(a)) : permute(ctx, use(a), 0, 2, 1, 3); break;
        case 15:
        case 16: r = chance(70) ? cont(ctx, use(a)) : dup(ctx, use(a)); break;
        case 17: { // rope needs positions; all widths are even
            if (a->ne[3] != 1 || a->ne[0] % 2 != 0) {
                r = cont(ctx, use(a));
                break;
            }
            tensor* pos = leaf({a->ne[2], 1, 1, 1}, elem_type::i32);
            r = rope(ctx, use(a), use(pos), static_cast<int>(a->ne[0]),
                     chance(50) ? rope_mode::normal : rope_mode::neox);
            break;
        }
        case 18: { // cpy into a fresh leaf: a view that computes
            tensor* dst = leaf({a->nelements(), 1, 1, 1});
            dst->clear_flag(tensor_flag::input);
            r = cpy(ctx, use(a), use(dst));
            break;
        }
        default: r = silu(ctx, use(a)); break;
        }
        r->name = "op" + std::to_string(op_no++) + "_" + std::string(to_string(r->op));
        if (chance(8) && r->view_src == nullptr) r->set_output();
        pool.push_back(r);
    }

    // the graph computes every tensor nothing reads (some flagged output, the last always)
    pool.back()->set_output();
    for (tensor* t : pool)
        if (!read.contains(t)) {
            if (chance(50)) t->set_output();
            rg->g.build_forward(t);
        }
    return rg;
}

} // namespace

// =========================================================================================
// The address planner on its own.

TEST_CASE("dynamic allocator: best fit, merging on free, chunks", "[alloc][graph_alloc][planner]") {
    using detail::dynamic_allocator;
    dynamic_allocator d;
    d.reset(1000);
    auto at = [](dynamic_allocator::address a) { return std::pair{a.chunk, a.offset}; };

    SECTION("blocks stack up; freeing the top lowers it, a hole below it is absorbed") {
        const auto a = d.allocate(100), b = d.allocate(200), c = d.allocate(50);
        CHECK(at(a) == std::pair{0u, std::size_t{0}});
        CHECK(at(b) == std::pair{0u, std::size_t{100}});
        CHECK(at(c) == std::pair{0u, std::size_t{300}});
        CHECK(d.peak(0) == 350);
        d.release(b, 200); // a hole [100, 300)
        d.release(c, 50);  // top falls to 300, then absorbs the hole
        CHECK(at(d.allocate(250)) == std::pair{0u, std::size_t{100}});
        CHECK(d.peak(0) == 350);
    }
    SECTION("the smallest hole that fits wins") {
        const auto a = d.allocate(100), b = d.allocate(10), c = d.allocate(60), e = d.allocate(10);
        (void)b, (void)e;
        d.allocate(10);
        d.release(a, 100);                                            // hole of 100 at 0
        d.release(c, 60);                                             // hole of 60 at 110
        CHECK(at(d.allocate(50)) == std::pair{0u, std::size_t{110}}); // 60 fits best
        CHECK(at(d.allocate(60)) == std::pair{0u, std::size_t{0}});   // the 10 left at 160 is too small
        CHECK(at(d.allocate(10)) == std::pair{0u, std::size_t{160}}); // exact
        CHECK(d.peak(0) == 190);
    }
    SECTION("freed neighbours merge on both sides") {
        std::vector<dynamic_allocator::address> v;
        for (int i = 0; i < 5; ++i) v.push_back(d.allocate(100));
        d.release(v[1], 100);
        d.release(v[3], 100);
        d.release(v[2], 100); // joins [100, 200) and [300, 400) into [100, 400)
        CHECK(at(d.allocate(300)) == std::pair{0u, std::size_t{100}});
        CHECK(d.peak(0) == 500);
    }
    SECTION("a block that fits no chunk opens a new one; tops grow where they can") {
        const auto a = d.allocate(600);
        const auto b = d.allocate(600); // 1200 > 1000
        CHECK(at(b) == std::pair{1u, std::size_t{0}});
        CHECK(at(d.allocate(300)) == std::pair{0u, std::size_t{600}}); // the least growth: both +300, chunk 0 first
        CHECK(at(d.allocate(400)) == std::pair{1u, std::size_t{600}});
        CHECK(d.n_chunks() == 2);
        CHECK(d.peak(0) == 900);
        CHECK(d.peak(1) == 1000);
        (void)a;
        d.reset(1000);
        CHECK(d.n_chunks() == 0);
        CHECK(at(d.allocate(10)) == std::pair{0u, std::size_t{0}});
    }
    SECTION("a top that fits below an existing peak is preferred over growing") {
        const auto a = d.allocate(900);
        d.allocate(800);   // chunk 1
        d.release(a, 900); // chunk 0 empty, peak 900
        d.allocate(50);    // chunk 0, below its peak: no growth
        CHECK(d.peak(0) == 900);
        CHECK(d.peak(1) == 800);
        CHECK(at(d.allocate(150)) == std::pair{0u, std::size_t{50}}); // chunk 1 would grow
    }
}

TEST_CASE("dynamic allocator: random sequences never overlap and merge back to empty",
          "[alloc][graph_alloc][planner]") {
    using detail::dynamic_allocator;
    for (std::uint32_t seed = 1; seed <= 50; ++seed) {
        CAPTURE(seed);
        std::mt19937 rng(seed);
        dynamic_allocator d;
        const std::size_t max_chunk = 64 * (8 + rng() % 32);
        d.reset(max_chunk);
        struct block {
            dynamic_allocator::address a;
            std::size_t size;
        };
        std::vector<block> live;
        for (int step = 0; step < 400; ++step) {
            if (live.empty() || rng() % 100 < 55) {
                const std::size_t size = 64 * (1 + rng() % 8);
                const block b{d.allocate(size), size};
                bool disjoint = b.a.offset + size <= max_chunk;
                for (const block& o : live)
                    if (o.a.chunk == b.a.chunk)
                        disjoint = disjoint && (b.a.offset + b.size <= o.a.offset || o.a.offset + o.size <= b.a.offset);
                REQUIRE(disjoint);
                live.push_back(b);
            } else {
                const std::size_t i = rng() % live.size();
                d.release(live[i].a, live[i].size);
                live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
            }
            bool under_peak = true;
            for (const block& o : live) under_peak = under_peak && o.a.offset + o.size <= d.peak(o.a.chunk);
            REQUIRE(under_peak);
        }
        for (const block& o : live) d.release(o.a, o.size);
        // everything merged back: each chunk takes a block of its full size at offset 0
        const std::size_t n = d.n_chunks();
        std::unordered_set<std::uint32_t> chunks;
        for (std::size_t c = 0; c < n; ++c) {
            const auto a = d.allocate(max_chunk);
            CHECK(a.offset == 0);
            chunks.insert(a.chunk);
        }
        CHECK(chunks.size() == n);
        CHECK(d.n_chunks() == n);
    }
}

// =========================================================================================

TEST_CASE("random graphs: no live tensors share memory, in place exactly where allowed", "[alloc][graph_alloc]") {
    for (std::uint32_t seed = 1; seed <= 120; ++seed) {
        CAPTURE(seed);
        auto rg = make_random_graph(seed);
        graph_allocator ga(cpu_bt());
        checker ck(ga, rg->g);
        REQUIRE(ga.alloc_graph(rg->g).ok());
        ck.check_all(rg->g);
        inplace_oracle{rg->g, ck}.check();

        // the peak holds what is alive at once (an in-place pair counted once) and is at
        // most everything
        const auto live = test::detail_checks::liveness(rg->g, ck.context());
        std::size_t total = 0, peak_live = 0;
        for (const auto& [t, iv] : live) total += padded(*t, cpu_bt());
        for (int step = -1; step < static_cast<int>(rg->g.n_nodes()); ++step) {
            std::size_t bytes = 0;
            for (const auto& [t, iv] : live)
                if (iv.first <= step && step <= iv.last) bytes += padded(*t, cpu_bt());
            for (const tensor* n : rg->g.nodes()) { // a node written over its live source
                if (n->view_src || !n->src[0] || n->data != n->src[0]->data) continue;
                const tensor* r = test::detail_checks::root_of(n->src[0]);
                const auto in = live.find(n), ir = live.find(r);
                if (in == live.end() || ir == live.end()) continue;
                if (in->second.first <= step && step <= in->second.last && ir->second.first <= step &&
                    step <= ir->second.last)
                    bytes -= std::min(padded(*n, cpu_bt()), padded(*r, cpu_bt()));
            }
            peak_live = std::max(peak_live, bytes);
        }
        CHECK(ga.buffer_size(0) <= total);
        CHECK(ga.buffer_size(0) >= peak_live);
        CHECK(ga.buffer(0)->usage() == buffer_usage::compute);
    }
}

TEST_CASE("random graphs with pre-allocated weights, padding, alignment and chunks", "[alloc][graph_alloc]") {
    for (std::uint32_t seed = 1000; seed < 1100; ++seed) {
        CAPTURE(seed);
        context wctx = no_alloc_context();
        std::vector<tensor*> weights;
        auto rg = make_random_graph(seed, &wctx, &weights);
        auto wbufs = alloc_tensors(wctx, cpu_bt(), buffer_usage::weights);
        REQUIRE(wbufs.ok());

        // chunks of a few KiB force several buffers on most graphs
        std::size_t largest = 0;
        for (const tensor* t : test::detail_checks::all_tensors(rg->g)) largest = std::max(largest, t->nbytes() + 32);
        failing_buffer_type bt(
            {.alignment = 128, .max_size = std::max<std::size_t>(largest + 128, 6000), .extra_bytes = 32});
        {
            graph_allocator ga(bt);
            checker ck(ga, rg->g);
            REQUIRE(ga.alloc_graph(rg->g).ok());
            ck.check_all(rg->g);
            inplace_oracle{rg->g, ck}.check();
            for (std::size_t c = 0; c < ga.n_chunks(0); ++c) CHECK(ga.buffer(0, c)->size() <= bt.max_size());
            for (tensor* w : weights) CHECK(wbufs->contains(w->buffer)); // left alone
        }
        CHECK(bt.live_buffers() == 0);
    }
}

TEST_CASE("random graphs over two buffer ids", "[alloc][graph_alloc]") {
    failing_buffer_type other({.alignment = 256, .name = "other"});
    for (std::uint32_t seed = 2000; seed < 2060; ++seed) {
        CAPTURE(seed);
        auto rg = make_random_graph(seed);
        std::mt19937 rng(seed);
        std::vector<int> node_ids(rg->g.n_nodes()), leaf_ids(rg->g.n_leafs());
        for (int& id : node_ids) id = static_cast<int>(rng() % 2);
        for (int& id : leaf_ids) id = static_cast<int>(rng() % 2);

        graph_allocator ga({cpu_bt(), other});
        checker ck(ga, rg->g);
        ck.set_ids(rg->g, node_ids, leaf_ids);
        REQUIRE(ga.alloc_graph(rg->g, node_ids, leaf_ids).ok());
        ck.check_all(rg->g);
        inplace_oracle{rg->g, ck}.check();
        for (const tensor* t : test::detail_checks::all_tensors(rg->g))
            if (t->view_src == nullptr && ck.id_of(*t) == 1)
                CHECK(reinterpret_cast<std::uintptr_t>(t->data) % 256 == 0);
    }
    CHECK(other.live_buffers() == 0);
}

TEST_CASE("a graph rebuilt in a new context replays the reserved plan", "[alloc][graph_alloc]") {
    for (std::uint32_t seed = 3000; seed < 3040; ++seed) {
        CAPTURE(seed);
        auto first = make_random_graph(seed);
        graph_allocator ga(cpu_bt());
        REQUIRE(ga.reserve(first->g).ok());
        const std::size_t size = ga.buffer_size(0);
        buffer_handle* buf = ga.buffer(0);
        CHECK(first->g.back()->data == nullptr); // reserve places nothing

        for (int round = 0; round < 2; ++round) {
            auto again = make_random_graph(seed);
            checker ck(ga, again->g);
            REQUIRE(ga.alloc_graph(again->g).ok());
            CHECK(ga.n_reallocs() == 0);
            CHECK(ga.buffer_size(0) == size);
            CHECK(ga.buffer(0) == buf);
            ck.check_all(again->g);
            // and allocating the same graph object again gives the same addresses
            std::vector<void*> before;
            for (const tensor* t : again->g.nodes()) before.push_back(t->data);
            REQUIRE(ga.alloc_graph(again->g).ok());
            for (std::size_t i = 0; i < before.size(); ++i) CHECK(again->g.nodes()[i]->data == before[i]);
            CHECK(ga.n_reallocs() == 0);
        }
    }
}

// -----------------------------------------------------------------------------------------
// The in-place rule, one condition at a time.

namespace {

struct inplace_case {
    context ctx = no_alloc_context();
    tensor* input(std::int64_t ne0 = 16, std::int64_t ne1 = 4, const char* name = "x") {
        tensor* t = ctx.new_tensor_2d(elem_type::f32, ne0, ne1);
        t->name = name;
        t->set_input();
        return t;
    }
    /// A tensor the allocator owns and nothing pins: scale of an input.
    tensor* owned(std::int64_t ne0 = 16, std::int64_t ne1 = 4) {
        tensor* t = scale(ctx, input(ne0, ne1), 2.0f);
        t->name = "a";
        return t;
    }
};

bool allocated_in_place(graph_allocator& ga, const graph& g, const tensor* node) {
    checker ck(ga, g);
    REQUIRE(ga.alloc_graph(g).ok());
    ck.check_all(g);
    inplace_oracle{g, ck}.check(); // the oracle agrees on every node, not just this one
    return node->data == node->src[0]->data;
}

} // namespace

TEST_CASE("in place: every in-place op takes over a lone source", "[alloc][graph_alloc][inplace]") {
    using builder = std::function<tensor*(context&, tensor*)>;
    const std::vector<std::pair<std::string, builder>> ops = {
        {"add", [](context& c, tensor* a) { return add(c, a, c.new_tensor_1d(elem_type::f32, 16)); }},
        {"sub", [](context& c, tensor* a) { return sub(c, a, c.new_tensor_1d(elem_type::f32, 16)); }},
        {"mul", [](context& c, tensor* a) { return mul(c, a, c.new_tensor_1d(elem_type::f32, 16)); }},
        {"div", [](context& c, tensor* a) { return div(c, a, c.new_tensor_1d(elem_type::f32, 16)); }},
        {"scale", [](context& c, tensor* a) { return scale(c, a, 3.0f); }},
        {"sqr", [](context& c, tensor* a) { return sqr(c, a); }},
        {"sqrt", [](context& c, tensor* a) { return sqrt(c, a); }},
        {"silu", [](context& c, tensor* a) { return silu(c, a); }},
        {"gelu", [](context& c, tensor* a) { return gelu(c, a); }},
        {"relu", [](context& c, tensor* a) { return relu(c, a); }},
        {"rms_norm", [](context& c, tensor* a) { return rms_norm(c, a); }},
        {"soft_max", [](context& c, tensor* a) { return soft_max(c, a, c.new_tensor_2d(elem_type::f32, 16, 4)); }},
        {"rope",
         [](context& c, tensor* a) {
             tensor* a3 = reshape(c, a, {16, 1, 4});
             return rope(c, cont(c, a3), c.new_tensor_1d(elem_type::i32, 4), 16);
         }},
    };
    for (const auto& [name, make] : ops) {
        CAPTURE(name);
        inplace_case k;
        tensor* a = k.owned();
        tensor* b = make(k.ctx, a);
        b->set_output();
        graph g(b);
        graph_allocator ga(cpu_bt());
        CHECK(allocated_in_place(ga, g, b));
    }
}

TEST_CASE("in place: ops that cannot write over their source never do", "[alloc][graph_alloc][inplace]") {
    using builder = std::function<tensor*(context&, tensor*)>;
    const std::vector<std::pair<std::string, builder>> ops = {
        {"cont", [](context& c, tensor* a) { return cont(c, a); }},
        {"dup", [](context& c, tensor* a) { return dup(c, a); }},
        {"norm", [](context& c, tensor* a) { return norm(c, a); }},
        {"concat", [](context& c, tensor* a) { return concat(c, a, c.new_tensor_2d(elem_type::f32, 16, 1), 1); }},
        {"mul_mat", [](context& c, tensor* a) { return mul_mat(c, c.new_tensor_2d(elem_type::f32, 16, 16), a); }},
    };
    for (const auto& [name, make] : ops) {
        CAPTURE(name);
        inplace_case k;
        tensor* a = k.owned();
        tensor* b = make(k.ctx, a);
        b->set_output();
        graph g(b);
        graph_allocator ga(cpu_bt());
        CHECK_FALSE(allocated_in_place(ga, g, b));
    }
}

TEST_CASE("in place: each condition of the rule", "[alloc][graph_alloc][inplace]") {
    inplace_case k;
    graph_allocator ga(cpu_bt());
    auto& ctx = k.ctx;

    SECTION("a lone source, and a chain of them") {
        tensor* a = k.owned();
        tensor* b = relu(ctx, a);
        tensor* c = silu(ctx, b);
        c->set_output();
        graph g(c);
        CHECK(allocated_in_place(ga, g, b));
        CHECK(c->data == a->data);
    }
    SECTION("a leaf the allocator owns qualifies") {
        tensor* x = ctx.new_tensor_2d(elem_type::f32, 16, 4);
        tensor* b = relu(ctx, x);
        b->set_output();
        graph g(b);
        CHECK(allocated_in_place(ga, g, b));
    }
    SECTION("the source is read again later") {
        tensor* a = k.owned();
        tensor* b = relu(ctx, a);
        tensor* c = add(ctx, b, a); // a read after b: b must not overwrite it
        c->set_output();
        graph g(c);
        CHECK_FALSE(allocated_in_place(ga, g, b));
        CHECK(c->data == b->data); // b's only reader is c, through src[0]
    }
    SECTION("the source was read before by another node") {
        tensor* a = k.owned();
        tensor* s = sum_rows(ctx, a);
        tensor* b = relu(ctx, a);
        s->set_output();
        b->set_output();
        graph g{s, b}; // s runs first: b is a's last reader
        CHECK(allocated_in_place(ga, g, b));
    }
    SECTION("the same source twice") {
        tensor* a = k.owned();
        tensor* b = mul(ctx, a, a);
        b->set_output();
        graph g(b);
        CHECK_FALSE(allocated_in_place(ga, g, b));
    }
    SECTION("an output source") {
        tensor* a = k.owned();
        a->set_output();
        tensor* b = relu(ctx, a);
        b->set_output();
        graph g(b);
        CHECK_FALSE(allocated_in_place(ga, g, b));
    }
    SECTION("an input source") {
        tensor* x = k.input();
        tensor* b = relu(ctx, x);
        b->set_output();
        graph g(b);
        CHECK_FALSE(allocated_in_place(ga, g, b));
    }
    SECTION("an input node never takes a source over") {
        tensor* a = k.owned();
        tensor* b = relu(ctx, a);
        b->set_input();
        tensor* c = sqr(ctx, b);
        c->set_output();
        graph g(c);
        CHECK_FALSE(allocated_in_place(ga, g, b));
    }
    SECTION("a different layout") {
        tensor* a = k.owned();
        tensor* b = relu(ctx, transpose(ctx, a)); // contiguous result, transposed source
        b->set_output();
        graph g(b);
        CHECK_FALSE(allocated_in_place(ga, g, b));
    }
    SECTION("a live view of the source") {
        tensor* a = k.owned();
        tensor* v = view_1d(ctx, a, 16, 0);
        tensor* b = relu(ctx, a);
        tensor* c = add(ctx, b, v); // v read after b
        c->set_output();
        graph g(c);
        CHECK_FALSE(allocated_in_place(ga, g, b));
    }
    SECTION("a view of the source that nothing reads stays live") {
        tensor* a = k.owned();
        tensor* v = view_1d(ctx, a, 16, 0);
        tensor* b = relu(ctx, a);
        b->set_output();
        graph g{v, b};
        CHECK_FALSE(allocated_in_place(ga, g, b));
    }
    SECTION("a view of the source whose readers are done") {
        tensor* a = k.owned();
        tensor* s = sum_rows(ctx, view_1d(ctx, a, 16, 0));
        tensor* b = relu(ctx, a);
        s->set_output();
        b->set_output();
        graph g{s, b};
        CHECK(allocated_in_place(ga, g, b));
    }
    SECTION("only src[0]") {
        tensor* x = k.input(16, 4, "x2");
        tensor* a = k.owned();
        tensor* b = add(ctx, x, a); // a is src[1] with one reader; x is pinned
        b->set_output();
        graph g(b);
        CHECK_FALSE(allocated_in_place(ga, g, b));
        CHECK(b->data != a->data);
    }
    SECTION("a pre-allocated source") {
        context wctx = no_alloc_context();
        tensor* w = wctx.new_tensor_2d(elem_type::f32, 16, 4);
        auto wbufs = alloc_tensors(wctx, cpu_bt());
        REQUIRE(wbufs.ok());
        void* wdata = w->data;
        tensor* b = relu(ctx, w);
        b->set_output();
        graph g(b);
        CHECK_FALSE(allocated_in_place(ga, g, b));
        CHECK(w->data == wdata);
        CHECK(w->buffer == &(*wbufs)[0]);
    }
    SECTION("a view source at offset 0 whose source has no other reader") {
        tensor* a = k.owned();
        tensor* r = reshape(ctx, a, {64});
        tensor* b = relu(ctx, r);
        b->set_output();
        graph g(b);
        CHECK(allocated_in_place(ga, g, b));
        CHECK(b->data == a->data);
    }
    SECTION("a view source not at offset 0") {
        tensor* a = k.owned();
        tensor* v = view_1d(ctx, a, 16, 16 * sizeof(float));
        tensor* b = relu(ctx, v);
        b->set_output();
        graph g(b);
        CHECK_FALSE(allocated_in_place(ga, g, b));
    }
    SECTION("a view source whose source has another live view") {
        tensor* a = k.owned();
        tensor* r1 = reshape(ctx, a, {64});
        tensor* r2 = view_1d(ctx, a, 64, 0);
        tensor* b = relu(ctx, r1);
        tensor* c = add(ctx, b, r2);
        c->set_output();
        graph g(c);
        CHECK_FALSE(allocated_in_place(ga, g, b));
    }
    SECTION("a view source whose source is read later") {
        tensor* a = k.owned();
        tensor* r = reshape(ctx, a, {16, 4});
        tensor* b = relu(ctx, r);
        tensor* c = add(ctx, b, a);
        c->set_output();
        graph g(c);
        CHECK_FALSE(allocated_in_place(ga, g, b));
    }
    SECTION("an output view source pins its source") {
        tensor* a = k.owned();
        tensor* r = reshape(ctx, a, {64});
        r->set_output();
        tensor* b = relu(ctx, r);
        b->set_output();
        graph g(b);
        CHECK_FALSE(allocated_in_place(ga, g, b));
    }
    SECTION("a smaller view source: the tail of its source is reused") {
        tensor* x = k.input();                         // 256 bytes, pinned at offset 0
        tensor* a = scale(ctx, x, 2.0f);               // 256 bytes at 256
        tensor* v = view_1d(ctx, a, 16, 0);            // a's first 64 bytes
        tensor* b = relu(ctx, v);                      // takes a's block, returns 192 bytes
        tensor* c = cont(ctx, view_1d(ctx, x, 48, 0)); // 192 bytes: fits the returned tail
        c->set_output();
        b->set_output();
        graph g{b, c};
        CHECK(allocated_in_place(ga, g, b));
        CHECK(b->data == a->data);
        CHECK(c->data == static_cast<std::byte*>(a->data) + 64);
        CHECK(ga.buffer_size(0) == 512);
    }
}

TEST_CASE("in place: only within one buffer type", "[alloc][graph_alloc][inplace]") {
    failing_buffer_type other({.name = "other"});
    inplace_case k;
    tensor* a = k.owned();
    tensor* b = relu(k.ctx, a);
    b->set_output();
    graph g(b);
    REQUIRE(g.n_nodes() == 2); // a, b (a's input is the leaf)
    const int ids[] = {0, 1};

    SECTION("different buffer types: a fresh block in b's own buffer") {
        graph_allocator ga({cpu_bt(), other});
        REQUIRE(ga.alloc_graph(g, ids).ok());
        CHECK(b->data != a->data);
        CHECK(b->buffer == ga.buffer(1));
        CHECK(a->buffer == ga.buffer(0));
    }
    SECTION("two ids of one buffer type share memory, and in-place reuse") {
        graph_allocator ga({cpu_bt(), cpu_bt()});
        REQUIRE(ga.alloc_graph(g, ids).ok());
        CHECK(b->data == a->data);
        CHECK(ga.buffer(0) == ga.buffer(1));
        CHECK(ga.buffer_size(0) > 0);
        CHECK(ga.buffer_size(1) == 0); // counted once, under the first id
    }
}

// -----------------------------------------------------------------------------------------
// Peak memory.

TEST_CASE("peak memory of chains", "[alloc][graph_alloc]") {
    constexpr std::int64_t n = 1000; // 4000 bytes, a multiple of 64 after padding: 4032
    context ctx = no_alloc_context();
    tensor* x = ctx.new_tensor_1d(elem_type::f32, n);
    const std::size_t s = padded(*x, cpu_bt());
    const bool input = GENERATE(false, true);
    if (input) x->set_input();

    SECTION("100 in-place ops: one block, plus the pinned input") {
        tensor* t = x;
        for (int i = 0; i < 100; ++i) t = i % 2 ? silu(ctx, t) : scale(ctx, t, 1.01f);
        t->set_output();
        graph g(t);
        graph_allocator ga(cpu_bt());
        REQUIRE(ga.alloc_graph(g).ok());
        CHECK(ga.buffer_size(0) == (input ? 2 : 1) * s);
    }
    SECTION("100 copies (no in place): two blocks alternate, plus the pinned input") {
        tensor* t = x;
        for (int i = 0; i < 100; ++i) t = cont(ctx, t);
        t->set_output();
        graph g(t);
        graph_allocator ga(cpu_bt());
        REQUIRE(ga.alloc_graph(g).ok());
        CHECK(ga.buffer_size(0) == (input ? 3 : 2) * s);
        checker ck(ga, g);
        ck.check_all(g);
    }
    SECTION("a diamond per step: three blocks live at once") {
        tensor* t = x;
        for (int i = 0; i < 50; ++i) t = add(ctx, cont(ctx, t), cont(ctx, t));
        t->set_output();
        graph g(t);
        graph_allocator ga(cpu_bt());
        REQUIRE(ga.alloc_graph(g).ok());
        // t, its two copies alive together; the add then writes over the first copy
        CHECK(ga.buffer_size(0) == (input ? 4 : 3) * s);
    }
}

// -----------------------------------------------------------------------------------------
// reserve, then allocate without growing.

namespace {

/// A transformer-like stack: weights pre-allocated in `weights`, activations in ctx.
struct model {
    context weights_ctx = no_alloc_context();
    std::vector<std::array<tensor*, 5>> layers; // q, k, v, up, down
    buffer_list weights;
    static constexpr std::int64_t d = 64;

    explicit model(int n_layers) {
        for (int l = 0; l < n_layers; ++l) {
            auto w = [&](std::int64_t a, std::int64_t b) { return weights_ctx.new_tensor_2d(elem_type::f32, a, b); };
            layers.push_back({w(d, d), w(d, d), w(d, d), w(d, 2 * d), w(2 * d, d)});
        }
        weights = std::move(alloc_tensors(weights_ctx, cpu_bt(), buffer_usage::weights).value());
    }

    /// The graph for n_tokens over the first n_layers layers, in `ctx`.
    graph build(context& ctx, std::int64_t n_tokens, std::size_t n_layers) const {
        tensor* x = ctx.new_tensor_2d(elem_type::f32, d, n_tokens);
        x->name = "x";
        x->set_input();
        tensor* mask = ctx.new_tensor_2d(elem_type::f32, n_tokens, n_tokens);
        mask->set_input();
        for (std::size_t l = 0; l < n_layers; ++l) {
            const auto& [wq, wk, wv, wup, wdown] = layers[l];
            tensor* h = rms_norm(ctx, x);
            tensor* q = mul_mat(ctx, wq, h);
            tensor* k = mul_mat(ctx, wk, h);
            tensor* kq = mul_mat(ctx, k, q); // [n_tokens, n_tokens]
            tensor* sm = soft_max(ctx, kq, mask, 0.125f);
            tensor* vt = cont(ctx, transpose(ctx, mul_mat(ctx, wv, h))); // [n_tokens, d]
            x = add(ctx, x, mul_mat(ctx, vt, sm));
            tensor* ff = silu(ctx, mul_mat(ctx, wup, rms_norm(ctx, x)));
            x = add(ctx, x, mul_mat(ctx, wdown, ff));
        }
        x->set_output();
        return graph(x);
    }
};

} // namespace

TEST_CASE("reserve on the worst case, then allocate smaller graphs without growing", "[alloc][graph_alloc]") {
    const model m(4);
    graph_allocator ga(cpu_bt());
    {
        context ctx = no_alloc_context();
        REQUIRE(ga.reserve(m.build(ctx, 64, 4)).ok());
    }
    const std::size_t reserved = ga.buffer_size(0);
    REQUIRE(reserved > 0);

    SECTION("the same shape rebuilt, then fewer tokens: the plan is replayed") {
        for (std::int64_t n_tokens : {64, 64, 32, 7, 1}) {
            CAPTURE(n_tokens);
            context ctx = no_alloc_context();
            const graph g = m.build(ctx, n_tokens, 4);
            checker ck(ga, g);
            REQUIRE(ga.alloc_graph(g).ok());
            CHECK(ga.n_reallocs() == 0);
            CHECK(ga.buffer_size(0) == reserved);
            ck.check_all(g);
        }
    }
    SECTION("fewer layers (another structure): planned again, fits the reserved buffer") {
        for (std::size_t n_layers : {std::size_t{2}, std::size_t{1}, std::size_t{3}}) {
            CAPTURE(n_layers);
            context ctx = no_alloc_context();
            const graph g = m.build(ctx, 64, n_layers);
            checker ck(ga, g);
            REQUIRE(ga.alloc_graph(g).ok());
            CHECK(ga.n_reallocs() == 0);
            CHECK(ga.buffer_size(0) == reserved);
            ck.check_all(g);
        }
    }
    SECTION("a larger graph grows the buffer once, and is counted") {
        context ctx = no_alloc_context();
        const graph g = m.build(ctx, 128, 4);
        checker ck(ga, g);
        REQUIRE(ga.alloc_graph(g).ok());
        CHECK(ga.n_reallocs() == 1);
        CHECK(ga.buffer_size(0) > reserved);
        ck.check_all(g);
        context ctx2 = no_alloc_context();
        const graph g2 = m.build(ctx2, 128, 4);
        REQUIRE(ga.alloc_graph(g2).ok());
        CHECK(ga.n_reallocs() == 1);
    }
}

TEST_CASE("a graph with the same counts but another wiring is not given the old plan", "[alloc][graph_alloc]") {
    // A: x -> a -> b -> c -> d (each a copy). B: the same counts and sizes, but c reads a.
    // Replaying A's addresses for B would put c where a lives while c reads a.
    graph_allocator ga(cpu_bt());
    context ca = no_alloc_context();
    {
        tensor* x = ca.new_tensor_1d(elem_type::f32, 256);
        tensor* d = cont(ca, cont(ca, cont(ca, cont(ca, x))));
        d->set_output();
        graph a(d);
        REQUIRE(ga.reserve(a).ok());
    }
    context cb = no_alloc_context();
    tensor* x = cb.new_tensor_1d(elem_type::f32, 256);
    tensor* a = cont(cb, x);
    tensor* b = cont(cb, a);
    tensor* c = cont(cb, a);
    tensor* d = add(cb, b, c);
    d->set_output();
    graph g(d);
    REQUIRE(g.n_nodes() == 4);
    checker ck(ga, g);
    REQUIRE(ga.alloc_graph(g).ok());
    ck.check_all(g);
    CHECK(c->data != a->data);
    CHECK(b->data != a->data);
}

TEST_CASE("tensors with data are left alone, tensors already in the allocator buffers are placed again",
          "[alloc][graph_alloc]") {
    context host; // tensors with host data
    tensor* h = host.new_tensor_1d(elem_type::f32, 64);
    void* hdata = h->data;
    context ctx = no_alloc_context();
    tensor* a = relu(ctx, h);
    tensor* b = scale(ctx, a, 2.0f);
    b->set_output();
    graph g(b);
    graph_allocator ga(cpu_bt());
    checker ck(ga, g);
    REQUIRE(ga.alloc_graph(g).ok());
    CHECK(h->data == hdata);
    CHECK(h->buffer == nullptr);
    CHECK(a->buffer == ga.buffer(0));
    CHECK(b->data == a->data);
    ck.check_all(g);

    // a tensor placed by this allocator is not "pre-allocated" the next time
    REQUIRE(ga.alloc_graph(g).ok());
    CHECK(b->data == a->data);
    CHECK(ga.n_reallocs() == 1); // the first allocation only
}

// -----------------------------------------------------------------------------------------
// Buffer ids.

TEST_CASE("several buffer ids: each tensor in its own buffer type", "[alloc][graph_alloc]") {
    failing_buffer_type gpu({.alignment = 256, .name = "gpu"});
    context ctx = no_alloc_context();
    tensor* x = ctx.new_tensor_2d(elem_type::f32, 32, 8);
    x->set_input();
    tensor* y = ctx.new_tensor_2d(elem_type::f32, 32, 8);
    tensor* a = add(ctx, x, y);
    tensor* b = silu(ctx, a);
    tensor* c = mul(ctx, b, y);
    tensor* d = cont(ctx, c);
    d->set_output();
    graph g(d);
    REQUIRE(g.n_nodes() == 4);
    REQUIRE(g.n_leafs() == 2);
    const int node_ids[] = {1, 1, 0, 1};
    const int leaf_ids[] = {0, 1};

    graph_allocator ga({cpu_bt(), gpu});
    CHECK(ga.n_buffers() == 2);
    CHECK(ga.buffer_type(1) == buffer_type_ref(gpu));
    checker ck(ga, g);
    ck.set_ids(g, node_ids, leaf_ids);
    REQUIRE(ga.alloc_graph(g, node_ids, leaf_ids).ok());
    ck.check_all(g);
    CHECK(x->buffer == ga.buffer(0));
    CHECK(y->buffer == ga.buffer(1));
    CHECK(a->buffer == ga.buffer(1));
    CHECK(b->data == a->data); // same buffer: in place
    CHECK(c->buffer == ga.buffer(0));
    CHECK(c->data != b->data); // another buffer type: never in place
    CHECK(d->buffer == ga.buffer(1));
    CHECK(ga.buffer_size(0) > 0);
    CHECK(ga.buffer_size(1) > 0);
    CHECK(ga.buffer(1)->usage() == buffer_usage::compute);
    CHECK(gpu.live_buffers() == 1);
}

TEST_CASE("bad buffer ids are statuses and the allocator stays usable", "[alloc][graph_alloc]") {
    context ctx = no_alloc_context();
    tensor* x = ctx.new_tensor_1d(elem_type::f32, 16);
    tensor* y = relu(ctx, x);
    graph g(y);
    graph_allocator ga({cpu_bt(), cpu_bt()});
    const int bad[] = {2};
    const int negative[] = {-1};
    const int two[] = {0, 0};
    CHECK(ga.alloc_graph(g, bad).code() == errc::invalid_argument);
    CHECK(ga.reserve(g, negative).code() == errc::invalid_argument);
    CHECK(ga.alloc_graph(g, {}, bad).code() == errc::invalid_argument);
    CHECK(ga.alloc_graph(g, two).code() == errc::invalid_argument); // one node, two ids
    CHECK(y->data == nullptr);
    CHECK_THROWS_AS(graph_allocator(std::vector<buffer_type_ref>{}), error);
    CHECK_THROWS_AS(ga.buffer_type(2), error);
    CHECK(ga.buffer(2) == nullptr);
    CHECK(ga.buffer(-1) == nullptr);
    CHECK(ga.buffer_size(7) == 0);
    CHECK(ga.n_chunks(-3) == 0);

    const int one[] = {1};
    REQUIRE(ga.alloc_graph(g, one).ok());
    CHECK(y->data != nullptr);
}

// -----------------------------------------------------------------------------------------
// max_size: chunks.

TEST_CASE("max_size splits memory into chunks", "[alloc][graph_alloc]") {
    failing_buffer_type bt({.alignment = 64, .max_size = 4096});
    {
        context ctx = no_alloc_context();
        std::vector<tensor*> leafs;
        for (int i = 0; i < 10; ++i) { // 1000 bytes each, padded to 1024, all alive at once
            tensor* t = ctx.new_tensor_1d(elem_type::f32, 250);
            t->name = "in" + std::to_string(i);
            t->set_input();
            leafs.push_back(t);
        }
        tensor* s = leafs[0];
        for (int i = 1; i < 10; ++i) s = add(ctx, s, leafs[static_cast<std::size_t>(i)]);
        s->set_output();
        graph g(s);

        graph_allocator ga(bt);
        checker ck(ga, g);
        REQUIRE(ga.alloc_graph(g).ok());
        ck.check_all(g);
        CHECK(ga.n_chunks(0) >= 3); // 11 KiB alive at the end, 4 KiB per chunk
        std::size_t total = 0;
        for (std::size_t c = 0; c < ga.n_chunks(0); ++c) {
            REQUIRE(ga.buffer(0, c) != nullptr);
            CHECK(ga.buffer(0, c)->size() <= 4096);
            total += ga.buffer(0, c)->size();
        }
        CHECK(ga.buffer_size(0) == total);
        CHECK(ga.buffer(0, ga.n_chunks(0)) == nullptr);
        for (const tensor* t : g.leafs()) CHECK(t->buffer->contains(t->data, bt.alloc_size(*t)));
        for (const tensor* t : g.nodes()) CHECK(t->buffer->contains(t->data, bt.alloc_size(*t)));
        CHECK(bt.live_buffers() == ga.n_chunks(0));
    }
    CHECK(bt.live_buffers() == 0);
}

TEST_CASE("a tensor larger than max_size is an error status", "[alloc][graph_alloc]") {
    failing_buffer_type bt({.alignment = 64, .max_size = 4096});
    graph_allocator ga(bt);
    {
        context ctx = no_alloc_context();
        tensor* big = ctx.new_tensor_1d(elem_type::f32, 2000); // 8000 bytes
        big->name = "big";
        tensor* y = relu(ctx, big);
        graph g(y);
        for (int reserve = 0; reserve < 2; ++reserve) {
            const status s = reserve ? ga.reserve(g) : ga.alloc_graph(g);
            CHECK(s.code() == errc::alloc_failed);
            CHECK(s.message().find("big") != std::string::npos);
            CHECK(s.message().find("4096") != std::string::npos);
            CHECK(y->data == nullptr);
        }
    }
    CHECK(bt.live_buffers() == 0);
    context ctx = no_alloc_context();
    tensor* y = relu(ctx, ctx.new_tensor_1d(elem_type::f32, 1000));
    graph g(y);
    REQUIRE(ga.alloc_graph(g).ok()); // still usable
    CHECK(y->data != nullptr);
}

// -----------------------------------------------------------------------------------------
// Failing allocations: reported, nothing leaks, and the next call succeeds.

namespace {

/// A graph that needs several chunks of a 4 KiB buffer type.
graph chunky_graph(context& ctx, int n_inputs) {
    tensor* s = nullptr;
    for (int i = 0; i < n_inputs; ++i) {
        tensor* t = ctx.new_tensor_1d(elem_type::f32, 250);
        t->set_input();
        s = s ? add(ctx, s, t) : relu(ctx, t);
    }
    s->set_output();
    return graph(s);
}

} // namespace

TEST_CASE("each buffer allocation failing in turn", "[alloc][graph_alloc]") {
    failing_buffer_type bt({.alignment = 64, .max_size = 4096});
    failing_buffer_type other({.alignment = 64, .max_size = 4096, .name = "other"});
    context ctx = no_alloc_context();
    const graph g = chunky_graph(ctx, 10);
    std::vector<int> node_ids(g.n_nodes()), leaf_ids(g.n_leafs());
    for (std::size_t i = 0; i < node_ids.size(); ++i) node_ids[i] = static_cast<int>(i % 2);
    for (std::size_t i = 0; i < leaf_ids.size(); ++i) leaf_ids[i] = static_cast<int>(i % 2);

    std::size_t needed = 0; // allocations a successful reserve makes
    {
        graph_allocator ga({bt, other});
        const std::size_t before = bt.successes() + other.successes();
        REQUIRE(ga.reserve(g, node_ids, leaf_ids).ok());
        needed = bt.successes() + other.successes() - before;
    }
    REQUIRE(needed >= 3);

    const bool use_reserve = GENERATE(true, false);
    CAPTURE(use_reserve);
    for (std::size_t n = 1; n <= needed; ++n) {
        CAPTURE(n);
        // the n-th allocation over both buffer types fails: arm the one it falls on
        {
            graph_allocator ga({bt, other});
            // count the first buffer type's share by a dry run
            std::size_t share = 0;
            {
                graph_allocator probe({bt, other});
                const std::size_t b0 = bt.successes();
                REQUIRE(probe.reserve(g, node_ids, leaf_ids).ok());
                share = bt.successes() - b0;
            }
            if (n <= share)
                bt.fail_at(n);
            else
                other.fail_at(n - share);

            const status s = use_reserve ? ga.reserve(g, node_ids, leaf_ids) : ga.alloc_graph(g, node_ids, leaf_ids);
            REQUIRE_FALSE(s.ok());
            CHECK(s.code() == errc::alloc_failed);
            CHECK(s.native() == 7);
            CHECK(s.message().find("fails on purpose") != std::string::npos);
            CHECK(bt.live_buffers() + other.live_buffers() < needed);
            bt.fail_at(0);
            other.fail_at(0);

            // the same allocator succeeds now, and holds exactly its chunks
            checker ck(ga, g);
            ck.set_ids(g, node_ids, leaf_ids);
            REQUIRE(ga.alloc_graph(g, node_ids, leaf_ids).ok());
            ck.check_all(g);
            CHECK(bt.live_buffers() + other.live_buffers() == needed);
            CHECK(bt.live_buffers() == ga.n_chunks(0));
            CHECK(other.live_buffers() == ga.n_chunks(1));
            for (tensor* t : g.nodes()) unplace_tensor(*t);
            for (tensor* t : g.leafs()) unplace_tensor(*t);
        }
        CHECK(bt.live_buffers() == 0);
        CHECK(other.live_buffers() == 0);
    }
}

TEST_CASE("a failed growth keeps the allocator usable", "[alloc][graph_alloc]") {
    failing_buffer_type bt({.alignment = 64, .max_size = 4096});
    graph_allocator ga(bt);
    context small_ctx = no_alloc_context();
    const graph small = chunky_graph(small_ctx, 3);
    REQUIRE(ga.reserve(small).ok());
    const std::size_t reallocs = ga.n_reallocs();

    context big_ctx = no_alloc_context();
    const graph big = chunky_graph(big_ctx, 12);
    bt.fail_at(1);
    const status s = ga.alloc_graph(big);
    CHECK(s.code() == errc::alloc_failed);
    CHECK(ga.n_reallocs() == reallocs + 1); // it tried to grow
    bt.fail_at(0);

    checker ck(ga, big);
    REQUIRE(ga.alloc_graph(big).ok());
    ck.check_all(big);
    context small_ctx2 = no_alloc_context();
    const graph small2 = chunky_graph(small_ctx2, 3);
    checker ck2(ga, small2);
    REQUIRE(ga.alloc_graph(small2).ok());
    ck2.check_all(small2);
    CHECK(bt.live_buffers() == ga.n_chunks(0));
}

TEST_CASE("a topology saves lookups and never changes the result: right, wrong or missing positions",
          "[alloc][graph_alloc][topology]") {
    // a small graph with a view and a transposed copy
    context ctx(context_params{.no_alloc = true});
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 16, 4);
    tensor* b = ctx.new_tensor_2d(elem_type::f32, 16, 4);
    a->set_input();
    tensor* c = add(ctx, a, b);
    tensor* t = transpose(ctx, c);
    tensor* d = cont(ctx, t);
    tensor* e = scale(ctx, mul(ctx, c, c), 2.0f);
    graph g{d, e};
    const auto nodes = g.nodes();
    const auto leafs = g.leafs();
    const std::size_t n = nodes.size() + leafs.size();
    // positions: nodes, then leafs
    const auto position = [&](const tensor* x) -> std::int32_t {
        for (std::size_t i = 0; i < nodes.size(); ++i)
            if (nodes[i] == x) return static_cast<std::int32_t>(i);
        for (std::size_t i = 0; i < leafs.size(); ++i)
            if (leafs[i] == x) return static_cast<std::int32_t>(nodes.size() + i);
        return -1;
    };
    std::vector<std::array<std::int32_t, max_srcs>> srcs(nodes.size());
    std::vector<std::int32_t> vsrcs(n, -1);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        for (std::size_t j = 0; j < max_srcs; ++j) srcs[i][j] = nodes[i]->src[j] ? position(nodes[i]->src[j]) : -1;
        if (nodes[i]->view_src) vsrcs[i] = position(nodes[i]->view_src);
    }

    const auto offsets = [&](const alloc_topology* topo) {
        for (tensor* x : nodes) unplace_tensor(*x); // the last allocator is gone
        for (tensor* x : leafs) unplace_tensor(*x);
        graph_allocator ga(cpu_buffer_type::instance());
        REQUIRE(ga.alloc_graph(nodes, leafs, {}, {}, topo));
        std::vector<std::ptrdiff_t> out;
        const auto* base = static_cast<const std::byte*>(ga.buffer(0)->base());
        for (tensor* x : nodes) out.push_back(static_cast<const std::byte*>(x->data) - base);
        for (tensor* x : leafs) out.push_back(static_cast<const std::byte*>(x->data) - base);
        CHECK(ga.holds(*c));
        return out;
    };
    const auto plain = offsets(nullptr);
    const alloc_topology right{srcs, vsrcs};
    CHECK(offsets(&right) == plain);

    // every position off by one: each is checked and looked up instead
    auto wrong_srcs = srcs;
    for (auto& row : wrong_srcs)
        for (auto& k : row)
            if (k >= 0) k = (k + 1) % static_cast<std::int32_t>(n);
    std::vector<std::int32_t> wrong_vsrcs(n, 0);
    const alloc_topology wrong{wrong_srcs, wrong_vsrcs};
    CHECK(offsets(&wrong) == plain);

    // a topology of the wrong size is ignored
    const alloc_topology short_one{std::span(srcs).first(1), vsrcs};
    CHECK(offsets(&short_one) == plain);
}

TEST_CASE("a binding places an unlisted tensor on a listed block, replays included, and is checked",
          "[alloc][graph_alloc][topology]") {
    // x rotates through two input slots s0, s1 (as a scheduler's pipeline slots): the
    // lists stay the same, y names s0 as its source, and x is bound to the current slot
    context ctx(context_params{.no_alloc = true});
    tensor* x = ctx.new_tensor_2d(elem_type::f32, 16, 4);
    tensor* s0 = ctx.new_tensor_2d(elem_type::f32, 16, 4);
    tensor* s1 = ctx.new_tensor_2d(elem_type::f32, 16, 4);
    x->set_input();
    s0->set_input();
    s1->set_input();
    tensor* y = scale(ctx, x, 2.0f);
    std::vector<tensor*> nodes{y};
    std::vector<tensor*> leafs{s0, s1};
    std::vector<std::array<std::int32_t, max_srcs>> srcs(1);
    srcs[0].fill(-1);
    srcs[0][0] = 1;
    const std::vector<std::int32_t> vsrcs(3, -1);
    graph_allocator ga(cpu_buffer_type::instance());
    const auto alloc_bound_to = [&](std::int32_t position) {
        const alloc_binding binding{x, position};
        const alloc_topology topo{srcs, vsrcs, true, std::span(&binding, 1)};
        return ga.alloc_graph(nodes, leafs, {}, {}, &topo);
    };
    for (int run = 0; run < 4; ++run) {
        REQUIRE(alloc_bound_to(1 + run % 2));
        CHECK(x->data == (run % 2 == 0 ? s0 : s1)->data);
        CHECK(x->buffer == s0->buffer);
        CHECK(ga.holds(*x));
        CHECK(y->data != s0->data);
        CHECK(y->data != s1->data);
    }
    CHECK(ga.n_plans() == 1); // the same lists every time: the plan replays

    // a binding to no block, or to one too small, is an error naming the tensor
    for (const std::int32_t bad : {-1, 3}) {
        const status s = alloc_bound_to(bad);
        CHECK(s.code() == errc::invalid_argument);
        CHECK(s.message().find("binding") != std::string::npos);
    }
    tensor* big = ctx.new_tensor_2d(elem_type::f32, 16, 8);
    const alloc_binding too_big{big, 1};
    const alloc_topology topo{srcs, vsrcs, true, std::span(&too_big, 1)};
    CHECK(ga.alloc_graph(nodes, leafs, {}, {}, &topo).code() == errc::invalid_argument);
}

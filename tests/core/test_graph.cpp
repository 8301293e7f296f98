// graph: forward build (topological order, leafs vs nodes, shared sub-expressions, long
// chains), views of node ranges; context: host data, growth, stable addresses, moves.

#include <backplane/core/context.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/ops.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

using namespace backplane;
using Catch::Matchers::Contains;

namespace {

/// Position of t among g's nodes, or -1.
std::ptrdiff_t node_index(const graph& g, const tensor* t) {
    const auto n = g.nodes();
    const auto it = std::find(n.begin(), n.end(), t);
    return it == n.end() ? -1 : it - n.begin();
}

/// Every source of every node is a leaf of g or a node listed before it; no tensor
/// appears twice; leafs have no op and nodes have one.
void require_topological(const graph& g) {
    std::map<const tensor*, std::size_t> seen_nodes;
    for (std::size_t i = 0; i < g.n_nodes(); ++i) {
        const tensor* n = g.nodes()[i];
        INFO("node " << i << " op " << to_string(n->op));
        REQUIRE(n->op != op_kind::none);
        for (const tensor* s : n->src) {
            if (s == nullptr) continue;
            const bool is_leaf = std::find(g.leafs().begin(), g.leafs().end(), s) != g.leafs().end();
            const bool earlier = seen_nodes.count(s) != 0;
            CHECK((is_leaf || earlier));
        }
        REQUIRE(seen_nodes.emplace(n, i).second); // listed once
    }
    std::vector<const tensor*> leafs(g.leafs().begin(), g.leafs().end());
    for (const tensor* l : leafs) CHECK(l->op == op_kind::none);
    std::sort(leafs.begin(), leafs.end());
    CHECK(std::adjacent_find(leafs.begin(), leafs.end()) == leafs.end());
}

template <class F>
error thrown_error(F&& f) {
    try {
        f();
    } catch (const error& e) {
        return e;
    }
    FAIL("no backplane::error was thrown");
    return error("unreachable");
}

} // namespace

TEST_CASE("build_forward: sources before consumers, leafs apart from nodes", "[graph]") {
    context ctx({.no_alloc = true});
    tensor* w = ctx.new_tensor_2d(elem_type::f32, 8, 4);
    tensor* x = ctx.new_tensor_2d(elem_type::f32, 8, 3);
    tensor* b = ctx.new_tensor_1d(elem_type::f32, 4);
    w->name = "w";
    x->name = "x";
    b->name = "b";
    tensor* y = mul_mat(ctx, w, x);   // [4, 3]
    tensor* z = add(ctx, y, b);       // [4, 3]
    tensor* out = soft_max(ctx, relu(ctx, z));

    graph g(out);
    require_topological(g);
    CHECK(g.n_nodes() == 4);
    CHECK(g.n_leafs() == 3);
    CHECK(g.back() == out);
    CHECK(node_index(g, y) < node_index(g, z));
    CHECK(node_index(g, z) < node_index(g, out));
    // sources are visited in order: src[0]'s leafs before src[1]'s
    REQUIRE(g.leafs().size() == 3);
    CHECK(g.leafs()[0] == w);
    CHECK(g.leafs()[1] == x);
    CHECK(g.leafs()[2] == b);
    CHECK(g.contains(w));
    CHECK(g.contains(out));
    CHECK_FALSE(g.contains(ctx.new_tensor_1d(elem_type::f32, 1)));

    // a single leaf is a graph with no nodes
    graph only_leaf(w);
    CHECK(only_leaf.n_nodes() == 0);
    CHECK(only_leaf.n_leafs() == 1);
    CHECK(only_leaf.back() == nullptr);
    CHECK(only_leaf.view().empty());
}

TEST_CASE("build_forward: shared sub-expressions are visited once", "[graph]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_1d(elem_type::f32, 16);
    tensor* s = sqr(ctx, a);       // used three times below
    tensor* p = add(ctx, s, s);    // the same tensor as both sources
    tensor* q = mul(ctx, p, s);
    tensor* r = sub(ctx, q, a);
    // a diamond: r <- q <- {p, s}, p <- {s, s}
    graph g(r);
    require_topological(g);
    CHECK(g.n_leafs() == 1);
    CHECK(g.n_nodes() == 4);
    CHECK(node_index(g, s) == 0);

    // building again, or from a node already in the graph, adds nothing
    g.build_forward(r);
    g.build_forward(s);
    CHECK(g.n_nodes() == 4);
    CHECK(g.n_leafs() == 1);
}

TEST_CASE("build_forward: several outputs", "[graph]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_1d(elem_type::f32, 16);
    tensor* b = ctx.new_tensor_1d(elem_type::f32, 16);
    tensor* shared = add(ctx, a, b);
    tensor* out1 = relu(ctx, shared);
    tensor* out2 = silu(ctx, shared);
    tensor* out3 = scale(ctx, b, 2.0f); // only reads a leaf that is already there

    graph g;
    g.build_forward(out1);
    const std::size_t after_first = g.n_nodes();
    CHECK(after_first == 2);
    g.build_forward(out2);
    g.build_forward(out3);
    require_topological(g);
    CHECK(g.n_nodes() == 4);
    CHECK(g.n_leafs() == 2);
    // each output's new nodes are appended after what was there
    CHECK(g.node(0) == shared);
    CHECK(g.node(1) == out1);
    CHECK(g.node(2) == out2);
    CHECK(g.node(3) == out3);
    CHECK(g.back() == out3);

    // the initializer-list constructor builds the same graph
    graph h{out1, out2, out3};
    CHECK(std::equal(h.nodes().begin(), h.nodes().end(), g.nodes().begin(), g.nodes().end()));
    CHECK(std::equal(h.leafs().begin(), h.leafs().end(), g.leafs().begin(), g.leafs().end()));

    g.clear();
    CHECK(g.n_nodes() == 0);
    CHECK(g.n_leafs() == 0);
    CHECK_FALSE(g.contains(shared));
    g.build_forward(out1);
    CHECK(g.n_nodes() == 2);
}

TEST_CASE("build_forward: views are nodes, a null output is an error", "[graph]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 4, 6);
    tensor* t = transpose(ctx, a);
    tensor* c = cont(ctx, t);
    graph g(c);
    require_topological(g);
    CHECK(g.n_nodes() == 2);
    CHECK(g.node(0) == t);

    graph e;
    const error err = thrown_error([&] { e.build_forward(nullptr); });
    CHECK(err.code() == errc::invalid_argument);
    CHECK_THAT(err.what(), Contains("build_forward"));
}

TEST_CASE("build_forward: a cycle made by editing a source is an error naming a tensor on it", "[graph]") {
    context ctx({.no_alloc = true});
    tensor* x = ctx.new_tensor_1d(elem_type::f32, 4);
    x->name = "x";
    tensor* a = add(ctx, x, x);
    a->name = "a";
    tensor* b = relu(ctx, a);
    b->name = "b";
    tensor* c = scale(ctx, b, 2.0f);
    c->name = "c";
    tensor* other = relu(ctx, x);
    other->name = "other";
    graph g(other);
    const std::size_t nodes_before = g.n_nodes();
    const std::size_t leafs_before = g.n_leafs();

    SECTION("a longer cycle") {
        a->src[1] = c; // a -> c -> b -> a
        const error err = thrown_error([&] { g.build_forward(c); });
        CHECK(err.code() == errc::invalid_argument);
        CHECK_THAT(err.what(), Contains("cycle"));
        CHECK_THAT(err.what(), Contains("'a'"));
        CHECK_THAT(err.what(), Contains("'b'"));
        CHECK_THAT(err.what(), Contains("'c'"));
    }
    SECTION("a node reading itself") {
        b->src[0] = b;
        const error err = thrown_error([&] { g.build_forward(c); });
        CHECK_THAT(err.what(), Contains("cycle"));
        CHECK_THAT(err.what(), Contains("'b'"));
        CHECK_THAT(err.what(), !Contains("'c'"));
    }
    SECTION("through a view") {
        tensor* v = view_1d(ctx, b, 4, 0);
        v->name = "v";
        tensor* d = add(ctx, v, x);
        d->name = "d";
        a->src[0] = d; // a -> d -> v -> b -> a
        const error err = thrown_error([&] { g.build_forward(d); });
        CHECK_THAT(err.what(), Contains("cycle"));
        CHECK_THAT(err.what(), Contains("'v'"));
    }
    // the graph is left as it was, and still usable
    CHECK(g.n_nodes() == nodes_before);
    CHECK(g.n_leafs() == leafs_before);
    CHECK(!g.contains(a));
    CHECK(!g.contains(c));
    a->src = {x, x, nullptr, nullptr};
    b->src[0] = a;
    g.build_forward(c);
    require_topological(g);
    CHECK(g.n_nodes() == nodes_before + 3);
    CHECK(graph(c).n_nodes() == 3);
}

TEST_CASE("new_tensor: an element type outside elem_type is an error naming its value", "[graph]") {
    context ctx({.no_alloc = true});
    const error err = thrown_error([&] { (void)ctx.new_tensor_1d(static_cast<elem_type>(200), 4); });
    CHECK(err.code() == errc::invalid_argument);
    CHECK_THAT(err.what(), Contains("200"));
    CHECK_THAT(err.what(), Contains("element type"));
    CHECK(ctx.size() == 0);
    context host;
    CHECK_THROWS_AS(host.new_tensor_2d(static_cast<elem_type>(elem_type_count), 2, 2), error);
    tensor* t = ctx.new_tensor_1d(elem_type::f32, 4);
    CHECK_THROWS_AS(ctx.new_view(t, static_cast<elem_type>(77), {4, 1, 1, 1}, {4, 16, 16, 16}, 0), error);
}

TEST_CASE("build_forward: a 200000-node chain builds without deep recursion", "[graph]") {
    context ctx({.no_alloc = true});
    tensor* t = ctx.new_tensor_1d(elem_type::f32, 4);
    tensor* const leaf = t;
    constexpr std::size_t n = 200'000;
    std::vector<tensor*> chain;
    chain.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        t = (i % 2) ? relu(ctx, t) : scale(ctx, t, 0.5f);
        chain.push_back(t);
    }
    graph g(t);
    REQUIRE(g.n_nodes() == n);
    REQUIRE(g.n_leafs() == 1);
    CHECK(g.leafs()[0] == leaf);
    CHECK(std::equal(chain.begin(), chain.end(), g.nodes().begin(), g.nodes().end()));
}

TEST_CASE("graph views: node ranges and their errors", "[graph]") {
    context ctx({.no_alloc = true});
    tensor* t = ctx.new_tensor_1d(elem_type::f32, 4);
    for (int i = 0; i < 10; ++i) t = relu(ctx, t);
    graph g(t);
    REQUIRE(g.n_nodes() == 10);

    graph_view all = g; // implicit: a graph is a view of itself
    CHECK(all.size() == 10);
    CHECK(all.nodes().data() == g.nodes().data());

    graph_view v = g.view(2, 7);
    CHECK(v.size() == 5);
    CHECK(v[0] == g.node(2));
    CHECK(v[4] == g.node(6));
    CHECK(std::equal(v.begin(), v.end(), g.nodes().begin() + 2));

    graph_view w = v.subview(1, 3);
    CHECK(w.size() == 2);
    CHECK(w[0] == g.node(3));
    CHECK(w[1] == g.node(4));

    CHECK(g.view(0, 0).empty());
    CHECK(g.view(10, 10).empty());
    CHECK(v.subview(5, 5).empty());

    // out of range: the error says which range and how many nodes there are
    for (auto [i0, i1] : {std::pair<std::size_t, std::size_t>{0, 11}, {11, 11}, {5, 4}, {9, 12}}) {
        INFO("view(" << i0 << ", " << i1 << ")");
        const error e = thrown_error([&] { (void)g.view(i0, i1); });
        CHECK(e.code() == errc::out_of_range);
        CHECK_THAT(e.what(), Contains("[" + std::to_string(i0) + ", " + std::to_string(i1) + ")"));
        CHECK_THAT(e.what(), Contains("10 nodes"));
    }
    const error e = thrown_error([&] { (void)v.subview(0, 6); });
    CHECK(e.code() == errc::out_of_range);
    CHECK_THAT(e.what(), Contains("5 nodes"));

    // node(i)
    CHECK(g.node(9) == g.back());
    const error ne = thrown_error([&] { (void)g.node(10); });
    CHECK(ne.code() == errc::out_of_range);
    CHECK_THAT(ne.what(), Contains("10"));
    CHECK(thrown_error([&] { (void)graph{}.node(0); }).code() == errc::out_of_range);
}

// ---------------------------------------------------------------------------------------
// context

TEST_CASE("context: no_alloc tensors have no data", "[context]") {
    context ctx({.no_alloc = true});
    CHECK(ctx.no_alloc());
    tensor* a = ctx.new_tensor_3d(elem_type::f16, 8, 4, 2);
    CHECK(a->data == nullptr);
    CHECK(a->buffer == nullptr);
    CHECK(ctx.host_bytes() == 0);
    // shape and contiguous strides are still set
    CHECK(a->ne == std::array<std::int64_t, 4>{8, 4, 2, 1});
    CHECK(a->nb == std::array<std::size_t, 4>{2, 16, 64, 128});
    CHECK(a->op == op_kind::none);
    // ops on such tensors have no data either
    CHECK(relu(ctx, a)->data == nullptr);
    CHECK(transpose(ctx, a)->data == nullptr);
}

TEST_CASE("context: host data is aligned and does not overlap", "[context]") {
    for (const std::size_t alignment : {std::size_t{16}, std::size_t{64}, std::size_t{256}, std::size_t{4096}}) {
        INFO("alignment " << alignment);
        context ctx({.no_alloc = false, .alignment = alignment, .chunk_size = 1u << 16});
        std::vector<tensor*> ts;
        // odd sizes, including empty tensors and quantized rows
        const std::int64_t sizes[] = {1, 3, 17, 1000, 0, 5, 64, 4096, 2};
        for (auto n : sizes) ts.push_back(ctx.new_tensor_1d(elem_type::f32, n));
        ts.push_back(ctx.new_tensor_2d(elem_type::q4_0, 64, 3));
        ts.push_back(ctx.new_tensor_2d(elem_type::q8_0, 32, 5));
        std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
        for (tensor* t : ts) {
            REQUIRE(t->data != nullptr);
            const auto p = reinterpret_cast<std::uintptr_t>(t->data);
            CHECK(p % alignment == 0);
            ranges.emplace_back(p, p + std::max<std::size_t>(t->nbytes(), 1));
            std::memset(t->data, 0xab, t->nbytes()); // ASan: the whole range is ours
        }
        std::sort(ranges.begin(), ranges.end());
        for (std::size_t i = 1; i < ranges.size(); ++i) CHECK(ranges[i - 1].second <= ranges[i].first);
        CHECK(ctx.host_bytes() >= 4 * (1 + 3 + 17 + 1000 + 5 + 64 + 4096 + 2) + 3 * 36 + 5 * 34);
    }
}

TEST_CASE("context: grows beyond its chunk size, addresses stay put", "[context]") {
    context ctx({.no_alloc = false, .alignment = 64, .chunk_size = 1024});
    tensor* first = ctx.new_tensor_1d(elem_type::f32, 100);
    first->name = "first";
    for (int i = 0; i < 100; ++i) static_cast<float*>(first->data)[i] = static_cast<float>(i);
    const void* first_data = first->data;

    // many tensors: several chunks, and a tensor larger than a chunk
    std::vector<std::pair<tensor*, float>> made;
    for (int i = 0; i < 5000; ++i) {
        tensor* t = ctx.new_tensor_1d(elem_type::f32, 1 + i % 50);
        static_cast<float*>(t->data)[0] = static_cast<float>(i);
        made.emplace_back(t, static_cast<float>(i));
    }
    tensor* big = ctx.new_tensor_2d(elem_type::f32, 1024, 16); // 64 KiB > chunk_size
    REQUIRE(big->data != nullptr);
    std::memset(big->data, 0, big->nbytes());
    CHECK(ctx.size() == 5002);
    CHECK(ctx.host_bytes() >= big->nbytes() + 400);

    // the first tensor and its data are where they were, with their contents
    CHECK(ctx.find("first") == first);
    CHECK(first->data == first_data);
    for (int i = 0; i < 100; ++i) CHECK(static_cast<float*>(first->data)[i] == static_cast<float>(i));
    bool all_kept = true;
    for (auto [t, v] : made) all_kept = all_kept && static_cast<float*>(t->data)[0] == v;
    CHECK(all_kept);
    // iteration visits tensors in creation order
    CHECK(&*ctx.begin() == first);
}

TEST_CASE("context: moving keeps tensor and data addresses", "[context]") {
    context a({.no_alloc = false, .alignment = 64, .chunk_size = 4096});
    tensor* t = a.new_tensor_2d(elem_type::f32, 8, 8);
    t->name = "t";
    static_cast<float*>(t->data)[63] = 42.0f;
    for (int i = 0; i < 100; ++i) a.new_tensor_1d(elem_type::f32, 8);

    context b(std::move(a));
    CHECK(b.find("t") == t);
    CHECK(static_cast<float*>(t->data)[63] == 42.0f);
    CHECK(b.size() == 101);

    context c;
    c = std::move(b);
    CHECK(c.find("t") == t);
    CHECK(static_cast<float*>(t->data)[63] == 42.0f);
    // the moved-to context keeps growing without moving t
    for (int i = 0; i < 100; ++i) c.new_tensor_1d(elem_type::f32, 8);
    CHECK(c.find("t") == t);
    CHECK(c.size() == 201);
}

TEST_CASE("context: find by name", "[context]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_1d(elem_type::f32, 4);
    tensor* b = ctx.new_tensor_1d(elem_type::f32, 4);
    tensor* c = ctx.new_tensor_1d(elem_type::f32, 4);
    a->name = "a";
    b->name = "dup";
    c->name = "dup";
    CHECK(ctx.find("a") == a);
    CHECK(ctx.find("dup") == b); // the first with that name
    CHECK(ctx.find("missing") == nullptr);
    CHECK(ctx.find("") == nullptr); // every tensor here has a name
    ctx.new_tensor_1d(elem_type::f32, 1);
    CHECK(ctx.find("") != nullptr); // an unnamed one now exists
}

TEST_CASE("context: bad parameters and bad tensors throw", "[context]") {
    for (const std::size_t alignment : {std::size_t{0}, std::size_t{3}, std::size_t{48}, std::size_t{100}}) {
        INFO("alignment " << alignment);
        const error e = thrown_error([&] { context ctx({.alignment = alignment}); });
        CHECK(e.code() == errc::invalid_argument);
        CHECK_THAT(e.what(), Contains(std::to_string(alignment)));
    }
    context ctx({.no_alloc = true});
    CHECK_THAT(thrown_error([&] { ctx.new_tensor_2d(elem_type::f32, 4, -1); }).what(), Contains("-1"));
    CHECK_THAT(thrown_error([&] { ctx.new_tensor(elem_type::f32, {}); }).what(), Contains("0"));
    CHECK_THAT(thrown_error([&] { ctx.new_tensor(elem_type::f32, {1, 2, 3, 4, 5}); }).what(), Contains("5"));
    // a quantized row must be whole blocks
    const error q = thrown_error([&] { ctx.new_tensor_2d(elem_type::q4_0, 48, 2); });
    CHECK_THAT(q.what(), Contains("q4_0"));
    CHECK_THAT(q.what(), Contains("48"));
    CHECK(ctx.size() == 0); // nothing half-made
}

TEST_CASE("context: a tensor whose byte size overflows is rejected", "[context]") {
    // 2^62 f32 values are 2^64 bytes: the byte count wraps to 0 in size_t. Such a tensor
    // must be refused, not given a few bytes of host data.
    context ctx;
    CHECK_THROWS_AS(ctx.new_tensor_1d(elem_type::f32, std::int64_t{1} << 62), error);
    CHECK_THROWS_AS(ctx.new_tensor_2d(elem_type::f32, std::int64_t{1} << 32, std::int64_t{1} << 32), error);
    context meta({.no_alloc = true});
    CHECK_THROWS_AS(meta.new_tensor_4d(elem_type::f16, 1 << 20, 1 << 20, 1 << 20, 1 << 20), error);
}

TEST_CASE("graph records its topology: source and view-source ids name the right tensors", "[graph][topology]") {
    context ctx(context_params{.no_alloc = true});
    tensor* x = ctx.new_tensor_2d(elem_type::f32, 8, 4);
    tensor* w = ctx.new_tensor_2d(elem_type::f32, 8, 8);
    tensor* y = mul_mat(ctx, w, x);
    tensor* t = transpose(ctx, y);   // a view of y
    tensor* v = view_2d(ctx, t, 2, 2, t->nb[1], 0); // a view of a view: view_src is y
    tensor* z = add(ctx, cont(ctx, v), cont(ctx, v));
    tensor* out = add(ctx, z, z);    // the same source twice
    graph g(out);
    const auto nodes = g.nodes();
    REQUIRE(g.src_ids().size() == nodes.size());
    REQUIRE(g.view_src_ids().size() == nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        for (std::size_t j = 0; j < max_srcs; ++j) {
            const std::int32_t id = g.src_ids()[i][j];
            CHECK(g.by_id(id) == nodes[i]->src[j]);
            if (id >= 0) CHECK(static_cast<std::size_t>(id) < i); // sources come first
        }
        CHECK(g.by_id(g.view_src_ids()[i]) == nodes[i]->view_src);
    }
    CHECK(g.by_id(graph::no_id) == nullptr);
    CHECK(g.by_id(graph::leaf_id(0)) == g.leafs()[0]);
    CHECK(g.contains(v));
    CHECK_FALSE(g.contains(ctx.new_tensor_1d(elem_type::f32, 1)));
    // extending the graph keeps the ids of what was there
    tensor* more = scale(ctx, out, 2.0f);
    g.build_forward(more);
    REQUIRE(g.src_ids().size() == g.n_nodes());
    CHECK(g.by_id(g.src_ids().back()[0]) == out);
    g.clear();
    CHECK(g.src_ids().empty());
    CHECK_FALSE(g.contains(out));
}

// graph_index: the numbers of a graph's tensors (nodes, leafs, then tensors read outside
// both lists), as the graph recorded them, as a view or node lists give them, and with
// positions a caller already knows (checked, or taken as the truth).

#include <backplane/core/context.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/graph_index.hpp>
#include <backplane/core/ops.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

using namespace backplane;

namespace {

// Every number names the tensor the graph reads there: node i's sources and view source,
// and the view source of every other numbered tensor; find() inverts the numbering.
void require_consistent(const graph_index& idx) {
    for (std::size_t i = 0; i < idx.size(); ++i) {
        const tensor& t = idx[i];
        INFO("tensor " << i << " '" << t.name << "'");
        CHECK(idx.find(&t) == static_cast<std::int32_t>(i));
        for (std::size_t j = 0; i < idx.n_nodes() && j < max_srcs; ++j) {
            const std::int32_t k = idx.src(i, j);
            CHECK((k == graph_index::none) == (t.src[j] == nullptr));
            if (k != graph_index::none) CHECK(&idx[static_cast<std::size_t>(k)] == t.src[j]);
        }
        const std::int32_t v = idx.view_src(i);
        CHECK((v == graph_index::none) == (t.view_src == nullptr));
        if (v != graph_index::none) CHECK(&idx[static_cast<std::size_t>(v)] == t.view_src);
        CHECK(idx.root(i) == (v == graph_index::none ? static_cast<std::int32_t>(i) : v));
    }
}

struct small_graph {
    context ctx{{.no_alloc = true}};
    tensor* a = ctx.new_tensor_1d(elem_type::f32, 16);
    tensor* b = ctx.new_tensor_1d(elem_type::f32, 16);
    tensor* c = ctx.new_tensor_1d(elem_type::f32, 8);
    tensor* sum = add(ctx, a, b);
    tensor* half = view_1d(ctx, sum, 8, 0);
    tensor* out = mul(ctx, half, c);
    graph g{out};
};

} // namespace

TEST_CASE("graph_index of a graph: nodes, then the graph's leafs, in the graph's order") {
    small_graph s;
    const graph_index idx(s.g);
    REQUIRE(idx.n_nodes() == s.g.n_nodes());
    REQUIRE(idx.n_leafs() == s.g.n_leafs());
    REQUIRE(idx.size() == s.g.n_nodes() + s.g.n_leafs());
    for (std::size_t i = 0; i < s.g.n_nodes(); ++i) CHECK(&idx[i] == s.g.nodes()[i]);
    for (std::size_t k = 0; k < s.g.n_leafs(); ++k) CHECK(&idx[s.g.n_nodes() + k] == s.g.leafs()[k]);
    CHECK(idx.view_src(static_cast<std::size_t>(idx.find(s.half))) == idx.find(s.sum));
    CHECK(idx.is_node(idx.find(s.sum)));
    CHECK_FALSE(idx.is_node(idx.find(s.a)));
    CHECK(idx.find(s.ctx.new_tensor_1d(elem_type::f32, 1)) == graph_index::none);
    CHECK(idx.find(nullptr) == graph_index::none);
    require_consistent(idx);
}

TEST_CASE("graph_index of a graph whose node was rewired since: the new source is numbered after the leafs") {
    small_graph s;
    tensor* outside = s.ctx.new_tensor_1d(elem_type::f32, 8);
    s.out->src[1] = outside; // c is still a leaf of the graph, read by no node now
    graph_index idx(s.g);
    REQUIRE(idx.size() == s.g.n_nodes() + s.g.n_leafs() + 1);
    CHECK(idx.find(outside) == static_cast<std::int32_t>(s.g.n_nodes() + s.g.n_leafs()));
    require_consistent(idx);

    s.out->src[1] = s.c; // rewired back: assign() forgets the extra tensor
    idx.assign(s.g);
    CHECK(idx.size() == s.g.n_nodes() + s.g.n_leafs());
    CHECK(idx.find(outside) == graph_index::none);
    require_consistent(idx);
}

TEST_CASE("graph_index of a graph view: what the nodes read is numbered in order of first use") {
    small_graph s;
    const graph_index idx(s.g.view());
    CHECK(idx.n_leafs() == 0);
    REQUIRE(idx.size() == s.g.n_nodes() + 3);
    const std::size_t n = s.g.n_nodes();
    CHECK(&idx[n] == s.a); // add reads a, then b
    CHECK(&idx[n + 1] == s.b);
    CHECK(&idx[n + 2] == s.c);
    require_consistent(idx);

    // the last node alone: its sources, then its source's view source
    const graph_index tail(s.g.view(n - 1, n));
    REQUIRE(tail.size() == 4);
    CHECK(&tail[1] == s.half);
    CHECK(&tail[2] == s.c);
    CHECK(&tail[3] == s.sum);
    require_consistent(tail);
}

TEST_CASE("graph_index of lists: the same numbers as the graph's, a null or repeated entry named") {
    small_graph s;
    graph_index idx;
    const auto nodes = s.g.nodes();
    const auto leafs = s.g.leafs();
    REQUIRE(idx.assign(nodes, leafs) == nodes.size() + leafs.size());
    const graph_index of_graph(s.g);
    REQUIRE(idx.size() == of_graph.size());
    for (std::size_t i = 0; i < idx.size(); ++i) CHECK(&idx[i] == &of_graph[i]);
    for (std::size_t i = 0; i < idx.n_nodes(); ++i) CHECK(idx.srcs(i) == of_graph.srcs(i));
    require_consistent(idx);

    std::vector<tensor*> twice(leafs.begin(), leafs.end());
    twice.push_back(twice.front());
    CHECK(idx.assign(nodes, twice) == nodes.size() + twice.size() - 1);
    CHECK(idx.size() == 0); // emptied
    std::vector<tensor*> with_null(nodes.begin(), nodes.end());
    with_null[1] = nullptr;
    CHECK(idx.assign(with_null, leafs) == 1);
    CHECK(idx.find(s.a) == graph_index::none);
}

TEST_CASE("graph_index of lists with known positions: checked, or the truth when given") {
    small_graph s;
    const graph_index truth(s.g);
    const std::size_t n_nodes = truth.n_nodes();
    const std::size_t n = n_nodes + truth.n_leafs();
    std::vector<std::array<std::int32_t, max_srcs>> srcs(truth.srcs().begin(), truth.srcs().end());
    std::vector<std::int32_t> vsrcs(truth.view_srcs().begin(), truth.view_srcs().begin() + static_cast<std::ptrdiff_t>(n));

    graph_index idx;
    REQUIRE(idx.assign(s.g.nodes(), s.g.leafs(), {srcs, vsrcs}) == n);
    for (std::size_t i = 0; i < n_nodes; ++i) CHECK(idx.srcs(i) == truth.srcs(i));
    require_consistent(idx);

    // wrong and unknown positions are looked up
    const auto mul_at = static_cast<std::size_t>(truth.find(s.out));
    const auto c_at = truth.find(s.c);
    auto wrong = srcs;
    wrong[mul_at][1] = truth.find(s.a);
    wrong[0][0] = -1;
    auto wrong_v = vsrcs;
    wrong_v[static_cast<std::size_t>(truth.find(s.half))] = -1;
    REQUIRE(idx.assign(s.g.nodes(), s.g.leafs(), {wrong, wrong_v}) == n);
    CHECK(idx.src(mul_at, 1) == c_at);
    require_consistent(idx);

    // given: the position is the truth (the node reads b in c's place)
    auto given = srcs;
    given[mul_at][1] = truth.find(s.b);
    REQUIRE(idx.assign(s.g.nodes(), s.g.leafs(), {given, vsrcs, true}) == n);
    CHECK(idx.src(mul_at, 1) == truth.find(s.b));
    CHECK(idx.src(mul_at, 0) == truth.find(s.half));

    // spans that do not cover the lists are not used
    REQUIRE(idx.assign(s.g.nodes(), s.g.leafs(), {std::span(given).first(1), vsrcs, true}) == n);
    CHECK(idx.src(mul_at, 1) == c_at);
}

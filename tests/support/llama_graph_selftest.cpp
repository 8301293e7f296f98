// The reference llama graph (tests/support/llama_graph.hpp): its node count, a full-size
// run on the CPU backend, and a small one on the test device (weights spread over two
// buffers) against the CPU.

#include "llama_graph.hpp"
#include "ref_oracle.hpp"
#include "require_ok.hpp"
#include "test_backend.hpp"

#include <backplane/backplane.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace backplane;
using namespace backplane::test;

namespace {

std::vector<float> read_all(const tensor& t) {
    auto r = tensor_get_all<float>(t);
    INFO(r.error().describe());
    REQUIRE(r.ok());
    return std::move(*r);
}


} // namespace

TEST_CASE("llama graph: node count and the op sequence of a layer", "[sched][llama]") {
    for (bool tokens : {false, true}) {
        llama_params p;
        p.token_input = tokens;
        context wctx({.no_alloc = true});
        llama_model m = make_llama_model(wctx, p);
        context gctx({.no_alloc = true});
        llama_inputs in = make_llama_inputs(gctx, p);
        graph g = build_llama_graph(gctx, m, in);
        std::printf("llama graph (%d layers, %s input): %zu nodes, %zu leafs\n", p.n_layer,
                    tokens ? "token" : "embedding", g.n_nodes(), g.n_leafs());
        CHECK(g.n_nodes() == llama_node_count(p));
        CHECK(g.n_nodes() == (tokens ? 964u : 963u));
        // weights, inputs: every leaf; weights 9 per layer + output_norm + output (+ tok_embd)
        CHECK(m.all_weights().size() == 9u * 32u + (tokens ? 3u : 2u));
        CHECK(g.n_leafs() == m.all_weights().size() + 3u); // + tokens or x, pos, mask
        CHECK(g.back()->name == "result_output");
        CHECK(g.back()->has_flag(tensor_flag::output));
        CHECK(g.back()->ne[0] == 4096);
        CHECK(g.back()->ne[1] == 32);
    }

    // one layer, op by op
    llama_params p;
    p.n_layer = 1;
    context wctx({.no_alloc = true});
    llama_model m = make_llama_model(wctx, p);
    context gctx({.no_alloc = true});
    llama_inputs in = make_llama_inputs(gctx, p);
    graph g = build_llama_graph(gctx, m, in);
    using k = op_kind;
    // per layer, then the output norm and the vocabulary mul_mat
    const std::vector<std::pair<op_kind, long>> expected = {
        {k::rms_norm, 2 + 1}, {k::mul, 3 + 1},     {k::mul_mat, 9 + 1}, {k::reshape, 4}, {k::rope, 2},
        {k::permute, 4},      {k::cont, 2},        {k::soft_max, 1},    {k::add, 2},     {k::silu, 1}};
    std::string got;
    for (tensor* t : g.nodes()) got += std::string(to_string(t->op)) + " ";
    INFO(got);
    CHECK(g.n_nodes() == 33u);
    for (auto [op, n] : expected) {
        INFO(to_string(op));
        CHECK(std::count_if(g.nodes().begin(), g.nodes().end(), [op = op](const tensor* t) { return t->op == op; }) ==
              n);
    }
}

TEST_CASE("llama graph: the full model on the CPU backend gives finite logits", "[sched][llama]") {
    llama_params p; // 32 layers, n_embd 512, 8 heads, n_ff 1376, 32 tokens, vocab 4096
#if defined(__SANITIZE_THREAD__)
    // ThreadSanitizer checks every memory access of the kernels: 32 layers take about 50 s
    // there, 4 layers run the same thread pool over the same kinds of nodes
    p.n_layer = 4;
#endif
    context wctx({.no_alloc = true});
    llama_model m = make_llama_model(wctx, p);
    auto weights = alloc_tensors(wctx, cpu_buffer_type::instance(), buffer_usage::weights);
    require_ok(weights.error());
    REQUIRE(weights.ok());
    CHECK(m.layers[0].wq->buffer->usage() == buffer_usage::weights);

    context gctx({.no_alloc = true});
    llama_inputs in = make_llama_inputs(gctx, p);
    graph g = build_llama_graph(gctx, m, in);
    std::printf("llama graph: %zu nodes\n", g.n_nodes());
    CHECK(g.n_nodes() == 30u * static_cast<unsigned>(p.n_layer) + 3u); // 963 for 32 layers
    graph_allocator ga(cpu_buffer_type::instance());
    require_ok(ga.alloc_graph(g));
    require_ok(fill_llama(m, in, 42));

    cpu_backend cpu;
    require_ok(cpu.compute(g));
    const auto logits = read_all(*g.back());
    REQUIRE(logits.size() == 4096u * 32u);
    std::size_t finite = 0;
    double sum_sq = 0;
    for (float v : logits) {
        finite += std::isfinite(v) ? 1 : 0;
        sum_sq += static_cast<double>(v) * v;
    }
    CHECK(finite == logits.size());
    CHECK(sum_sq > 0);
}

TEST_CASE("llama graph: a small model on the test device equals the CPU backend", "[sched][llama][test_backend]") {
    llama_params p;
    p.n_layer = 3;
    p.n_embd = 64;
    p.n_head = 4;
    p.n_ff = 160;
    p.n_tokens = 8;
    p.n_vocab = 100;
    p.token_input = true;

    // CPU reference
    context cw({.no_alloc = true});
    llama_model cm = make_llama_model(cw, p);
    auto cbufs = alloc_tensors(cw, cpu_buffer_type::instance(), buffer_usage::weights);
    REQUIRE(cbufs.ok());
    context cg({.no_alloc = true});
    llama_inputs cin = make_llama_inputs(cg, p);
    graph cgraph = build_llama_graph(cg, cm, cin);
    graph_allocator cga(cpu_buffer_type::instance());
    require_ok(cga.alloc_graph(cgraph));
    require_ok(fill_llama(cm, cin, 7));
    cpu_backend cpu({.n_threads = 2});
    require_ok(cpu.compute(cgraph));
    const auto expected = read_all(*cgraph.back());

    // the test device: layer 0 and the global weights in one buffer, the rest in another
    test_device dev;
    test_backend b = dev.make_backend();
    context tw({.no_alloc = true});
    llama_model tm = make_llama_model(tw, p);
    std::vector<tensor*> first = tm.global_weights();
    for (tensor* t : tm.layer_weights(0, 1)) first.push_back(t);
    auto b0 = alloc_tensor_list(first, dev.buffer_type());
    REQUIRE(b0.ok());
    auto b1 = alloc_tensor_list(tm.layer_weights(1, p.n_layer), dev.buffer_type());
    REQUIRE(b1.ok());
    CHECK(tm.layers[0].wq->buffer == b0->get());
    CHECK(tm.layers[2].wq->buffer == b1->get());
    CHECK((*b1)->usage() == buffer_usage::weights);
    context tg({.no_alloc = true});
    llama_inputs tin = make_llama_inputs(tg, p);
    graph tgraph = build_llama_graph(tg, tm, tin);
    CHECK(tgraph.n_nodes() == llama_node_count(p));
    graph_allocator tga(dev.buffer_type());
    require_ok(tga.alloc_graph(tgraph));
    require_ok(fill_llama(tm, tin, 7));
    require_ok(b.compute(tgraph));
    require_ok(b.synchronize());
    const auto actual = read_all(*tgraph.back());

    for (float v : actual) REQUIRE(std::isfinite(v));
    CHECK(nmse_of(expected, actual) <= 1e-6);
    CHECK(b.n_computes() == 1);
    std::size_t computing = 0;
    for (tensor* t : tgraph.nodes()) computing += is_view_op(t->op) ? 0 : 1;
    CHECK(b.n_nodes_computed() == computing);
}

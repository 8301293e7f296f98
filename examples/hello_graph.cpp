// hello_graph: the smallest complete backplane program.
//
// 1. describe a computation as a graph of tensors (metadata only, no memory yet);
// 2. let the graph allocator place every tensor in a CPU buffer, reusing memory;
// 3. write the inputs, compute on the CPU backend, read the result.
//
// y = silu(w^T x) + b, with x two 4-vectors, w a 4x3 matrix and b broadcast over columns.

#include <backplane/backplane.hpp>

#include <cstdio>
#include <string_view>
#include <vector>

int main(int argc, char** argv) {
    using namespace backplane;
    // It takes no arguments: anything given is a mistake worth saying so (exit status 2).
    if (argc > 1) {
        const std::string_view a = argv[1];
        const bool help = a == "-h" || a == "--help";
        if (!help) std::fprintf(stderr, "hello_graph: unknown argument '%s'\n", argv[1]);
        std::fprintf(help ? stdout : stderr, "usage: hello_graph (no arguments)\n");
        return help ? 0 : 2;
    }

    context ctx({.no_alloc = true});
    tensor* x = ctx.new_tensor(elem_type::f32, {4, 2}); // two columns of 4 values
    tensor* w = ctx.new_tensor(elem_type::f32, {4, 3}); // K = 4, M = 3
    tensor* b = ctx.new_tensor(elem_type::f32, {3, 1}); // broadcast over the 2 columns
    x->name = "x";
    w->name = "w";
    b->name = "b";
    for (tensor* t : {x, w, b}) t->set_input(); // written by us: never overwritten

    tensor* y = add(ctx, silu(ctx, mul_mat(ctx, w, x)), b); // [3, 2]
    y->name = "y";
    y->set_output(); // read by us: never reused

    graph g(y);
    std::printf("graph: %zu nodes, %zu leafs\n", g.n_nodes(), g.n_leafs());

    cpu_backend cpu;
    graph_allocator galloc(cpu.buffer_type());
    if (status s = galloc.alloc_graph(g); !s) {
        std::fprintf(stderr, "allocation failed: %s\n", s.describe().c_str());
        return 1;
    }
    std::printf("compute buffer: %zu bytes\n", galloc.buffer_size(0));

    const std::vector<float> xv = {1, 2, 3, 4, /**/ -1, 0, 1, 0};
    const std::vector<float> wv = {0.1f, 0.2f, 0.3f, 0.4f, /**/ 1, 0, 0, 0, /**/ 0, 0, 0, -1};
    const std::vector<float> bv = {0.5f, 0, -0.5f};
    for (auto [t, v] : {std::pair{x, &xv}, {w, &wv}, {b, &bv}}) {
        if (status s = tensor_set(*t, *v); !s) {
            std::fprintf(stderr, "%s\n", s.describe().c_str());
            return 1;
        }
    }

    if (status s = cpu.compute(g); !s) {
        std::fprintf(stderr, "compute failed: %s\n", s.describe().c_str());
        return 1;
    }
    auto out = tensor_get_all<float>(*y);
    if (!out) {
        std::fprintf(stderr, "%s\n", out.error().describe().c_str());
        return 1;
    }
    std::printf("y = silu(w^T x) + b:\n");
    for (std::int64_t col = 0; col < y->ne[1]; ++col) {
        std::printf("  column %lld:", static_cast<long long>(col));
        for (std::int64_t row = 0; row < y->ne[0]; ++row) std::printf(" %9.5f", (*out)[col * y->ne[0] + row]);
        std::printf("\n");
    }
    return 0;
}

// {fmt} formatters of core/format.hpp: every formatter's exact output. The expected
// strings are written by hand from the documented formats.

#include <backplane/core/format.hpp>

#include <backplane/core/context.hpp>
#include <backplane/core/ops.hpp>

#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h> // graph_view has begin()/end(): its formatter must still win

#include <string>

using namespace backplane;

TEST_CASE("format: enumerations print their names", "[format]") {
    CHECK(fmt::format("{}", elem_type::f32) == "f32");
    CHECK(fmt::format("{}", elem_type::bf16) == "bf16");
    CHECK(fmt::format("{}", elem_type::q8_0) == "q8_0");
    CHECK(fmt::format("{}", elem_type::q4_0) == "q4_0");
    CHECK(fmt::format("{}", elem_type::i32) == "i32");
    CHECK(fmt::format("{}", op_kind::none) == "none");
    CHECK(fmt::format("{}", op_kind::mul_mat) == "mul_mat");
    CHECK(fmt::format("{}", op_kind::soft_max) == "soft_max");
    CHECK(fmt::format("{}", op_kind::argmax) == "argmax");
    CHECK(fmt::format("{}", errc::ok) == "ok");
    CHECK(fmt::format("{}", errc::out_of_range) == "out of range");
    CHECK(fmt::format("{}", errc::alloc_failed) == "allocation failed");
    CHECK(fmt::format("{}", buffer_usage::any) == "any");
    CHECK(fmt::format("{}", buffer_usage::weights) == "weights");
    CHECK(fmt::format("{}", buffer_usage::compute) == "compute");
    CHECK(fmt::format("{}", device_kind::cpu) == "cpu");
    CHECK(fmt::format("{}", device_kind::gpu) == "gpu");
    CHECK(fmt::format("{}", device_kind::igpu) == "igpu");
    CHECK(fmt::format("{}", device_kind::accel) == "accel");
    // every value of every enumeration has a name of its own
    for (std::size_t i = 0; i < op_kind_count; ++i)
        CHECK(fmt::format("{}", static_cast<op_kind>(i)) == to_string(static_cast<op_kind>(i)));
    for (auto t : all_elem_types) CHECK(fmt::format("{}", t) == to_string(t));
    // out-of-range values do not crash
    CHECK(fmt::format("{}", static_cast<op_kind>(200)) == "?");
    CHECK(fmt::format("{}", static_cast<device_kind>(9)) == "?");
}

TEST_CASE("format: enumerations take string specs (fill, align, width)", "[format]") {
    CHECK(fmt::format("[{:<6}]", elem_type::f16) == "[f16   ]");
    CHECK(fmt::format("[{:>6}]", elem_type::f16) == "[   f16]");
    CHECK(fmt::format("[{:*^9}]", op_kind::add) == "[***add***]");
    CHECK(fmt::format("[{:>12}]", errc::failed) == "[      failed]");
    CHECK(fmt::format("[{:<8}]", buffer_usage::weights) == "[weights ]");
    CHECK(fmt::format("[{:>4}]", device_kind::gpu) == "[ gpu]");
    CHECK(fmt::format("[{:.2}]", op_kind::mul_mat) == "[mu]"); // precision truncates, as for strings
    CHECK_THROWS_AS(fmt::format(fmt::runtime("{:d}"), elem_type::f32), fmt::format_error);
}

TEST_CASE("format: status", "[format]") {
    CHECK(fmt::format("{}", status{}) == "ok");
    CHECK(fmt::format("{}", status(errc::alloc_failed, "no room")) == "allocation failed: no room");
    CHECK(fmt::format("{}", status(errc::device_error, "lost", -4)) == "device error: lost (native code -4)");
    CHECK(fmt::format("{}", status(errc::aborted, "")) == "aborted");
    CHECK(fmt::format("[{:>4}]", status{}) == "[  ok]");
}

TEST_CASE("format: shape", "[format]") {
    CHECK(fmt::format("{}", shape{{4, 3, 1, 1}}) == "[4, 3, 1, 1]");
    CHECK(fmt::format("{}", shape{}) == "[1, 1, 1, 1]");
    CHECK(fmt::format("{}", shape{{4096, 32000, 2, 7}}) == "[4096, 32000, 2, 7]");
    CHECK(fmt::format("{}", shape{{0, 3, 1, 1}}) == "[0, 3, 1, 1]");
    // "s": trailing 1s dropped, at least one extent kept, inner 1s kept
    CHECK(fmt::format("{:s}", shape{{4, 3, 1, 1}}) == "[4, 3]");
    CHECK(fmt::format("{:s}", shape{{4, 1, 1, 1}}) == "[4]");
    CHECK(fmt::format("{:s}", shape{{1, 1, 1, 1}}) == "[1]");
    CHECK(fmt::format("{:s}", shape{{4, 1, 3, 1}}) == "[4, 1, 3]");
    CHECK(fmt::format("{:s}", shape{{1, 1, 1, 5}}) == "[1, 1, 1, 5]");
    // string specs pad the whole text
    CHECK(fmt::format("[{:>14}]", shape{{4, 3, 1, 1}}) == "[  [4, 3, 1, 1]]");
    CHECK(fmt::format("[{:<8s}]", shape{{4, 3, 1, 1}}) == "[[4, 3]  ]");
    CHECK(fmt::format("[{:>{}s}]", shape{{4, 3, 1, 1}}, 7) == "[ [4, 3]]"); // dynamic width
    CHECK_THROWS_AS(fmt::format(fmt::runtime("{:x}"), shape{}), fmt::format_error);
    // a tensor's shape() is a shape
    context ctx({.no_alloc = true});
    CHECK(fmt::format("{}", ctx.new_tensor_2d(elem_type::f32, 4, 3)->shape()) == "[4, 3, 1, 1]");
}

TEST_CASE("format: tensor", "[format]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 4, 3);
    CHECK(fmt::format("{}", *a) == "f32 [4, 3, 1, 1] op=none");
    a->name = "a";
    CHECK(fmt::format("{}", *a) == "'a' f32 [4, 3, 1, 1] op=none");
    CHECK(fmt::format("{:s}", *a) == "'a' f32 [4, 3] op=none");

    tensor* b = ctx.new_tensor_1d(elem_type::f32, 4);
    tensor* h = add(ctx, a, b);
    h->name = "h";
    CHECK(fmt::format("{}", *h) == "'h' f32 [4, 3, 1, 1] op=add");

    // a non-contiguous tensor shows its strides (bytes): the transpose of [4, 3] f32
    // has ne [3, 4] and nb [16, 4, 48, 48]
    tensor* t = transpose(ctx, a);
    CHECK(fmt::format("{}", *t) == "f32 [3, 4, 1, 1] op=transpose nb=[16, 4, 48, 48]");
    CHECK(fmt::format("{:s}", *t) == "f32 [3, 4] op=transpose nb=[16, 4, 48, 48]");
    // a contiguous view shows none
    CHECK(fmt::format("{}", *view_1d(ctx, a, 4, 16)) == "f32 [4, 1, 1, 1] op=view");

    tensor* q = ctx.new_tensor_3d(elem_type::q4_0, 64, 2, 3);
    q->name = "w.0";
    CHECK(fmt::format("{}", *q) == "'w.0' q4_0 [64, 2, 3, 1] op=none");

    // padding applies to the whole text; const tensors format too
    const tensor& ca = *a;
    CHECK(fmt::format("[{:>30}]", ca) /* 28 characters */ == "[  'a' f32 [4, 3, 1, 1] op=none]");
    CHECK(fmt::format("[{:<24s}]", ca) == "['a' f32 [4, 3] op=none  ]");
}

TEST_CASE("format: tensor pointers through show()", "[format]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_1d(elem_type::i32, 7);
    a->name = "idx";
    CHECK(fmt::format("{}", show(a)) == "'idx' i32 [7, 1, 1, 1] op=none");
    CHECK(fmt::format("{:s}", show(a)) == "'idx' i32 [7] op=none");
    const tensor* ca = a;
    CHECK(fmt::format("{}", show(ca)) == fmt::format("{}", *a));
    CHECK(fmt::format("{}", show(nullptr)) == "null");
    CHECK(fmt::format("[{:>6}]", show(nullptr)) == "[  null]");
}

TEST_CASE("format: graph and graph_view listings", "[format]") {
    context ctx({.no_alloc = true});
    tensor* w = ctx.new_tensor_2d(elem_type::f16, 8, 3);
    tensor* x = ctx.new_tensor_2d(elem_type::f32, 8, 2);
    tensor* bias = ctx.new_tensor_1d(elem_type::f32, 3);
    w->name = "w";
    x->name = "x";
    // bias stays unnamed: referred to as "leaf 2"
    tensor* y = mul_mat(ctx, w, x);
    y->name = "y";
    tensor* z = add(ctx, y, bias); // unnamed: "node 1"
    tensor* out = soft_max(ctx, z);
    out->name = "probs";
    graph g(out);

    // columns: index right-aligned in 5, two spaces, op left-aligned in 9, type in 4,
    // shape in 20, then the name ("-" when unnamed) and " <- " with the sources
    const std::string want = "graph: 3 nodes, 3 leafs\n"
                             "leafs:\n"
                             "    0  none      f16  [8, 3, 1, 1]         w\n"
                             "    1  none      f32  [8, 2, 1, 1]         x\n"
                             "    2  none      f32  [3, 1, 1, 1]         -\n"
                             "nodes:\n"
                             "    0  mul_mat   f32  [3, 2, 1, 1]         y <- w, x\n"
                             "    1  add       f32  [3, 2, 1, 1]         - <- y, leaf 2\n"
                             "    2  soft_max  f32  [3, 2, 1, 1]         probs <- node 1";
    CHECK(fmt::format("{}", g) == want);

    // a view lists its own nodes, numbered from 0; sources outside it are "?" unless named
    const std::string want_view = "graph_view: 2 nodes\n"
                                  "    0  add       f32  [3, 2, 1, 1]         - <- y, ?\n"
                                  "    1  soft_max  f32  [3, 2, 1, 1]         probs <- node 0";
    CHECK(fmt::format("{}", g.view(1, 3)) == want_view);
    CHECK(fmt::format("{}", g.view(0, 1)) ==
          "graph_view: 1 node\n"
          "    0  mul_mat   f32  [3, 2, 1, 1]         y <- w, x");

    CHECK(fmt::format("{}", graph{}) == "graph: 0 nodes, 0 leafs");
    CHECK(fmt::format("{}", graph{}.view()) == "graph_view: 0 nodes");
    CHECK(fmt::format("{}", graph(w)) == "graph: 0 nodes, 1 leaf\n"
                                         "leafs:\n"
                                         "    0  none      f16  [8, 3, 1, 1]         w");
    CHECK_THROWS_AS(fmt::format(fmt::runtime("{:>4}"), g), fmt::format_error);
    CHECK_THROWS_AS(fmt::format(fmt::runtime("{:s}"), g.view()), fmt::format_error);
}

TEST_CASE("format: long names and shapes overflow their columns without truncation", "[format]") {
    context ctx({.no_alloc = true});
    tensor* e = ctx.new_tensor_4d(elem_type::bf16, 4096, 32000, 12, 1000);
    e->name = "token_embd.weight";
    tensor* t = transpose(ctx, e);
    graph g(t);
    CHECK(fmt::format("{}", g) ==
          "graph: 1 node, 1 leaf\n"
          "leafs:\n"
          "    0  none      bf16 [4096, 32000, 12, 1000] token_embd.weight\n"
          "nodes:\n"
          "    0  transpose bf16 [32000, 4096, 12, 1000] - <- token_embd.weight");
}

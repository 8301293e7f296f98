// Every op builder: the result's type, shape, strides and parameters for valid operands,
// and for every invalid case a backplane::error (never an abort) whose message names the
// op and the shapes and types of the operands.
//
// Expected shapes and strides are derived by hand from the op definitions (ggml's, see
// DESIGN.md section 2) and written out as literals; each comment says how.

#include <backplane/core/context.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/ops.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

using namespace backplane;
using Catch::Matchers::Contains;
using Catch::Matchers::Matches;

namespace {

using ne_t = std::array<std::int64_t, 4>;
using nb_t = std::array<std::size_t, 4>;

/// "[4, 3, 1, 1]": the shape as a message should show it (written here, not taken from
/// the library, so that the test does not agree with the library by construction).
std::string shape_text(const tensor* t) {
    return "[" + std::to_string(t->ne[0]) + ", " + std::to_string(t->ne[1]) + ", " + std::to_string(t->ne[2]) + ", " +
           std::to_string(t->ne[3]) + "]";
}

std::string type_text(const tensor* t) {
    switch (t->type) {
    case elem_type::f32: return "f32";
    case elem_type::f16: return "f16";
    case elem_type::bf16: return "bf16";
    case elem_type::q8_0: return "q8_0";
    case elem_type::q4_0: return "q4_0";
    case elem_type::q8_K: return "q8_K";
    case elem_type::i32: return "i32";
    case elem_type::i64: return "i64";
    case elem_type::iq4_xs: return "iq4_xs";
    case elem_type::iq3_xxs: return "iq3_xxs";
    case elem_type::iq3_s: return "iq3_s";
    case elem_type::iq2_xxs: return "iq2_xxs";
    case elem_type::iq2_xs: return "iq2_xs";
    case elem_type::iq2_s: return "iq2_s";
    case elem_type::iq1_s: return "iq1_s";
    case elem_type::iq1_m: return "iq1_m";
    default: break; // the types these cases use are named above
    }
    return "?";
}

std::vector<const tensor*> operands(std::initializer_list<const tensor*> ts) { return ts; }

/// Runs f, which must throw backplane::error (invalid_argument) naming `op` and, for each
/// non-null operand, its shape and its type.
void check_op_error(const std::string& op, const std::vector<const tensor*>& ops, const std::function<void()>& f) {
    std::string msg;
    try {
        f();
        FAIL_CHECK("no error was thrown");
        return;
    } catch (const error& e) {
        CHECK(e.code() == errc::invalid_argument);
        msg = e.what();
    } catch (const std::exception& e) {
        FAIL_CHECK("an exception other than backplane::error: " << e.what());
        return;
    }
    CHECK_THAT(msg, Matches(op + ": .+"));
    for (const tensor* t : ops) {
        if (t == nullptr) continue;
        CHECK_THAT(msg, Contains(shape_text(t)));
        CHECK_THAT(msg, Contains(type_text(t)));
    }
}

/// Runs f, which must throw backplane::error naming `op` and saying an operand is null.
void check_null_error(const std::string& op, const std::function<void()>& f) {
    try {
        f();
        FAIL_CHECK("no error was thrown");
    } catch (const error& e) {
        CHECK(e.code() == errc::invalid_argument);
        CHECK_THAT(e.what(), Matches(op + ": .+"));
        CHECK_THAT(e.what(), Contains("null"));
    }
}

#define CHECK_OP_ERROR(op, ops, expr)                                                                                  \
    do {                                                                                                               \
        INFO("line " << __LINE__ << ": " #expr);                                                                       \
        check_op_error(op, ops, [&] { (void)(expr); });                                                                \
    } while (0)

#define CHECK_NULL_ERROR(op, expr)                                                                                     \
    do {                                                                                                               \
        INFO("line " << __LINE__ << ": " #expr);                                                                       \
        check_null_error(op, [&] { (void)(expr); });                                                                   \
    } while (0)

/// A computed (non-view) result: type, shape, contiguous strides, op and sources.
void check_result(const tensor* r, elem_type type, const ne_t& ne, op_kind op, const tensor* src0,
                  const tensor* src1 = nullptr, const tensor* src2 = nullptr) {
    REQUIRE(r != nullptr);
    CHECK(r->type == type);
    CHECK(r->ne == ne);
    CHECK(r->is_contiguous());
    CHECK(r->op == op);
    CHECK(r->src[0] == src0);
    CHECK(r->src[1] == src1);
    CHECK(r->src[2] == src2);
    CHECK(r->view_src == nullptr);
}

} // namespace

// ---------------------------------------------------------------------------------------
// element-wise

TEST_CASE("add, sub, mul, div: broadcasting b over a", "[ops][binary]") {
    context ctx({.no_alloc = true});
    using builder = tensor* (*)(context&, tensor*, tensor*);
    const std::pair<builder, op_kind> builders[] = {
        {&backplane::add, op_kind::add},
        {&backplane::sub, op_kind::sub},
        {&backplane::mul, op_kind::mul},
        {&backplane::div, op_kind::div}};
    tensor* a = ctx.new_tensor_4d(elem_type::f32, 4, 3, 2, 5);
    for (auto [fn, op] : builders) {
        INFO(to_string(op));
        // ggml's repeat rule: each extent of a is a multiple of b's
        for (const ne_t bne : {ne_t{4, 3, 2, 5}, ne_t{4, 1, 1, 1}, ne_t{1, 1, 1, 1}, ne_t{4, 3, 1, 1},
                               ne_t{1, 3, 1, 5}, ne_t{2, 3, 2, 5}, ne_t{1, 1, 2, 1}}) {
            tensor* b = ctx.new_tensor(elem_type::f32, bne);
            tensor* r = fn(ctx, a, b);
            check_result(r, elem_type::f32, {4, 3, 2, 5}, op, a, b);
            CHECK(r->nb == nb_t{4, 16, 48, 96}); // 4 bytes, rows of 4, then 3 rows, then 2
        }
        // mixed float types: the result has a's type
        tensor* h = ctx.new_tensor_2d(elem_type::f16, 4, 3);
        tensor* bf = ctx.new_tensor_2d(elem_type::bf16, 4, 1);
        tensor* f = ctx.new_tensor_1d(elem_type::f32, 4);
        check_result(fn(ctx, h, f), elem_type::f16, {4, 3, 1, 1}, op, h, f);
        check_result(fn(ctx, h, bf), elem_type::f16, {4, 3, 1, 1}, op, h, bf);
        tensor* abf = ctx.new_tensor_2d(elem_type::bf16, 4, 3);
        check_result(fn(ctx, abf, f), elem_type::bf16, {4, 3, 1, 1}, op, abf, f);
    }
}

TEST_CASE("add, sub, mul, div: invalid operands", "[ops][binary]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 4, 3);
    tensor* b33 = ctx.new_tensor_2d(elem_type::f32, 3, 3);    // 4 % 3 != 0
    tensor* big = ctx.new_tensor_2d(elem_type::f32, 4, 6);    // larger than a
    tensor* empty = ctx.new_tensor_2d(elem_type::f32, 0, 3);  // cannot be repeated to 4
    tensor* i = ctx.new_tensor_2d(elem_type::i32, 4, 3);
    tensor* q = ctx.new_tensor_2d(elem_type::q8_0, 32, 3);
    tensor* qa = ctx.new_tensor_2d(elem_type::f32, 32, 3);
    for (auto [fn, name] : {std::pair{&backplane::add, "add"}, {&backplane::sub, "sub"}, {&backplane::mul, "mul"},
                              {&backplane::div, "div"}}) {
        CHECK_OP_ERROR(name, operands({a, b33}), fn(ctx, a, b33));
        CHECK_OP_ERROR(name, operands({a, big}), fn(ctx, a, big));
        CHECK_OP_ERROR(name, operands({a, empty}), fn(ctx, a, empty));
        CHECK_OP_ERROR(name, operands({i, a}), fn(ctx, i, a));
        CHECK_OP_ERROR(name, operands({a, i}), fn(ctx, a, i));
        CHECK_OP_ERROR(name, operands({q, qa}), fn(ctx, q, qa));
        CHECK_OP_ERROR(name, operands({qa, q}), fn(ctx, qa, q));
        CHECK_NULL_ERROR(name, fn(ctx, nullptr, a));
        CHECK_NULL_ERROR(name, fn(ctx, a, nullptr));
    }
}

TEST_CASE("an op error message shows shapes and types as written by hand", "[ops][binary]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 4, 3);
    tensor* b = ctx.new_tensor_2d(elem_type::f16, 3, 3);
    a->name = "lhs";
    try {
        add(ctx, a, b);
        FAIL("no error");
    } catch (const error& e) {
        CHECK_THAT(e.what(), Matches("add: .*"));
        CHECK_THAT(e.what(), Contains("[4, 3, 1, 1]"));
        CHECK_THAT(e.what(), Contains("[3, 3, 1, 1]"));
        CHECK_THAT(e.what(), Contains("f32"));
        CHECK_THAT(e.what(), Contains("f16"));
        CHECK_THAT(e.what(), Contains("lhs")); // a named operand is named
    }
}

TEST_CASE("unary ops and scale", "[ops][unary]") {
    context ctx({.no_alloc = true});
    using builder = tensor* (*)(context&, tensor*);
    const std::pair<builder, op_kind> builders[] = {{&sqr, op_kind::sqr},
                                                    {&backplane::sqrt, op_kind::sqrt},
                                                    {&silu, op_kind::silu},
                                                    {&gelu, op_kind::gelu},
                                                    {&relu, op_kind::relu}};
    for (const elem_type t : {elem_type::f32, elem_type::f16, elem_type::bf16}) {
        tensor* a = ctx.new_tensor_3d(t, 5, 4, 3);
        for (auto [fn, op] : builders) check_result(fn(ctx, a), t, {5, 4, 3, 1}, op, a);
        tensor* s = scale(ctx, a, 2.5f, -1.0f);
        check_result(s, t, {5, 4, 3, 1}, op_kind::scale, a);
        CHECK(s->param<float>(0) == 2.5f);
        CHECK(s->param<float>(1) == -1.0f);
        CHECK(scale(ctx, a, 3.0f)->param<float>(1) == 0.0f); // bias defaults to 0
    }

    tensor* i = ctx.new_tensor_2d(elem_type::i32, 5, 4);
    tensor* q = ctx.new_tensor_2d(elem_type::q4_0, 32, 4);
    const std::pair<builder, const char*> named[] = {
        {&sqr, "sqr"}, {&backplane::sqrt, "sqrt"}, {&silu, "silu"}, {&gelu, "gelu"}, {&relu, "relu"}};
    for (auto [fn, name] : named) {
        CHECK_OP_ERROR(name, operands({i}), fn(ctx, i));
        CHECK_OP_ERROR(name, operands({q}), fn(ctx, q));
        CHECK_NULL_ERROR(name, fn(ctx, nullptr));
    }
    CHECK_OP_ERROR("scale", operands({i}), scale(ctx, i, 2.0f));
    CHECK_OP_ERROR("scale", operands({q}), scale(ctx, q, 2.0f));
    CHECK_NULL_ERROR("scale", scale(ctx, nullptr, 2.0f));
}

TEST_CASE("concat", "[ops][concat]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_4d(elem_type::f32, 4, 3, 2, 5);
    // joining along d adds the extents of d; the others must agree
    const std::pair<int, ne_t> cases[] = {{0, {6, 3, 2, 5}}, {1, {4, 4, 2, 5}}, {2, {4, 3, 9, 5}}, {3, {4, 3, 2, 6}}};
    const ne_t want[] = {{10, 3, 2, 5}, {4, 7, 2, 5}, {4, 3, 11, 5}, {4, 3, 2, 11}};
    for (std::size_t k = 0; k < 4; ++k) {
        auto [dim, bne] = cases[k];
        tensor* b = ctx.new_tensor(elem_type::f32, bne);
        tensor* r = concat(ctx, a, b, dim);
        check_result(r, elem_type::f32, want[k], op_kind::concat, a, b);
        CHECK(r->param<std::int32_t>(0) == dim);
    }
    tensor* ia = ctx.new_tensor_2d(elem_type::i32, 4, 3);
    tensor* ib = ctx.new_tensor_2d(elem_type::i32, 4, 2);
    check_result(concat(ctx, ia, ib, 1), elem_type::i32, {4, 5, 1, 1}, op_kind::concat, ia, ib);

    tensor* b = ctx.new_tensor_4d(elem_type::f32, 4, 3, 2, 5);
    tensor* h = ctx.new_tensor_4d(elem_type::f16, 4, 3, 2, 5);
    tensor* q1 = ctx.new_tensor_2d(elem_type::q8_0, 32, 2);
    tensor* q2 = ctx.new_tensor_2d(elem_type::q8_0, 32, 3);
    tensor* wrong = ctx.new_tensor_4d(elem_type::f32, 4, 4, 2, 5);
    CHECK_OP_ERROR("concat", operands({a, b}), concat(ctx, a, b, -1));
    CHECK_OP_ERROR("concat", operands({a, b}), concat(ctx, a, b, 4));
    CHECK_OP_ERROR("concat", operands({a, h}), concat(ctx, a, h, 0));
    // quantized operands join with whole blocks (as ggml's concat of any type)
    check_result(concat(ctx, q1, q2, 1), elem_type::q8_0, {32, 5, 1, 1}, op_kind::concat, q1, q2);
    check_result(concat(ctx, q1, q1, 0), elem_type::q8_0, {64, 2, 1, 1}, op_kind::concat, q1, q1);
    tensor* gaps = view(ctx, ctx.new_tensor_2d(elem_type::q8_0, 64, 2), {32, 2, 1, 1}, {68, 68, 136, 136}, 0);
    CHECK_OP_ERROR("concat", operands({q1, gaps}), concat(ctx, q1, gaps, 1)); // blocks not contiguous
    tensor* q4 = ctx.new_tensor_2d(elem_type::q4_0, 32, 2);
    CHECK_OP_ERROR("concat", operands({q1, q4}), concat(ctx, q1, q4, 1));
    CHECK_OP_ERROR("concat", operands({a, wrong}), concat(ctx, a, wrong, 0)); // dim 1 differs
    CHECK_OP_ERROR("concat", operands({a, wrong}), concat(ctx, a, wrong, 2));
    CHECK_NULL_ERROR("concat", concat(ctx, nullptr, b, 0));
    CHECK_NULL_ERROR("concat", concat(ctx, a, nullptr, 0));
}

// ---------------------------------------------------------------------------------------
// mul_mat, get_rows

TEST_CASE("mul_mat: shapes, types and broadcasting", "[ops][mul_mat]") {
    context ctx({.no_alloc = true});
    // a [K, M] x b [K, N] -> f32 [M, N]
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 8, 4);
    tensor* b = ctx.new_tensor_2d(elem_type::f32, 8, 3);
    tensor* r = mul_mat(ctx, a, b);
    check_result(r, elem_type::f32, {4, 3, 1, 1}, op_kind::mul_mat, a, b);
    CHECK(r->nb == nb_t{4, 16, 48, 48});

    // f16 and bf16 operands, quantized a: the result is f32
    tensor* ah = ctx.new_tensor_2d(elem_type::f16, 8, 4);
    tensor* bh = ctx.new_tensor_2d(elem_type::f16, 8, 3);
    check_result(mul_mat(ctx, ah, bh), elem_type::f32, {4, 3, 1, 1}, op_kind::mul_mat, ah, bh);
    tensor* bb = ctx.new_tensor_2d(elem_type::bf16, 8, 3);
    check_result(mul_mat(ctx, a, bb), elem_type::f32, {4, 3, 1, 1}, op_kind::mul_mat, a, bb);
    for (const elem_type qt : {elem_type::q8_0, elem_type::q4_0}) {
        tensor* aq = ctx.new_tensor_2d(qt, 64, 4);
        tensor* bq = ctx.new_tensor_2d(elem_type::f32, 64, 3);
        check_result(mul_mat(ctx, aq, bq), elem_type::f32, {4, 3, 1, 1}, op_kind::mul_mat, aq, bq);
    }

    // a broadcast over dims 2 and 3: b's extents there are multiples of a's
    tensor* a4 = ctx.new_tensor_4d(elem_type::f32, 8, 4, 2, 3);
    tensor* b4 = ctx.new_tensor_4d(elem_type::f32, 8, 5, 4, 6);
    check_result(mul_mat(ctx, a4, b4), elem_type::f32, {4, 5, 4, 6}, op_kind::mul_mat, a4, b4);
    tensor* b5 = ctx.new_tensor_4d(elem_type::f32, 8, 5, 3, 2);
    check_result(mul_mat(ctx, a, b5), elem_type::f32, {4, 5, 3, 2}, op_kind::mul_mat, a, b5);

    // a non-contiguous b is fine; a transposed a made contiguous is fine
    tensor* bt = transpose(ctx, ctx.new_tensor_2d(elem_type::f32, 3, 8)); // [8, 3], strides swapped
    check_result(mul_mat(ctx, a, bt), elem_type::f32, {4, 3, 1, 1}, op_kind::mul_mat, a, bt);
    tensor* ac = cont(ctx, transpose(ctx, ctx.new_tensor_2d(elem_type::f32, 4, 8)));
    check_result(mul_mat(ctx, ac, b), elem_type::f32, {4, 3, 1, 1}, op_kind::mul_mat, ac, b);
}

TEST_CASE("mul_mat: invalid operands", "[ops][mul_mat]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 8, 4);
    tensor* b = ctx.new_tensor_2d(elem_type::f32, 8, 3);
    tensor* b6 = ctx.new_tensor_2d(elem_type::f32, 6, 3);
    CHECK_OP_ERROR("mul_mat", operands({a, b6}), mul_mat(ctx, a, b6)); // K differs

    tensor* ai = ctx.new_tensor_2d(elem_type::i32, 8, 4);
    tensor* bi = ctx.new_tensor_2d(elem_type::i32, 8, 3);
    CHECK_OP_ERROR("mul_mat", operands({ai, b}), mul_mat(ctx, ai, b));
    CHECK_OP_ERROR("mul_mat", operands({a, bi}), mul_mat(ctx, a, bi));
    tensor* a32 = ctx.new_tensor_2d(elem_type::f32, 32, 4);
    tensor* bq = ctx.new_tensor_2d(elem_type::q8_0, 32, 3);
    CHECK_OP_ERROR("mul_mat", operands({a32, bq}), mul_mat(ctx, a32, bq)); // b quantized

    // broadcast: b's dims 2, 3 not multiples of a's
    tensor* a3 = ctx.new_tensor_3d(elem_type::f32, 8, 4, 2);
    tensor* b3 = ctx.new_tensor_3d(elem_type::f32, 8, 5, 3);
    CHECK_OP_ERROR("mul_mat", operands({a3, b3}), mul_mat(ctx, a3, b3));
    tensor* a43 = ctx.new_tensor_4d(elem_type::f32, 8, 4, 1, 2);
    tensor* b43 = ctx.new_tensor_4d(elem_type::f32, 8, 5, 1, 3);
    CHECK_OP_ERROR("mul_mat", operands({a43, b43}), mul_mat(ctx, a43, b43));
    CHECK_OP_ERROR("mul_mat", operands({b3, a3}), mul_mat(ctx, b3, a3)); // a larger than b in dim 2

    // a transposed (dim 0 stride larger than dim 1's)
    tensor* at = transpose(ctx, ctx.new_tensor_2d(elem_type::f32, 4, 8)); // [8, 4]
    REQUIRE(at->is_transposed());
    CHECK_OP_ERROR("mul_mat", operands({at, b}), mul_mat(ctx, at, b));

    // quantized a whose blocks are not adjacent (every other block of each row)
    tensor* q = ctx.new_tensor_2d(elem_type::q8_0, 64, 4);
    tensor* gaps = view(ctx, q, {32, 2, 1, 1}, {68, 68, 136, 136}, 0);
    tensor* b32 = ctx.new_tensor_2d(elem_type::f32, 32, 3);
    CHECK_OP_ERROR("mul_mat", operands({gaps, b32}), mul_mat(ctx, gaps, b32));

    CHECK_NULL_ERROR("mul_mat", mul_mat(ctx, nullptr, b));
    CHECK_NULL_ERROR("mul_mat", mul_mat(ctx, a, nullptr));
}

TEST_CASE("mul_mat_id: the experts, the activations and the ids", "[ops][mul_mat_id]") {
    context ctx({.no_alloc = true});
    tensor* as = ctx.new_tensor_3d(elem_type::q4_0, 64, 16, 8); // 8 experts of [64, 16]
    tensor* b = ctx.new_tensor_3d(elem_type::f32, 64, 1, 5);    // one activation per token
    tensor* ids = ctx.new_tensor_2d(elem_type::i32, 2, 5);      // 2 experts per token
    tensor* r = mul_mat_id(ctx, as, b, ids);
    REQUIRE(r != nullptr);
    CHECK(r->op == op_kind::mul_mat_id);
    CHECK(r->type == elem_type::f32);
    CHECK(r->ne == ne_t{16, 2, 5, 1});
    CHECK(r->src[2] == ids);
    tensor* b2 = ctx.new_tensor_3d(elem_type::f16, 64, 2, 5); // one activation per used expert
    CHECK(mul_mat_id(ctx, as, b2, ids)->ne == ne_t{16, 2, 5, 1});

    tensor* b3 = ctx.new_tensor_3d(elem_type::f32, 64, 3, 5); // 3 does not divide 2
    CHECK_OP_ERROR("mul_mat_id", operands({as, b3, ids}), mul_mat_id(ctx, as, b3, ids));
    tensor* bk = ctx.new_tensor_3d(elem_type::f32, 32, 1, 5);
    CHECK_OP_ERROR("mul_mat_id", operands({as, bk, ids}), mul_mat_id(ctx, as, bk, ids));
    tensor* bt = ctx.new_tensor_3d(elem_type::f32, 64, 1, 4); // 4 tokens, 5 columns of ids
    CHECK_OP_ERROR("mul_mat_id", operands({as, bt, ids}), mul_mat_id(ctx, as, bt, ids));
    tensor* fids = ctx.new_tensor_2d(elem_type::f32, 2, 5);
    CHECK_OP_ERROR("mul_mat_id", operands({as, b, fids}), mul_mat_id(ctx, as, b, fids));
    tensor* bq = ctx.new_tensor_3d(elem_type::q8_0, 64, 1, 5);
    CHECK_OP_ERROR("mul_mat_id", operands({as, bq, ids}), mul_mat_id(ctx, as, bq, ids));
    tensor* as4 = ctx.new_tensor_4d(elem_type::f32, 64, 16, 8, 2);
    CHECK_OP_ERROR("mul_mat_id", operands({as4, b, ids}), mul_mat_id(ctx, as4, b, ids));
    CHECK_NULL_ERROR("mul_mat_id", mul_mat_id(ctx, nullptr, b, ids));
    CHECK_NULL_ERROR("mul_mat_id", mul_mat_id(ctx, as, nullptr, ids));
    CHECK_NULL_ERROR("mul_mat_id", mul_mat_id(ctx, as, b, nullptr));
}

TEST_CASE("im2col: ggml's shapes and parameters, and refused nodes", "[ops][im2col]") {
    context ctx({.no_alloc = true});
    tensor* k2 = ctx.new_tensor_4d(elem_type::f16, 3, 2, 4, 8); // [kw, kh, ic, oc]
    tensor* img = ctx.new_tensor_4d(elem_type::f32, 10, 7, 4, 2); // [iw, ih, ic, n]
    tensor* r = im2col(ctx, k2, img, 2, 1, 1, 0, 1, 3, true, elem_type::f16);
    // ow = (10 + 2 - 2 - 1) / 2 + 1 = 5, oh = (7 - 3 - 1) / 1 + 1 = 4
    check_result(r, elem_type::f16, {4 * 2 * 3, 5, 4, 2}, op_kind::im2col, k2, img);
    for (std::size_t i = 0; i < 7; ++i)
        CHECK(r->param<std::int32_t>(i) == std::array<std::int32_t, 7>{2, 1, 1, 0, 1, 3, 1}[i]);
    tensor* k1 = ctx.new_tensor_3d(elem_type::f32, 3, 4, 6); // [k, ic, oc]
    tensor* sig = ctx.new_tensor_3d(elem_type::f16, 9, 4, 3); // [iw, ic, n]
    check_result(im2col(ctx, k1, sig, 1, 0, 1, 0, 2, 0, false, elem_type::f32), elem_type::f32, {12, 7, 3, 1},
                 op_kind::im2col, k1, sig);
    CHECK(conv_output_size(9, 3, 2, 0, 1) == 4);
    CHECK(conv_output_size(4, 3, 2, 0, 2) == 1); // (4 - 4 - 1) / 2 + 1: C division truncates toward zero

    // the composites: im2col, then mul_mat, then ggml's reshape, permute and cont
    tensor* c2 = conv_2d(ctx, k2, img, 1, 1, 1, 1, 1, 1);
    CHECK(c2->op == op_kind::cont);
    CHECK(c2->ne == ne_t{10, 8, 8, 2});
    tensor* c1 = conv_1d(ctx, ctx.new_tensor_3d(elem_type::f16, 3, 4, 6), sig, 2, 1, 1);
    CHECK(c1->op == op_kind::reshape);
    CHECK(c1->ne == ne_t{5, 6, 3, 1});

    const auto two_d = [&](tensor* a, tensor* b, int s0, int s1, int p0, int p1, int d0, int d1, elem_type t) {
        return im2col(ctx, a, b, s0, s1, p0, p1, d0, d1, true, t);
    };
    CHECK_OP_ERROR("im2col", operands({k2, img}), two_d(k2, img, 0, 1, 0, 0, 1, 1, elem_type::f32)); // stride 0
    CHECK_OP_ERROR("im2col", operands({k2, img}), two_d(k2, img, 1, 0, 0, 0, 1, 1, elem_type::f32));
    CHECK_OP_ERROR("im2col", operands({k2, img}), two_d(k2, img, 1, 1, -1, 0, 1, 1, elem_type::f32)); // negative pad
    CHECK_OP_ERROR("im2col", operands({k2, img}), two_d(k2, img, 1, 1, 0, 0, 1, 0, elem_type::f32)); // dilation 0
    CHECK_OP_ERROR("im2col", operands({k2, img}), two_d(k2, img, 1, 1, 0, 0, 5, 1, elem_type::f32)); // window past b
    CHECK_OP_ERROR("im2col", operands({k2, img}), two_d(k2, img, 1, 1, 0, 0, 1, 1, elem_type::bf16));
    tensor* bf = ctx.new_tensor_4d(elem_type::bf16, 10, 7, 4, 2);
    CHECK_OP_ERROR("im2col", operands({k2, bf}), two_d(k2, bf, 1, 1, 0, 0, 1, 1, elem_type::f32));
    tensor* q = ctx.new_tensor_4d(elem_type::q8_0, 32, 2, 4, 1);
    CHECK_OP_ERROR("im2col", operands({q, img}), two_d(q, img, 1, 1, 0, 0, 1, 1, elem_type::f32));
    tensor* three = ctx.new_tensor_4d(elem_type::f32, 10, 7, 3, 2); // channels differ
    CHECK_OP_ERROR("im2col", operands({k2, three}), two_d(k2, three, 1, 1, 0, 0, 1, 1, elem_type::f32));
    tensor* k7 = ctx.new_tensor_3d(elem_type::f32, 3, 7, 6);
    CHECK_OP_ERROR("im2col", operands({k7, img}), im2col(ctx, k7, img, 1, 0, 0, 0, 1, 0, false, elem_type::f32)); // 4-D b
    CHECK_OP_ERROR("im2col", operands({k1, sig}), im2col(ctx, k1, sig, 1, 0, 0, 1, 1, 0, false, elem_type::f32)); // p1 in 1-D
    CHECK_NULL_ERROR("im2col", im2col(ctx, nullptr, img, 1, 1, 0, 0, 1, 1, true, elem_type::f32));
    CHECK_NULL_ERROR("im2col", im2col(ctx, k2, nullptr, 1, 1, 0, 0, 1, 1, true, elem_type::f32));
    // the composites refuse what their parts refuse
    CHECK_OP_ERROR("im2col", operands({k2, three}), conv_2d(ctx, k2, three, 1, 1, 0, 0, 1, 1));
    tensor* gaps = ctx.new_tensor_4d(elem_type::f16, 3, 3, 4, 8);
    tensor* strided = view(ctx, gaps, {3, 2, 4, 8}, {2, 6, 18, 72}, 0); // kernel rows 0, 1 of 3: not contiguous
    CHECK_THROWS_AS(conv_2d(ctx, strided, img, 1, 1, 0, 0, 1, 1), backplane::error);
}

TEST_CASE("conv_2d (conv_2d_direct): ggml's shapes and parameters, and refused nodes", "[ops][conv_2d]") {
    context ctx({.no_alloc = true});
    tensor* k = ctx.new_tensor_4d(elem_type::f16, 3, 2, 4, 8); // [kw, kh, ic, oc]
    tensor* img = ctx.new_tensor_4d(elem_type::f32, 10, 7, 4, 2); // [iw, ih, ic, n]
    tensor* r = conv_2d_direct(ctx, k, img, 2, 1, 1, 0, 1, 3);
    // ow = (10 + 2 - 2 - 1) / 2 + 1 = 5, oh = (7 - 3 - 1) / 1 + 1 = 4
    check_result(r, elem_type::f32, {5, 4, 8, 2}, op_kind::conv_2d, k, img);
    for (std::size_t i = 0; i < 6; ++i)
        CHECK(r->param<std::int32_t>(i) == std::array<std::int32_t, 6>{2, 1, 1, 0, 1, 3}[i]);
    tensor* k32 = ctx.new_tensor_4d(elem_type::f32, 1, 1, 4, 3);
    check_result(conv_2d_direct(ctx, k32, img, 1, 1, 0, 0, 1, 1), elem_type::f32, {10, 7, 3, 2}, op_kind::conv_2d, k32, img);

    CHECK_OP_ERROR("conv_2d", operands({k, img}), conv_2d_direct(ctx, k, img, 0, 1, 0, 0, 1, 1)); // stride 0
    CHECK_OP_ERROR("conv_2d", operands({k, img}), conv_2d_direct(ctx, k, img, 1, 1, 0, -2, 1, 1)); // negative pad
    CHECK_OP_ERROR("conv_2d", operands({k, img}), conv_2d_direct(ctx, k, img, 1, 1, 0, 0, 1, 0)); // dilation 0
    CHECK_OP_ERROR("conv_2d", operands({k, img}), conv_2d_direct(ctx, k, img, 1, 1, 0, 0, 1, 7)); // window past b
    tensor* h = ctx.new_tensor_4d(elem_type::f16, 10, 7, 4, 2);
    CHECK_OP_ERROR("conv_2d", operands({k, h}), conv_2d_direct(ctx, k, h, 1, 1, 0, 0, 1, 1)); // an f16 input
    tensor* bf = ctx.new_tensor_4d(elem_type::bf16, 3, 2, 4, 8);
    CHECK_OP_ERROR("conv_2d", operands({bf, img}), conv_2d_direct(ctx, bf, img, 1, 1, 0, 0, 1, 1));
    tensor* three = ctx.new_tensor_4d(elem_type::f32, 10, 7, 3, 2); // channels differ
    CHECK_OP_ERROR("conv_2d", operands({k, three}), conv_2d_direct(ctx, k, three, 1, 1, 0, 0, 1, 1));
    CHECK_NULL_ERROR("conv_2d", conv_2d_direct(ctx, nullptr, img, 1, 1, 0, 0, 1, 1));
    CHECK_NULL_ERROR("conv_2d", conv_2d_direct(ctx, k, nullptr, 1, 1, 0, 0, 1, 1));
}

TEST_CASE("conv_transpose_1d: ggml's shapes and parameters, and refused nodes", "[ops][conv_transpose]") {
    context ctx({.no_alloc = true});
    tensor* k = ctx.new_tensor_3d(elem_type::f16, 3, 5, 4); // [k, oc, ic]
    tensor* sig = ctx.new_tensor_2d(elem_type::f32, 10, 4); // [iw, ic]
    tensor* r = conv_transpose_1d(ctx, k, sig, 2);
    check_result(r, elem_type::f32, {(10 - 1) * 2 + 3, 5, 1, 1}, op_kind::conv_transpose_1d, k, sig); // ow = 21
    CHECK(r->param<std::int32_t>(0) == 2);
    CHECK(r->param<std::int32_t>(1) == 0);
    CHECK(r->param<std::int32_t>(2) == 1);
    tensor* k32 = ctx.new_tensor_3d(elem_type::f32, 1, 2, 4);
    check_result(conv_transpose_1d(ctx, k32, sig, 1), elem_type::f32, {10, 2, 1, 1}, op_kind::conv_transpose_1d, k32, sig);

    CHECK_OP_ERROR("conv_transpose_1d", operands({k, sig}), conv_transpose_1d(ctx, k, sig, 0));       // stride 0
    CHECK_OP_ERROR("conv_transpose_1d", operands({k, sig}), conv_transpose_1d(ctx, k, sig, 1, 1, 1)); // a pad
    CHECK_OP_ERROR("conv_transpose_1d", operands({k, sig}), conv_transpose_1d(ctx, k, sig, 1, 0, 2)); // a dilation
    tensor* batch = ctx.new_tensor_3d(elem_type::f32, 10, 4, 2); // not a matrix
    CHECK_OP_ERROR("conv_transpose_1d", operands({k, batch}), conv_transpose_1d(ctx, k, batch, 1));
    tensor* three = ctx.new_tensor_2d(elem_type::f32, 10, 3); // channels differ
    CHECK_OP_ERROR("conv_transpose_1d", operands({k, three}), conv_transpose_1d(ctx, k, three, 1));
    tensor* h = ctx.new_tensor_2d(elem_type::f16, 10, 4);
    CHECK_OP_ERROR("conv_transpose_1d", operands({k, h}), conv_transpose_1d(ctx, k, h, 1)); // an f16 input
    tensor* bf = ctx.new_tensor_3d(elem_type::bf16, 3, 5, 4);
    CHECK_OP_ERROR("conv_transpose_1d", operands({bf, sig}), conv_transpose_1d(ctx, bf, sig, 1));
    CHECK_NULL_ERROR("conv_transpose_1d", conv_transpose_1d(ctx, nullptr, sig, 1));
    CHECK_NULL_ERROR("conv_transpose_1d", conv_transpose_1d(ctx, k, nullptr, 1));
}

TEST_CASE("conv_transpose_2d (conv_transpose_2d_p0): ggml's shapes and parameters, and refused nodes", "[ops][conv_transpose]") {
    context ctx({.no_alloc = true});
    tensor* k = ctx.new_tensor_4d(elem_type::f16, 3, 2, 5, 4);   // [kw, kh, oc, ic]
    tensor* img = ctx.new_tensor_4d(elem_type::f32, 6, 7, 4, 2); // [iw, ih, ic, n]
    tensor* r = conv_transpose_2d_p0(ctx, k, img, 3);
    // ow = (6 - 1) 3 + 3 = 18, oh = (7 - 1) 3 + 2 = 20
    check_result(r, elem_type::f32, {18, 20, 5, 2}, op_kind::conv_transpose_2d, k, img);
    CHECK(r->param<std::int32_t>(0) == 3);
    tensor* k32 = ctx.new_tensor_4d(elem_type::f32, 1, 1, 2, 4);
    check_result(conv_transpose_2d_p0(ctx, k32, img, 1), elem_type::f32, {6, 7, 2, 2}, op_kind::conv_transpose_2d, k32, img);

    CHECK_OP_ERROR("conv_transpose_2d", operands({k, img}), conv_transpose_2d_p0(ctx, k, img, 0)); // stride 0
    CHECK_OP_ERROR("conv_transpose_2d", operands({k, img}), conv_transpose_2d_p0(ctx, k, img, -1));
    tensor* three = ctx.new_tensor_4d(elem_type::f32, 6, 7, 3, 2); // channels differ
    CHECK_OP_ERROR("conv_transpose_2d", operands({k, three}), conv_transpose_2d_p0(ctx, k, three, 1));
    tensor* h = ctx.new_tensor_4d(elem_type::f16, 6, 7, 4, 2);
    CHECK_OP_ERROR("conv_transpose_2d", operands({k, h}), conv_transpose_2d_p0(ctx, k, h, 1)); // an f16 input
    tensor* q = ctx.new_tensor_4d(elem_type::bf16, 3, 2, 5, 4);
    CHECK_OP_ERROR("conv_transpose_2d", operands({q, img}), conv_transpose_2d_p0(ctx, q, img, 1));
    CHECK_NULL_ERROR("conv_transpose_2d", conv_transpose_2d_p0(ctx, nullptr, img, 1));
    CHECK_NULL_ERROR("conv_transpose_2d", conv_transpose_2d_p0(ctx, k, nullptr, 1));
}

TEST_CASE("conv_2d_dw (conv_2d_dw_direct): ggml's shapes, parameters and layouts, and refused nodes", "[ops][conv_2d_dw]") {
    context ctx({.no_alloc = true});
    tensor* k = ctx.new_tensor_4d(elem_type::f32, 3, 2, 1, 4);    // [kw, kh, 1, c]
    tensor* img = ctx.new_tensor_4d(elem_type::f32, 10, 7, 4, 2); // [iw, ih, c, n]
    tensor* r = conv_2d_dw_direct(ctx, k, img, 2, 1, 1, 0, 1, 3);
    // ow = (10 + 2 - 2 - 1) / 2 + 1 = 5, oh = (7 - 3 - 1) / 1 + 1 = 4
    check_result(r, elem_type::f32, {5, 4, 4, 2}, op_kind::conv_2d_dw, k, img);
    for (std::size_t i = 0; i < 6; ++i)
        CHECK(r->param<std::int32_t>(i) == std::array<std::int32_t, 6>{2, 1, 1, 0, 1, 3}[i]);
    // channel-last (ggml's CWHN): a [c, w, h, n] tensor permuted; the result as ggml's
    tensor* cwhn = permute(ctx, ctx.new_tensor_4d(elem_type::f32, 4, 10, 7, 2), 2, 0, 1, 3);
    REQUIRE(channels_last(*cwhn, 4));
    tensor* rc = conv_2d_dw_direct(ctx, k, cwhn, 1, 1, 1, 1, 1, 1);
    CHECK(rc->ne == ne_t{10, 8, 4, 2}); // the 3 x 2 kernel padded by 1: oh = 7 + 2 - 2 + 1
    CHECK(rc->nb == std::array<std::size_t, 4>{16, 160, 4, 1280});
    CHECK_FALSE(rc->is_contiguous());
    CHECK(rc->view_src == nullptr);
    CHECK(rc->nbytes() == 10 * 8 * 4 * 2 * 4);
    // one channel: not channel-last (ggml's test needs nb0 > nb2)
    tensor* one = permute(ctx, ctx.new_tensor_4d(elem_type::f32, 1, 10, 7, 2), 2, 0, 1, 3);
    CHECK(conv_2d_dw_direct(ctx, ctx.new_tensor_4d(elem_type::f32, 3, 3, 1, 1), one, 1, 1, 0, 0, 1, 1)->is_contiguous());

    CHECK_OP_ERROR("conv_2d_dw", operands({k, img}), conv_2d_dw_direct(ctx, k, img, 0, 1, 0, 0, 1, 1)); // stride 0
    CHECK_OP_ERROR("conv_2d_dw", operands({k, img}), conv_2d_dw_direct(ctx, k, img, 1, 1, -1, 0, 1, 1)); // negative pad
    CHECK_OP_ERROR("conv_2d_dw", operands({k, img}), conv_2d_dw_direct(ctx, k, img, 1, 1, 0, 0, 1, 0)); // dilation 0
    CHECK_OP_ERROR("conv_2d_dw", operands({k, img}), conv_2d_dw_direct(ctx, k, img, 1, 1, 0, 0, 1, 7)); // window past b
    tensor* k2 = ctx.new_tensor_4d(elem_type::f32, 3, 2, 2, 4); // not one plane per channel
    CHECK_OP_ERROR("conv_2d_dw", operands({k2, img}), conv_2d_dw_direct(ctx, k2, img, 1, 1, 0, 0, 1, 1));
    tensor* three = ctx.new_tensor_4d(elem_type::f32, 10, 7, 3, 2); // channels differ
    CHECK_OP_ERROR("conv_2d_dw", operands({k, three}), conv_2d_dw_direct(ctx, k, three, 1, 1, 0, 0, 1, 1));
    tensor* h = ctx.new_tensor_4d(elem_type::f16, 3, 2, 1, 4);
    CHECK_OP_ERROR("conv_2d_dw", operands({h, img}), conv_2d_dw_direct(ctx, h, img, 1, 1, 0, 0, 1, 1)); // an f16 kernel
    CHECK_NULL_ERROR("conv_2d_dw", conv_2d_dw_direct(ctx, nullptr, img, 1, 1, 0, 0, 1, 1));
    CHECK_NULL_ERROR("conv_2d_dw", conv_2d_dw_direct(ctx, k, nullptr, 1, 1, 0, 0, 1, 1));
}

TEST_CASE("win_part and win_unpart: ggml's shapes and parameters, and refused nodes", "[ops][window]") {
    context ctx({.no_alloc = true});
    tensor* img = ctx.new_tensor_3d(elem_type::f32, 8, 7, 5); // [c, w0, h0]
    tensor* parts = win_part(ctx, img, 3);                     // 3 windows across, 2 down
    check_result(parts, elem_type::f32, {8, 3, 3, 6}, op_kind::win_part, img);
    CHECK(parts->param<std::int32_t>(0) == 3);
    CHECK(parts->param<std::int32_t>(1) == 2);
    CHECK(parts->param<std::int32_t>(2) == 3);
    check_result(win_part(ctx, img, 7), elem_type::f32, {8, 7, 7, 1}, op_kind::win_part, img); // one padded window
    tensor* back = win_unpart(ctx, parts, 7, 5, 3);
    check_result(back, elem_type::f32, {8, 7, 5, 1}, op_kind::win_unpart, parts);
    CHECK(back->param<std::int32_t>(0) == 3);

    CHECK_OP_ERROR("win_part", operands({img}), win_part(ctx, img, 0));
    tensor* four = ctx.new_tensor_4d(elem_type::f32, 8, 7, 5, 2);
    CHECK_OP_ERROR("win_part", operands({four}), win_part(ctx, four, 3));
    tensor* h = ctx.new_tensor_3d(elem_type::f16, 8, 7, 5);
    CHECK_OP_ERROR("win_part", operands({h}), win_part(ctx, h, 3));
    CHECK_OP_ERROR("win_unpart", operands({parts}), win_unpart(ctx, parts, 7, 5, 2)); // windows are 3 x 3
    CHECK_OP_ERROR("win_unpart", operands({parts}), win_unpart(ctx, parts, 10, 5, 3)); // needs 8 windows
    CHECK_OP_ERROR("win_unpart", operands({parts}), win_unpart(ctx, parts, 0, 5, 3));
    CHECK_OP_ERROR("win_unpart", operands({parts}), win_unpart(ctx, parts, 7, 5, 0));
    tensor* hp = ctx.new_tensor_4d(elem_type::f16, 8, 3, 3, 6);
    CHECK_OP_ERROR("win_unpart", operands({hp}), win_unpart(ctx, hp, 7, 5, 3));
    CHECK_NULL_ERROR("win_part", win_part(ctx, nullptr, 3));
    CHECK_NULL_ERROR("win_unpart", win_unpart(ctx, nullptr, 7, 5, 3));
}

TEST_CASE("get_rel_pos: ggml's shapes, and refused nodes", "[ops][window]") {
    context ctx({.no_alloc = true});
    tensor* table = ctx.new_tensor_2d(elem_type::f16, 8, 9); // [c, 2 qh - 1]
    check_result(get_rel_pos(ctx, table, 5, 5), elem_type::f16, {8, 5, 5, 1}, op_kind::get_rel_pos, table);
    CHECK_OP_ERROR("get_rel_pos", operands({table}), get_rel_pos(ctx, table, 5, 4)); // qh != kh
    CHECK_OP_ERROR("get_rel_pos", operands({table}), get_rel_pos(ctx, table, 4, 4)); // 2 qh - 1 != 9
    CHECK_OP_ERROR("get_rel_pos", operands({table}), get_rel_pos(ctx, table, 0, 0));
    tensor* f = ctx.new_tensor_2d(elem_type::f32, 8, 9);
    CHECK_OP_ERROR("get_rel_pos", operands({f}), get_rel_pos(ctx, f, 5, 5));
    tensor* bf = ctx.new_tensor_2d(elem_type::bf16, 8, 9);
    CHECK_OP_ERROR("get_rel_pos", operands({bf}), get_rel_pos(ctx, bf, 5, 5));
    tensor* planes = ctx.new_tensor_3d(elem_type::f16, 8, 9, 2);
    CHECK_OP_ERROR("get_rel_pos", operands({planes}), get_rel_pos(ctx, planes, 5, 5));
    CHECK_NULL_ERROR("get_rel_pos", get_rel_pos(ctx, nullptr, 5, 5));
}

TEST_CASE("add_id: the rows, the experts' rows and the ids", "[ops][add_id]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_3d(elem_type::f32, 64, 2, 5); // 2 experts for each of 5 tokens
    tensor* b = ctx.new_tensor_2d(elem_type::f32, 64, 8);    // 8 experts' rows
    tensor* ids = ctx.new_tensor_2d(elem_type::i32, 2, 5);
    tensor* r = add_id(ctx, a, b, ids);
    REQUIRE(r != nullptr);
    CHECK(r->op == op_kind::add_id);
    CHECK(r->type == elem_type::f32);
    CHECK(r->ne == ne_t{64, 2, 5, 1});
    CHECK(r->src[2] == ids);

    tensor* bk = ctx.new_tensor_2d(elem_type::f32, 32, 8);
    CHECK_OP_ERROR("add_id", operands({a, bk, ids}), add_id(ctx, a, bk, ids));
    tensor* ids3 = ctx.new_tensor_2d(elem_type::i32, 3, 5); // 3 ids per token, 2 rows
    CHECK_OP_ERROR("add_id", operands({a, b, ids3}), add_id(ctx, a, b, ids3));
    tensor* ids4 = ctx.new_tensor_2d(elem_type::i32, 2, 4); // 4 tokens, 5 columns of a
    CHECK_OP_ERROR("add_id", operands({a, b, ids4}), add_id(ctx, a, b, ids4));
    tensor* fids = ctx.new_tensor_2d(elem_type::f32, 2, 5);
    CHECK_OP_ERROR("add_id", operands({a, b, fids}), add_id(ctx, a, b, fids));
    tensor* ah = ctx.new_tensor_3d(elem_type::f16, 64, 2, 5);
    CHECK_OP_ERROR("add_id", operands({ah, b, ids}), add_id(ctx, ah, b, ids));
    tensor* bh = ctx.new_tensor_2d(elem_type::f16, 64, 8);
    CHECK_OP_ERROR("add_id", operands({a, bh, ids}), add_id(ctx, a, bh, ids));
    tensor* b3 = ctx.new_tensor_3d(elem_type::f32, 64, 8, 2);
    CHECK_OP_ERROR("add_id", operands({a, b3, ids}), add_id(ctx, a, b3, ids));
    tensor* a4 = ctx.new_tensor_4d(elem_type::f32, 64, 2, 5, 2);
    CHECK_OP_ERROR("add_id", operands({a4, b, ids}), add_id(ctx, a4, b, ids));
    CHECK_NULL_ERROR("add_id", add_id(ctx, nullptr, b, ids));
    CHECK_NULL_ERROR("add_id", add_id(ctx, a, nullptr, ids));
    CHECK_NULL_ERROR("add_id", add_id(ctx, a, b, nullptr));
}

TEST_CASE("get_rows", "[ops][get_rows]") {
    context ctx({.no_alloc = true});
    // a [E, R, A2, A3], idx i32 [N, A2, A3] -> [E, N, A2, A3]; f32 unless a is i32
    tensor* idx = ctx.new_tensor_1d(elem_type::i32, 4);
    for (const elem_type t : {elem_type::f32, elem_type::f16, elem_type::bf16, elem_type::q8_0, elem_type::q4_0}) {
        tensor* a = ctx.new_tensor_2d(t, 32, 10);
        check_result(get_rows(ctx, a, idx), elem_type::f32, {32, 4, 1, 1}, op_kind::get_rows, a, idx);
    }
    tensor* ai = ctx.new_tensor_2d(elem_type::i32, 6, 10);
    check_result(get_rows(ctx, ai, idx), elem_type::i32, {6, 4, 1, 1}, op_kind::get_rows, ai, idx);
    tensor* a3 = ctx.new_tensor_3d(elem_type::f32, 6, 10, 3);
    tensor* idx3 = ctx.new_tensor_2d(elem_type::i32, 4, 3);
    check_result(get_rows(ctx, a3, idx3), elem_type::f32, {6, 4, 3, 1}, op_kind::get_rows, a3, idx3);
    tensor* a4 = ctx.new_tensor_4d(elem_type::f32, 6, 10, 3, 2);
    tensor* idx4 = ctx.new_tensor_3d(elem_type::i32, 4, 3, 2);
    check_result(get_rows(ctx, a4, idx4), elem_type::f32, {6, 4, 3, 2}, op_kind::get_rows, a4, idx4);

    tensor* a = ctx.new_tensor_2d(elem_type::f32, 6, 10);
    tensor* fidx = ctx.new_tensor_1d(elem_type::f32, 4);
    CHECK_OP_ERROR("get_rows", operands({a, fidx}), get_rows(ctx, a, fidx));
    CHECK_OP_ERROR("get_rows", operands({a3, idx}), get_rows(ctx, a3, idx));   // idx.ne1 1 != a.ne2 3
    CHECK_OP_ERROR("get_rows", operands({a, idx3}), get_rows(ctx, a, idx3));   // idx.ne1 3 != a.ne2 1
    CHECK_OP_ERROR("get_rows", operands({a4, idx3}), get_rows(ctx, a4, idx3)); // idx.ne2 1 != a.ne3 2
    tensor* idx_ne3 = ctx.new_tensor_4d(elem_type::i32, 4, 1, 1, 2);
    CHECK_OP_ERROR("get_rows", operands({a, idx_ne3}), get_rows(ctx, a, idx_ne3));
    tensor* q = ctx.new_tensor_2d(elem_type::q4_0, 64, 4);
    tensor* gaps = view(ctx, q, {32, 4, 1, 1}, {36, 36, 144, 144}, 0);
    CHECK_OP_ERROR("get_rows", operands({gaps, idx}), get_rows(ctx, gaps, idx));
    CHECK_NULL_ERROR("get_rows", get_rows(ctx, nullptr, idx));
    CHECK_NULL_ERROR("get_rows", get_rows(ctx, a, nullptr));
}

TEST_CASE("pad and arange", "[ops][pad][arange]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_3d(elem_type::f16, 5, 4, 3);
    tensor* p = pad(ctx, a, 3, 0, 2);
    check_result(p, elem_type::f16, {8, 4, 5, 1}, op_kind::pad, a);
    CHECK(p->param<std::int32_t>(1) == 3); // rp0
    CHECK(p->param<std::int32_t>(8) == 0); // not circular
    tensor* e = pad_ext(ctx, a, {.lp = {1, 2, 0, 1}, .rp = {0, 1, 1, 0}}, true);
    check_result(e, elem_type::f16, {6, 7, 4, 2}, op_kind::pad, a);
    CHECK(e->param<std::int32_t>(0) == 1);
    CHECK(e->param<std::int32_t>(8) == 1);
    CHECK_OP_ERROR("pad", operands({a}), pad(ctx, a, -1));
    CHECK_OP_ERROR("pad", operands({a}), pad_ext(ctx, a, {.lp = {0, -2, 0, 0}, .rp = {}}));
    tensor* q = ctx.new_tensor_2d(elem_type::q8_0, 32, 2);
    CHECK_OP_ERROR("pad", operands({q}), pad(ctx, q, 32));
    tensor* ints = ctx.new_tensor_1d(elem_type::i32, 4);
    CHECK_OP_ERROR("pad", operands({ints}), pad(ctx, ints, 1));
    CHECK_NULL_ERROR("pad", pad(ctx, nullptr, 1));

    tensor* r = arange(ctx, -1.0f, 2.0f, 0.25f);
    check_result(r, elem_type::f32, {12, 1, 1, 1}, op_kind::arange, nullptr);
    CHECK(r->param<float>(0) == -1.0f);
    CHECK(r->param<float>(1) == 2.0f);
    CHECK(r->param<float>(2) == 0.25f);
    CHECK(arange(ctx, 0.0f, 1.0f, 0.3f)->ne[0] == 4); // ceil(3.33)
    CHECK_OP_ERROR("arange", operands({}), arange(ctx, 2.0f, 1.0f, 0.5f)); // stop below start
    CHECK_OP_ERROR("arange", operands({}), arange(ctx, 0.0f, 1.0f, -0.5f));
    CHECK_OP_ERROR("arange", operands({}), arange(ctx, 0.0f, 1.0f, 0.0f));
    CHECK_OP_ERROR("arange", operands({}), arange(ctx, 0.0f, std::numeric_limits<float>::infinity(), 1.0f));
}

TEST_CASE("pool_1d and pool_2d", "[ops][pool]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_4d(elem_type::f16, 10, 7, 3, 2);
    tensor* p1 = pool_1d(ctx, a, pool_op::avg, 3, 2, 1);
    check_result(p1, elem_type::f32, {5, 7, 3, 2}, op_kind::pool_1d, a); // (10 + 2 - 3) / 2 + 1
    CHECK(p1->param<std::int32_t>(0) == static_cast<std::int32_t>(pool_op::avg));
    CHECK(p1->param<std::int32_t>(3) == 1); // p0
    tensor* p2 = pool_2d(ctx, a, pool_op::max, 3, 2, 3, 1, 0, 1);
    check_result(p2, elem_type::f32, {3, 8, 3, 2}, op_kind::pool_2d, a); // (10 - 3) / 3 + 1, (7 + 2 - 2) / 1 + 1
    CHECK(p2->param<std::int32_t>(2) == 2);       // k1
    CHECK(p2->param<std::int32_t>(6) == 1);       // p1
    CHECK(pool_1d(ctx, a, pool_op::max, 12, 1, 1)->ne[0] == 1); // the kernel fills the padded row
    CHECK_OP_ERROR("pool_1d", operands({a}), pool_1d(ctx, a, pool_op::max, 13, 1, 1)); // larger than the padded row
    CHECK_OP_ERROR("pool_1d", operands({a}), pool_1d(ctx, a, pool_op::max, 0, 1, 0));
    CHECK_OP_ERROR("pool_1d", operands({a}), pool_1d(ctx, a, pool_op::max, 2, 0, 0));
    CHECK_OP_ERROR("pool_1d", operands({a}), pool_1d(ctx, a, pool_op::max, 2, 1, -1));
    CHECK_OP_ERROR("pool_1d", operands({a}), pool_1d(ctx, a, static_cast<pool_op>(2), 2, 1, 0));
    CHECK_OP_ERROR("pool_2d", operands({a}), pool_2d(ctx, a, pool_op::avg, 2, 10, 1, 1, 0, 1)); // k1 past ne1 + 2 p1
    CHECK_OP_ERROR("pool_2d", operands({a}), pool_2d(ctx, a, pool_op::avg, 2, 2, 1, -3, 0, 0));
    for (const elem_type t : {elem_type::bf16, elem_type::i32, elem_type::q8_0}) {
        tensor* x = ctx.new_tensor_2d(t, 32, 4);
        CHECK_OP_ERROR("pool_1d", operands({x}), pool_1d(ctx, x, pool_op::max, 2, 2, 0));
        CHECK_OP_ERROR("pool_2d", operands({x}), pool_2d(ctx, x, pool_op::max, 2, 2, 2, 2, 0, 0));
    }
    CHECK_NULL_ERROR("pool_1d", pool_1d(ctx, nullptr, pool_op::max, 2, 2, 0));
    CHECK_NULL_ERROR("pool_2d", pool_2d(ctx, nullptr, pool_op::max, 2, 2, 2, 2, 0, 0));
}

TEST_CASE("upscale, upscale_ext and interpolate", "[ops][upscale]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_4d(elem_type::f32, 5, 4, 3, 2);
    tensor* u = upscale(ctx, a, 3, scale_mode::bilinear);
    check_result(u, elem_type::f32, {15, 12, 3, 2}, op_kind::upscale, a);
    CHECK(u->param<std::int32_t>(0) == 1);
    check_result(upscale_ext(ctx, a, 2, 9, 1, 4), elem_type::f32, {2, 9, 1, 4}, op_kind::upscale, a);
    const auto bicubic_corners = static_cast<std::uint32_t>(scale_mode::bicubic) | scale_align_corners;
    CHECK(interpolate(ctx, a, 7, 3, 3, 2, bicubic_corners)->param<std::int32_t>(0) == 0x102);
    CHECK(interpolate(ctx, a, 2, 2, 3, 2, static_cast<std::uint32_t>(scale_mode::bilinear) | scale_antialias)->ne[0] == 2);
    CHECK_OP_ERROR("upscale", operands({a}), upscale(ctx, a, 1));
    CHECK_OP_ERROR("upscale", operands({a}), interpolate(ctx, a, 0, 4, 3, 2, 0));
    CHECK_OP_ERROR("upscale", operands({a}), interpolate(ctx, a, 5, 4, 3, 2, 3));      // no fourth mode
    CHECK_OP_ERROR("upscale", operands({a}), interpolate(ctx, a, 5, 4, 3, 2, 1u << 10)); // an unknown flag
    CHECK_OP_ERROR("upscale", operands({a}),
                   interpolate(ctx, a, 5, 4, 3, 2, static_cast<std::uint32_t>(scale_mode::bicubic) | scale_antialias));
    for (const elem_type t : {elem_type::f16, elem_type::bf16, elem_type::i32}) {
        tensor* x = ctx.new_tensor_2d(t, 4, 4);
        CHECK_OP_ERROR("upscale", operands({x}), upscale(ctx, x, 2));
    }
    tensor* empty = ctx.new_tensor_2d(elem_type::f32, 0, 4);
    CHECK_OP_ERROR("upscale", operands({empty}), interpolate(ctx, empty, 2, 4, 1, 1, 0));
    CHECK_NULL_ERROR("upscale", upscale(ctx, nullptr, 2));
    CHECK_NULL_ERROR("upscale", interpolate(ctx, nullptr, 2, 2, 1, 1, 0));
}

TEST_CASE("pad_reflect_1d and roll", "[ops][remap]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_3d(elem_type::bf16, 5, 4, 3);
    tensor* p = pad_reflect_1d(ctx, a, 4, 2);
    check_result(p, elem_type::bf16, {11, 4, 3, 1}, op_kind::pad_reflect_1d, a);
    CHECK(p->param<std::int32_t>(0) == 4);
    CHECK(p->param<std::int32_t>(1) == 2);
    tensor* r = roll(ctx, a, -4, 3, 2);
    check_result(r, elem_type::bf16, {5, 4, 3, 1}, op_kind::roll, a);
    CHECK(r->param<std::int32_t>(0) == -4);
    CHECK(r->param<std::int32_t>(2) == 2);
    CHECK_OP_ERROR("pad_reflect_1d", operands({a}), pad_reflect_1d(ctx, a, 5, 0)); // a pad as long as the row
    CHECK_OP_ERROR("pad_reflect_1d", operands({a}), pad_reflect_1d(ctx, a, 0, 5));
    CHECK_OP_ERROR("pad_reflect_1d", operands({a}), pad_reflect_1d(ctx, a, -1, 0));
    CHECK_OP_ERROR("roll", operands({a}), roll(ctx, a, 5));
    CHECK_OP_ERROR("roll", operands({a}), roll(ctx, a, 0, -4));
    CHECK_OP_ERROR("roll", operands({a}), roll(ctx, a, 0, 0, 0, 1)); // dimension 3 has one element
    for (const elem_type t : {elem_type::i32, elem_type::q8_0}) {
        tensor* x = ctx.new_tensor_2d(t, 32, 4);
        CHECK_OP_ERROR("pad_reflect_1d", operands({x}), pad_reflect_1d(ctx, x, 1, 1));
        CHECK_OP_ERROR("roll", operands({x}), roll(ctx, x, 1));
    }
    CHECK_NULL_ERROR("pad_reflect_1d", pad_reflect_1d(ctx, nullptr, 1, 1));
    CHECK_NULL_ERROR("roll", roll(ctx, nullptr, 1));
}

// ---------------------------------------------------------------------------------------
// row ops

TEST_CASE("sum_rows and argmax", "[ops][rows]") {
    context ctx({.no_alloc = true});
    for (const elem_type t : {elem_type::f32, elem_type::f16, elem_type::bf16}) {
        tensor* a = ctx.new_tensor_4d(t, 5, 4, 3, 2);
        // one value per row, in f32
        check_result(sum_rows(ctx, a), elem_type::f32, {1, 4, 3, 2}, op_kind::sum_rows, a);
        // one index per row, rows' dims shifted down
        tensor* m = argmax(ctx, a);
        check_result(m, elem_type::i32, {4, 3, 2, 1}, op_kind::argmax, a);
        CHECK(m->nb == nb_t{4, 16, 48, 96});
    }
    tensor* v = ctx.new_tensor_1d(elem_type::f32, 7);
    check_result(argmax(ctx, v), elem_type::i32, {1, 1, 1, 1}, op_kind::argmax, v);

    tensor* i = ctx.new_tensor_2d(elem_type::i32, 5, 4);
    tensor* q = ctx.new_tensor_2d(elem_type::q8_0, 32, 4);
    tensor* empty_rows = ctx.new_tensor_2d(elem_type::f32, 0, 4);
    CHECK_OP_ERROR("sum_rows", operands({i}), sum_rows(ctx, i));
    CHECK_OP_ERROR("sum_rows", operands({q}), sum_rows(ctx, q));
    CHECK_OP_ERROR("argmax", operands({i}), argmax(ctx, i));
    CHECK_OP_ERROR("argmax", operands({q}), argmax(ctx, q));
    CHECK_OP_ERROR("argmax", operands({empty_rows}), argmax(ctx, empty_rows));
    CHECK_NULL_ERROR("sum_rows", sum_rows(ctx, nullptr));
    CHECK_NULL_ERROR("argmax", argmax(ctx, nullptr));
}

TEST_CASE("sum and mean", "[ops][rows]") {
    context ctx({.no_alloc = true});
    for (const elem_type t : {elem_type::f32, elem_type::f16, elem_type::bf16}) {
        tensor* a = ctx.new_tensor_4d(t, 5, 4, 3, 2);
        // one element of a's type
        check_result(sum(ctx, a), t, {1, 1, 1, 1}, op_kind::sum, a);
        // one f32 mean per row
        check_result(mean(ctx, a), elem_type::f32, {1, 4, 3, 2}, op_kind::mean, a);
        // any layout
        tensor* tr = transpose(ctx, a);
        check_result(sum(ctx, tr), t, {1, 1, 1, 1}, op_kind::sum, tr);
    }
    tensor* i = ctx.new_tensor_2d(elem_type::i32, 5, 4);
    tensor* q = ctx.new_tensor_2d(elem_type::q8_0, 32, 4);
    tensor* empty_rows = ctx.new_tensor_2d(elem_type::f32, 0, 4);
    CHECK_OP_ERROR("sum", operands({i}), sum(ctx, i));
    CHECK_OP_ERROR("sum", operands({q}), sum(ctx, q));
    CHECK_OP_ERROR("mean", operands({i}), mean(ctx, i));
    CHECK_OP_ERROR("mean", operands({q}), mean(ctx, q));
    CHECK_OP_ERROR("mean", operands({empty_rows}), mean(ctx, empty_rows));
    CHECK_NULL_ERROR("sum", sum(ctx, nullptr));
    CHECK_NULL_ERROR("mean", mean(ctx, nullptr));
}

TEST_CASE("argsort and top_k", "[ops][rows]") {
    context ctx({.no_alloc = true});
    for (const elem_type t : {elem_type::f32, elem_type::f16, elem_type::bf16}) {
        tensor* a = ctx.new_tensor_4d(t, 5, 4, 3, 2);
        tensor* s = argsort(ctx, a, sort_order::desc);
        check_result(s, elem_type::i32, {5, 4, 3, 2}, op_kind::argsort, a);
        CHECK(s->param<std::int32_t>(0) == 1); // ggml's GGML_SORT_ORDER_DESC
        CHECK(argsort(ctx, a)->param<std::int32_t>(0) == 0);
        check_result(top_k(ctx, a, 1), elem_type::i32, {1, 4, 3, 2}, op_kind::top_k, a);
        check_result(top_k(ctx, a, 5), elem_type::i32, {5, 4, 3, 2}, op_kind::top_k, a);
    }
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 5, 4);
    tensor* i = ctx.new_tensor_2d(elem_type::i32, 5, 4);
    tensor* q = ctx.new_tensor_2d(elem_type::q8_0, 32, 4);
    CHECK_OP_ERROR("argsort", operands({i}), argsort(ctx, i));
    CHECK_OP_ERROR("argsort", operands({q}), argsort(ctx, q));
    CHECK_OP_ERROR("argsort", operands({a}), argsort(ctx, a, static_cast<sort_order>(2)));
    CHECK_OP_ERROR("top_k", operands({i}), top_k(ctx, i, 2));
    CHECK_OP_ERROR("top_k", operands({a}), top_k(ctx, a, 0));
    CHECK_OP_ERROR("top_k", operands({a}), top_k(ctx, a, 6));
    CHECK_OP_ERROR("top_k", operands({a}), top_k(ctx, a, -1));
    CHECK_NULL_ERROR("argsort", argsort(ctx, nullptr));
    CHECK_NULL_ERROR("top_k", top_k(ctx, nullptr, 1));
}

TEST_CASE("rms_norm and norm", "[ops][rows]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_3d(elem_type::f32, 8, 3, 2);
    tensor* r = rms_norm(ctx, a, 1e-5f);
    check_result(r, elem_type::f32, {8, 3, 2, 1}, op_kind::rms_norm, a);
    CHECK(r->param<float>(0) == 1e-5f);
    CHECK(rms_norm(ctx, a)->param<float>(0) == 1e-6f);
    tensor* n = norm(ctx, a, 0.0f);
    check_result(n, elem_type::f32, {8, 3, 2, 1}, op_kind::norm, a);
    CHECK(n->param<float>(0) == 0.0f);
    CHECK(norm(ctx, a)->param<float>(0) == 1e-5f);

    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (auto [fn, name] : {std::pair{&rms_norm, "rms_norm"}, {&norm, "norm"}}) {
        for (const elem_type t : {elem_type::f16, elem_type::bf16, elem_type::i32}) {
            tensor* x = ctx.new_tensor_2d(t, 8, 3);
            CHECK_OP_ERROR(name, operands({x}), fn(ctx, x, 1e-5f));
        }
        tensor* q = ctx.new_tensor_2d(elem_type::q4_0, 32, 3);
        CHECK_OP_ERROR(name, operands({q}), fn(ctx, q, 1e-5f));
        for (const float eps : {-1.0f, nan, inf}) CHECK_OP_ERROR(name, operands({a}), fn(ctx, a, eps));
        CHECK_NULL_ERROR(name, fn(ctx, nullptr, 1e-5f));
    }
}

TEST_CASE("l2_norm and group_norm", "[ops][rows]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_4d(elem_type::f32, 8, 3, 10, 2);
    tensor* l = l2_norm(ctx, a, 1e-4f);
    check_result(l, elem_type::f32, {8, 3, 10, 2}, op_kind::l2_norm, a);
    CHECK(l->param<float>(0) == 1e-4f);
    tensor* g = group_norm(ctx, a, 4, 1e-5f);
    check_result(g, elem_type::f32, {8, 3, 10, 2}, op_kind::group_norm, a);
    CHECK(g->param<std::int32_t>(0) == 4); // ggml's slots: n_groups, then eps
    CHECK(g->param<float>(1) == 1e-5f);
    CHECK(group_norm(ctx, a, 32)->param<std::int32_t>(0) == 32); // more groups than channels

    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (const elem_type t : {elem_type::f16, elem_type::bf16, elem_type::i32}) {
        tensor* x = ctx.new_tensor_2d(t, 8, 3);
        CHECK_OP_ERROR("l2_norm", operands({x}), l2_norm(ctx, x, 1e-5f));
        CHECK_OP_ERROR("group_norm", operands({x}), group_norm(ctx, x, 1));
    }
    for (const float eps : {-1.0f, nan, inf}) {
        CHECK_OP_ERROR("l2_norm", operands({a}), l2_norm(ctx, a, eps));
        CHECK_OP_ERROR("group_norm", operands({a}), group_norm(ctx, a, 2, eps));
    }
    for (const int n_groups : {0, -3}) CHECK_OP_ERROR("group_norm", operands({a}), group_norm(ctx, a, n_groups));
    CHECK_NULL_ERROR("l2_norm", l2_norm(ctx, nullptr));
    CHECK_NULL_ERROR("group_norm", group_norm(ctx, nullptr, 2));
}

TEST_CASE("repeat and repeat_back", "[ops][misc]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_3d(elem_type::f32, 4, 3, 2);
    tensor* big = ctx.new_tensor_4d(elem_type::f32, 8, 6, 2, 3);
    for (const elem_type t : {elem_type::f32, elem_type::f16, elem_type::bf16, elem_type::i32}) {
        tensor* x = ctx.new_tensor_3d(t, 4, 3, 2);
        check_result(repeat(ctx, x, big), t, {8, 6, 2, 3}, op_kind::repeat, x);
    }
    check_result(repeat_4d(ctx, a, 4, 3, 2, 1), elem_type::f32, {4, 3, 2, 1}, op_kind::repeat, a);
    check_result(repeat_back(ctx, big, a), elem_type::f32, {4, 3, 2, 1}, op_kind::repeat_back, big);
    CHECK(repeat(ctx, a, big)->src[1] == nullptr); // b gives only its shape

    tensor* q = ctx.new_tensor_2d(elem_type::q8_0, 32, 2);
    tensor* i64t = ctx.new_tensor_2d(elem_type::i64, 4, 3);
    CHECK_OP_ERROR("repeat", operands({q}), repeat_4d(ctx, q, 64, 2, 1, 1));
    CHECK_OP_ERROR("repeat", operands({i64t}), repeat_4d(ctx, i64t, 8, 3, 1, 1));
    CHECK_OP_ERROR("repeat", operands({a}), repeat_4d(ctx, a, 6, 3, 2, 1)); // 6 is not a multiple of 4
    CHECK_OP_ERROR("repeat", operands({a}), repeat_4d(ctx, a, -4, 3, 2, 1));
    tensor* empty = ctx.new_tensor_1d(elem_type::f32, 0);
    CHECK_OP_ERROR("repeat", operands({empty}), repeat_4d(ctx, empty, 4, 1, 1, 1)); // nothing to tile
    check_result(repeat_4d(ctx, empty, 0, 2, 1, 1), elem_type::f32, {0, 2, 1, 1}, op_kind::repeat, empty);
    CHECK_OP_ERROR("repeat_back", operands({a, big}), repeat_back(ctx, a, big)); // the wrong way round
    tensor* h = ctx.new_tensor_3d(elem_type::f16, 8, 6, 2);
    CHECK_OP_ERROR("repeat_back", operands({h, a}), repeat_back(ctx, h, a));
    CHECK_NULL_ERROR("repeat", repeat(ctx, nullptr, big));
    CHECK_NULL_ERROR("repeat", repeat(ctx, a, nullptr));
    CHECK_NULL_ERROR("repeat_back", repeat_back(ctx, big, nullptr));
}

TEST_CASE("cumsum, tri and diag", "[ops][misc]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_4d(elem_type::f32, 5, 5, 3, 2);
    check_result(cumsum(ctx, a), elem_type::f32, {5, 5, 3, 2}, op_kind::cumsum, a);
    for (const tri_type t : {tri_type::upper_diag, tri_type::upper, tri_type::lower_diag, tri_type::lower}) {
        tensor* r = tri(ctx, a, t);
        check_result(r, elem_type::f32, {5, 5, 3, 2}, op_kind::tri, a);
        CHECK(r->param<std::int32_t>(0) == static_cast<std::int32_t>(t)); // ggml_tri_type's values
    }
    tensor* v = ctx.new_tensor_4d(elem_type::f32, 7, 1, 3, 2);
    check_result(diag(ctx, v), elem_type::f32, {7, 7, 3, 2}, op_kind::diag, v);

    tensor* h = ctx.new_tensor_4d(elem_type::f16, 5, 5, 3, 2);
    tensor* wide = ctx.new_tensor_2d(elem_type::f32, 5, 4);
    CHECK_OP_ERROR("cumsum", operands({h}), cumsum(ctx, h));
    CHECK_OP_ERROR("tri", operands({h}), tri(ctx, h, tri_type::lower));
    CHECK_OP_ERROR("tri", operands({wide}), tri(ctx, wide, tri_type::lower)); // not square
    for (const int bad : {-1, 4}) CHECK_OP_ERROR("tri", operands({a}), tri(ctx, a, static_cast<tri_type>(bad)));
    CHECK_OP_ERROR("diag", operands({a}), diag(ctx, a)); // ne1 != 1
    tensor* hv = ctx.new_tensor_2d(elem_type::f16, 7, 1);
    CHECK_OP_ERROR("diag", operands({hv}), diag(ctx, hv));
    CHECK_NULL_ERROR("cumsum", cumsum(ctx, nullptr));
    CHECK_NULL_ERROR("tri", tri(ctx, nullptr, tri_type::upper));
    CHECK_NULL_ERROR("diag", diag(ctx, nullptr));
}

TEST_CASE("ssm_conv and ssm_scan shapes and errors", "[ops][recurrent]") {
    context ctx({.no_alloc = true});
    constexpr elem_type f32 = elem_type::f32;
    tensor* sx = ctx.new_tensor_3d(f32, 9, 6, 2); // d_conv 4: 6 tokens
    tensor* c = ctx.new_tensor_2d(f32, 4, 6);
    check_result(ssm_conv(ctx, sx, c), f32, {6, 6, 2, 1}, op_kind::ssm_conv, sx, c);
    tensor* one = ctx.new_tensor_3d(f32, 4, 6, 2); // one token
    CHECK(ssm_conv(ctx, one, c)->ne == ne_t{6, 1, 2, 1});
    tensor* short_sx = ctx.new_tensor_3d(f32, 3, 6, 2);
    CHECK_OP_ERROR("ssm_conv", operands({short_sx, c}), ssm_conv(ctx, short_sx, c));
    tensor* other_inner = ctx.new_tensor_3d(f32, 9, 5, 2);
    CHECK_OP_ERROR("ssm_conv", operands({other_inner, c}), ssm_conv(ctx, other_inner, c));
    tensor* sx4 = ctx.new_tensor_4d(f32, 9, 6, 2, 2);
    CHECK_OP_ERROR("ssm_conv", operands({sx4, c}), ssm_conv(ctx, sx4, c));
    tensor* c3 = ctx.new_tensor_3d(f32, 4, 6, 2);
    CHECK_OP_ERROR("ssm_conv", operands({sx, c3}), ssm_conv(ctx, sx, c3));
    tensor* sxh = ctx.new_tensor_3d(elem_type::f16, 9, 6, 2);
    CHECK_OP_ERROR("ssm_conv", operands({sxh, c}), ssm_conv(ctx, sxh, c));
    CHECK_NULL_ERROR("ssm_conv", ssm_conv(ctx, nullptr, c));

    // Mamba-2: d_state 16, head_dim 4, 6 heads in 2 groups, 5 tokens, 2 sequences of 3 states
    tensor* s = ctx.new_tensor_4d(f32, 16, 4, 6, 3);
    tensor* x = ctx.new_tensor_4d(f32, 4, 6, 5, 2);
    tensor* dt = ctx.new_tensor_3d(f32, 6, 5, 2);
    tensor* A2 = ctx.new_tensor_2d(f32, 1, 6);
    tensor* A1 = ctx.new_tensor_2d(f32, 16, 6);
    tensor* B = ctx.new_tensor_4d(f32, 16, 2, 5, 2);
    tensor* C = ctx.new_tensor_4d(f32, 16, 2, 5, 2);
    tensor* ids = ctx.new_tensor_1d(elem_type::i32, 2);
    tensor* r = ssm_scan(ctx, s, x, dt, A2, B, C, ids);
    check_result(r, f32, {4 * 6 * 5 * 2 + 16 * 4 * 6 * 2, 1, 1, 1}, op_kind::ssm_scan, s, x, dt);
    CHECK(r->src[3] == A2);
    CHECK(r->src[4] == B);
    CHECK(r->src[5] == C);
    CHECK(r->src[6] == ids);
    CHECK(ssm_scan(ctx, s, x, dt, A1, B, C, ids)->src[3] == A1); // Mamba-1's A per state
    const auto scan_error = [&](tensor* s_, tensor* x_, tensor* dt_, tensor* A_, tensor* B_, tensor* C_, tensor* ids_) {
        CHECK_OP_ERROR("ssm_scan", operands({s_, x_, dt_, A_, B_, C_, ids_}), ssm_scan(ctx, s_, x_, dt_, A_, B_, C_, ids_));
    };
    scan_error(s, x, dt, ctx.new_tensor_2d(f32, 8, 6), B, C, ids);               // A neither per state nor per head
    scan_error(s, x, dt, ctx.new_tensor_2d(f32, 1, 5), B, C, ids);               // A for other heads
    scan_error(ctx.new_tensor_4d(f32, 16, 3, 6, 3), x, dt, A2, B, C, ids);       // s's head_dim
    scan_error(s, x, ctx.new_tensor_3d(f32, 6, 4, 2), A2, B, C, ids);            // dt's tokens
    scan_error(s, x, dt, A2, ctx.new_tensor_4d(f32, 16, 4, 5, 2), C, ids);       // B and C apart
    tensor* B4 = ctx.new_tensor_4d(f32, 16, 4, 5, 2);
    tensor* C4 = ctx.new_tensor_4d(f32, 16, 4, 5, 2);
    scan_error(s, x, dt, A2, B4, C4, ids);                                       // 6 heads in 4 groups
    scan_error(s, x, dt, A2, B, C, ctx.new_tensor_1d(elem_type::i32, 3));        // ids for 3 sequences
    scan_error(s, x, dt, A2, B, C, ctx.new_tensor_1d(f32, 2));                   // f32 ids
    scan_error(ctx.new_tensor_4d(elem_type::f16, 16, 4, 6, 3), x, dt, A2, B, C, ids);
    tensor* xt = transpose(ctx, ctx.new_tensor_4d(f32, 6, 4, 5, 2));             // x's dims 0 and 1 not packed
    scan_error(s, xt, dt, A2, B, C, ids);
    CHECK_NULL_ERROR("ssm_scan", ssm_scan(ctx, s, x, dt, A2, B, nullptr, ids));
}

TEST_CASE("gated_linear_attn, rwkv_wkv6 and rwkv_wkv7 shapes and errors", "[ops][recurrent]") {
    context ctx({.no_alloc = true});
    constexpr elem_type f32 = elem_type::f32;
    // S 4, H 3, T 6 tokens of 2 sequences
    const auto tok = [&] { return ctx.new_tensor_3d(f32, 4, 3, 6); };
    tensor* state = ctx.new_tensor_2d(f32, 4 * 4 * 3, 2);
    tensor *k = tok(), *v = tok(), *q = tok(), *g = tok();
    tensor* r = gated_linear_attn(ctx, k, v, q, g, state, 0.5f);
    check_result(r, f32, {12, 6 + 4 * 2, 1, 1}, op_kind::gated_linear_attn, k, v, q);
    CHECK(r->src[3] == g);
    CHECK(r->src[4] == state);
    CHECK(r->param<float>(0) == 0.5f);
    tensor* tf = ctx.new_tensor_2d(f32, 4, 3);
    tensor* w6 = rwkv_wkv6(ctx, k, v, q, tf, g, state);
    check_result(w6, f32, {12, 14, 1, 1}, op_kind::rwkv_wkv6, k, v, q);
    CHECK(w6->src[5] == state);
    tensor* w7 = rwkv_wkv7(ctx, q, g, k, v, tok(), tok(), state);
    check_result(w7, f32, {12, 14, 1, 1}, op_kind::rwkv_wkv7, q, g, k);
    CHECK(w7->src[6] == state);

    tensor* bad_v = ctx.new_tensor_3d(f32, 4, 3, 5);
    CHECK_OP_ERROR("gated_linear_attn", operands({k, bad_v, q, g, state}), gated_linear_attn(ctx, k, bad_v, q, g, state, 1.0f));
    tensor* three_seqs = ctx.new_tensor_2d(f32, 4 * 4 * 3, 4); // 6 tokens do not split into 4 sequences
    CHECK_OP_ERROR("gated_linear_attn", operands({k, v, q, g, three_seqs}), gated_linear_attn(ctx, k, v, q, g, three_seqs, 1.0f));
    tensor* small_state = ctx.new_tensor_2d(f32, 4 * 4 * 2, 2);
    CHECK_OP_ERROR("rwkv_wkv6", operands({k, v, q, tf, g, small_state}), rwkv_wkv6(ctx, k, v, q, tf, g, small_state));
    tensor* bad_tf = ctx.new_tensor_2d(f32, 4, 2);
    CHECK_OP_ERROR("rwkv_wkv6", operands({k, v, q, bad_tf, g, state}), rwkv_wkv6(ctx, k, v, q, bad_tf, g, state));
    tensor* kh = ctx.new_tensor_3d(elem_type::f16, 4, 3, 6);
    CHECK_OP_ERROR("rwkv_wkv7", operands({q, g, kh, v, k, k, state}), rwkv_wkv7(ctx, q, g, kh, v, k, k, state));
    tensor* kt = transpose(ctx, ctx.new_tensor_3d(f32, 3, 4, 6)); // [4, 3, 6], not contiguous
    CHECK_OP_ERROR("rwkv_wkv7", operands({q, g, kt, v, k, k, state}), rwkv_wkv7(ctx, q, g, kt, v, k, k, state));
    CHECK_OP_ERROR("gated_linear_attn", operands({k, v, q, g, state}),
                   gated_linear_attn(ctx, k, v, q, g, state, std::numeric_limits<float>::infinity()));
    CHECK_NULL_ERROR("gated_linear_attn", gated_linear_attn(ctx, k, v, nullptr, g, state, 1.0f));
    CHECK_NULL_ERROR("rwkv_wkv6", rwkv_wkv6(ctx, k, v, q, tf, g, nullptr));
    CHECK_NULL_ERROR("rwkv_wkv7", rwkv_wkv7(ctx, q, g, k, v, nullptr, k, state));
}

TEST_CASE("timestep_embedding and out_prod", "[ops][misc]") {
    context ctx({.no_alloc = true});
    tensor* t = ctx.new_tensor_1d(elem_type::f32, 6);
    tensor* e = timestep_embedding(ctx, t, 7, 100);
    check_result(e, elem_type::f32, {7, 6, 1, 1}, op_kind::timestep_embedding, t);
    CHECK(e->param<std::int32_t>(0) == 7); // ggml's slots: dim, max_period
    CHECK(e->param<std::int32_t>(1) == 100);
    CHECK(timestep_embedding(ctx, t, 8)->param<std::int32_t>(1) == 10000);
    CHECK_OP_ERROR("timestep_embedding", operands({t}), timestep_embedding(ctx, t, 0));
    CHECK_OP_ERROR("timestep_embedding", operands({t}), timestep_embedding(ctx, t, 8, 0));
    tensor* t2 = ctx.new_tensor_2d(elem_type::f32, 6, 2);
    tensor* th = ctx.new_tensor_1d(elem_type::f16, 6);
    CHECK_OP_ERROR("timestep_embedding", operands({t2}), timestep_embedding(ctx, t2, 8));
    CHECK_OP_ERROR("timestep_embedding", operands({th}), timestep_embedding(ctx, th, 8));
    CHECK_NULL_ERROR("timestep_embedding", timestep_embedding(ctx, nullptr, 8));

    tensor* a = ctx.new_tensor_4d(elem_type::f32, 4, 5, 2, 1);
    tensor* b = ctx.new_tensor_4d(elem_type::f32, 3, 5, 4, 3);
    check_result(out_prod(ctx, a, b), elem_type::f32, {4, 3, 4, 3}, op_kind::out_prod, a, b);
    tensor* q = ctx.new_tensor_2d(elem_type::q4_K, 256, 5);
    check_result(out_prod(ctx, q, b), elem_type::f32, {256, 3, 4, 3}, op_kind::out_prod, q, b);
    for (const elem_type bad : {elem_type::f16, elem_type::bf16, elem_type::i32}) {
        tensor* x = ctx.new_tensor_2d(bad, 4, 5);
        CHECK_OP_ERROR("out_prod", operands({x, b}), out_prod(ctx, x, b)); // ggml's CPU has no f16 a
        CHECK_OP_ERROR("out_prod", operands({a, x}), out_prod(ctx, a, x));
    }
    tensor* k8 = ctx.new_tensor_2d(elem_type::q8_K, 256, 5);
    CHECK_OP_ERROR("out_prod", operands({k8, b}), out_prod(ctx, k8, b));
    tensor* at = transpose(ctx, ctx.new_tensor_2d(elem_type::f32, 5, 4));
    CHECK_OP_ERROR("out_prod", operands({at, b}), out_prod(ctx, at, b));
    tensor* b6 = ctx.new_tensor_2d(elem_type::f32, 3, 6);
    CHECK_OP_ERROR("out_prod", operands({a, b6}), out_prod(ctx, a, b6)); // dimension 1 differs
    tensor* b3 = ctx.new_tensor_3d(elem_type::f32, 3, 5, 3);
    CHECK_OP_ERROR("out_prod", operands({a, b3}), out_prod(ctx, a, b3)); // 2 does not divide 3
    CHECK_NULL_ERROR("out_prod", out_prod(ctx, nullptr, b));
    CHECK_NULL_ERROR("out_prod", out_prod(ctx, a, nullptr));
}

TEST_CASE("count_equal and acc", "[ops][misc]") {
    context ctx({.no_alloc = true});
    tensor* i = ctx.new_tensor_3d(elem_type::i32, 5, 4, 3);
    tensor* j = ctx.new_tensor_3d(elem_type::i32, 5, 4, 3);
    check_result(count_equal(ctx, i, j), elem_type::i64, {1, 1, 1, 1}, op_kind::count_equal, i, j);
    tensor* f = ctx.new_tensor_3d(elem_type::f32, 5, 4, 3);
    tensor* j2 = ctx.new_tensor_3d(elem_type::i32, 5, 4, 2);
    CHECK_OP_ERROR("count_equal", operands({f, j}), count_equal(ctx, f, j));
    CHECK_OP_ERROR("count_equal", operands({i, j2}), count_equal(ctx, i, j2));
    CHECK_NULL_ERROR("count_equal", count_equal(ctx, i, nullptr));

    tensor* a = ctx.new_tensor_3d(elem_type::f32, 8, 6, 3); // 576 bytes
    tensor* b = ctx.new_tensor_2d(elem_type::f32, 3, 2);
    tensor* r = acc(ctx, a, b, 32, 192, 576, 36);
    check_result(r, elem_type::f32, {8, 6, 3, 1}, op_kind::acc, a, b);
    const std::int32_t want[] = {32, 192, 576, 36, 0}; // ggml's slots: nb1, nb2, nb3, offset, inplace
    for (std::size_t k = 0; k < 5; ++k) CHECK(r->param<std::int32_t>(k) == want[k]);
    CHECK_OP_ERROR("acc", operands({a, b}), acc(ctx, a, b, 32, 192, 576, 2));    // offset not a multiple of 4
    CHECK_OP_ERROR("acc", operands({a, b}), acc(ctx, a, b, 8, 192, 576, 0));     // rows of 12 bytes every 8: overlap
    CHECK_OP_ERROR("acc", operands({a, b}), acc(ctx, a, b, 32, 192, 576, 560));  // past a's end
    CHECK_OP_ERROR("acc", operands({a, b}), acc(ctx, a, b, std::size_t{1} << 33, 0, 0, 0));
    tensor* at = transpose(ctx, ctx.new_tensor_2d(elem_type::f32, 6, 8));
    CHECK_OP_ERROR("acc", operands({at, b}), acc(ctx, at, b, 32, 192, 576, 0)); // a not contiguous
    tensor* h = ctx.new_tensor_2d(elem_type::f16, 3, 2);
    CHECK_OP_ERROR("acc", operands({a, h}), acc(ctx, a, h, 32, 192, 576, 0));
    CHECK_NULL_ERROR("acc", acc(ctx, nullptr, b, 32, 192, 576, 0));
}

TEST_CASE("soft_max: mask rules", "[ops][soft_max]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_4d(elem_type::f32, 8, 4, 6, 2);
    tensor* r = soft_max(ctx, a);
    check_result(r, elem_type::f32, {8, 4, 6, 2}, op_kind::soft_max, a);
    CHECK(r->param<float>(0) == 1.0f);
    CHECK(soft_max(ctx, a, nullptr, 0.125f)->param<float>(0) == 0.125f);

    // the mask has a's row length, at least a's rows, and divides a's dims 2 and 3
    for (const auto& [t, mne] : {std::pair{elem_type::f32, ne_t{8, 4, 1, 1}}, {elem_type::f16, ne_t{8, 4, 1, 1}},
                                 {elem_type::f32, ne_t{8, 7, 1, 1}}, {elem_type::f32, ne_t{8, 4, 6, 2}},
                                 {elem_type::f16, ne_t{8, 4, 3, 1}}, {elem_type::f32, ne_t{8, 4, 1, 2}}}) {
        tensor* mask = ctx.new_tensor(t, mne);
        check_result(soft_max(ctx, a, mask, 0.5f), elem_type::f32, {8, 4, 6, 2}, op_kind::soft_max, a, mask);
    }

    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (const ne_t mne : {ne_t{7, 4, 1, 1}, ne_t{9, 4, 1, 1}, ne_t{8, 3, 1, 1}, ne_t{8, 4, 4, 1}, ne_t{8, 4, 1, 3},
                           ne_t{8, 4, 12, 2}, ne_t{8, 4, 0, 1}}) {
        tensor* mask = ctx.new_tensor(elem_type::f32, mne);
        CHECK_OP_ERROR("soft_max", operands({a, mask}), soft_max(ctx, a, mask));
    }
    tensor* mi = ctx.new_tensor_2d(elem_type::i32, 8, 4);
    CHECK_OP_ERROR("soft_max", operands({a, mi}), soft_max(ctx, a, mi));
    tensor* mb = ctx.new_tensor_2d(elem_type::bf16, 8, 4);
    CHECK_OP_ERROR("soft_max", operands({a, mb}), soft_max(ctx, a, mb));
    tensor* a32 = ctx.new_tensor_2d(elem_type::f32, 32, 4);
    tensor* mq = ctx.new_tensor_2d(elem_type::q8_0, 32, 4);
    CHECK_OP_ERROR("soft_max", operands({a32, mq}), soft_max(ctx, a32, mq));
    for (const elem_type t : {elem_type::f16, elem_type::bf16, elem_type::i32}) {
        tensor* x = ctx.new_tensor_2d(t, 8, 4);
        CHECK_OP_ERROR("soft_max", operands({x}), soft_max(ctx, x));
    }
    tensor* mask = ctx.new_tensor_2d(elem_type::f32, 8, 4);
    for (const float s : {nan, inf, -inf}) {
        CHECK_OP_ERROR("soft_max", operands({a}), soft_max(ctx, a, nullptr, s));
        CHECK_OP_ERROR("soft_max", operands({a, mask}), soft_max(ctx, a, mask, s));
    }
    CHECK_NULL_ERROR("soft_max", soft_max(ctx, nullptr, mask));
}

TEST_CASE("soft_max_ext: max_bias and sinks", "[ops][soft_max]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_4d(elem_type::f32, 8, 4, 6, 2);
    tensor* mask = ctx.new_tensor_2d(elem_type::f16, 8, 4);
    tensor* r = soft_max_ext(ctx, a, mask, 0.5f, 8.0f);
    check_result(r, elem_type::f32, {8, 4, 6, 2}, op_kind::soft_max, a, mask);
    CHECK(r->param<float>(0) == 0.5f);
    CHECK(r->param<float>(1) == 8.0f);
    CHECK(soft_max(ctx, a)->param<float>(1) == 0.0f);

    // ALiBi needs a mask; max_bias must be finite
    CHECK_OP_ERROR("soft_max", operands({a}), soft_max_ext(ctx, a, nullptr, 1.0f, 8.0f));
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (const float mb : {nan, inf, -inf}) CHECK_OP_ERROR("soft_max", operands({a, mask}), soft_max_ext(ctx, a, mask, 1.0f, mb));

    // sinks: f32, one per head (a.ne2), with or without a mask
    tensor* sinks = ctx.new_tensor_1d(elem_type::f32, 6);
    CHECK(soft_max_add_sinks(r, sinks) == r);
    CHECK(r->src[2] == sinks);
    tensor* plain = soft_max(ctx, a);
    CHECK(soft_max_add_sinks(plain, sinks)->src[2] == sinks);
    CHECK_OP_ERROR("soft_max_add_sinks", operands({r}), soft_max_add_sinks(r, sinks)); // set already
    for (tensor* bad : {ctx.new_tensor_1d(elem_type::f32, 5), ctx.new_tensor_1d(elem_type::f16, 6),
                        ctx.new_tensor_2d(elem_type::f32, 6, 2), ctx.new_tensor_1d(elem_type::i32, 6)}) {
        tensor* s = soft_max(ctx, a, mask);
        CHECK_OP_ERROR("soft_max", operands({a, mask, bad}), soft_max_add_sinks(s, bad));
        CHECK(s->src[2] == nullptr); // a refused sink leaves the node as it was
    }
    tensor* other = rms_norm(ctx, a);
    CHECK_OP_ERROR("soft_max_add_sinks", operands({other}), soft_max_add_sinks(other, sinks));
    CHECK_NULL_ERROR("soft_max_add_sinks", soft_max_add_sinks(nullptr, sinks));
    CHECK_NULL_ERROR("soft_max_add_sinks", soft_max_add_sinks(plain, nullptr));
}

TEST_CASE("flash_attn_ext: shapes, types, mask, sinks and parameters", "[ops][flash_attn_ext]") {
    context ctx({.no_alloc = true});
    const auto t = [&](elem_type type, std::int64_t n0, std::int64_t n1, std::int64_t n2, std::int64_t n3 = 1) {
        return ctx.new_tensor_4d(type, n0, n1, n2, n3);
    };
    tensor* q = t(elem_type::f32, 64, 3, 8, 2);
    tensor* k = t(elem_type::f16, 64, 10, 2, 2);
    tensor* v = t(elem_type::q4_0, 96, 10, 2, 2);
    tensor* mask = t(elem_type::f16, 10, 4, 1, 1);
    tensor* r = flash_attn_ext(ctx, q, k, v, mask, 0.125f, 8.0f, 30.0f);
    check_result(r, elem_type::f32, {96, 8, 3, 2}, op_kind::flash_attn_ext, q, k, v); // heads before queries
    CHECK(r->src[3] == mask);
    CHECK(r->param<float>(0) == 0.125f);
    CHECK(r->param<float>(1) == 8.0f);
    CHECK(r->param<float>(2) == 30.0f);
    CHECK(flash_attn_ext(ctx, q, k, k, nullptr, 1.0f)->ne == ne_t{64, 8, 3, 2});
    // q, k, v permuted in dims 1..3 (rows contiguous) are fine
    CHECK(flash_attn_ext(ctx, permute(ctx, t(elem_type::f32, 64, 8, 3, 2), 0, 2, 1, 3), k, k, nullptr, 1.0f)->ne ==
          ne_t{64, 8, 3, 2});

    // types and layouts
    tensor* q16 = t(elem_type::f16, 64, 3, 8, 2);
    CHECK_OP_ERROR("flash_attn_ext", operands({q16, k, v}), flash_attn_ext(ctx, q16, k, v, nullptr, 1.0f));
    tensor* ki = t(elem_type::i32, 64, 10, 2, 2);
    CHECK_OP_ERROR("flash_attn_ext", operands({q, ki, v}), flash_attn_ext(ctx, q, ki, v, nullptr, 1.0f));
    tensor* kt = transpose(ctx, t(elem_type::f16, 10, 64, 2, 2));
    CHECK_OP_ERROR("flash_attn_ext", operands({q, kt, v}), flash_attn_ext(ctx, q, kt, v, nullptr, 1.0f));
    tensor* qt = transpose(ctx, t(elem_type::f32, 3, 64, 8, 2));
    CHECK_OP_ERROR("flash_attn_ext", operands({qt, k, v}), flash_attn_ext(ctx, qt, k, v, nullptr, 1.0f));

    // shapes: head size, positions, heads (GQA), dim 3
    for (tensor* bad_k : {t(elem_type::f16, 32, 10, 2, 2), t(elem_type::f16, 64, 10, 3, 2), t(elem_type::f16, 64, 10, 2, 1)})
        CHECK_OP_ERROR("flash_attn_ext", operands({q, bad_k, v}), flash_attn_ext(ctx, q, bad_k, v, nullptr, 1.0f));
    for (tensor* bad_v : {t(elem_type::f16, 64, 9, 2, 2), t(elem_type::f16, 64, 10, 1, 2), t(elem_type::f16, 64, 10, 2, 1)})
        CHECK_OP_ERROR("flash_attn_ext", operands({q, k, bad_v}), flash_attn_ext(ctx, q, k, bad_v, nullptr, 1.0f));

    // the mask: f16, contiguous, n_kv columns, at least n_q rows, dividing heads and dim 3
    for (tensor* bad : {t(elem_type::f32, 10, 4, 1, 1), t(elem_type::f16, 11, 4, 1, 1), t(elem_type::f16, 10, 2, 1, 1),
                        t(elem_type::f16, 10, 3, 3, 1), t(elem_type::f16, 10, 3, 1, 3),
                        transpose(ctx, t(elem_type::f16, 4, 10, 1, 1))})
        CHECK_OP_ERROR("flash_attn_ext", operands({q, k, v, bad}), flash_attn_ext(ctx, q, k, v, bad, 1.0f));
    CHECK(flash_attn_ext(ctx, q, k, v, t(elem_type::f16, 10, 3, 8, 2), 1.0f)->src[3] != nullptr);

    // parameters: finite; ALiBi needs a mask
    CHECK_OP_ERROR("flash_attn_ext", operands({q, k, v}), flash_attn_ext(ctx, q, k, v, nullptr, 1.0f, 8.0f));
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (const float x : {nan, inf}) {
        CHECK_OP_ERROR("flash_attn_ext", operands({q, k, v}), flash_attn_ext(ctx, q, k, v, nullptr, x));
        CHECK_OP_ERROR("flash_attn_ext", operands({q, k, v, mask}), flash_attn_ext(ctx, q, k, v, mask, 1.0f, x));
        CHECK_OP_ERROR("flash_attn_ext", operands({q, k, v}), flash_attn_ext(ctx, q, k, v, nullptr, 1.0f, 0.0f, x));
    }

    // sinks: f32, one per head (q.ne2), set once, only on a flash_attn_ext
    tensor* sinks = ctx.new_tensor_1d(elem_type::f32, 8);
    CHECK(flash_attn_ext_add_sinks(r, sinks) == r);
    CHECK(r->src[4] == sinks);
    CHECK_OP_ERROR("flash_attn_ext_add_sinks", operands({r}), flash_attn_ext_add_sinks(r, sinks));
    for (tensor* bad : {ctx.new_tensor_1d(elem_type::f32, 2), ctx.new_tensor_1d(elem_type::f16, 8),
                        ctx.new_tensor_2d(elem_type::f32, 8, 2)}) {
        tensor* plain = flash_attn_ext(ctx, q, k, v, nullptr, 1.0f);
        CHECK_OP_ERROR("flash_attn_ext", operands({q, k, v, nullptr, bad}), flash_attn_ext_add_sinks(plain, bad));
        CHECK(plain->src[4] == nullptr); // a refused sink leaves the node as it was
    }
    tensor* other = rms_norm(ctx, q);
    CHECK_OP_ERROR("flash_attn_ext_add_sinks", operands({other}), flash_attn_ext_add_sinks(other, sinks));
    CHECK_NULL_ERROR("flash_attn_ext_add_sinks", flash_attn_ext_add_sinks(nullptr, sinks));
    CHECK_NULL_ERROR("flash_attn_ext", flash_attn_ext(ctx, q, nullptr, v, nullptr, 1.0f));
}

TEST_CASE("rope: positions, n_dims, mode, frequencies", "[ops][rope]") {
    context ctx({.no_alloc = true});
    // a [head_dim, n_head, n_tokens], pos i32 [n_tokens]
    tensor* a = ctx.new_tensor_3d(elem_type::f32, 64, 8, 5);
    tensor* pos = ctx.new_tensor_1d(elem_type::i32, 5);
    tensor* r = rope(ctx, a, pos, 64);
    check_result(r, elem_type::f32, {64, 8, 5, 1}, op_kind::rope, a, pos);
    CHECK(r->param<std::int32_t>(0) == 64);
    CHECK(r->param<std::int32_t>(1) == 0); // normal
    CHECK(r->param<float>(2) == 10000.0f);
    CHECK(r->param<float>(3) == 1.0f);
    tensor* h = ctx.new_tensor_3d(elem_type::f16, 64, 8, 5);
    tensor* rn = rope(ctx, h, pos, 32, rope_mode::neox, 500000.0f, 0.25f);
    check_result(rn, elem_type::f16, {64, 8, 5, 1}, op_kind::rope, h, pos);
    CHECK(rn->param<std::int32_t>(0) == 32);
    CHECK(rn->param<std::int32_t>(1) == 2); // ggml's neox bit
    CHECK(rn->param<float>(2) == 500000.0f);
    CHECK(rn->param<float>(3) == 0.25f);
    tensor* a4 = ctx.new_tensor_4d(elem_type::f32, 16, 2, 5, 3); // ne3 is free
    check_result(rope(ctx, a4, pos, 2), elem_type::f32, {16, 2, 5, 3}, op_kind::rope, a4, pos);

    for (const elem_type t : {elem_type::bf16, elem_type::i32}) {
        tensor* x = ctx.new_tensor_3d(t, 64, 8, 5);
        CHECK_OP_ERROR("rope", operands({x, pos}), rope(ctx, x, pos, 64));
    }
    tensor* q = ctx.new_tensor_3d(elem_type::q8_0, 64, 8, 5);
    CHECK_OP_ERROR("rope", operands({q, pos}), rope(ctx, q, pos, 64));
    tensor* fpos = ctx.new_tensor_1d(elem_type::f32, 5);
    CHECK_OP_ERROR("rope", operands({a, fpos}), rope(ctx, a, fpos, 64));
    tensor* short_pos = ctx.new_tensor_1d(elem_type::i32, 4);
    CHECK_OP_ERROR("rope", operands({a, short_pos}), rope(ctx, a, short_pos, 64));
    tensor* pos2d = ctx.new_tensor_2d(elem_type::i32, 5, 2);
    CHECK_OP_ERROR("rope", operands({a, pos2d}), rope(ctx, a, pos2d, 64));
    for (const int n_dims : {0, -2, 3, 63, 66})
        CHECK_OP_ERROR("rope", operands({a, pos}), rope(ctx, a, pos, n_dims));
    for (const int mode : {1, 3, -1})
        CHECK_OP_ERROR("rope", operands({a, pos}), rope(ctx, a, pos, 64, static_cast<rope_mode>(mode)));
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (const float base : {0.0f, -1.0f, nan, inf})
        CHECK_OP_ERROR("rope", operands({a, pos}), rope(ctx, a, pos, 64, rope_mode::normal, base));
    for (const float fs : {nan, inf})
        CHECK_OP_ERROR("rope", operands({a, pos}), rope(ctx, a, pos, 64, rope_mode::normal, 10000.0f, fs));
    CHECK_NULL_ERROR("rope", rope(ctx, nullptr, pos, 64));
    CHECK_NULL_ERROR("rope", rope(ctx, a, nullptr, 64));
}

TEST_CASE("glu: fused and split forms, functions, swapped, parameters", "[ops][glu]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_3d(elem_type::f32, 10, 3, 2);
    // fused: the result has half of each row (ggml's integer division)
    tensor* r = swiglu(ctx, a);
    check_result(r, elem_type::f32, {5, 3, 2, 1}, op_kind::glu, a);
    CHECK(r->param<std::int32_t>(0) == 2); // ggml's GGML_GLU_OP_SWIGLU
    CHECK(r->param<std::int32_t>(1) == 0);
    CHECK(geglu_quick_swapped(ctx, a)->param<std::int32_t>(0) == 5);
    CHECK(geglu_quick_swapped(ctx, a)->param<std::int32_t>(1) == 1);
    tensor* odd = ctx.new_tensor_2d(elem_type::bf16, 7, 2);
    check_result(reglu(ctx, odd), elem_type::bf16, {3, 2, 1, 1}, op_kind::glu, odd);
    // split: the result has a's shape
    tensor* h = ctx.new_tensor_2d(elem_type::f16, 6, 4);
    tensor* hg = ctx.new_tensor_2d(elem_type::f16, 6, 4);
    check_result(geglu_split(ctx, h, hg), elem_type::f16, {6, 4, 1, 1}, op_kind::glu, h, hg);
    tensor* oai = swiglu_oai(ctx, a, nullptr, 1.702f, 7.0f);
    check_result(oai, elem_type::f32, {5, 3, 2, 1}, op_kind::glu, a);
    CHECK(oai->param<std::int32_t>(0) == 3);
    CHECK(oai->param<float>(2) == 1.702f);
    CHECK(oai->param<float>(3) == 7.0f);
    // rows contiguous, other dims strided: a window of a wider tensor
    tensor* wide = ctx.new_tensor_2d(elem_type::f32, 16, 3);
    tensor* win = view_2d(ctx, wide, 10, 3, wide->nb[1], 0);
    check_result(swiglu(ctx, win), elem_type::f32, {5, 3, 1, 1}, op_kind::glu, win);

    // refused: types, the split form's shape and type, strided rows, the function,
    // swapped on the split form, swiglu_oai's parameters
    for (const elem_type t : {elem_type::i32, elem_type::q8_0}) {
        tensor* x = ctx.new_tensor_2d(t, 64, 2);
        CHECK_OP_ERROR("glu", operands({x}), swiglu(ctx, x));
    }
    tensor* a2 = ctx.new_tensor_3d(elem_type::f32, 10, 3, 1);
    CHECK_OP_ERROR("glu", operands({a, a2}), swiglu_split(ctx, a, a2));
    tensor* ah = ctx.new_tensor_3d(elem_type::f16, 10, 3, 2);
    CHECK_OP_ERROR("glu", operands({a, ah}), reglu_split(ctx, a, ah));
    tensor* t = transpose(ctx, ctx.new_tensor_2d(elem_type::f32, 3, 10));
    CHECK_OP_ERROR("glu", operands({t}), swiglu(ctx, t));
    CHECK_OP_ERROR("glu", operands({a2, t}), swiglu_split(ctx, a2, t));
    for (const int fn : {-1, 6, 100})
        CHECK_OP_ERROR("glu", operands({a}), glu(ctx, a, static_cast<glu_op>(fn)));
    tensor s = *swiglu_split(ctx, h, hg);
    s.set_param(1, std::int32_t{1});
    CHECK(why_undefined(s) == "the split form has no halves to swap");
    tensor f = *swiglu(ctx, a);
    f.set_param(1, std::int32_t{2});
    CHECK(why_undefined(f) == "swapped must be 0 or 1");
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (const float x : {nan, inf}) {
        CHECK_OP_ERROR("glu", operands({a}), swiglu_oai(ctx, a, nullptr, x, 7.0f));
        CHECK_OP_ERROR("glu", operands({a}), swiglu_oai(ctx, a, nullptr, 1.702f, x));
    }
    CHECK_NULL_ERROR("glu", swiglu(ctx, nullptr));
    CHECK_NULL_ERROR("glu", swiglu_split(ctx, a, nullptr));
    CHECK_NULL_ERROR("glu", swiglu_split(ctx, nullptr, a));
}

TEST_CASE("rope_ext and rope_multi: frequency factors, YaRN, sections", "[ops][rope]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_3d(elem_type::f32, 64, 8, 5);
    tensor* pos = ctx.new_tensor_1d(elem_type::i32, 5);
    tensor* ff = ctx.new_tensor_1d(elem_type::f32, 16);
    tensor* r = rope_ext(ctx, a, pos, ff, 32, rope_mode::neox, 8192, 500000.0f, 0.125f, 1.0f, 1.0f, 32.0f, 1.0f);
    check_result(r, elem_type::f32, {64, 8, 5, 1}, op_kind::rope, a, pos, ff);
    // the slots (rope_fn::slot)
    CHECK(r->param<std::int32_t>(0) == 32);
    CHECK(r->param<std::int32_t>(1) == 2);
    CHECK(r->param<float>(2) == 500000.0f);
    CHECK(r->param<float>(3) == 0.125f);
    CHECK(r->param<std::int32_t>(4) == 8192);
    CHECK(r->param<float>(5) == 1.0f);
    CHECK(r->param<float>(6) == 1.0f);
    CHECK(r->param<float>(7) == 32.0f);
    CHECK(r->param<float>(8) == 1.0f);
    CHECK(rope(ctx, a, pos, 64)->param<float>(6) == 1.0f); // attn_factor 1 by default

    // frequency factors: f32 vectors of at least n_dims / 2 values
    for (tensor* bad : {ctx.new_tensor_1d(elem_type::f32, 15), ctx.new_tensor_1d(elem_type::f16, 16),
                        ctx.new_tensor_2d(elem_type::f32, 16, 2), ctx.new_tensor_1d(elem_type::i32, 16)})
        CHECK_OP_ERROR("rope", operands({a, pos, bad}),
                       rope_ext(ctx, a, pos, bad, 32, rope_mode::neox, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f));
    // YaRN's parameters
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (const float x : {nan, inf}) {
        CHECK_OP_ERROR("rope", operands({a, pos}),
                       rope_ext(ctx, a, pos, nullptr, 32, rope_mode::neox, 0, 10000.0f, 1.0f, x, 1.0f, 0.0f, 0.0f));
        CHECK_OP_ERROR("rope", operands({a, pos}),
                       rope_ext(ctx, a, pos, nullptr, 32, rope_mode::neox, 0, 10000.0f, 1.0f, 0.0f, x, 0.0f, 0.0f));
        CHECK_OP_ERROR("rope", operands({a, pos}),
                       rope_ext(ctx, a, pos, nullptr, 32, rope_mode::neox, 0, 10000.0f, 1.0f, 0.0f, 1.0f, x, 0.0f));
    }
    CHECK_OP_ERROR("rope", operands({a, pos}),
                   rope_ext(ctx, a, pos, nullptr, 32, rope_mode::neox, -1, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f));
    CHECK_OP_ERROR("rope", operands({a, pos}), // ext_factor != 0 takes log(1 / freq_scale)
                   rope_ext(ctx, a, pos, nullptr, 32, rope_mode::neox, 4096, 10000.0f, 0.0f, 1.0f, 1.0f, 32.0f, 1.0f));

    // rope_multi: 4 positions per token, valid sections
    tensor* pos4 = ctx.new_tensor_1d(elem_type::i32, 20);
    const std::array<int, 4> sec{8, 12, 12, 0};
    for (const rope_mode m : {rope_mode::mrope, rope_mode::imrope}) {
        tensor* rm = rope_multi(ctx, a, pos4, nullptr, 64, sec, m, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
        check_result(rm, elem_type::f32, {64, 8, 5, 1}, op_kind::rope, a, pos4);
        CHECK(rm->param<std::int32_t>(9) == 8);
        CHECK(rm->param<std::int32_t>(10) == 12);
        CHECK(rm->param<std::int32_t>(11) == 12);
        CHECK(rm->param<std::int32_t>(12) == 0);
    }
    CHECK(rope_multi(ctx, a, pos4, nullptr, 32, sec, rope_mode::vision, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f) !=
          nullptr);
    auto multi = [&](tensor* p, int n_dims, std::array<int, 4> s, rope_mode m, tensor* f = nullptr) {
        return rope_multi(ctx, a, p, f, n_dims, s, m, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
    };
    CHECK_OP_ERROR("rope", operands({a, pos}), multi(pos, 64, sec, rope_mode::mrope));      // 1 position per token
    CHECK_OP_ERROR("rope", operands({a, pos4}), rope(ctx, a, pos4, 64, rope_mode::neox));    // 4 without M-RoPE
    CHECK_OP_ERROR("rope", operands({a, pos4}), multi(pos4, 64, {0, 0, 0, 4}, rope_mode::mrope)); // t, h, w empty
    CHECK_OP_ERROR("rope", operands({a, pos4}), multi(pos4, 64, {-1, 8, 8, 0}, rope_mode::mrope));
    CHECK_OP_ERROR("rope", operands({a, pos4}), multi(pos4, 64, {32, 32, 8, 0}, rope_mode::imrope)); // sum > ne0
    CHECK_OP_ERROR("rope", operands({a, pos4}), multi(pos4, 64, sec, rope_mode::vision));  // n_dims != ne0 / 2
    CHECK_OP_ERROR("rope", operands({a, pos4}), multi(pos4, 64, sec, static_cast<rope_mode>(16)));
    tensor* ff16 = ctx.new_tensor_1d(elem_type::f32, 16);
    CHECK_OP_ERROR("rope", operands({a, pos4, ff16}), multi(pos4, 32, sec, rope_mode::vision, ff16)); // needs 32
}

// ---------------------------------------------------------------------------------------
// views

TEST_CASE("view_1d .. view_4d: shape, strides, offsets, data", "[ops][view]") {
    context ctx; // with host data: views point into their source's data
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 10, 6); // nb {4, 40, 240, 240}, 240 bytes
    auto* base = static_cast<std::byte*>(a->data);

    tensor* v1 = view_1d(ctx, a, 5, 8);
    CHECK(v1->op == op_kind::view);
    CHECK(v1->type == elem_type::f32);
    CHECK(v1->ne == ne_t{5, 1, 1, 1});
    CHECK(v1->nb == nb_t{4, 20, 20, 20});
    CHECK(v1->view_src == a);
    CHECK(v1->view_offs == 8);
    CHECK(v1->data == base + 8);
    CHECK(v1->src[0] == a);
    CHECK(view_1d(ctx, a, 60, 0)->nbytes() == 240); // exactly the whole source

    // rows 4 values long taken from every other row, starting at value 1
    tensor* v2 = view_2d(ctx, a, 4, 3, 80, 4);
    CHECK(v2->ne == ne_t{4, 3, 1, 1});
    CHECK(v2->nb == nb_t{4, 80, 240, 240});
    CHECK(v2->view_offs == 4);
    CHECK(v2->data == base + 4);
    CHECK_FALSE(v2->is_contiguous());

    tensor* b = ctx.new_tensor_3d(elem_type::f32, 4, 3, 2); // nb {4, 16, 48, 96}
    tensor* v3 = view_3d(ctx, b, 2, 3, 2, 16, 48, 8);
    CHECK(v3->ne == ne_t{2, 3, 2, 1});
    CHECK(v3->nb == nb_t{4, 16, 48, 96});
    CHECK(v3->view_offs == 8);

    tensor* c = ctx.new_tensor_4d(elem_type::f32, 2, 3, 4, 5); // nb {4, 8, 24, 96}
    tensor* v4 = view_4d(ctx, c, 2, 3, 2, 5, 8, 48, 96, 24);
    CHECK(v4->ne == ne_t{2, 3, 2, 5});
    CHECK(v4->nb == nb_t{4, 8, 48, 96});
    CHECK(v4->view_offs == 24);
    CHECK(v4->data == static_cast<std::byte*>(c->data) + 24);

    // a view of a view: offsets add up, view_src is the tensor that owns the memory
    tensor* outer = view_1d(ctx, a, 20, 40);
    tensor* inner = view_1d(ctx, outer, 5, 8);
    CHECK(inner->view_src == a);
    CHECK(inner->view_offs == 48);
    CHECK(inner->data == base + 48);
    CHECK(inner->src[0] == outer);

    // general view of a quantized tensor: the second block of each row
    tensor* q = ctx.new_tensor_2d(elem_type::q8_0, 64, 4); // rows of 68 bytes
    tensor* vq = view(ctx, q, {32, 4, 1, 1}, {34, 68, 272, 272}, 34);
    CHECK(vq->type == elem_type::q8_0);
    CHECK(vq->ne == ne_t{32, 4, 1, 1});
    CHECK(vq->view_offs == 34);
}

TEST_CASE("views: invalid extents and out-of-bounds views", "[ops][view]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 10, 6); // 240 bytes
    CHECK_OP_ERROR("view", operands({a}), view_1d(ctx, a, 60, 4));        // 244 > 240
    CHECK_OP_ERROR("view", operands({a}), view_1d(ctx, a, 61, 0));
    CHECK_OP_ERROR("view", operands({a}), view_1d(ctx, a, 1, 240));       // one past the end
    CHECK_OP_ERROR("view", operands({a}), view_2d(ctx, a, 10, 6, 44, 0)); // 40 + 5 * 44 = 260
    CHECK_OP_ERROR("view", operands({a}), view_3d(ctx, a, 10, 3, 3, 40, 80, 0));
    CHECK_OP_ERROR("view", operands({a}), view_4d(ctx, a, 10, 3, 1, 3, 40, 120, 80, 4));
    CHECK_OP_ERROR("view", operands({a}), view(ctx, a, {-1, 1, 1, 1}, {4, 4, 4, 4}, 0));
    CHECK_OP_ERROR("view", operands({a}), view(ctx, a, {4, 1, 1, -2}, {4, 16, 16, 16}, 0));
    // offsets and extents so large that a byte count wraps around must still be refused
    const auto huge = std::numeric_limits<std::size_t>::max();
    CHECK_OP_ERROR("view", operands({a}), view_1d(ctx, a, 4, huge - 7));
    CHECK_OP_ERROR("view", operands({a}), view_1d(ctx, a, std::int64_t{1} << 62, 0));
    CHECK_OP_ERROR("view", operands({a}), view_2d(ctx, a, 1, std::int64_t{1} << 62, 4, 0));
    // a view of a view is bounded by the inner view, not by the source
    tensor* part = view_1d(ctx, a, 20, 40);
    CHECK_OP_ERROR("view", operands({part}), view_1d(ctx, part, 20, 4));
    // quantized rows are whole blocks
    tensor* q = ctx.new_tensor_2d(elem_type::q4_0, 64, 2);
    CHECK_OP_ERROR("view", operands({q}), view_1d(ctx, q, 16, 0));
    CHECK_NULL_ERROR("view", view_1d(ctx, nullptr, 4, 0));
    CHECK_NULL_ERROR("view", view_2d(ctx, nullptr, 4, 1, 16, 0));
    CHECK_NULL_ERROR("view", view_3d(ctx, nullptr, 4, 1, 1, 16, 16, 0));
    CHECK_NULL_ERROR("view", view_4d(ctx, nullptr, 4, 1, 1, 1, 16, 16, 16, 0));
    CHECK_NULL_ERROR("view", view(ctx, nullptr, {4, 1, 1, 1}, {4, 16, 16, 16}, 0));
}

TEST_CASE("reshape", "[ops][view]") {
    context ctx;
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 4, 6);
    tensor* r = reshape(ctx, a, {24});
    CHECK(r->op == op_kind::reshape);
    CHECK(r->ne == ne_t{24, 1, 1, 1});
    CHECK(r->nb == nb_t{4, 96, 96, 96});
    CHECK(r->view_src == a);
    CHECK(r->view_offs == 0);
    CHECK(r->data == a->data);
    CHECK(r->src[0] == a);
    tensor* r3 = reshape(ctx, a, {2, 3, 4});
    CHECK(r3->ne == ne_t{2, 3, 4, 1});
    CHECK(r3->nb == nb_t{4, 8, 24, 96});
    // a contiguous view keeps its offset
    tensor* part = view_1d(ctx, a, 12, 48);
    tensor* rp = reshape(ctx, part, {3, 4});
    CHECK(rp->view_src == a);
    CHECK(rp->view_offs == 48);
    CHECK(rp->data == static_cast<std::byte*>(a->data) + 48);
    // quantized: rows of whole blocks, strides in blocks (q4_0 rows of 32 are 18 bytes)
    tensor* q = ctx.new_tensor_2d(elem_type::q4_0, 64, 2);
    tensor* rq = reshape(ctx, q, {32, 4});
    CHECK(rq->ne == ne_t{32, 4, 1, 1});
    CHECK(rq->nb == nb_t{18, 18, 72, 72});
    tensor* like = ctx.new_tensor_2d(elem_type::f16, 6, 4);
    tensor* ra = reshape_as(ctx, a, like);
    CHECK(ra->ne == ne_t{6, 4, 1, 1});
    CHECK(ra->type == elem_type::f32); // the shape of like, not its type

    CHECK_OP_ERROR("reshape", operands({a}), reshape(ctx, a, {5, 5}));
    CHECK_OP_ERROR("reshape", operands({a}), reshape(ctx, a, {25}));
    CHECK_OP_ERROR("reshape", operands({a}), reshape(ctx, a, {}));
    CHECK_OP_ERROR("reshape", operands({a}), reshape(ctx, a, {1, 2, 3, 4, 1}));
    CHECK_OP_ERROR("reshape", operands({a}), reshape(ctx, a, {-4, -6}));
    CHECK_OP_ERROR("reshape", operands({a}), reshape(ctx, a, {-1, 24}));
    // extents whose product overflows int64 must be an error, not undefined behaviour
    CHECK_OP_ERROR("reshape", operands({a}), reshape(ctx, a, {std::int64_t{1} << 32, std::int64_t{1} << 32}));
    tensor* t = transpose(ctx, a);
    CHECK_OP_ERROR("reshape", operands({t}), reshape(ctx, t, {24}));
    CHECK_OP_ERROR("reshape", operands({q}), reshape(ctx, q, {16, 8}));
    tensor* like25 = ctx.new_tensor_2d(elem_type::f32, 5, 5);
    CHECK_OP_ERROR("reshape", operands({a, like25}), reshape_as(ctx, a, like25));
    CHECK_NULL_ERROR("reshape", reshape(ctx, nullptr, {4}));
    CHECK_NULL_ERROR("reshape", reshape_as(ctx, a, nullptr));
    CHECK_NULL_ERROR("reshape", reshape_as(ctx, nullptr, a));
}

TEST_CASE("permute and transpose: ggml's axis rule", "[ops][view]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_4d(elem_type::f32, 2, 3, 4, 5); // nb {4, 8, 24, 96}

    // source dim i becomes result dim axes[i]: ne[axes[i]] = a.ne[i], nb[axes[i]] = a.nb[i]
    tensor* p = permute(ctx, a, 1, 2, 0, 3);
    CHECK(p->op == op_kind::permute);
    CHECK(p->ne == ne_t{4, 2, 3, 5});
    CHECK(p->nb == nb_t{24, 4, 8, 96});
    CHECK(p->view_src == a);
    CHECK(p->src[0] == a);
    CHECK(p->param<std::int32_t>(0) == 1);
    CHECK(p->param<std::int32_t>(1) == 2);
    CHECK(p->param<std::int32_t>(2) == 0);
    CHECK(p->param<std::int32_t>(3) == 3);
    CHECK_FALSE(p->is_contiguous());

    tensor* rev = permute(ctx, a, 3, 2, 1, 0);
    CHECK(rev->ne == ne_t{5, 4, 3, 2});
    CHECK(rev->nb == nb_t{96, 24, 8, 4});

    tensor* id = permute(ctx, a, 0, 1, 2, 3);
    CHECK(id->ne == a->ne);
    CHECK(id->nb == a->nb);
    CHECK(id->is_contiguous());

    // a permute of a permute composes: (1,2,0,3) then (2,0,1,3) is the identity
    tensor* back = permute(ctx, p, 2, 0, 1, 3);
    CHECK(back->ne == a->ne);
    CHECK(back->nb == a->nb);
    CHECK(back->view_src == a);

    // quantized: allowed while dim 0 (the blocks) stays first
    tensor* q = ctx.new_tensor_3d(elem_type::q8_0, 32, 3, 2); // nb {34, 34, 102, 204}
    tensor* pq = permute(ctx, q, 0, 2, 1, 3);
    CHECK(pq->ne == ne_t{32, 2, 3, 1});
    CHECK(pq->nb == nb_t{34, 102, 34, 204});

    // transpose swaps dims 0 and 1
    tensor* m = ctx.new_tensor_2d(elem_type::f32, 4, 6); // nb {4, 16, 96, 96}
    tensor* t = transpose(ctx, m);
    CHECK(t->op == op_kind::transpose);
    CHECK(t->ne == ne_t{6, 4, 1, 1});
    CHECK(t->nb == nb_t{16, 4, 96, 96});
    CHECK(t->view_src == m);
    CHECK(t->src[0] == m);
    CHECK(t->is_transposed());
    CHECK_FALSE(t->is_contiguous());
    tensor* tt = transpose(ctx, t);
    CHECK(tt->ne == m->ne);
    CHECK(tt->nb == m->nb);
    CHECK(tt->is_contiguous());

    for (auto [x0, x1, x2, x3] : {std::array{0, 0, 1, 2}, std::array{0, 1, 2, 4}, std::array{-1, 0, 1, 2},
                                  std::array{3, 3, 3, 3}, std::array{0, 1, 2, 2}})
        CHECK_OP_ERROR("permute", operands({a}), permute(ctx, a, x0, x1, x2, x3));
    CHECK_OP_ERROR("permute", operands({q}), permute(ctx, q, 1, 0, 2, 3));
    CHECK_OP_ERROR("permute", operands({q}), permute(ctx, q, 2, 1, 0, 3));
    tensor* q4 = ctx.new_tensor_2d(elem_type::q4_0, 32, 4);
    CHECK_OP_ERROR("transpose", operands({q4}), transpose(ctx, q4));
    CHECK_OP_ERROR("transpose", operands({q}), transpose(ctx, q));
    CHECK_NULL_ERROR("permute", permute(ctx, nullptr, 0, 1, 2, 3));
    CHECK_NULL_ERROR("transpose", transpose(ctx, nullptr));
}

// ---------------------------------------------------------------------------------------
// copies

TEST_CASE("dup and cont", "[ops][copy]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_2d(elem_type::f16, 4, 6);
    tensor* d = dup(ctx, a);
    check_result(d, elem_type::f16, {4, 6, 1, 1}, op_kind::dup, a);
    CHECK(d->nb == nb_t{2, 8, 48, 48});
    tensor* t = transpose(ctx, a);
    tensor* c = cont(ctx, t);
    check_result(c, elem_type::f16, {6, 4, 1, 1}, op_kind::cont, t);
    CHECK(c->nb == nb_t{2, 12, 48, 48}); // packed again
    tensor* q = ctx.new_tensor_2d(elem_type::q4_0, 64, 3);
    check_result(dup(ctx, q), elem_type::q4_0, {64, 3, 1, 1}, op_kind::dup, q);
    CHECK_NULL_ERROR("dup", dup(ctx, nullptr));
    CHECK_NULL_ERROR("cont", cont(ctx, nullptr));
}

TEST_CASE("cpy: converts and aliases its destination", "[ops][copy]") {
    context ctx; // with data: the result's data is b's
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 4, 6);
    tensor* b = ctx.new_tensor_1d(elem_type::f16, 24);
    tensor* r = cpy(ctx, a, b);
    CHECK(r->op == op_kind::cpy);
    CHECK(r->type == elem_type::f16);
    CHECK(r->ne == b->ne);
    CHECK(r->nb == b->nb);
    CHECK(r->view_src == b);
    CHECK(r->view_offs == 0);
    CHECK(r->data == b->data);
    CHECK(r->src[0] == a);
    CHECK(r->src[1] == b);

    // into a view: the result aliases the view's memory in the owner
    tensor* big = ctx.new_tensor_1d(elem_type::f32, 64);
    tensor* part = view_1d(ctx, big, 24, 16);
    tensor* rv = cpy(ctx, a, part);
    CHECK(rv->view_src == big);
    CHECK(rv->view_offs == 16);
    CHECK(rv->data == static_cast<std::byte*>(big->data) + 16);

    // to and from quantized types, and i32 to i32
    tensor* f = ctx.new_tensor_2d(elem_type::f32, 64, 2);
    tensor* q = ctx.new_tensor_2d(elem_type::q8_0, 64, 2);
    CHECK(cpy(ctx, f, q)->type == elem_type::q8_0);
    CHECK(cpy(ctx, q, f)->type == elem_type::f32);
    tensor* i1 = ctx.new_tensor_1d(elem_type::i32, 6);
    tensor* i2 = ctx.new_tensor_2d(elem_type::i32, 3, 2);
    CHECK(cpy(ctx, i1, i2)->ne == ne_t{3, 2, 1, 1});
    // a non-contiguous f32 source is fine
    CHECK(cpy(ctx, transpose(ctx, a), b)->src[0]->op == op_kind::transpose);

    tensor* b25 = ctx.new_tensor_1d(elem_type::f32, 25);
    CHECK_OP_ERROR("cpy", operands({a, b25}), cpy(ctx, a, b25));
    tensor* bi = ctx.new_tensor_1d(elem_type::i32, 24);
    CHECK_OP_ERROR("cpy", operands({a, bi}), cpy(ctx, a, bi));
    CHECK_OP_ERROR("cpy", operands({bi, b}), cpy(ctx, bi, b));
    // quantized source with gaps between blocks; quantized destination not contiguous
    tensor* qsrc = view(ctx, q, {32, 2, 1, 1}, {68, 68, 136, 136}, 0);
    tensor* f64 = ctx.new_tensor_1d(elem_type::f32, 64);
    CHECK_OP_ERROR("cpy", operands({qsrc, f64}), cpy(ctx, qsrc, f64));
    tensor* q4 = ctx.new_tensor_2d(elem_type::q8_0, 32, 4);
    tensor* qdst = view_2d(ctx, q4, 32, 2, 68, 0); // every other row
    CHECK_FALSE(qdst->is_contiguous());
    tensor* f2 = ctx.new_tensor_2d(elem_type::f32, 32, 2);
    CHECK_OP_ERROR("cpy", operands({f2, qdst}), cpy(ctx, f2, qdst));
    CHECK_NULL_ERROR("cpy", cpy(ctx, nullptr, b));
    CHECK_NULL_ERROR("cpy", cpy(ctx, a, nullptr));
    // i64 copies only to i64
    tensor* l1 = ctx.new_tensor_1d(elem_type::i64, 6);
    CHECK(cpy(ctx, l1, ctx.new_tensor_2d(elem_type::i64, 2, 3))->type == elem_type::i64);
    CHECK_OP_ERROR("cpy", operands({l1, i1}), cpy(ctx, l1, i1));
    CHECK_OP_ERROR("cpy", operands({i1, l1}), cpy(ctx, i1, l1));
    // the lattice i-quants are read, copied as they are, but never converted into (as
    // ggml's CPU, which has no from_float for them); iq4_xs, tq1_0 and tq2_0 are
    tensor* f256 = ctx.new_tensor_2d(elem_type::f32, 256, 2);
    for (const elem_type t : {elem_type::iq3_xxs, elem_type::iq3_s, elem_type::iq2_xxs, elem_type::iq2_xs,
                              elem_type::iq2_s, elem_type::iq1_s, elem_type::iq1_m}) {
        INFO(to_string(t));
        tensor* lq = ctx.new_tensor_2d(t, 256, 2);
        CHECK_OP_ERROR("cpy", operands({f256, lq}), cpy(ctx, f256, lq));
        CHECK(cpy(ctx, lq, f256)->type == elem_type::f32);
        CHECK(cpy(ctx, lq, ctx.new_tensor_2d(t, 256, 2))->type == t);
    }
    for (const elem_type t : {elem_type::iq4_xs, elem_type::tq1_0, elem_type::tq2_0})
        CHECK(cpy(ctx, f256, ctx.new_tensor_2d(t, 256, 2))->type == t);
}

TEST_CASE("set_rows: writes into and aliases its destination", "[ops][set_rows]") {
    context ctx; // with data: the result's data is a's
    // a [E, R, A2, A3] (the destination), b [E, N, A2, A3], idx [N, I2, I3] with I2 | A2, I3 | A3
    for (const elem_type t : {elem_type::f32, elem_type::f16, elem_type::bf16, elem_type::q8_0, elem_type::q4_0})
        for (const elem_type it : {elem_type::i32, elem_type::i64}) {
            tensor* a = ctx.new_tensor_4d(t, 64, 10, 4, 2);
            tensor* b = ctx.new_tensor_4d(elem_type::f32, 64, 3, 4, 2);
            tensor* idx = ctx.new_tensor_3d(it, 3, 2, 1); // broadcast over dims 2 and 3
            tensor* r = set_rows(ctx, a, b, idx);
            REQUIRE(r != nullptr);
            CHECK(r->op == op_kind::set_rows);
            CHECK(r->type == t);
            CHECK(r->ne == ne_t{64, 10, 4, 2});
            CHECK(r->src[0] == b);
            CHECK(r->src[1] == idx);
            CHECK(r->src[2] == a);
            CHECK(r->view_src == a);
            CHECK(r->data == a->data);
            CHECK(r->nb == a->nb);
        }
    tensor* a = ctx.new_tensor_2d(elem_type::f16, 8, 10);
    tensor* b = ctx.new_tensor_2d(elem_type::f32, 8, 3);
    tensor* idx = ctx.new_tensor_1d(elem_type::i32, 3);
    CHECK(set_rows(ctx, a, ctx.new_tensor_2d(elem_type::bf16, 8, 3), idx)->type == elem_type::f16);
    // into a view of a bigger cache: the result aliases the view's memory in the owner
    tensor* cache = ctx.new_tensor_2d(elem_type::f32, 8, 32);
    tensor* window = view_2d(ctx, cache, 8, 10, cache->nb[1], 4 * cache->nb[1]);
    CHECK(set_rows(ctx, window, b, idx)->view_src == cache);

    CHECK_OP_ERROR("set_rows", operands({a, ctx.new_tensor_2d(elem_type::f32, 9, 3), idx}),
                   set_rows(ctx, a, ctx.new_tensor_2d(elem_type::f32, 9, 3), idx)); // row lengths differ
    tensor* b4 = ctx.new_tensor_2d(elem_type::f32, 8, 4);
    CHECK_OP_ERROR("set_rows", operands({a, b4, idx}), set_rows(ctx, a, b4, idx)); // 4 rows, 3 indices
    tensor* fidx = ctx.new_tensor_1d(elem_type::f32, 3);
    CHECK_OP_ERROR("set_rows", operands({a, b, fidx}), set_rows(ctx, a, b, fidx));
    tensor* bq = ctx.new_tensor_2d(elem_type::q8_0, 32, 3);
    tensor* aq = ctx.new_tensor_2d(elem_type::f32, 32, 10);
    CHECK_OP_ERROR("set_rows", operands({aq, bq, idx}), set_rows(ctx, aq, bq, idx)); // quantized rows written
    tensor* ai = ctx.new_tensor_2d(elem_type::i32, 8, 10);
    CHECK_OP_ERROR("set_rows", operands({ai, b, idx}), set_rows(ctx, ai, b, idx)); // an i32 destination
    tensor* alat = ctx.new_tensor_2d(elem_type::iq2_s, 256, 10);
    tensor* b256 = ctx.new_tensor_2d(elem_type::f32, 256, 3);
    CHECK_OP_ERROR("set_rows", operands({alat, b256, idx}), set_rows(ctx, alat, b256, idx)); // f32 does not convert into iq2_s
    CHECK(set_rows(ctx, ctx.new_tensor_2d(elem_type::iq4_xs, 256, 10), b256, idx)->type == elem_type::iq4_xs);
    tensor* a3 = ctx.new_tensor_3d(elem_type::f32, 8, 10, 3);
    tensor* b3 = ctx.new_tensor_3d(elem_type::f32, 8, 3, 3);
    tensor* idx2 = ctx.new_tensor_2d(elem_type::i32, 3, 2); // 2 does not divide 3
    CHECK_OP_ERROR("set_rows", operands({a3, b3, idx2}), set_rows(ctx, a3, b3, idx2));
    CHECK_OP_ERROR("set_rows", operands({a3, b, idx}), set_rows(ctx, a3, b, idx)); // a.ne2 3 != b.ne2 1
    tensor* idx4 = ctx.new_tensor_4d(elem_type::i32, 3, 1, 1, 2);
    CHECK_OP_ERROR("set_rows", operands({a, b, idx4}), set_rows(ctx, a, b, idx4)); // idx.ne3 must be 1
    CHECK_NULL_ERROR("set_rows", set_rows(ctx, nullptr, b, idx));
    CHECK_NULL_ERROR("set_rows", set_rows(ctx, a, nullptr, idx));
    CHECK_NULL_ERROR("set_rows", set_rows(ctx, a, b, nullptr));
}

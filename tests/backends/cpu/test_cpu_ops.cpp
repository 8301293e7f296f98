// CPU backend kernels against the reference oracle (tests/support/ref_oracle.hpp), in the
// manner of ggml's test-backend-ops: every op, every type combination supports_op
// claims, many shapes (sizes 1, odd sizes, all four dimensions), non-contiguous sources
// and destinations, broadcasting, in-place aliasing, the work split across threads, and
// the backend's statuses. Seeds are fixed, so every run checks the same cases.

#include "cpu_test_harness.hpp"

#include <backplane/conformance/catalogue.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

using namespace cpu_test;

namespace {

/// The values of f32 row r (contiguous), as a vector.
std::vector<float> row_values(const tensor* r) {
    std::vector<float> v(static_cast<std::size_t>(r->ne[0]));
    std::memcpy(v.data(), r->data, v.size() * sizeof(float));
    return v;
}

std::string describe(std::string_view op,
                     std::initializer_list<std::pair<const char*, const tensor*>> operands) {
    std::ostringstream s;
    s << op;
    for (auto& [name, t] : operands) {
        if (t == nullptr)
            continue;
        s << ' ' << name << '=' << to_string(t->type) << str(t->ne)
          << (t->is_contiguous() ? "" : "(nc)");
    }
    return s.str();
}

} // namespace

// ---------------------------------------------------------------------------------------
// dup, cont, cpy

TEST_CASE("cpu: dup, cont and cpy convert between every type pair in any layout", "[cpu][copy]") {
    harness h(1001);
    const std::vector<elem_type> types = {f32, f16, bf16, q8_0, q4_0, i32};
    for (elem_type from : types) {
        for (elem_type to : types) {
            if ((from == i32) != (to == i32))
                continue; // the builder's rule: i32 only to i32
            const bool quant = is_quantized(from) || is_quantized(to);
            const auto& shapes = quant ? block_shapes() : plain_shapes();
            // Quantizing: the oracle re-derives the blocks in double; a value on a rounding
            // boundary may land one step apart, so NMSE (ggml's 5e-4) bounds those.
            const tolerance tol = is_quantized(to) && from != to
                                      ? tolerance{.max_nmse = 5e-4}
                                      : tolerance{.max_nmse = 0.0, .exact = true};
            for (std::size_t s = 0; s < shapes.size(); ++s) {
                const extents ne = shapes[s];
                tensor* a = h.input(from, ne, nth_layout(s, from));
                if (from == to) {
                    h.check(dup(h.ctx, a), tol, describe("dup", {{"a", a}}));
                    h.check(cont(h.ctx, a), tol, describe("cont", {{"a", a}}));
                }
                // cpy into a destination of the same shape, or of another shape with the
                // same number of elements, in any layout the destination type allows
                extents dne = ne;
                if (s % 3 == 1)
                    dne = {ne[0] * ne[1], ne[2], ne[3], 1};
                if (s % 3 == 2 && !is_quantized(to))
                    dne = {ne[3], ne[2], ne[1], ne[0]};
                const layout dl = is_quantized(to) ? (s % 2 ? layout::offset : layout::contiguous)
                                                   : nth_layout(s / 2 + 1, to);
                tensor* b = h.input(to, dne, dl);
                h.check(cpy(h.ctx, a, b), tol, describe("cpy", {{"a", a}, {"b", b}}));
            }
        }
    }
    INFO(h.cases << " cases");
    CHECK(h.cases > 300);
}

// ---------------------------------------------------------------------------------------
// add, sub, mul, div

TEST_CASE("cpu: add, sub, mul, div broadcast b over a for every type pair", "[cpu][binary]") {
    harness h(2002);
    using builder = tensor* (*)(context&, tensor*, tensor*);
    const std::pair<const char*, builder> ops[] = {{"add", &backplane::add},
                                                   {"sub", &backplane::sub},
                                                   {"mul", &backplane::mul},
                                                   {"div", &backplane::div}};
    for (auto [name, build] : ops) {
        const bool is_div = std::string_view(name) == "div";
        for (elem_type ta : float_types)
            for (elem_type tb : float_types) {
                const auto& shapes = plain_shapes();
                for (std::size_t s = 0; s < shapes.size(); ++s) {
                    const extents ne = shapes[s];
                    // b: a divisor of a's extent in each dimension (1 and full included)
                    extents nb = ne;
                    if (s % 4 != 0)
                        for (auto& n : nb)
                            n = random_divisor(h.rng, n);
                    if (s % 4 == 3)
                        nb[0] = ne[0]; // row-length b with broadcast rows
                    tensor* a = h.input(ta, ne, nth_layout(s, ta));
                    tensor* b = is_div ? h.input(tb, nb, nth_layout(s + 2, tb), 0.5, 2.0)
                                       : h.input(tb, nb, nth_layout(s + 2, tb));
                    // Each result is one f32 operation rounded once to a's type: exact.
                    h.check(build(h.ctx, a, b), {.max_nmse = 0.0, .exact = true},
                            describe(name, {{"a", a}, {"b", b}}));
                }
            }
    }
    CHECK(h.cases == 4 * 9 * static_cast<int>(plain_shapes().size()));
}

// ---------------------------------------------------------------------------------------
// scale, sqr, sqrt, silu, gelu, relu, neg

TEST_CASE("cpu: unary ops in f32, f16 and bf16", "[cpu][unary]") {
    harness h(3003);
    struct unary_case {
        const char* name;
        double lo, hi;
        double ulps; ///< allowed error in steps of the result type (0: exact); gelu's f32
                     ///< argument u carries a few steps of error into exp(-2u)
    };
    const unary_case cases[] = {
        {"scale", -2, 2, 1}, {"sqr", -2, 2, 0},   {"sqrt", 0, 4, 0},
        {"silu", -8, 8, 4},  {"gelu", -6, 6, 32}, {"relu", -1, 1, 0}, {"neg", -2, 2, 0},
    };
    for (const unary_case& c : cases) {
        const std::string_view name = c.name;
        for (elem_type t : float_types) {
            const auto& shapes = plain_shapes();
            for (std::size_t s = 0; s < shapes.size(); ++s) {
                tensor* a = h.input(t, shapes[s], nth_layout(s, t), c.lo, c.hi);
                tensor* out = nullptr;
                if (name == "scale") {
                    const auto sc = static_cast<float>(bt::uniform01(h.rng) * 4 - 2);
                    const float bias =
                        s % 2 ? static_cast<float>(bt::uniform01(h.rng) - 0.5) : 0.0f;
                    out = scale(h.ctx, a, sc, bias);
                } else if (name == "sqr") {
                    out = sqr(h.ctx, a);
                } else if (name == "sqrt") {
                    out = backplane::sqrt(h.ctx, a);
                } else if (name == "silu") {
                    out = silu(h.ctx, a);
                } else if (name == "gelu") {
                    out = gelu(h.ctx, a);
                } else if (name == "neg") {
                    out = neg(h.ctx, a);
                } else {
                    out = relu(h.ctx, a);
                }
                // f16 / bf16: f32 math then one rounding to the type, at most one step off
                // scale rounds twice (x * s, then + bias), so near a cancellation its error is
                // a step of |x * s|, not of the result: bound it against the largest value.
                const double steps = t == f32 ? c.ulps : std::min(c.ulps, 1.0);
                const tolerance tol =
                    steps == 0 ? tolerance{.max_nmse = 0.0, .exact = true}
                               : tolerance{.max_nmse = 1e-7,
                                           .max_rel = (name == "scale" ? 2 : 1) * steps * ulp(t),
                                           .rel_floor = name == "scale" ? 1.0 : 1e-6};
                h.check(out, tol, describe(name, {{"a", a}}));
            }
        }
    }
    CHECK(h.cases == 7 * 3 * static_cast<int>(plain_shapes().size()));
}

// ---------------------------------------------------------------------------------------
// the functions of core/unary_functions.hpp

TEST_CASE("cpu: the unary functions (abs ... clamp) in f32, f16 and bf16", "[cpu][unary]") {
    harness h(3103);
    int ops = 0;
    for (std::size_t k = static_cast<std::size_t>(op_kind::abs); k < op_kind_count; ++k) {
        const auto op = static_cast<op_kind>(k);
        if (!is_unary_elementwise(op)) continue;
        ++ops;
        const conformance::value_range in = conformance::unary_input_range(op);
        // sgn, step and clamp are exact; the rest are libm's f32 functions (a few steps).
        // softplus and gelu_erf are written as ggml writes them, log(1 + e^x) and
        // 0.5x(1 + erf(x / sqrt 2)), which cancel for negative x: their error is a few
        // steps of 1 (of |x| <= 6 for gelu_erf), not of the result, so it is bounded
        // absolutely.
        const bool exact = op == op_kind::sgn || op == op_kind::step || op == op_kind::clamp;
        const bool cancels = op == op_kind::softplus || op == op_kind::gelu_erf;
        for (elem_type t : float_types) {
            const auto& shapes = plain_shapes();
            for (std::size_t s = 0; s < shapes.size(); ++s) {
                tensor* a = h.input(t, shapes[s], nth_layout(s, t), in.lo, in.hi);
                tensor* out = conformance::unary_of(h.ctx, op, a, h.rng);
                const double steps = t == f32 ? 8 : 1;
                const tolerance tol = exact     ? tolerance{.max_nmse = 0.0, .exact = true}
                                      : cancels ? tolerance{.max_nmse = 1.0, .max_abs = 6 * steps * ulp(t)}
                                                : tolerance{.max_nmse = 1e-7, .max_rel = steps * ulp(t), .rel_floor = 1e-3};
                h.check(out, tol, describe(std::string(backplane::to_string(op)), {{"a", a}}));
            }
        }
    }
    CHECK(ops == 17);
    CHECK(h.cases == 17 * 3 * static_cast<int>(plain_shapes().size()));
}

namespace {

/// The unary ops whose fast rows are vector formulas (an exp polynomial, a fused
/// multiply-add): within a few steps of the reference; every other one is bit-identical.
bool fast_unary_rounds(op_kind op) {
    switch (op) {
    case op_kind::scale:
    case op_kind::silu:
    case op_kind::gelu:
    case op_kind::gelu_quick:
    case op_kind::sigmoid:
    case op_kind::tanh:
    case op_kind::exp: return true;
    default: return false;
    }
}

/// Computes out's graph on a reference-mode CPU backend and calls read(), then with the
/// fast paths at every instruction-set level, calling check(level) after each.
template <class Read, class Check>
void reference_then_every_level(tensor* out, Read read, Check check) {
    graph g(out);
    cpu_backend reference({.reference = true});
    REQUIRE(reference.compute(g).ok());
    read();
    for (int l = 0; l <= static_cast<int>(cpu::detected_isa()); ++l) {
        std::memset(out->data, 0xff, out->nbytes()); // NaN or -1: a kernel that writes nothing fails
        cpu::set_isa_override(static_cast<cpu::isa>(l));
        cpu_backend fast;
        const status st = fast.compute(g);
        cpu::clear_isa_override();
        REQUIRE(st.ok());
        check(static_cast<cpu::isa>(l));
    }
}

/// The fast paths' out against the reference kernel's, at every instruction-set level.
void check_fast_against_reference(tensor* out, const std::string& what) {
    bt::ref_tensor want;
    const elem_type t = out->type;
    const bool rounds = fast_unary_rounds(out->op);
    reference_then_every_level(out, [&] { want = bt::read(*out); }, [&](cpu::isa level) {
        const bt::comparison c = bt::compare(want, *out, 1e-3);
        INFO(what << " " << to_string(t) << str(out->ne) << " at " << to_string(level)
                  << ": nmse " << c.nmse << ", max rel " << c.max_rel_err << " at " << c.worst << ", mismatches "
                  << c.mismatches << ", nans " << c.nans);
        CHECK(c.nans == 0);
        if (rounds) {
            CHECK(c.nmse <= 1e-7);
            // scale's x * s + bias, fused, cancels near zero: bounded by the NMSE only
            if (out->op != op_kind::scale) CHECK(c.max_rel_err <= 8 * ulp(t));
        } else {
            CHECK(c.mismatches == 0);
        }
    });
}

} // namespace

TEST_CASE("cpu: fast unary rows agree with the reference kernel on odd row lengths", "[cpu][unary][fast]") {
    harness h(3119);
    const i64 lengths[] = {1, 7, 15, 17, 33, 255, 1001};
    int ops = 0;
    for (std::size_t k = 0; k < op_kind_count; ++k) {
        const auto op = static_cast<op_kind>(k);
        if (!is_unary_elementwise(op)) continue;
        ++ops;
        const conformance::value_range in = conformance::unary_input_range(op);
        for (elem_type t : {f32, f16})
            for (const i64 n : lengths) {
                tensor* out = conformance::unary_of(h.ctx, op, h.leaf(t, {n, 3, 2, 1}, in.lo, in.hi), h.rng);
                REQUIRE(cpu::choose_kernel(*out, false) == cpu::kernel_kind::fast_rowwise);
                check_fast_against_reference(out, std::string(backplane::to_string(op)));
            }
    }
    CHECK(ops == 24);
}

TEST_CASE("cpu: fast unary rows keep NaN, infinities, overflow and signed zeros", "[cpu][unary][fast]") {
    harness h(3121);
    constexpr float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> special = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 0.0f, -0.0f, 1e-20f,
                                        -1e-6f, 0.3499f, 0.3501f, -0.36f, 20.5f, 88.5f, 88.8f, 100.0f, -87.5f,
                                        -104.5f, -200.0f};
    for (const op_kind op : {op_kind::neg, op_kind::abs, op_kind::exp, op_kind::tanh, op_kind::sigmoid,
                             op_kind::silu, op_kind::gelu_quick, op_kind::softplus}) {
        tensor* a = h.leaf(f32, {static_cast<i64>(special.size()), 1, 1, 1});
        std::copy(special.begin(), special.end(), static_cast<float*>(a->data));
        tensor* out = conformance::unary_of(h.ctx, op, a, h.rng);
        const auto* values = static_cast<const float*>(out->data);
        std::vector<float> want;
        reference_then_every_level(out, [&] { want.assign(values, values + special.size()); }, [&](cpu::isa level) {
            for (std::size_t i = 0; i < special.size(); ++i) {
                // NaN where the reference has NaN, the same infinity, else a few steps
                // (results below the smallest normal float may be flushed to zero)
                const float e = want[i], got = values[i];
                INFO(backplane::to_string(op) << "(" << special[i] << ") at " << to_string(level) << ": " << got
                                              << ", reference " << e);
                if (std::isnan(e) || std::isinf(e))
                    CHECK((std::isnan(e) ? std::isnan(got) : got == e));
                else
                    CHECK(std::fabs(got - e) <= 8 * ulp(f32) * std::fabs(e) + 2e-38);
                if (e == 0.0f && !fast_unary_rounds(op)) CHECK(std::signbit(got) == std::signbit(e));
            }
        });
    }
}

TEST_CASE("cpu: unary ops on strided rows or bf16 take the reference kernel", "[cpu][unary][fast]") {
    harness h(3123);
    tensor* a = h.leaf(f32, {8, 5, 1, 1});
    CHECK(cpu::choose_kernel(*tanh(h.ctx, transpose(h.ctx, a)), false) == cpu::kernel_kind::unary);
    CHECK(cpu::choose_kernel(*silu(h.ctx, h.leaf(bf16, {8, 5, 1, 1})), false) == cpu::kernel_kind::unary);
    CHECK(cpu::choose_kernel(*tanh(h.ctx, a), true) == cpu::kernel_kind::unary);
    CHECK(cpu::choose_kernel(*tanh(h.ctx, a), false) == cpu::kernel_kind::fast_rowwise);
}

// ---------------------------------------------------------------------------------------
// sum_rows, argmax

TEST_CASE("cpu: sum_rows and argmax over rows of every float type", "[cpu][rows]") {
    harness h(4004);
    for (elem_type t : float_types) {
        const auto& shapes = plain_shapes();
        for (std::size_t s = 0; s < shapes.size(); ++s) {
            tensor* a = h.input(t, shapes[s], nth_layout(s, t));
            h.check(sum_rows(h.ctx, a), {.max_nmse = 1e-7, .max_rel = 2 * ulp(f32)},
                    describe("sum_rows", {{"a", a}}));

            tensor* b = h.input(t, shapes[s], nth_layout(s + 3, t));
            h.check(argmax(h.ctx, b), {.max_nmse = 0.0, .exact = true},
                    describe("argmax", {{"a", b}}));

            // ties: few distinct values, the last maximum must win (as ggml)
            tensor* c = h.input(t, shapes[s], nth_layout(s + 1, t));
            bt::for_each_index(c->ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
                bt::set(*c, i0, i1, i2, i3, static_cast<double>(h.rng() % 4));
            });
            h.check(argmax(h.ctx, c), {.max_nmse = 0.0, .exact = true},
                    describe("argmax ties", {{"a", c}}));
        }
    }
}

// ---------------------------------------------------------------------------------------
// sum, mean, argsort, top_k

TEST_CASE("cpu: sum and mean of every float type in any layout", "[cpu][rows][sum]") {
    harness h(4014);
    for (elem_type t : float_types) {
        const auto& shapes = plain_shapes();
        for (std::size_t s = 0; s < shapes.size(); ++s) {
            tensor* a = h.input(t, shapes[s], nth_layout(s, t), -0.5, 1.0);
            // one rounding of the double sum to t
            h.check(sum(h.ctx, a), {.max_nmse = 1e-7, .max_rel = ulp(t)}, describe("sum", {{"a", a}}));
            tensor* b = h.input(t, shapes[s], nth_layout(s + 2, t));
            // the f32 sum divided in f32: two roundings
            h.check(mean(h.ctx, b), {.max_nmse = 1e-7, .max_rel = 2 * ulp(f32)}, describe("mean", {{"a", b}}));
        }
    }
}

namespace {
/// Sets every element of a to one of `distinct` small integers: rows full of ties.
void make_ties(harness& h, tensor& a, unsigned distinct) {
    bt::for_each_index(a.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        bt::set(a, i0, i1, i2, i3, static_cast<double>(h.rng() % distinct));
    });
}
} // namespace

TEST_CASE("cpu: argsort in both orders, ties kept in index order", "[cpu][rows][sort]") {
    harness h(4024);
    const tolerance exact{.max_nmse = 0.0, .exact = true};
    for (elem_type t : float_types) {
        const auto& shapes = plain_shapes();
        for (std::size_t s = 0; s < shapes.size(); ++s) {
            for (const sort_order order : {sort_order::asc, sort_order::desc}) {
                tensor* a = h.input(t, shapes[s], nth_layout(s, t));
                h.check(argsort(h.ctx, a, order), exact, describe("argsort", {{"a", a}}));
                tensor* c = h.input(t, shapes[s], nth_layout(s + 1, t));
                make_ties(h, *c, 3);
                h.check(argsort(h.ctx, c, order), exact, describe("argsort ties", {{"a", c}}));
            }
        }
    }
    // rows longer than one GPU workgroup sorts, several rows split over threads
    const split_threshold every_row(1);
    for (const sort_order order : {sort_order::asc, sort_order::desc}) {
        tensor* a = h.input(f32, {1500, 3, 2, 1}, layout::strided_rows);
        make_ties(h, *a, 700);
        h.check(argsort(h.ctx, a, order), exact, describe("argsort long rows", {{"a", a}}));
    }
}

TEST_CASE("cpu: argsort puts NaNs above every number", "[cpu][rows][sort]") {
    harness h(4034);
    tensor* a = h.leaf(f32, {6, 1, 1, 1});
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    const float v[] = {1.0f, nan, -inf, inf, nan, -0.0f};
    for (i64 i = 0; i < 6; ++i) bt::set(*a, i, 0, 0, 0, v[i]);
    tensor* up = argsort(h.ctx, a, sort_order::asc);
    tensor* down = argsort(h.ctx, a, sort_order::desc);
    h.check(up, {.max_nmse = 0.0, .exact = true}, "argsort nan asc");
    h.check(down, {.max_nmse = 0.0, .exact = true}, "argsort nan desc");
    const std::int32_t want_up[] = {2, 5, 0, 3, 1, 4}, want_down[] = {1, 4, 3, 0, 5, 2};
    for (i64 i = 0; i < 6; ++i) {
        CHECK(bt::get(*up, i) == want_up[i]);
        CHECK(bt::get(*down, i) == want_down[i]);
    }
}

TEST_CASE("cpu: top_k for k = 1, a few and ne0, in descending order", "[cpu][rows][sort]") {
    harness h(4044);
    const tolerance exact{.max_nmse = 0.0, .exact = true};
    for (elem_type t : float_types) {
        const auto& shapes = plain_shapes();
        for (std::size_t s = 0; s < shapes.size(); ++s) {
            const i64 ne0 = shapes[s][0];
            for (const i64 k : {i64{1}, std::min<i64>(3, ne0), ne0}) {
                tensor* a = h.input(t, shapes[s], nth_layout(s + static_cast<std::size_t>(k), t));
                if (k == 3) make_ties(h, *a, 4);
                h.check(top_k(h.ctx, a, k), exact, describe("top_k", {{"a", a}}));
            }
        }
    }
    const split_threshold every_row(1);
    tensor* a = h.input(bf16, {2000, 5, 1, 1}, layout::permuted);
    h.check(top_k(h.ctx, a, 40), exact, describe("top_k long rows", {{"a", a}}));
}

// ---------------------------------------------------------------------------------------
// norm, rms_norm

TEST_CASE("cpu: norm and rms_norm", "[cpu][rows]") {
    harness h(5005);
    const float eps[] = {1e-6f, 1e-5f, 1e-3f};
    const auto& shapes = plain_shapes();
    for (std::size_t s = 0; s < shapes.size(); ++s) {
        for (int v = 0; v < 2; ++v) {
            const float e = eps[(s + static_cast<std::size_t>(v)) % 3];
            // offset values (not centred) exercise norm's mean subtraction
            tensor* a = h.input(f32, shapes[s],
                                nth_layout(s + static_cast<std::size_t>(v) * 3, f32), -1.0, 3.0);
            h.check(rms_norm(h.ctx, a, e), {.max_nmse = 1e-7, .max_rel = 4 * ulp(f32)},
                    describe("rms_norm", {{"a", a}}));
            // norm's outputs have unit variance; an f32 mean (as ggml's) makes values
            // near the mean off by a few ulps of 1, so bound the error against 1
            h.check(norm(h.ctx, a, e), {.max_nmse = 1e-7, .max_rel = 8 * ulp(f32), .rel_floor = 1.0},
                    describe("norm", {{"a", a}}));
        }
    }
}

TEST_CASE("cpu: l2_norm", "[cpu][rows]") {
    harness h(5008);
    const float eps[] = {1e-12f, 1e-6f, 1e-3f};
    const auto& shapes = plain_shapes();
    for (std::size_t s = 0; s < shapes.size(); ++s) {
        tensor* a = h.input(f32, shapes[s], nth_layout(s, f32), -1.0, 3.0);
        h.check(l2_norm(h.ctx, a, eps[s % 3]), {.max_nmse = 1e-7, .max_rel = 4 * ulp(f32)},
                describe("l2_norm", {{"a", a}}));
    }
}

TEST_CASE("cpu: l2_norm divides a row shorter than eps by eps", "[cpu][rows]") {
    harness h(5006);
    tensor* a = h.input(f32, {6, 3, 1, 1}, layout::contiguous, -1e-4, 1e-4); // |row| < 1e-3
    tensor* out = l2_norm(h.ctx, a, 1e-3f);
    h.check(out, {.max_nmse = 1e-7, .max_rel = 4 * ulp(f32)}, "l2_norm short rows");
    CHECK(std::fabs(bt::get(*out, 0, 0, 0, 0) - bt::get(*a, 0, 0, 0, 0) / 1e-3) < 1e-6);
}

TEST_CASE("cpu: group_norm over groups that divide the channels or not, any layout", "[cpu][rows]") {
    harness h(5007);
    const std::vector<std::pair<extents, int>> cases = {
        {{4, 3, 8, 1}, 4},  {{5, 2, 10, 2}, 4}, {{3, 3, 9, 1}, 4}, {{7, 1, 3, 2}, 8}, {{1, 1, 6, 1}, 6},
        {{16, 4, 6, 1}, 1}, {{9, 2, 5, 3}, 2},  {{2, 5, 1, 1}, 3}, {{33, 3, 4, 2}, 3},
    };
    for (std::size_t c = 0; c < cases.size(); ++c) {
        const auto& [ne, n_groups] = cases[c];
        tensor* a = h.input(f32, ne, nth_layout(c, f32), -1.0, 3.0); // not centred
        h.check(group_norm(h.ctx, a, n_groups, c % 2 ? 1e-6f : 1e-3f),
                {.max_nmse = 1e-7, .max_rel = 8 * ulp(f32), .rel_floor = 1.0},
                describe("group_norm g" + std::to_string(n_groups), {{"a", a}}));
    }
}

// ---------------------------------------------------------------------------------------
// soft_max

TEST_CASE("cpu: soft_max with f32 and f16 masks broadcast over dims 2 and 3", "[cpu][softmax]") {
    harness h(6006);
    const auto& shapes = plain_shapes();
    const elem_type mask_types[] = {f32, f16};
    for (std::size_t s = 0; s < shapes.size(); ++s) {
        for (int m = 0; m < 3; ++m) { // no mask, f32 mask, f16 mask
            const extents ne = shapes[s];
            tensor* a =
                h.input(f32, ne, nth_layout(s + static_cast<std::size_t>(m), f32), -3.0, 3.0);
            tensor* mask = nullptr;
            if (m > 0) {
                const elem_type mt = mask_types[m - 1];
                const extents mne = {ne[0], ne[1] + static_cast<i64>(s % 3),
                                     random_divisor(h.rng, ne[2]), random_divisor(h.rng, ne[3])};
                // the mask is used as given: contiguous, padded rows or offset
                const layout ml = s % 3 == 0 ? layout::contiguous
                                             : (s % 3 == 1 ? layout::strided_rows : layout::offset);
                mask = h.input(mt, mne, ml, -2.0, 2.0);
                // a few masked positions (-inf), never a whole row
                if (mne[0] > 1)
                    for (i64 r = 0; r < mne[1] * mne[2] * mne[3]; r += 2) {
                        const i64 i1 = r % mne[1], i2 = (r / mne[1]) % mne[2],
                                  i3 = r / (mne[1] * mne[2]);
                        bt::set(*mask,
                                static_cast<i64>(h.rng() % static_cast<std::uint32_t>(mne[0])), i1,
                                i2, i3, -std::numeric_limits<double>::infinity());
                    }
            }
            const float sc = s % 2 ? 1.0f : static_cast<float>(0.1 + bt::uniform01(h.rng) * 2);
            h.check(soft_max(h.ctx, a, mask, sc), {.max_nmse = 1e-6, .max_rel = 32 * ulp(f32)},
                    describe("soft_max", {{"a", a}, {"mask", mask}}));
        }
    }
    SECTION("a row masked everywhere is all zeros, not NaN") {
        tensor* a = h.leaf(f32, {5, 2, 1, 1});
        tensor* mask = h.leaf(f16, {5, 2, 1, 1});
        for (i64 i0 = 0; i0 < 5; ++i0)
            bt::set(*mask, i0, 1, 0, 0, -std::numeric_limits<double>::infinity());
        tensor* out = soft_max(h.ctx, a, mask, 0.5f);
        h.check(out, {.max_nmse = 1e-6}, "soft_max fully masked row");
        for (i64 i0 = 0; i0 < 5; ++i0)
            CHECK(bt::get(*out, i0, 1) == 0.0);
    }
}

// ---------------------------------------------------------------------------------------
// mul_mat

/// Fills t (any float type; rows along dim 0 a multiple of 32 long) with values k / 16,
/// k an integer in [-127, 127] and the first of each 32 values +-127. Such values are exact
/// in f16, bf16 and f32, and q8_0 represents them with no error (each block's scale is
/// exactly 1/16), so a kernel that quantizes its activations multiplies the same values
/// as the oracle.
static void fill_q8_0_exact(tensor& t, std::mt19937& rng) {
    for (i64 i3 = 0; i3 < t.ne[3]; ++i3)
        for (i64 i2 = 0; i2 < t.ne[2]; ++i2)
            for (i64 i1 = 0; i1 < t.ne[1]; ++i1)
                for (i64 i0 = 0; i0 < t.ne[0]; ++i0) {
                    i64 k = static_cast<i64>(rng() % 255u) - 127;
                    if (i0 % qk8_0 == 0)
                        k = rng() % 2u ? 127 : -127;
                    bt::set(t, i0, i1, i2, i3, static_cast<double>(k) / 16.0);
                }
}

TEST_CASE("cpu: mul_mat for every weight type and activation type", "[cpu][mul_mat]") {
    harness h(7007);
    struct mm_shape {
        i64 k, m, n, a2, a3, r2, r3; // b's dims 2, 3 are a2 * r2, a3 * r3
    };
    const std::vector<mm_shape> plain = {
        {1, 1, 1, 1, 1, 1, 1},   {2, 3, 1, 1, 1, 1, 1},   {5, 1, 4, 1, 1, 1, 1},
        {16, 4, 4, 1, 1, 1, 1},  {31, 7, 3, 2, 1, 1, 1},  {32, 1, 1, 1, 1, 3, 1},
        {33, 5, 2, 1, 1, 2, 2},  {64, 17, 3, 2, 1, 2, 1}, {7, 3, 5, 1, 2, 1, 3},
        {100, 2, 9, 1, 1, 1, 1}, {128, 9, 1, 3, 1, 1, 1}, {255, 3, 3, 1, 1, 1, 1},
        {256, 4, 2, 1, 1, 1, 1}, {257, 2, 2, 1, 1, 1, 1}, {300, 5, 3, 1, 1, 2, 1},
        {3, 16, 16, 1, 1, 1, 1}, {1, 8, 8, 2, 2, 1, 1},   {48, 1, 7, 1, 1, 4, 1},
        {9, 11, 13, 1, 1, 1, 1}, {513, 3, 2, 1, 1, 1, 1},
    };
    const std::vector<mm_shape> blocks = {
        {32, 1, 1, 1, 1, 1, 1},   {32, 3, 2, 1, 1, 1, 1},  {64, 1, 5, 1, 1, 1, 1},
        {64, 7, 3, 2, 1, 1, 1},   {96, 4, 4, 1, 1, 2, 1},  {128, 5, 1, 1, 2, 1, 2},
        {256, 3, 3, 1, 1, 1, 1},  {288, 2, 5, 1, 1, 1, 1}, {512, 4, 2, 1, 1, 1, 1},
        {32, 16, 16, 1, 1, 1, 1}, {160, 9, 1, 3, 1, 1, 1}, {64, 2, 2, 2, 2, 1, 1},
        {32, 1, 9, 1, 1, 3, 1},   {544, 2, 3, 1, 1, 1, 1}, {224, 6, 2, 1, 1, 2, 2},
        {32, 8, 1, 1, 3, 1, 1},   {192, 3, 7, 1, 1, 1, 1}, {64, 11, 4, 1, 1, 1, 1},
        {320, 1, 1, 1, 1, 1, 1},  {96, 5, 5, 2, 1, 1, 1},
    };
    const layout b_layouts[] = {layout::contiguous,   layout::transposed,    layout::permuted,
                                layout::strided_rows, layout::strided_elems, layout::offset};
    for (elem_type ta : real_types)
        for (elem_type tb : float_types) {
            const auto& shapes = is_quantized(ta) ? blocks : plain;
            for (std::size_t s = 0; s < shapes.size(); ++s) {
                const mm_shape& c = shapes[s];
                // a must not be transposed (the builder's rule); every other layout is fine
                layout la = nth_layout(s, ta);
                if (la == layout::transposed)
                    la = layout::strided_elems;
                tensor* a = h.input(ta, {c.k, c.m, c.a2, c.a3}, la);
                tensor* b =
                    h.input(tb, {c.k, c.n, c.a2 * c.r2, c.a3 * c.r3}, b_layouts[(s + 1) % 6]);
                // With quantized weights the fast path quantizes the activations to q8_0,
                // as ggml does: give it activations that q8_0 holds exactly, so kernel and
                // oracle multiply the same values and the bound below stays tight.
                if (is_quantized(ta))
                    fill_q8_0_exact(*b, h.rng);
                // f32 accumulation over K; the oracle sums exactly in double
                const double nmse = ta == f32 && tb == f32 ? 1e-7 : 5e-4;
                // and no single value off by more than 1e-5 of the largest
                h.check(mul_mat(h.ctx, a, b), {.max_nmse = nmse, .max_rel = 1e-5, .rel_floor = 1.0},
                        describe("mul_mat", {{"a", a}, {"b", b}}));
            }
        }
    SECTION("K = 0 gives zeros") {
        // views with a non-zero row stride: a fresh [0, 3] tensor has nb1 = 0 < nb0 and
        // counts as transposed for the builder
        tensor* a = view_2d(h.ctx, h.leaf(f32, {1, 3, 1, 1}), 0, 3, sizeof(float), 0);
        tensor* b = view_2d(h.ctx, h.leaf(f32, {1, 2, 1, 1}), 0, 2, sizeof(float), 0);
        tensor* out = mul_mat(h.ctx, a, b);
        std::memset(out->data, 0x7f, out->nbytes());
        h.check(out, {.max_nmse = 0.0, .exact = true}, "mul_mat K=0");
    }
}

// ---------------------------------------------------------------------------------------
// mul_mat_id

TEST_CASE("cpu: mul_mat_id over every weight and activation type, one or n_used activations", "[cpu][mul_mat_id]") {
    harness h(9119);
    for (elem_type ta : {f32, f16, bf16, q8_0, q4_0})
        for (elem_type tb : {f32, f16, bf16})
            for (int s = 0; s < 6; ++s) {
                const i64 k = is_quantized(ta) ? 32 * (1 + s % 3) : 1 + 7 * s;
                const i64 m = 1 + (s * 5) % 9, n_expert = 1 + s % 4, n_used = 1 + s % 3, n_tokens = 1 + (s * 3) % 5;
                const i64 b1 = s % 2 ? 1 : n_used;
                layout la = nth_layout(static_cast<std::size_t>(s), ta);
                if (la == layout::transposed) la = layout::strided_elems; // the experts must not be transposed
                tensor* as = h.input(ta, {k, m, n_expert, 1}, la);
                tensor* b = h.input(tb, {k, b1, n_tokens, 1}, s % 3 == 1 ? layout::strided_rows : layout::contiguous);
                if (is_quantized(ta)) fill_q8_0_exact(*b, h.rng); // what the fast path's q8_0 activations hold
                tensor* ids = h.input(i32, {n_used, n_tokens, 1, 1}, s % 2 ? layout::strided_elems : layout::contiguous);
                bt::for_each_index(ids->ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
                    bt::set(*ids, i0, i1, i2, i3, static_cast<double>(h.rng() % static_cast<std::uint32_t>(n_expert)));
                });
                h.check(mul_mat_id(h.ctx, as, b, ids), {.max_nmse = ta == f32 && tb == f32 ? 1e-7 : 5e-4},
                        describe("mul_mat_id", {{"as", as}, {"b", b}, {"ids", ids}}));
            }
    SECTION("an expert id out of range is reported, and never read") {
        tensor* as = h.leaf(f32, {8, 3, 2, 1});
        tensor* b = h.leaf(f32, {8, 1, 2, 1});
        tensor* ids = h.leaf(i32, {2, 2, 1, 1});
        for (const auto& [i, v] : std::vector<std::pair<i64, double>>{{0, 1}, {1, 2}, {2, -1}, {3, 0}})
            bt::set(*ids, i % 2, i / 2, 0, 0, v);
        tensor* out = mul_mat_id(h.ctx, as, b, ids);
        out->name = "moe";
        cpu_backend backend;
        const status st = backend.compute(graph(out));
        CHECK(st.code() == errc::out_of_range);
        CHECK_THAT(st.message(), Catch::Contains("mul_mat_id") && Catch::Contains("moe"));
        for (i64 m = 0; m < 3; ++m) {
            CHECK(bt::get(*out, m, 1, 0) == 0.0); // expert 2 of 2
            CHECK(bt::get(*out, m, 0, 1) == 0.0); // expert -1
        }
    }
}

// ---------------------------------------------------------------------------------------
// add_id

TEST_CASE("cpu: add_id over shapes and layouts", "[cpu][add_id]") {
    harness h(9127);
    for (int s = 0; s < 8; ++s) {
        const i64 ne0 = 1 + (s * 13) % 37, n_used = 1 + s % 4, n_tokens = 1 + (s * 3) % 7, n_expert = 1 + (s * 5) % 9;
        tensor* a = h.input(f32, {ne0, n_used, n_tokens, 1}, nth_layout(static_cast<std::size_t>(s), f32));
        tensor* b = h.input(f32, {ne0, n_expert, 1, 1}, nth_layout(static_cast<std::size_t>(s + 1), f32));
        tensor* ids = h.input(i32, {n_used, n_tokens, 1, 1}, s % 2 ? layout::strided_elems : layout::contiguous);
        bt::for_each_index(ids->ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
            bt::set(*ids, i0, i1, i2, i3, static_cast<double>(h.rng() % static_cast<std::uint32_t>(n_expert)));
        });
        h.check(add_id(h.ctx, a, b, ids), {.max_nmse = 1e-12}, describe("add_id", {{"a", a}, {"b", b}, {"ids", ids}}));
    }
    SECTION("an id out of range is reported, and never read") {
        tensor* a = h.leaf(f32, {4, 2, 2, 1});
        tensor* b = h.leaf(f32, {4, 3, 1, 1});
        b->name = "biases";
        tensor* ids = h.leaf(i32, {2, 2, 1, 1});
        for (const auto& [i, v] : std::vector<std::pair<i64, double>>{{0, 1}, {1, 3}, {2, -1}, {3, 0}})
            bt::set(*ids, i % 2, i / 2, 0, 0, v);
        tensor* out = add_id(h.ctx, a, b, ids);
        out->name = "biased";
        cpu_backend backend;
        const status st = backend.compute(graph(out));
        CHECK(st.code() == errc::out_of_range);
        CHECK_THAT(st.message(), Catch::Contains("add_id") && Catch::Contains("biased") && Catch::Contains("biases"));
        for (i64 i0 = 0; i0 < 4; ++i0) {
            CHECK(bt::get(*out, i0, 1, 0) == 0.0); // expert 3 of 3
            CHECK(bt::get(*out, i0, 0, 1) == 0.0); // expert -1
            CHECK(bt::get(*out, i0, 0, 0) == static_cast<double>(static_cast<float>(bt::get(*a, i0, 0, 0)) +
                                                                  static_cast<float>(bt::get(*b, i0, 1))));
        }
    }
}

// ---------------------------------------------------------------------------------------
// get_rows

TEST_CASE("cpu: get_rows from every type, indices in any layout", "[cpu][get_rows]") {
    harness h(8008);
    const std::vector<elem_type> types = {f32, f16, bf16, q8_0, q4_0, i32};
    for (elem_type t : types) {
        const auto& shapes = shapes_for(t);
        for (std::size_t s = 0; s < shapes.size(); ++s) {
            const extents ne = shapes[s]; // a: [E, R, A2, A3]
            const i64 n = 1 + static_cast<i64>(s % 5);
            tensor* a = h.input(t, ne, nth_layout(s, t), -4.0, 4.0);
            const extents ine = {n, ne[2], ne[3], 1};
            tensor* idx = h.input(i32, ine, s % 2 ? layout::strided_elems : layout::permuted);
            bt::for_each_index(idx->ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
                bt::set(*idx, i0, i1, i2, i3,
                        static_cast<double>(h.rng() % static_cast<std::uint32_t>(ne[1])));
            });
            // dequantized values are exact in f32: every type is bit-exact
            h.check(get_rows(h.ctx, a, idx), {.max_nmse = 0.0, .exact = true},
                    describe("get_rows", {{"a", a}, {"idx", idx}}));
        }
    }
    SECTION("an index out of range is reported, and never read") {
        tensor* a = h.leaf(f32, {4, 3, 1, 1});
        tensor* idx = h.leaf(i32, {3, 1, 1, 1});
        bt::set(*idx, 0, 0, 0, 0, 1);
        bt::set(*idx, 1, 0, 0, 0, 3);
        bt::set(*idx, 2, 0, 0, 0, -1);
        tensor* out = get_rows(h.ctx, a, idx);
        out->name = "picked";
        cpu_backend backend;
        const status st = backend.compute(graph(out));
        CHECK(st.code() == errc::out_of_range);
        CHECK_THAT(st.message(), Catch::Contains("get_rows") && Catch::Contains("picked"));
        // the rows that could be read are there; the others are zeros, not stray memory
        for (i64 i0 = 0; i0 < 4; ++i0) {
            CHECK(bt::get(*out, i0, 0) == bt::get(*a, i0, 1));
            CHECK(bt::get(*out, i0, 1) == 0.0);
            CHECK(bt::get(*out, i0, 2) == 0.0);
        }
    }
}

TEST_CASE("cpu: soft_max_ext with ALiBi slopes and sinks", "[cpu][softmax]") {
    harness h(6106);
    const tolerance tol{.max_nmse = 1e-6, .max_rel = 32 * ulp(f32)};
    int n = 0;
    for (const i64 n_head : {1, 2, 4, 5, 8, 12})
        for (const elem_type mt : {f32, f16})
            for (const bool with_sinks : {false, true}) {
                const extents ne = {13 + 7 * (n % 4), 1 + n % 3, n_head, 1 + n % 2};
                tensor* a = h.input(f32, ne, nth_layout(static_cast<std::size_t>(n), f32), -3.0, 3.0);
                const extents mne = {ne[0], ne[1] + n % 2, n % 3 == 0 ? 1 : random_divisor(h.rng, n_head),
                                     random_divisor(h.rng, ne[3])};
                tensor* mask = h.input(mt, mne, n % 2 ? layout::offset : layout::contiguous, -2.0, 2.0);
                bt::set(*mask, 0, 0, 0, 0, -std::numeric_limits<double>::infinity());
                const float max_bias = n % 3 == 2 ? 0.5f : 8.0f;
                const float sc = n % 2 ? 1.0f : 0.125f;
                tensor* r = soft_max_ext(h.ctx, a, mask, sc, max_bias);
                if (with_sinks) soft_max_add_sinks(r, h.input(f32, {n_head, 1, 1, 1}, layout::contiguous, -2.0, 2.0));
                h.check(r, tol,
                        describe("soft_max_ext", {{"a", a}, {"mask", mask}, {"sinks", r->src[2]}}) + " max_bias " +
                            std::to_string(max_bias));
                ++n;
            }
    SECTION("sinks without a mask, and a row masked everywhere with a sink is all zeros") {
        tensor* a = h.input(f32, {7, 3, 4, 1}, layout::contiguous, -3.0, 3.0);
        h.check(soft_max_add_sinks(soft_max(h.ctx, a, nullptr, 0.5f), h.input(f32, {4, 1, 1, 1}, layout::contiguous)),
                tol, "soft_max sinks without a mask");
        tensor* b = h.leaf(f32, {5, 2, 3, 1});
        tensor* mask = h.leaf(f32, {5, 2, 1, 1});
        for (i64 i0 = 0; i0 < 5; ++i0) bt::set(*mask, i0, 1, 0, 0, -std::numeric_limits<double>::infinity());
        tensor* out = soft_max_add_sinks(soft_max_ext(h.ctx, b, mask, 1.0f, 2.0f), h.leaf(f32, {3, 1, 1, 1}));
        h.check(out, tol, "soft_max fully masked row with a sink");
        for (i64 i2 = 0; i2 < 3; ++i2)
            for (i64 i0 = 0; i0 < 5; ++i0) CHECK(bt::get(*out, i0, 1, i2) == 0.0);
    }
}

// ---------------------------------------------------------------------------------------
// flash_attn_ext

TEST_CASE("cpu: flash_attn_ext for every k and v type, with masks, sinks, softcap, ALiBi, GQA and views",
          "[cpu][flash_attn_ext]") {
    harness h(6206);
    const split_threshold every_row(1); // the query rows split over the threads
    namespace cd = backplane::conformance::detail;
    const elem_type types[] = {f32, f16, bf16, q8_0, q4_0};
    int n = 0;
    for (const elem_type tk : types)
        for (const elem_type tv : types)
            for (int variant = 0; variant < 64; variant += 5) { // every feature bit, in many pairs
                const std::int64_t dk = is_quantized(tk) ? 64 : (n % 2 ? 40 : 65);
                const std::int64_t dv = is_quantized(tv) ? 32 * (1 + n % 2) : 24 + n % 5;
                const std::int64_t n_head_kv = 1 + n % 2;
                const std::int64_t n_head = n_head_kv * (variant & 16 ? 3 : 1);
                const cd::attention_shape s{dk, dv, 1 + (n * 37) % 70, 1 + n % 4, n_head, n_head_kv, 1 + (variant >> 5)};
                tensor* r = cd::build_attention(h.ctx, h.rng, tk, tv, s, variant);
                h.check(r, {.max_nmse = 1e-9},
                        describe("flash_attn_ext", {{"q", r->src[0]}, {"k", r->src[1]}, {"v", r->src[2]}, {"mask", r->src[3]},
                                                    {"sinks", r->src[4]}}) +
                            " variant " + std::to_string(variant));
                ++n;
            }
    CHECK(h.cases == 25 * 13);
}

TEST_CASE("cpu: flash_attn_ext of a query masked everywhere is zeros, with or without a sink", "[cpu][flash_attn_ext]") {
    harness h(6207);
    tensor* q = h.leaf(f32, {16, 2, 2, 1});
    tensor* k = h.leaf(f16, {16, 5, 1, 1});
    tensor* v = h.leaf(f16, {8, 5, 1, 1});
    tensor* mask = h.leaf(f16, {5, 2, 1, 1});
    for (i64 j = 0; j < 5; ++j) bt::set(*mask, j, 1, 0, 0, -std::numeric_limits<double>::infinity());
    for (const bool with_sink : {false, true}) {
        tensor* r = flash_attn_ext(h.ctx, q, k, v, mask, 0.25f);
        if (with_sink) flash_attn_ext_add_sinks(r, h.leaf(f32, {2, 1, 1, 1}));
        h.check(r, {.max_nmse = 1e-9}, with_sink ? "fully masked query with a sink" : "fully masked query");
        for (i64 hd = 0; hd < 2; ++hd)
            for (i64 d = 0; d < 8; ++d) CHECK(bt::get(*r, d, hd, 1) == 0.0);
    }
}

TEST_CASE("cpu: flash_attn_ext's fast kernel against the reference kernel and the oracle, on 1 and 2 threads",
          "[cpu][flash_attn_ext]") {
    harness h(6208);
    const split_threshold every_row(1); // a single query split along its positions too
    namespace cd = backplane::conformance::detail;
    // positions not a multiple of the tiles (16, 64), single queries (split along the
    // positions on 2 threads), several queries, two sequences, head sizes off the vector
    // width, and groups of query heads per key-value head of 2, 3, 4, 7 (4 + 2 + 1), 8 and
    // 16 (8 + 8): the AVX-512 kernel takes them together
    const cd::attention_shape shapes[] = {
        {64, 64, 1, 1, 1, 1, 1},      {128, 128, 300, 1, 2, 1, 1}, {40, 24, 257, 1, 1, 1, 1},
        {65, 33, 129, 3, 4, 2, 2},    {128, 128, 1000, 1, 1, 1, 1}, {16, 8, 64, 5, 3, 3, 1},
        {7, 5, 70, 1, 2, 2, 1},       {128, 128, 333, 1, 8, 2, 1}, {64, 64, 100, 2, 7, 1, 1},
        {32, 48, 77, 1, 16, 2, 2},    {80, 80, 40, 3, 32, 2, 1},   {24, 16, 50, 1, 6, 3, 1},
        {128, 64, 129, 1, 12, 4, 1},
    };
    const std::pair<elem_type, elem_type> kv_types[] = {{f16, f16}, {f32, f32}, {f16, f32}, {f32, f16}};
    std::vector<cpu::isa> levels;
    for (int l = 0; l <= static_cast<int>(cpu::detected_isa()); ++l) levels.push_back(static_cast<cpu::isa>(l));
    int n = 0;
    for (const auto& shape : shapes)
        for (const auto& [tk, tv] : kv_types) {
            const int variant = (n * 7) % 16; // mask, sinks, softcap and ALiBi in turn
            tensor* r = cd::build_attention(h.ctx, h.rng, tk, tv, shape, variant);
            INFO(describe("flash_attn_ext", {{"q", r->src[0]}, {"k", r->src[1]}, {"v", r->src[2]}, {"mask", r->src[3]},
                                             {"sinks", r->src[4]}})
                 << " variant " << variant);
            REQUIRE(cpu::choose_kernel(*r, false) == cpu::kernel_kind::fast_attention);
            const bt::ref_tensor oracle = bt::ref_forward(*r);
            graph g(r);
            cpu_backend reference({.n_threads = 1, .reference = true});
            REQUIRE(reference.compute(g).ok());
            const bt::ref_tensor expected = bt::read(*r);
            CHECK(bt::nmse(oracle, expected) <= 1e-9);
            for (const cpu::isa level : levels)
                for (const int threads : {1, 2}) {
                    INFO("isa " << cpu::to_string(level) << ", " << threads << " threads");
                    bt::fill_random(*r, h.rng, 10.0, 20.0); // nothing left of the last run
                    cpu::set_isa_override(level);
                    cpu_backend fast({.n_threads = threads});
                    const status st = fast.compute(g);
                    cpu::clear_isa_override();
                    REQUIRE(st.ok());
                    CHECK(bt::nmse(expected, *r) <= 1e-10);
                    CHECK(bt::nmse(oracle, *r) <= 1e-9);
                }
            ++n;
        }
    CHECK(n == 52);
}

TEST_CASE("cpu: flash_attn_ext never reads a masked position's value into a sum, on every kernel",
          "[cpu][flash_attn_ext]") {
    // a cache's unwritten slots may hold anything: NaN and infinities at masked positions
    // must not reach the result (ggml skips those positions)
    harness h(6209);
    for (const auto& [n_head, n_head_kv] : {std::pair<i64, i64>{1, 1}, {4, 1}, {8, 2}, {7, 1}}) {
        tensor* q = h.input(f32, {64, 1, n_head, 1}, layout::contiguous, -2.0, 2.0);
        tensor* k = h.input(f16, {64, 40, n_head_kv, 1}, layout::contiguous, -1.0, 1.0);
        tensor* v = h.input(f16, {64, 40, n_head_kv, 1}, layout::contiguous, -1.0, 1.0);
        tensor* mask = h.leaf(f16, {40, 1, 1, 1});
        constexpr double ninf = -std::numeric_limits<double>::infinity();
        for (i64 j = 0; j < 40; ++j) {
            const bool hole = j % 7 == 3 || j >= 33;
            bt::set(*mask, j, 0, 0, 0, hole ? ninf : 0.0);
            if (!hole) continue;
            for (i64 hk = 0; hk < n_head_kv; ++hk)
                for (i64 d = 0; d < 64; ++d) {
                    bt::set(*k, d, j, hk, 0, std::numeric_limits<double>::quiet_NaN());
                    bt::set(*v, d, j, hk, 0, d % 2 ? std::numeric_limits<double>::infinity()
                                                  : std::numeric_limits<double>::quiet_NaN());
                }
        }
        tensor* r = flash_attn_ext(h.ctx, q, k, v, mask, 0.125f);
        INFO(n_head << " heads over " << n_head_kv);
        REQUIRE(cpu::choose_kernel(*r, false) == cpu::kernel_kind::fast_attention);
        graph g(r);
        cpu_backend reference({.n_threads = 1, .reference = true});
        REQUIRE(reference.compute(g).ok());
        const bt::ref_tensor expected = bt::read(*r);
        for (const double x : expected.v) REQUIRE(std::isfinite(x));
        for (int l = 0; l <= static_cast<int>(cpu::detected_isa()); ++l)
            for (const int threads : {1, 2}) {
                INFO("isa " << cpu::to_string(static_cast<cpu::isa>(l)) << ", " << threads << " threads");
                bt::fill_random(*r, h.rng, 10.0, 20.0); // nothing left of the last run
                cpu::set_isa_override(static_cast<cpu::isa>(l));
                cpu_backend fast({.n_threads = threads});
                const status st = fast.compute(g);
                cpu::clear_isa_override();
                REQUIRE(st.ok());
                CHECK(bt::nmse(expected, *r) <= 1e-10);
            }
    }
}

// ---------------------------------------------------------------------------------------
// set_rows

namespace {
/// Row numbers for set_rows: each row of idx (n values) distinct, drawn from [0, rows).
void distinct_rows(harness& h, tensor& idx, i64 rows) {
    for (i64 i3 = 0; i3 < idx.ne[3]; ++i3)
        for (i64 i2 = 0; i2 < idx.ne[2]; ++i2)
            for (i64 i1 = 0; i1 < idx.ne[1]; ++i1) {
                std::vector<i64> order(static_cast<std::size_t>(rows));
                std::iota(order.begin(), order.end(), i64{0});
                std::shuffle(order.begin(), order.end(), h.rng);
                for (i64 i0 = 0; i0 < idx.ne[0]; ++i0)
                    bt::set(idx, i0, i1, i2, i3, static_cast<double>(order[static_cast<std::size_t>(i0)]));
            }
}
} // namespace

TEST_CASE("cpu: set_rows into every type, from f32 f16 bf16, i32 and i64 indices, any layout", "[cpu][set_rows]") {
    harness h(8118);
    for (elem_type to : {f32, f16, bf16, q8_0, q4_0})
        for (elem_type from : {f32, f16, bf16})
            for (elem_type it : {i32, elem_type::i64}) {
                const auto& shapes = shapes_for(to);
                for (std::size_t s = 0; s < shapes.size(); s += 2) {
                    const extents ne = shapes[s]; // a: [E, R, A2, A3]
                    const i64 n = 1 + static_cast<i64>(s % static_cast<std::size_t>(ne[1]));
                    tensor* a = h.input(to, ne, nth_layout(s, to), -4.0, 4.0);
                    tensor* b = h.input(from, {ne[0], n, ne[2], ne[3]}, nth_layout(s + 1, from), -4.0, 4.0);
                    // idx broadcast over dims 2 and 3 when s is odd
                    const extents ine = {n, s % 2 ? 1 : ne[2], s % 2 ? 1 : ne[3], 1};
                    tensor* idx = h.input(it, ine, s % 4 < 2 ? layout::contiguous : layout::strided_elems);
                    distinct_rows(h, *idx, ne[1]);
                    const tolerance tol = is_quantized(to) ? tolerance{.max_nmse = 5e-4}
                                                           : tolerance{.max_nmse = 0.0, .exact = true};
                    h.check(set_rows(h.ctx, a, b, idx), tol, describe("set_rows", {{"a", a}, {"b", b}, {"idx", idx}}));
                }
            }
    SECTION("an index out of range writes nothing and is reported") {
        for (elem_type it : {i32, elem_type::i64}) {
            tensor* a = h.leaf(f32, {4, 3, 1, 1});
            tensor* b = h.leaf(f32, {4, 3, 1, 1});
            tensor* idx = h.leaf(it, {3, 1, 1, 1});
            bt::set(*idx, 0, 0, 0, 0, 2);
            bt::set(*idx, 1, 0, 0, 0, 3);
            bt::set(*idx, 2, 0, 0, 0, it == i32 ? -1.0 : 4294967296.0); // 2^32: the low word is 0
            const bt::ref_tensor before = bt::read(*a);
            tensor* out = set_rows(h.ctx, a, b, idx);
            out->name = "kv";
            cpu_backend backend;
            const status st = backend.compute(graph(out));
            CHECK(st.code() == errc::out_of_range);
            CHECK_THAT(st.message(), Catch::Contains("set_rows") && Catch::Contains("kv"));
            for (i64 i0 = 0; i0 < 4; ++i0) {
                CHECK(bt::get(*a, i0, 2) == bt::get(*b, i0, 0)); // the good row is written
                CHECK(bt::get(*a, i0, 0) == before.at(i0, 0));   // the others are untouched
                CHECK(bt::get(*a, i0, 1) == before.at(i0, 1));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// rope

TEST_CASE("cpu: rope normal and neox in f32 and f16", "[cpu][rope]") {
    harness h(9009);
    const std::vector<extents> shapes = {
        {2, 1, 1, 1},  {4, 1, 3, 1},  {8, 2, 5, 1},  {6, 3, 1, 1},  {16, 4, 7, 1},
        {10, 1, 1, 2}, {32, 2, 3, 1}, {64, 2, 2, 1}, {12, 5, 4, 1}, {128, 1, 2, 1},
        {18, 3, 3, 2}, {2, 7, 2, 1},  {24, 2, 9, 1}, {8, 1, 1, 1},  {40, 2, 1, 3},
        {14, 4, 2, 1}, {80, 1, 3, 1}, {4, 4, 4, 4},  {96, 2, 2, 1}, {20, 1, 6, 1},
    };
    const rope_mode modes[] = {rope_mode::normal, rope_mode::neox};
    for (elem_type t : {f32, f16})
        for (rope_mode mode : modes)
            for (std::size_t s = 0; s < shapes.size(); ++s) {
                const extents ne = shapes[s];
                // all dims rotated, or a part with the rest copied
                const int n_dims = s % 3 == 0 ? static_cast<int>(ne[0])
                                              : std::max(2, static_cast<int>(ne[0] / 2) & ~1);
                const float base = s % 2 ? 10000.0f : 500000.0f;
                const float fscale = s % 4 == 3 ? 0.25f : 1.0f;
                tensor* a = h.input(t, ne, nth_layout(s, t));
                tensor* pos = h.input(i32, {ne[2], 1, 1, 1},
                                      s % 2 ? layout::strided_elems : layout::contiguous);
                bt::for_each_index(pos->ne, [&](i64 i0, i64, i64, i64) {
                    bt::set(*pos, i0, 0, 0, 0,
                            static_cast<double>(static_cast<i64>(h.rng() % 8192) - 64));
                });
                // x0 cos - x1 sin cancels: bound each error against the largest value
                const tolerance tol =
                    t == f32 ? tolerance{.max_nmse = 1e-7, .max_rel = 1e-6, .rel_floor = 1.0}
                             : tolerance{.max_nmse = 5e-4, .max_rel = ulp(f16), .rel_floor = 1.0};
                h.check(rope(h.ctx, a, pos, n_dims, mode, base, fscale), tol,
                        describe(mode == rope_mode::neox ? "rope neox" : "rope normal",
                                 {{"a", a}, {"pos", pos}}) +
                            " n_dims " + std::to_string(n_dims));
            }
}

namespace {
/// Random positions for pos (values in [-64, 8128)).
void random_positions(harness& h, tensor* pos) {
    bt::for_each_index(pos->ne, [&](i64 i0, i64, i64, i64) {
        bt::set(*pos, i0, 0, 0, 0, static_cast<double>(static_cast<i64>(h.rng() % 8192) - 64));
    });
}
tolerance rope_tolerance(elem_type t) {
    // x0 cos - x1 sin cancels: bound each error against the largest value
    return t == f32 ? tolerance{.max_nmse = 1e-7, .max_rel = 1e-6, .rel_floor = 1.0}
                    : tolerance{.max_nmse = 5e-4, .max_rel = ulp(f16), .rel_floor = 1.0};
}
} // namespace

TEST_CASE("cpu: rope_ext with frequency factors and YaRN", "[cpu][rope]") {
    harness h(9109);
    const std::vector<extents> shapes = {{8, 2, 5, 1}, {16, 4, 7, 1}, {64, 2, 3, 2}, {128, 1, 2, 1}, {34, 3, 4, 1}};
    int n = 0;
    for (elem_type t : {f32, f16})
        for (rope_mode mode : {rope_mode::normal, rope_mode::neox})
            for (const extents& ne : shapes) {
                const int n_dims = n % 2 ? static_cast<int>(ne[0]) : std::max(2, static_cast<int>(ne[0] / 2) & ~1);
                tensor* a = h.input(t, ne, nth_layout(static_cast<std::size_t>(n), t));
                tensor* pos = h.input(i32, {ne[2], 1, 1, 1}, layout::contiguous);
                random_positions(h, pos);
                tensor* ff = n % 3 == 2 ? nullptr : h.input(f32, {n_dims / 2 + n % 3, 1, 1, 1}, layout::contiguous, 1.0, 40.0);
                const float ext = n % 4 == 0 ? 0.0f : (n % 4 == 1 ? 1.0f : 0.5f);
                const float fscale = n % 2 ? 0.25f : 0.125f;
                tensor* r = rope_ext(h.ctx, a, pos, ff, n_dims, mode, 4096, 500000.0f, fscale, ext, 0.8f + 0.1f * (n % 3),
                                     32.0f, 1.0f);
                h.check(r, rope_tolerance(t),
                        describe("rope_ext", {{"a", a}, {"pos", pos}, {"freq_factors", ff}}) + " n_dims " +
                            std::to_string(n_dims) + " ext_factor " + std::to_string(ext));
                ++n;
            }
}

TEST_CASE("cpu: rope_multi in the mrope, imrope and vision modes", "[cpu][rope]") {
    harness h(9209);
    struct shape_case {
        extents ne;
        std::array<int, 4> sections;
    };
    const std::vector<shape_case> cases = {
        {{16, 2, 5, 1}, {2, 3, 3, 0}}, {{32, 3, 4, 2}, {4, 6, 6, 0}}, {{24, 1, 3, 1}, {3, 3, 2, 1}},
        {{64, 2, 2, 1}, {8, 12, 12, 0}}, {{20, 2, 3, 1}, {2, 2, 1, 0}},
    };
    int n = 0;
    for (elem_type t : {f32, f16})
        for (rope_mode mode : {rope_mode::mrope, rope_mode::imrope, rope_mode::vision})
            for (const shape_case& c : cases) {
                const extents ne = c.ne;
                const bool vision = mode == rope_mode::vision;
                const int n_dims = vision ? static_cast<int>(ne[0] / 2)
                                          : (n % 2 ? static_cast<int>(ne[0]) : static_cast<int>(ne[0] / 2) & ~1);
                tensor* a = h.input(t, ne, nth_layout(static_cast<std::size_t>(n), t));
                tensor* pos = h.input(i32, {4 * ne[2], 1, 1, 1}, n % 2 ? layout::strided_elems : layout::contiguous);
                random_positions(h, pos);
                const i64 n_ff = vision ? n_dims : n_dims / 2;
                tensor* ff = n % 3 == 0 ? h.input(f32, {n_ff, 1, 1, 1}, layout::contiguous, 1.0, 8.0) : nullptr;
                const float ext = n % 2 ? 1.0f : 0.0f;
                tensor* r = rope_multi(h.ctx, a, pos, ff, n_dims, c.sections, mode, 2048, 10000.0f, 0.5f, ext, 1.0f,
                                       32.0f, 1.0f);
                h.check(r, rope_tolerance(t),
                        describe("rope_multi", {{"a", a}, {"pos", pos}, {"freq_factors", ff}}) + " mode " +
                            std::to_string(static_cast<int>(mode)) + " n_dims " + std::to_string(n_dims));
                ++n;
            }
}

// ---------------------------------------------------------------------------------------
// concat

TEST_CASE("cpu: pad with zeros or wrapped around, in f32 f16 bf16, any layout", "[cpu][pad]") {
    harness h(8228);
    for (elem_type t : {f32, f16, bf16}) {
        const auto& shapes = plain_shapes();
        for (std::size_t s = 0; s < shapes.size(); ++s) {
            tensor* a = h.input(t, shapes[s], nth_layout(s, t));
            pad_widths w;
            for (std::size_t d = 0; d < max_dims; ++d) {
                w.lp[d] = static_cast<int>(h.rng() % 3);
                w.rp[d] = static_cast<int>(h.rng() % 4);
            }
            const bool circular = s % 3 == 2;
            h.check(pad_ext(h.ctx, a, w, circular), {.max_nmse = 0.0, .exact = true},
                    describe(circular ? "pad_ext circular" : "pad_ext", {{"a", a}}));
        }
        tensor* a = h.input(t, {5, 3, 2, 1}, layout::permuted);
        h.check(pad(h.ctx, a, 3, 0, 1), {.max_nmse = 0.0, .exact = true}, describe("pad", {{"a", a}}));
    }
}

TEST_CASE("cpu: repeat of f32 f16 bf16 i32 and repeat_back, any layout", "[cpu][misc]") {
    harness h(8448);
    const auto& shapes = plain_shapes();
    for (std::size_t s = 0; s < shapes.size(); s += 2) {
        const extents ne = shapes[s];
        const extents times = {1 + static_cast<i64>(h.rng() % 3), 1 + static_cast<i64>(h.rng() % 3),
                               1 + static_cast<i64>(h.rng() % 2), 1 + static_cast<i64>(h.rng() % 2)};
        for (elem_type t : {f32, f16, bf16, i32}) {
            tensor* a = h.input(t, ne, nth_layout(s, t));
            h.check(repeat_4d(h.ctx, a, ne[0] * times[0], ne[1] * times[1], ne[2] * times[2], ne[3] * times[3]),
                    {.max_nmse = 0.0, .exact = true}, describe("repeat", {{"a", a}}));
        }
        tensor* big = h.input(f32, {ne[0] * times[0], ne[1] * times[1], ne[2] * times[2], ne[3] * times[3]},
                              nth_layout(s + 1, f32));
        h.check(repeat_back(h.ctx, big, h.leaf(f32, ne)), {.max_nmse = 1e-7, .max_rel = 4 * ulp(f32), .rel_floor = 1.0},
                describe("repeat_back", {{"a", big}}));
    }
}

TEST_CASE("cpu: cumsum, tri of every type and diag, any layout", "[cpu][misc]") {
    harness h(8558);
    const auto& shapes = plain_shapes();
    for (std::size_t s = 0; s < shapes.size(); ++s) {
        tensor* a = h.input(f32, shapes[s], nth_layout(s, f32));
        h.check(cumsum(h.ctx, a), {.max_nmse = 1e-7}, describe("cumsum", {{"a", a}}));
        const extents sq = {shapes[s][0], shapes[s][0], shapes[s][2], shapes[s][3]};
        tensor* m = h.input(f32, sq, nth_layout(s + 1, f32));
        h.check(tri(h.ctx, m, static_cast<tri_type>(s % 4)), {.max_nmse = 0.0, .exact = true},
                describe("tri " + std::to_string(s % 4), {{"a", m}}));
        tensor* v = h.input(f32, {shapes[s][0], 1, shapes[s][2], shapes[s][3]}, nth_layout(s + 2, f32));
        h.check(diag(h.ctx, v), {.max_nmse = 0.0, .exact = true}, describe("diag", {{"a", v}}));
    }
}

TEST_CASE("cpu: cumsum adds in f32 from the left, as ggml", "[cpu][misc]") {
    harness h(8668);
    tensor* a = h.leaf(f32, {3, 1, 1, 1});
    const float x[] = {1.0f, 1e-8f, -1.0f}; // 1 + 1e-8 rounds to 1 in f32: the last sum is 0
    std::memcpy(a->data, x, sizeof x);
    tensor* out = cumsum(h.ctx, a);
    REQUIRE(cpu::compute_forward(cpu::compute_params{}, *out) == errc::ok);
    CHECK(bt::get(*out, 1) == 1.0);
    CHECK(bt::get(*out, 2) == 0.0);
}

// ssm_conv, ssm_scan

TEST_CASE("cpu: ssm_conv over shapes and layouts", "[cpu][recurrent]") {
    harness h(6301);
    for (int s = 0; s < 8; ++s) {
        const i64 d_conv = 1 + s % 4, d_inner = 1 + (s * 7) % 19, n_t = 1 + (s * 3) % 6, n_s = 1 + s % 3;
        tensor* sx = h.input(f32, {d_conv - 1 + n_t, d_inner, n_s, 1}, nth_layout(static_cast<std::size_t>(s), f32));
        tensor* c = h.input(f32, {d_conv, d_inner, 1, 1}, nth_layout(static_cast<std::size_t>(s + 3), f32));
        tensor* out = ssm_conv(h.ctx, sx, c);
        CHECK(out->ne == extents{d_inner, n_t, n_s, 1});
        h.check(out, {.max_nmse = 1e-12}, describe("ssm_conv", {{"sx", sx}, {"c", c}}));
    }
    SECTION("the window of token t is columns t to t + d_conv - 1") {
        tensor* sx = h.leaf(f32, {4, 1, 1, 1});
        tensor* c = h.leaf(f32, {2, 1, 1, 1});
        for (i64 i = 0; i < 4; ++i) bt::set(*sx, i, 0, 0, 0, static_cast<double>(i + 1));
        bt::set(*c, 0, 0, 0, 0, 10.0);
        bt::set(*c, 1, 0, 0, 0, 1.0);
        tensor* out = ssm_conv(h.ctx, sx, c);
        REQUIRE(cpu::compute_forward(cpu::compute_params{}, *out) == errc::ok);
        CHECK(bt::get(*out, 0, 0) == 12.0);
        CHECK(bt::get(*out, 0, 1) == 23.0);
        CHECK(bt::get(*out, 0, 2) == 34.0);
    }
}

namespace {
/// An ssm_scan node of h's: Mamba-1 (A per state) or Mamba-2, ids picking states of n_rs.
tensor* ssm_scan_case(harness& h, bool mamba1, i64 d_state, i64 head_dim, i64 n_head, i64 n_group, i64 n_t, i64 n_s,
                      i64 n_rs, double dt_hi, layout l) {
    tensor* st = h.input(f32, {d_state, head_dim, n_head, n_rs}, layout::contiguous);
    tensor* x = h.input(f32, {head_dim, n_head, n_t, n_s}, l);
    tensor* dt = h.input(f32, {n_head, n_t, n_s, 1}, layout::contiguous, -3.0, dt_hi);
    tensor* A = h.input(f32, {mamba1 ? d_state : 1, n_head, 1, 1}, layout::contiguous, -2.0, -0.1);
    tensor* B = h.input(f32, {d_state, n_group, n_t, n_s}, l);
    tensor* C = h.input(f32, {d_state, n_group, n_t, n_s}, l);
    tensor* ids = h.leaf(i32, {n_s, 1, 1, 1});
    for (i64 k = 0; k < n_s; ++k) bt::set(*ids, k, 0, 0, 0, static_cast<double>((k * 2 + 1) % n_rs));
    return ssm_scan(h.ctx, st, x, dt, A, B, C, ids);
}
} // namespace

TEST_CASE("cpu: ssm_scan in the Mamba-1 and Mamba-2 layouts", "[cpu][recurrent]") {
    harness h(6302);
    for (int s = 0; s < 8; ++s) {
        const bool mamba1 = s % 2 == 0;
        const i64 d_state = mamba1 ? 1 + (s * 5) % 16 : 1 + (s * 7) % 33, n_group = mamba1 ? 1 : 1 + s % 2;
        const i64 n_head = mamba1 ? 1 + (s * 3) % 9 : n_group * (1 + s % 3), head_dim = mamba1 ? 1 : 1 + (s * 3) % 8;
        const i64 n_t = 1 + (s * 5) % 7, n_s = 1 + s % 3, n_rs = n_s + s % 2;
        tensor* out = ssm_scan_case(h, mamba1, d_state, head_dim, n_head, n_group, n_t, n_s, n_rs, s < 2 ? 25.0 : 2.0,
                                    s % 3 == 0 ? layout::offset : layout::contiguous);
        CHECK(out->ne == extents{head_dim * n_head * n_t * n_s + d_state * head_dim * n_head * n_s, 1, 1, 1});
        h.check(out, {.max_nmse = 1e-10}, std::string("ssm_scan ") + (mamba1 ? "Mamba-1" : "Mamba-2") + " case " + std::to_string(s));
    }
    SECTION("x, B and C strided in dims 2 and 3 (views of wider tensors)") {
        tensor* st = h.input(f32, {8, 4, 2, 2}, layout::contiguous);
        tensor* xw = h.input(f32, {4, 2, 7, 2}, layout::contiguous);
        tensor* bw = h.input(f32, {8, 1, 9, 2}, layout::contiguous);
        tensor* x = view_4d(h.ctx, xw, 4, 2, 5, 2, xw->nb[1], xw->nb[2], xw->nb[3], xw->nb[2]);
        tensor* B = view_4d(h.ctx, bw, 8, 1, 5, 2, bw->nb[1], bw->nb[2], bw->nb[3], 0);
        tensor* C = view_4d(h.ctx, bw, 8, 1, 5, 2, bw->nb[1], bw->nb[2], bw->nb[3], 4 * bw->nb[2]);
        tensor* dt = h.input(f32, {2, 5, 2, 1}, layout::contiguous);
        tensor* A = h.input(f32, {1, 2, 1, 1}, layout::contiguous, -2.0, -0.1);
        tensor* ids = h.leaf(i32, {2, 1, 1, 1});
        bt::set(*ids, 0, 0, 0, 0, 1.0);
        bt::set(*ids, 1, 0, 0, 0, 1.0); // both sequences start from state 1
        h.check(ssm_scan(h.ctx, st, x, dt, A, B, C, ids), {.max_nmse = 1e-10}, "ssm_scan of views");
    }
    SECTION("one step by hand: state = s exp(d A) + B x d, y = state C") {
        tensor* out = ssm_scan_case(h, false, 1, 1, 1, 1, 1, 1, 1, 2.0, layout::contiguous);
        REQUIRE(cpu::compute_forward(cpu::compute_params{}, *out) == errc::ok);
        const double d = std::log1p(std::exp(bt::get(*out->src[2], 0)));
        const double state = bt::get(*out->src[0], 0) * std::exp(d * bt::get(*out->src[3], 0)) +
                             bt::get(*out->src[4], 0) * bt::get(*out->src[1], 0) * d;
        CHECK(bt::get(*out, 1) == Approx(state).epsilon(1e-5));
        CHECK(bt::get(*out, 0) == Approx(state * bt::get(*out->src[5], 0)).epsilon(1e-5));
    }
    SECTION("a state id out of range is reported, and never read") {
        tensor* out = ssm_scan_case(h, true, 4, 1, 3, 1, 2, 2, 2, 2.0, layout::contiguous);
        out->src[0]->name = "states";
        out->name = "scanned";
        bt::set(*out->src[6], 1, 0, 0, 0, 2.0); // sequence 1 asks for state 2 of 2
        cpu_backend backend;
        const status st = backend.compute(graph(out));
        CHECK(st.code() == errc::out_of_range);
        CHECK_THAT(st.message(), Catch::Contains("ssm_scan") && Catch::Contains("scanned") && Catch::Contains("states"));
        for (i64 i = 3 * 2; i < 3 * 2 * 2; ++i) CHECK(bt::get(*out, i) == 0.0);        // sequence 1's y
        for (i64 i = 12 + 4 * 3; i < 12 + 4 * 3 * 2; ++i) CHECK(bt::get(*out, i) == 0.0); // its states
    }
}

namespace {
/// A gated_linear_attn, rwkv_wkv6 or rwkv_wkv7 node of h's over n_seqs sequences of T /
/// n_seqs tokens; decays in (0.5, 1).
tensor* linear_attention_case(harness& h, op_kind op, i64 S, i64 H, i64 T, i64 n_seqs) {
    const auto tok = [&](double lo, double hi) { return h.input(f32, {S, H, T, 1}, layout::contiguous, lo, hi); };
    tensor* state = h.input(f32, {S * S * H, n_seqs, 1, 1}, layout::contiguous);
    if (op == op_kind::gated_linear_attn) {
        tensor *k = tok(-1, 1), *v = tok(-1, 1), *q = tok(-1, 1), *g = tok(0.5, 1);
        return gated_linear_attn(h.ctx, k, v, q, g, state, 0.25f);
    }
    if (op == op_kind::rwkv_wkv6) {
        tensor *k = tok(-1, 1), *v = tok(-1, 1), *r = tok(-1, 1);
        tensor* tf = h.input(f32, {S, H, 1, 1}, layout::contiguous);
        tensor* td = tok(0.5, 1);
        return rwkv_wkv6(h.ctx, k, v, r, tf, td, state);
    }
    tensor *r = tok(-1, 1), *w = tok(0.5, 1), *k = tok(-1, 1), *v = tok(-1, 1), *a = tok(-0.5, 0.5), *b = tok(-0.5, 0.5);
    return rwkv_wkv7(h.ctx, r, w, k, v, a, b, state);
}
} // namespace

TEST_CASE("cpu: gated_linear_attn, rwkv_wkv6 and rwkv_wkv7 over one and more sequences", "[cpu][recurrent]") {
    harness h(6303);
    for (const op_kind op : {op_kind::gated_linear_attn, op_kind::rwkv_wkv6, op_kind::rwkv_wkv7})
        for (int s = 0; s < 5; ++s) {
            const i64 S = 1 + (s * 7) % 17, H = 1 + s % 3, n_seqs = 1 + s % 3, T = n_seqs * (1 + (s * 3) % 5);
            tensor* out = linear_attention_case(h, op, S, H, T, n_seqs);
            CHECK(out->ne == extents{S * H, T + S * n_seqs, 1, 1});
            h.check(out, {.max_nmse = 1e-10}, std::string(to_string(op)) + " case " + std::to_string(s));
        }
    SECTION("one head of size 1, one token, by hand") {
        tensor* g = linear_attention_case(h, op_kind::gated_linear_attn, 1, 1, 1, 1);
        tensor* w6 = linear_attention_case(h, op_kind::rwkv_wkv6, 1, 1, 1, 1);
        tensor* w7 = linear_attention_case(h, op_kind::rwkv_wkv7, 1, 1, 1, 1);
        for (tensor* t : {g, w6, w7}) REQUIRE(cpu::compute_forward(cpu::compute_params{}, *t) == errc::ok);
        const auto in = [](tensor* t, int j) { return bt::get(*t->src[j], 0); };
        // gated_linear_attn: st = st * g + k v, y = st * q * scale
        const double sg = in(g, 4) * in(g, 3) + in(g, 0) * in(g, 1);
        CHECK(bt::get(*g, 0, 1) == Approx(sg).epsilon(1e-5));
        CHECK(bt::get(*g, 0, 0) == Approx(sg * in(g, 2) * 0.25).epsilon(1e-5));
        // rwkv_wkv6: y = r (tf k v + st), st = st td + k v
        const double kv = in(w6, 0) * in(w6, 1);
        CHECK(bt::get(*w6, 0, 0) == Approx(in(w6, 2) * (in(w6, 3) * kv + in(w6, 5))).epsilon(1e-5));
        CHECK(bt::get(*w6, 0, 1) == Approx(in(w6, 5) * in(w6, 4) + kv).epsilon(1e-5));
        // rwkv_wkv7: st = st w + v k + (a st) b, y = st r
        const double s7 = in(w7, 6) * in(w7, 1) + in(w7, 3) * in(w7, 2) + in(w7, 4) * in(w7, 6) * in(w7, 5);
        CHECK(bt::get(*w7, 0, 1) == Approx(s7).epsilon(1e-5));
        CHECK(bt::get(*w7, 0, 0) == Approx(s7 * in(w7, 0)).epsilon(1e-5));
    }
}

TEST_CASE("cpu: timestep_embedding of even and odd dims", "[cpu][misc]") {
    harness h(8778);
    for (const auto& [n, dim, max_period] : std::vector<std::array<int, 3>>{
             {1, 8, 10000}, {3, 7, 10000}, {5, 64, 10000}, {2, 33, 100}, {4, 1, 10000}, {2, 2, 1}}) {
        tensor* t = h.input(f32, {n, 1, 1, 1}, layout::strided_rows, 0.0, 50.0);
        tensor* out = timestep_embedding(h.ctx, t, dim, max_period);
        CHECK(out->ne == extents{dim, n, 1, 1});
        // f32 arguments of up to 50 carry an absolute error of a few 1e-6 into cos and sin
        h.check(out, {.max_nmse = 1e-9, .max_rel = 2e-5, .rel_floor = 1.0},
                "timestep_embedding dim " + std::to_string(dim));
        if (dim % 2 != 0) CHECK(bt::get(*out, dim - 1, 0) == 0.0);
    }
}

TEST_CASE("cpu: out_prod of f32 and every quantized a, broadcast over dims 2 and 3", "[cpu][out_prod]") {
    harness h(8888);
    for (elem_type ta : all_elem_types) {
        if (ta != f32 && (!is_quantized(ta) || ta == elem_type::q8_K)) continue;
        const i64 m = is_quantized(ta) ? block_size(ta) * (block_size(ta) > 32 ? 1 : 2) : 13;
        const std::vector<std::pair<extents, extents>> shapes = {
            {{m, 5, 1, 1}, {7, 5, 1, 1}}, {{m, 3, 2, 1}, {4, 3, 4, 3}}, {{m, 1, 1, 2}, {9, 1, 3, 2}}};
        for (std::size_t s = 0; s < shapes.size(); ++s) {
            tensor* a = h.input(ta, shapes[s].first, is_quantized(ta) ? layout::contiguous : nth_layout(s, ta));
            if (is_quantized(ta)) // whole super-blocks of random values (the harness fills blocks of 32)
                backplane::conformance::detail::fill(*a, h.rng, -1.0, 1.0);
            tensor* b = h.input(f32, shapes[s].second, nth_layout(s + 1, f32));
            h.check(out_prod(h.ctx, a, b), {.max_nmse = 1e-7, .max_rel = 8 * ulp(f32), .rel_floor = 1.0},
                    describe("out_prod", {{"a", a}, {"b", b}}));
        }
    }
}

// ---------------------------------------------------------------------------------------
// pool_1d, pool_2d

TEST_CASE("cpu: pool_1d and pool_2d, max and avg, of f32 and f16 in any layout", "[cpu][pool]") {
    harness h(12012);
    for (elem_type t : {f32, f16}) {
        const auto& shapes = plain_shapes();
        for (std::size_t s = 0; s < shapes.size(); ++s) {
            tensor* a = h.input(t, shapes[s], nth_layout(s, t));
            const pool_window w = conformance::random_pool_window(h.rng, shapes[s], s % 2 == 1);
            const tolerance tol = w.op == pool_op::max ? tolerance{.max_nmse = 0.0, .exact = true} : tolerance{.max_nmse = 1e-12};
            h.check(conformance::pool_of(h.ctx, a, w), tol,
                    describe(s % 2 == 1 ? "pool_2d" : "pool_1d", {{"a", a}}) + (w.op == pool_op::max ? " max" : " avg") +
                        " k " + std::to_string(w.k0) + "x" + std::to_string(w.k1) + " s " + std::to_string(w.s0) + "x" +
                        std::to_string(w.s1) + " p " + std::to_string(w.p0) + "x" + std::to_string(w.p1));
        }
    }
}

TEST_CASE("cpu: pool padding cells, as ggml counts them", "[cpu][pool]") {
    harness h(12013);
    tensor* a = h.leaf(f32, {3, 1, 1, 1});
    const float cells[] = {1.0f, 2.0f, 4.0f};
    std::memcpy(a->data, cells, sizeof cells);
    // windows of 2 every cell, one padding cell on each side: [p 1] [1 2] [2 4] [4 p]
    tensor* avg_1d = pool_1d(h.ctx, a, pool_op::avg, 2, 1, 1);
    tensor* avg_2d = pool_2d(h.ctx, a, pool_op::avg, 2, 1, 1, 1, 1, 0);
    tensor* max_1d = pool_1d(h.ctx, a, pool_op::max, 2, 1, 1);
    // windows of 2 every 3 cells, two padding cells on each side: [p p] [2 4]
    tensor* empty_max = pool_1d(h.ctx, a, pool_op::max, 2, 3, 2);
    tensor* empty_avg = pool_1d(h.ctx, a, pool_op::avg, 2, 3, 2);
    for (tensor* r : {avg_1d, avg_2d, max_1d, empty_max, empty_avg}) REQUIRE(h.check(r, {.max_nmse = 0.0, .exact = true}, "pool"));
    constexpr float lowest = std::numeric_limits<float>::lowest();
    CHECK(row_values(avg_1d) == std::vector<float>{1.0f, 1.5f, 3.0f, 4.0f}); // padding cells not counted
    CHECK(row_values(avg_2d) == std::vector<float>{0.5f, 1.5f, 3.0f, 2.0f}); // padding cells count as zeros
    CHECK(row_values(max_1d) == std::vector<float>{1.0f, 2.0f, 4.0f, 4.0f});
    CHECK(row_values(empty_max) == std::vector<float>{lowest, 4.0f});
    CHECK(row_values(empty_avg) == std::vector<float>{0.0f, 3.0f});
}

// ---------------------------------------------------------------------------------------
// upscale

TEST_CASE("cpu: upscale in every mode, corners aligned or not, up and down, any layout", "[cpu][upscale]") {
    harness h(13013);
    const auto& shapes = plain_shapes();
    for (std::size_t s = 0; s < shapes.size(); ++s) {
        const extents ne = {std::min<i64>(shapes[s][0], 9), shapes[s][1], shapes[s][2], shapes[s][3]};
        tensor* a = h.input(f32, ne, nth_layout(s, f32));
        for (const std::uint32_t mode : conformance::upscale_modes) {
            const std::uint32_t flags = mode | (s % 2 != 0 ? scale_align_corners : 0u);
            const extents r = conformance::random_upscale_extents(h.rng, ne);
            const tolerance tol = mode == 0 ? tolerance{.max_nmse = 0.0, .exact = true} : tolerance{.max_nmse = 1e-10};
            h.check(interpolate(h.ctx, a, r[0], r[1], r[2], r[3], flags), tol,
                    describe("upscale", {{"a", a}}) + " mode " + std::to_string(flags) + " to " + str(r));
        }
    }
}

TEST_CASE("cpu: upscale of a row by 2, as ggml samples it", "[cpu][upscale]") {
    harness h(13014);
    tensor* a = h.leaf(f32, {2, 1, 1, 1});
    const float cells[] = {0.0f, 4.0f};
    std::memcpy(a->data, cells, sizeof cells);
    tensor* nearest = upscale(h.ctx, a, 2, scale_mode::nearest);
    tensor* half_pixel = interpolate(h.ctx, a, 4, 1, 1, 1, static_cast<std::uint32_t>(scale_mode::bilinear));
    tensor* corners = interpolate(h.ctx, a, 4, 1, 1, 1, static_cast<std::uint32_t>(scale_mode::bilinear) | scale_align_corners);
    for (tensor* r : {nearest, half_pixel, corners}) REQUIRE(h.check(r, {.max_nmse = 1e-12}, "upscale"));
    CHECK(nearest->ne[1] == 2);
    CHECK(row_values(nearest) == std::vector<float>{0.0f, 0.0f, 4.0f, 4.0f});
    CHECK(row_values(half_pixel) == std::vector<float>{0.0f, 1.0f, 3.0f, 4.0f}); // at -0.25 (clamped), 0.25, 0.75, 1.25 (clamped)
    const std::vector<float> c = row_values(corners);                             // at 0, 1/3, 2/3, 1
    CHECK(c[0] == 0.0f);
    CHECK(c[1] == Approx(4.0 / 3.0));
    CHECK(c[2] == Approx(8.0 / 3.0));
    CHECK(c[3] == 4.0f);
}

// ---------------------------------------------------------------------------------------
// pad_reflect_1d, roll

TEST_CASE("cpu: pad_reflect_1d and roll of f32 f16 bf16 in any layout", "[cpu][remap]") {
    harness h(14014);
    for (elem_type t : {f32, f16, bf16}) {
        const auto& shapes = plain_shapes();
        for (std::size_t s = 0; s < shapes.size(); ++s) {
            tensor* a = h.input(t, shapes[s], nth_layout(s, t));
            const bool reflect = s % 2 == 0;
            tensor* r = conformance::remap_of(h.ctx, a, reflect, h.rng);
            h.check(r, {.max_nmse = 0.0, .exact = true},
                    describe(reflect ? "pad_reflect_1d" : "roll", {{"a", a}}) + " params " + std::to_string(r->param<std::int32_t>(0)) +
                        " " + std::to_string(r->param<std::int32_t>(1)) + " " + std::to_string(r->param<std::int32_t>(2)));
        }
    }
}

TEST_CASE("cpu: pad_reflect_1d mirrors without the ends, roll wraps around", "[cpu][remap]") {
    harness h(14015);
    tensor* a = h.leaf(f32, {4, 1, 1, 1});
    const float cells[] = {1.0f, 2.0f, 3.0f, 4.0f};
    std::memcpy(a->data, cells, sizeof cells);
    tensor* reflected = pad_reflect_1d(h.ctx, a, 2, 3);
    tensor* right = roll(h.ctx, a, 1);
    tensor* left = roll(h.ctx, a, -3);
    for (tensor* r : {reflected, right, left}) REQUIRE(h.check(r, {.max_nmse = 0.0, .exact = true}, "remap"));
    CHECK(row_values(reflected) == std::vector<float>{3.0f, 2.0f, 1.0f, 2.0f, 3.0f, 4.0f, 3.0f, 2.0f, 1.0f});
    CHECK(row_values(right) == std::vector<float>{4.0f, 1.0f, 2.0f, 3.0f});
    CHECK(row_values(left) == std::vector<float>{4.0f, 1.0f, 2.0f, 3.0f});
}

TEST_CASE("cpu: count_equal of i32 tensors in any layout", "[cpu][misc]") {
    harness h(8998);
    const auto& shapes = plain_shapes();
    for (std::size_t s = 0; s < shapes.size(); s += 3) {
        tensor* a = h.input(i32, shapes[s], nth_layout(s, i32), 0, 3); // few values: many matches
        tensor* b = h.input(i32, shapes[s], nth_layout(s + 1, i32), 0, 3);
        h.check(count_equal(h.ctx, a, b), {.max_nmse = 0.0, .exact = true}, describe("count_equal", {{"a", a}, {"b", b}}));
    }
}

TEST_CASE("cpu: acc into views with gaps, offsets and broadcast-free strides", "[cpu][misc]") {
    harness h(9119);
    struct view_case {
        extents a, b;
        std::size_t nb1, nb2, nb3, offset; // in elements of 4 bytes
    };
    const view_case cases[] = {
        {{8, 6, 3, 2}, {3, 2, 2, 1}, 8, 48, 144, 9},      // a's own strides, from element (1, 1, 0, 0)
        {{8, 6, 3, 2}, {8, 6, 3, 2}, 8, 48, 144, 0},      // all of a
        {{40, 1, 1, 1}, {3, 4, 1, 1}, 5, 20, 20, 1},      // rows of 3 every 5 elements of a vector
        {{7, 5, 3, 1}, {7, 5, 3, 1}, 7, 35, 105, 0},      // odd sizes
        {{16, 4, 1, 1}, {1, 1, 1, 1}, 0, 0, 0, 63},       // the last element
        {{9, 9, 1, 1}, {2, 3, 2, 1}, 9, 30, 90, 4},       // a gap between planes
    };
    for (const view_case& c : cases) {
        tensor* a = h.input(f32, c.a, layout::contiguous);
        tensor* b = h.input(f32, c.b, layout::strided_rows);
        h.check(acc(h.ctx, a, b, 4 * c.nb1, 4 * c.nb2, 4 * c.nb3, 4 * c.offset), {.max_nmse = 0.0, .exact = true},
                describe("acc", {{"a", a}, {"b", b}}));
    }
}

TEST_CASE("cpu: arange in f32 as ggml rounds it", "[cpu][arange]") {
    harness h(8338);
    for (const auto& [start, stop, step] : std::vector<std::array<float, 3>>{
             {0.0f, 10.0f, 1.0f}, {-3.5f, 7.25f, 0.75f}, {0.1f, 0.35f, 0.05f}, {1.0f, 1.5f, 2.0f}, {-1e4f, 1e4f, 3.3f}}) {
        INFO(start << " " << stop << " " << step);
        tensor* out = arange(h.ctx, start, stop, step);
        CHECK(out->ne[0] == static_cast<i64>(std::ceil((stop - start) / step)));
        h.check(out, {.max_nmse = 0.0, .exact = true}, "arange");
    }
}

TEST_CASE("cpu: concat along every dimension, of every type", "[cpu][concat]") {
    harness h(10010);
    for (elem_type t : {f32, f16, bf16, q8_0, q4_0, i32, elem_type::i64}) {
        const auto& shapes = shapes_for(t);
        for (std::size_t s = 0; s < shapes.size(); ++s) {
            const int dim = static_cast<int>(s % 4);
            const extents na = shapes[s];
            extents nb = na;
            nb[static_cast<std::size_t>(dim)] = dim == 0 && is_quantized(t) ? 32 * (1 + static_cast<i64>(h.rng() % 2))
                                                                              : 1 + static_cast<i64>(h.rng() % 4);
            tensor* a = h.input(t, na, nth_layout(s, t), -100, 100);
            tensor* b = h.input(t, nb, nth_layout(s + 1, t), -100, 100);
            h.check(concat(h.ctx, a, b, dim), {.max_nmse = 0.0, .exact = true},
                    describe("concat dim " + std::to_string(dim), {{"a", a}, {"b", b}}));
        }
    }
}

// ---------------------------------------------------------------------------------------
// glu

TEST_CASE("cpu: glu, every function, fused, swapped and split, in f32, f16 and bf16", "[cpu][glu]") {
    harness h(10020);
    // the layouts with contiguous rows (the op's rule): fresh, at an odd offset, padded rows
    const layout layouts[] = {layout::contiguous, layout::offset, layout::strided_rows};
    const glu_op fns[] = {glu_op::reglu,      glu_op::geglu,     glu_op::swiglu,
                          glu_op::swiglu_oai, glu_op::geglu_erf, glu_op::geglu_quick};
    for (const glu_op fn : fns) {
        // reglu multiplies two values of the type exactly in f32; gelu_erf cancels for
        // negative x (an absolute error of a few steps of |x| <= 6, times |g| <= 6); the
        // rest are libm's f32 functions (a few steps), then one product and one rounding,
        // which for f16 and bf16 may round the other way than the exact value does (one
        // step, whence the NMSE of a 16-bit result)
        const bool exact = fn == glu_op::reglu;
        const bool cancels = fn == glu_op::geglu_erf;
        for (elem_type t : float_types) {
            const double steps = t == f32 ? 32 : 1;
            const double nmse = t == f32 ? 1e-7 : 5e-4;
            const tolerance tol = exact     ? tolerance{.max_nmse = 0.0, .exact = true}
                                  : cancels ? tolerance{.max_nmse = 1.0, .max_abs = 36 * steps * ulp(t)}
                                            : tolerance{.max_nmse = nmse, .max_rel = steps * ulp(t), .rel_floor = 1e-3};
            const auto& shapes = plain_shapes();
            for (std::size_t s = 0; s < shapes.size(); ++s) {
                const layout l = layouts[s % 3];
                const std::string name = "glu " + std::to_string(static_cast<int>(fn));
                auto build = [&](tensor* a, tensor* b, bool swapped) {
                    if (fn == glu_op::swiglu_oai) return swiglu_oai(h.ctx, a, b, 1.702f, 4.0f);
                    return b != nullptr ? glu_split(h.ctx, a, b, fn) : glu(h.ctx, a, fn, swapped);
                };
                // fused: rows of 2 * ne0 values, one more for odd s (ggml ignores it)
                extents fused = shapes[s];
                fused[0] = 2 * fused[0] + static_cast<i64>(s % 2);
                tensor* a = h.input(t, fused, l, -6, 6);
                h.check(build(a, nullptr, false), tol, describe(name + " fused", {{"a", a}}));
                if (fn != glu_op::swiglu_oai)
                    h.check(build(a, nullptr, true), tol, describe(name + " swapped", {{"a", a}}));
                tensor* x = h.input(t, shapes[s], l, -6, 6);
                tensor* g = h.input(t, shapes[s], layouts[(s + 1) % 3], -6, 6);
                h.check(build(x, g, false), tol, describe(name + " split", {{"a", x}, {"b", g}}));
            }
        }
    }
    CHECK(h.cases == (6 * 3 - 1) * 3 * static_cast<int>(plain_shapes().size()));
}

// ---------------------------------------------------------------------------------------
// convolutions

namespace {

/// One convolution's geometry: strides, pads, dilations (s1, p1, d1 unused in 1-D).
struct conv_case {
    extents kernel, input;
    int s0, s1, p0, p1, d0, d1;
};

/// 2-D windows: 1 x 1 to 5 x 1 kernels, strides, pads (one wider than the kernel), dilations.
const conv_case windows_2d[] = {
    {{3, 3, 2, 4}, {5, 5, 2, 1}, 1, 1, 1, 1, 1, 1}, {{1, 1, 3, 2}, {4, 3, 3, 2}, 1, 1, 0, 0, 1, 1},
    {{3, 2, 1, 1}, {7, 6, 1, 3}, 2, 3, 0, 2, 1, 2}, {{2, 3, 3, 5}, {9, 4, 3, 1}, 3, 1, 2, 1, 2, 1},
    {{5, 1, 2, 3}, {5, 1, 2, 2}, 1, 1, 2, 0, 1, 1}, {{4, 4, 1, 1}, {3, 3, 1, 1}, 2, 2, 3, 3, 1, 1},
};

} // namespace

TEST_CASE("cpu: im2col 1-D and 2-D in f32 and f16, with strides, pads and dilations, any layout", "[cpu][im2col]") {
    harness h(9119);
    const conv_case cases_1d[] = {
        {{3, 2, 4, 1}, {9, 2, 1, 1}, 1, 0, 1, 0, 1, 0}, {{1, 3, 2, 1}, {5, 3, 2, 1}, 2, 0, 0, 0, 1, 0},
        {{4, 1, 1, 1}, {17, 1, 3, 1}, 3, 0, 2, 0, 2, 0}, {{2, 5, 3, 1}, {2, 5, 1, 1}, 1, 0, 1, 0, 1, 0},
    };
    std::size_t s = 0;
    for (elem_type tb : {f32, f16})
        for (elem_type td : {f32, f16})
            for (bool two_d : {true, false})
                for (const conv_case& c : two_d ? std::span<const conv_case>(windows_2d) : std::span<const conv_case>(cases_1d)) {
                    tensor* a = h.input(s % 2 ? f16 : f32, c.kernel, layout::contiguous);
                    tensor* b = h.input(tb, c.input, nth_layout(s++, tb));
                    tensor* out = im2col(h.ctx, a, b, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1, two_d, td);
                    h.check(out, {.max_nmse = 0.0, .exact = true}, describe(two_d ? "im2col 2-D" : "im2col 1-D", {{"a", a}, {"b", b}}));
                }
}

TEST_CASE("cpu: conv_2d and conv_1d (im2col, then mul_mat) match a direct convolution", "[cpu][im2col][conv]") {
    harness h(9229);
    cpu_backend backend;
    const auto close = [&](tensor* out, const bt::ref_tensor& expected, const std::string& what) {
        REQUIRE(backend.compute(graph(out)).ok());
        INFO(what << " " << str(out->ne));
        REQUIRE(out->ne == expected.ne);
        CHECK(bt::nmse(expected, *out) < 1e-7);
    };
    const conv_case cases_2d[] = {
        {{3, 3, 3, 5}, {8, 7, 3, 2}, 1, 1, 1, 1, 1, 1},
        {{2, 3, 2, 3}, {9, 6, 2, 1}, 2, 1, 0, 2, 1, 2},
        {{1, 1, 4, 2}, {5, 3, 4, 3}, 1, 2, 0, 0, 1, 1},
    };
    for (elem_type tk : {f32, f16})
        for (const conv_case& c : cases_2d) {
            tensor* a = h.leaf(tk, c.kernel);
            tensor* b = h.leaf(f32, c.input);
            // the direct convolution (the oracle of conv_2d_direct) rounds the input to f16 under
            // an f16 kernel, as the f16 im2col does
            const bt::ref_tensor direct = bt::ref_forward(*conv_2d_direct(h.ctx, a, b, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1));
            close(conv_2d(h.ctx, a, b, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1), direct, describe("conv_2d", {{"a", a}, {"b", b}}));
        }
    // 1-D: the 2-D convolution of height 1. ggml's layout: the memory holds [ow, n, oc],
    // which the result reads as [ow, oc, n] (the same for n = 1).
    const conv_case cases_1d[] = {
        {{3, 4, 6, 1}, {11, 4, 1, 1}, 1, 1, 1, 0, 1, 1},
        {{2, 3, 2, 1}, {9, 3, 2, 1}, 2, 1, 1, 0, 3, 1},
    };
    for (const conv_case& c : cases_1d) {
        tensor* a = h.leaf(f16, c.kernel);
        tensor* b = h.leaf(f32, c.input);
        tensor* a2 = reshape(h.ctx, a, {c.kernel[0], 1, c.kernel[1], c.kernel[2]});
        tensor* b2 = reshape(h.ctx, b, {c.input[0], 1, c.input[1], c.input[2]});
        const bt::ref_tensor direct = // [ow, 1, oc, n]
            bt::ref_forward(*conv_2d_direct(h.ctx, a2, b2, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1));
        const i64 ow = direct.ne[0], oc = direct.ne[2], n = direct.ne[3];
        bt::ref_tensor expected(f32, {ow, oc, n, 1});
        for (i64 l = 0; l < ow * oc * n; ++l) { // mul_mat's [ow * n, oc] read as [ow, oc, n]
            const i64 r = l % (ow * n), o = l / (ow * n);
            expected.v[static_cast<std::size_t>(l)] = direct.at(r % ow, 0, o, r / ow);
        }
        close(conv_1d(h.ctx, a, b, c.s0, c.p0, c.d0), expected, describe("conv_1d", {{"a", a}, {"b", b}}));
    }
}

TEST_CASE("cpu: conv_2d_direct against the oracle, f32 and f16 kernels, any layout", "[cpu][conv_2d]") {
    harness h(9339);
    std::vector<conv_case> cases(std::begin(windows_2d), std::end(windows_2d));
    cases.push_back({{3, 3, 16, 8}, {9, 7, 16, 2}, 1, 2, 1, 1, 2, 1}); // the fast path's shapes (K * oc >= 256)
    std::size_t s = 0;
    for (elem_type tk : {f32, f16})
        for (const conv_case& c : cases) {
            tensor* a = h.input(tk, c.kernel, nth_layout(s, tk));
            tensor* b = h.input(f32, c.input, nth_layout(s + 1, f32));
            ++s;
            tensor* out = conv_2d_direct(h.ctx, a, b, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1);
            const std::string what = describe("conv_2d", {{"a", a}, {"b", b}});
            h.check(out, {.max_nmse = 1e-10}, what);
            graph g(out);
            bt::fill_random(*out, h.rng, 10.0, 20.0); // nothing left of the fast mode's run
            cpu_backend reference({.n_threads = 2, .reference = true});
            REQUIRE(reference.compute(g).ok());
            INFO(what << " (reference kernel)");
            CHECK(bt::nmse(bt::ref_forward(*out), *out) <= 1e-10);
        }
}

TEST_CASE("cpu: conv_2d_dw_direct against the oracle, WHCN and channel-last (CWHN) inputs, any layout", "[cpu][conv_2d_dw]") {
    harness h(9771);
    std::size_t s = 0;
    for (const conv_case& c : windows_2d)
        for (const bool cwhn : {false, true}) {
            const extents kne = {c.kernel[0], c.kernel[1], 1, c.input[2]};
            tensor* a = nullptr;
            tensor* b = nullptr;
            if (cwhn) { // ggml's channel-last layout: channels first in memory, permuted to [w, h, c, n]
                a = permute(h.ctx, h.leaf(f32, {kne[3], kne[0], kne[1], 1}), 3, 0, 1, 2);
                b = permute(h.ctx, h.leaf(f32, {c.input[2], c.input[0], c.input[1], c.input[3]}), 2, 0, 1, 3);
            } else {
                a = h.input(f32, kne, nth_layout(s, f32));
                b = h.input(f32, c.input, nth_layout(s + 1, f32));
                ++s;
            }
            tensor* out = conv_2d_dw_direct(h.ctx, a, b, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1);
            const bool last = cwhn && c.input[2] > 1;
            CHECK(out->is_contiguous() == !last);
            if (last) CHECK(out->nb == channels_last_strides(out->ne, sizeof(float)));
            h.check(out, {.max_nmse = 1e-10}, describe("conv_2d_dw", {{"a", a}, {"b", b}}));
        }
}

TEST_CASE("cpu: conv_2d_dw (im2col, then mul_mat) matches the direct depthwise convolution", "[cpu][conv_2d_dw]") {
    harness h(9881);
    for (elem_type tk : {f32, f16})
        for (const conv_case& c : windows_2d) {
            tensor* a = h.leaf(tk, {c.kernel[0], c.kernel[1], 1, c.input[2]});
            tensor* b = h.leaf(f32, c.input);
            tensor* a32 = tk == f32 ? a : h.leaf(f32, a->ne);
            if (tk == f16) // the same kernel, widened exactly
                bt::for_each_index(a->ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) { bt::set(*a32, i0, i1, i2, i3, bt::get(*a, i0, i1, i2, i3)); });
            const bt::ref_tensor direct = bt::ref_forward(*conv_2d_dw_direct(h.ctx, a32, b, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1));
            tensor* composite = conv_2d_dw(h.ctx, a, b, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1);
            REQUIRE(composite->ne == direct.ne);
            graph g(composite);
            cpu_backend backend;
            REQUIRE(backend.compute(g).ok());
            INFO(describe("conv_2d_dw", {{"a", a}, {"b", b}}));
            CHECK(bt::nmse(direct, *composite) <= 1e-5); // the windows rounded to f16
        }
}

TEST_CASE("cpu: win_part and win_unpart against the oracle, padded windows, any layout, and back", "[cpu][window]") {
    harness h(9991);
    struct case_w {
        extents image; // [c, w0, h0]
        int w;
    };
    // windows that divide the image, padded ones, one window past the whole image, 1 x 1
    const case_w cases[] = {{{3, 6, 4, 1}, 2}, {{2, 7, 5, 1}, 3}, {{4, 3, 2, 1}, 5}, {{1, 5, 5, 1}, 1}, {{5, 9, 4, 1}, 4}};
    std::size_t s = 0;
    for (const case_w& c : cases) {
        tensor* img = h.input(f32, c.image, nth_layout(s++, f32));
        tensor* parts = win_part(h.ctx, img, c.w);
        h.check(parts, {.exact = true}, describe("win_part", {{"a", img}}));
        tensor* windows = h.input(f32, parts->ne, nth_layout(s++, f32));
        h.check(win_unpart(h.ctx, windows, static_cast<int>(c.image[1]), static_cast<int>(c.image[2]), c.w), {.exact = true},
                describe("win_unpart", {{"a", windows}}));
        // win_unpart undoes win_part
        tensor* round = win_unpart(h.ctx, parts, static_cast<int>(c.image[1]), static_cast<int>(c.image[2]), c.w);
        graph g(round);
        cpu_backend backend;
        REQUIRE(backend.compute(g).ok());
        CHECK(bt::nmse(bt::read(*img), *round) == 0.0);
    }
}

TEST_CASE("cpu: get_rel_pos against the oracle, any layout", "[cpu][window]") {
    harness h(9992);
    std::size_t s = 0;
    for (const extents& q : {extents{4, 1, 1, 1}, extents{3, 2, 1, 1}, extents{8, 5, 1, 1}, extents{1, 7, 1, 1}}) {
        tensor* a = h.input(f16, {q[0], 2 * q[1] - 1, 1, 1}, nth_layout(s++, f16));
        tensor* out = get_rel_pos(h.ctx, a, static_cast<int>(q[1]), static_cast<int>(q[1]));
        h.check(out, {.exact = true}, describe("get_rel_pos", {{"a", a}}));
    }
}

TEST_CASE("cpu: conv_transpose_1d against the oracle, f32 and f16 kernels, any layout", "[cpu][conv_transpose]") {
    harness h(9551);
    struct case_1d {
        extents kernel, input; // [k, oc, ic], [iw, ic]
        int s0;
    };
    // strides below, at and above the kernel's width (gaps between the taps), one channel,
    // one input position, a one-tap kernel
    const case_1d cases[] = {
        {{3, 2, 4, 1}, {7, 4, 1, 1}, 1}, {{3, 1, 2, 1}, {5, 2, 1, 1}, 3}, {{2, 3, 1, 1}, {6, 1, 1, 1}, 4},
        {{5, 2, 3, 1}, {1, 3, 1, 1}, 2}, {{1, 4, 2, 1}, {9, 2, 1, 1}, 2}, {{4, 3, 5, 1}, {8, 5, 1, 1}, 2},
    };
    std::size_t s = 0;
    for (elem_type tk : {f32, f16})
        for (const case_1d& c : cases) {
            tensor* a = h.input(tk, c.kernel, nth_layout(s, tk));
            tensor* b = h.input(f32, c.input, nth_layout(s + 1, f32));
            ++s;
            tensor* out = conv_transpose_1d(h.ctx, a, b, c.s0);
            REQUIRE(out->ne == extents{(c.input[0] - 1) * c.s0 + c.kernel[0], c.kernel[1], 1, 1});
            h.check(out, {.max_nmse = 1e-10}, describe("conv_transpose_1d", {{"a", a}, {"b", b}}));
        }
}

TEST_CASE("cpu: conv_transpose_2d against the oracle, f32 and f16 kernels, any layout, batches", "[cpu][conv_transpose]") {
    harness h(9661);
    struct case_2d {
        extents kernel, input; // [kw, kh, oc, ic], [iw, ih, ic, n]
        int stride;
    };
    // strides below, at and above the kernel's extents, one channel, a 1 x 1 input, a batch
    // of three (each image its own result; ggml's CPU computes the first only)
    const case_2d cases[] = {
        {{3, 3, 2, 4}, {5, 4, 4, 1}, 1}, {{2, 3, 1, 2}, {4, 5, 2, 2}, 2}, {{2, 2, 3, 1}, {3, 3, 1, 3}, 3},
        {{4, 2, 2, 3}, {1, 1, 3, 1}, 2}, {{1, 1, 2, 2}, {6, 5, 2, 1}, 2}, {{3, 4, 2, 5}, {4, 3, 5, 2}, 2},
    };
    std::size_t s = 0;
    for (elem_type tk : {f32, f16})
        for (const case_2d& c : cases) {
            tensor* a = h.input(tk, c.kernel, nth_layout(s, tk));
            tensor* b = h.input(f32, c.input, nth_layout(s + 1, f32));
            ++s;
            tensor* out = conv_transpose_2d_p0(h.ctx, a, b, c.stride);
            REQUIRE(out->ne == extents{(c.input[0] - 1) * c.stride + c.kernel[0], (c.input[1] - 1) * c.stride + c.kernel[1],
                                       c.kernel[2], c.input[3]});
            h.check(out, {.max_nmse = 1e-10}, describe("conv_transpose_2d", {{"a", a}, {"b", b}}));
        }
}

TEST_CASE("cpu: conv_2d's fast path (unrolled windows times the kernel) matches the reference kernel", "[cpu][conv_2d]") {
    harness h(9449);
    // one tile and several (the tile holds about 4 MiB of windows), the GEMM's mat-vec
    // (oc <= 8) and packed paths, a strided input and a batch of two
    const conv_case cases[] = {
        {{3, 3, 8, 16}, {12, 9, 8, 2}, 1, 1, 1, 1, 1, 1},
        {{3, 3, 128, 4}, {45, 45, 128, 1}, 1, 1, 1, 1, 1, 1},
        {{3, 3, 128, 12}, {43, 41, 128, 1}, 1, 1, 1, 1, 1, 1},
        {{2, 3, 6, 24}, {17, 13, 6, 2}, 2, 1, 0, 2, 1, 2},
    };
    std::vector<cpu::isa> levels;
    for (int l = 0; l <= static_cast<int>(cpu::detected_isa()); ++l) levels.push_back(static_cast<cpu::isa>(l));
    std::size_t s = 0;
    for (elem_type tk : {f32, f16})
        for (const conv_case& c : cases) {
            tensor* a = h.leaf(tk, c.kernel);
            tensor* b = h.input(f32, c.input, s++ % 2 ? layout::strided_rows : layout::contiguous);
            tensor* out = conv_2d_direct(h.ctx, a, b, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1);
            INFO(describe("conv_2d", {{"a", a}, {"b", b}}));
            REQUIRE(cpu::choose_kernel(*out, false) == cpu::kernel_kind::fast_conv_2d);
            graph g(out);
            cpu_backend reference({.n_threads = 1, .reference = true});
            REQUIRE(reference.compute(g).ok());
            const bt::ref_tensor expected = bt::read(*out);
            for (const cpu::isa level : levels)
                for (const int threads : {1, 2}) {
                    INFO("isa " << cpu::to_string(level) << ", " << threads << " threads");
                    bt::fill_random(*out, h.rng, 10.0, 20.0); // nothing left of the last run
                    cpu::set_isa_override(level);
                    cpu_backend fast({.n_threads = threads});
                    const status st = fast.compute(g);
                    cpu::clear_isa_override();
                    REQUIRE(st.ok());
                    CHECK(bt::nmse(expected, *out) <= 1e-10);
                }
        }
    // too little work per result element for the unrolling to pay: the reference kernel
    tensor* small = conv_2d_direct(h.ctx, h.leaf(f32, {3, 3, 2, 1}), h.leaf(f32, {8, 8, 2, 1}), 1, 1, 1, 1, 1, 1);
    CHECK(cpu::choose_kernel(*small, false) == cpu::kernel_kind::conv_2d);
}

// ---------------------------------------------------------------------------------------
// In place: the graph allocator gives a node its src[0]'s memory when the layouts match.

TEST_CASE("cpu: in-place ops are correct when dst aliases src[0]", "[cpu][inplace]") {
    harness h(11011);
    const std::vector<extents> shapes = {
        {1, 1, 1, 1}, {7, 3, 1, 1}, {32, 4, 2, 1}, {65, 2, 3, 2}, {16, 1, 1, 5}};
    auto run_inplace = [&](tensor* out, const tolerance& tol, const std::string& what) {
        tensor* src = out->src[0];
        REQUIRE(same_layout(*out, *src));
        const bt::ref_tensor expected = bt::ref_forward(*out); // before src is overwritten
        out->data = src->data;
        graph g(out);
        cpu_backend backend;
        const status st = backend.compute(g);
        INFO(what << ' ' << str(out->ne) << ": " << st.describe());
        REQUIRE(st.ok());
        const bt::comparison c =
            bt::compare(expected, *src, tol.rel_floor); // read through src's memory
        INFO("nmse " << c.nmse << " mismatches " << c.mismatches << " max rel " << c.max_rel_err);
        CHECK(c.nans == 0);
        CHECK(c.nmse <= tol.max_nmse);
        if (tol.exact)
            CHECK(c.mismatches == 0);
        if (tol.max_rel >= 0)
            CHECK(c.max_rel_err <= tol.max_rel);
    };
    for (std::size_t s = 0; s < shapes.size(); ++s) {
        const extents ne = shapes[s];
        for (elem_type t : float_types) {
            const tolerance exact{.max_nmse = 0.0, .exact = true};
            auto b_of = [&](double lo, double hi) {
                extents nb = ne;
                for (auto& n : nb)
                    n = random_divisor(h.rng, n);
                return h.input(t, nb, layout::strided_rows, lo, hi);
            };
            run_inplace(add(h.ctx, h.leaf(t, ne), b_of(-1, 1)), exact, "add");
            run_inplace(sub(h.ctx, h.leaf(t, ne), b_of(-1, 1)), exact, "sub");
            run_inplace(mul(h.ctx, h.leaf(t, ne), b_of(-1, 1)), exact, "mul");
            run_inplace(div(h.ctx, h.leaf(t, ne), b_of(0.5, 2)), exact, "div");
            run_inplace(scale(h.ctx, h.leaf(t, ne), 0.75f, 0.25f),
                        {.max_nmse = 1e-7, .max_rel = 2 * ulp(t), .rel_floor = 1.0}, "scale");
            run_inplace(sqr(h.ctx, h.leaf(t, ne)), exact, "sqr");
            run_inplace(backplane::sqrt(h.ctx, h.leaf(t, ne, 0, 4)), exact, "sqrt");
            run_inplace(silu(h.ctx, h.leaf(t, ne, -6, 6)),
                        {.max_nmse = 1e-7, .max_rel = 4 * ulp(t)}, "silu");
            run_inplace(gelu(h.ctx, h.leaf(t, ne, -6, 6)),
                        {.max_nmse = 1e-7, .max_rel = 32 * ulp(f32) + ulp(t)}, "gelu");
            run_inplace(relu(h.ctx, h.leaf(t, ne)), exact, "relu");
            run_inplace(reglu_split(h.ctx, h.leaf(t, ne), h.leaf(t, ne)), exact, "reglu split");
            run_inplace(swiglu_split(h.ctx, h.leaf(t, ne, -6, 6), h.leaf(t, ne)),
                        {.max_nmse = 1e-7, .max_rel = 4 * ulp(f32) + ulp(t), .rel_floor = 1e-3}, "swiglu split");
        }
        for (elem_type t : {f32, f16}) {
            tensor* pos = h.leaf(i32, {ne[2], 1, 1, 1}, 0, 4096);
            const int n_dims = static_cast<int>(ne[0] >= 2 ? (ne[0] & ~i64{1}) : 0);
            if (n_dims == 0)
                continue;
            const tolerance tol =
                t == f32 ? tolerance{.max_nmse = 1e-7, .max_rel = 1e-6, .rel_floor = 1.0}
                         : tolerance{.max_nmse = 5e-4, .max_rel = ulp(f16), .rel_floor = 1.0};
            run_inplace(rope(h.ctx, h.leaf(t, ne), pos, n_dims, rope_mode::normal), tol,
                        "rope normal");
            run_inplace(rope(h.ctx, h.leaf(t, ne), pos, n_dims, rope_mode::neox), tol, "rope neox");
        }
        run_inplace(rms_norm(h.ctx, h.leaf(f32, ne), 1e-5f),
                    {.max_nmse = 1e-7, .max_rel = 4 * ulp(f32)}, "rms_norm");
        run_inplace(norm(h.ctx, h.leaf(f32, ne), 1e-5f),
                    {.max_nmse = 1e-7, .max_rel = 8 * ulp(f32), .rel_floor = 1.0}, "norm");
        run_inplace(l2_norm(h.ctx, h.leaf(f32, ne), 1e-5f), {.max_nmse = 1e-7, .max_rel = 4 * ulp(f32)}, "l2_norm");
        run_inplace(group_norm(h.ctx, h.leaf(f32, ne), 2, 1e-5f),
                    {.max_nmse = 1e-7, .max_rel = 8 * ulp(f32), .rel_floor = 1.0}, "group_norm");
        tensor* mask = h.leaf(f16, {ne[0], ne[1], 1, 1}, -2, 2);
        run_inplace(soft_max(h.ctx, h.leaf(f32, ne, -3, 3), mask, 0.5f),
                    {.max_nmse = 1e-6, .max_rel = 32 * ulp(f32)}, "soft_max");
        run_inplace(soft_max(h.ctx, h.leaf(f32, ne, -3, 3)),
                    {.max_nmse = 1e-6, .max_rel = 32 * ulp(f32)}, "soft_max no mask");
    }
}

// ---------------------------------------------------------------------------------------
// The work split: thread ith of nth computes its share; together they equal one thread.

TEST_CASE("cpu: kernels split their rows across threads exactly", "[cpu][threads]") {
    harness h(12012);
    std::vector<tensor*> nodes;
    const extents ne = {64, 5, 3, 2};
    tensor* a = h.input(f32, ne, layout::permuted);
    tensor* b = h.input(f16, {64, 1, 3, 1}, layout::strided_rows);
    nodes.push_back(add(h.ctx, a, b));
    nodes.push_back(mul(h.ctx, a, b));
    nodes.push_back(scale(h.ctx, a, 2.0f, 1.0f));
    nodes.push_back(gelu(h.ctx, a));
    nodes.push_back(sum_rows(h.ctx, a));
    nodes.push_back(argmax(h.ctx, a));
    nodes.push_back(sum(h.ctx, a));
    nodes.push_back(mean(h.ctx, a));
    nodes.push_back(argsort(h.ctx, a, sort_order::desc));
    nodes.push_back(top_k(h.ctx, a, 7));
    nodes.push_back(rms_norm(h.ctx, a));
    nodes.push_back(norm(h.ctx, a));
    nodes.push_back(l2_norm(h.ctx, a));
    nodes.push_back(group_norm(h.ctx, a, 2));
    nodes.push_back(repeat_4d(h.ctx, a, 128, 10, 3, 4));
    nodes.push_back(repeat_back(h.ctx, a, h.leaf(f32, {32, 5, 1, 2})));
    nodes.push_back(cumsum(h.ctx, a));
    nodes.push_back(tri(h.ctx, h.input(f32, {9, 9, 3, 2}, layout::permuted), tri_type::lower));
    nodes.push_back(diag(h.ctx, h.input(f32, {9, 1, 3, 2}, layout::strided_rows)));
    nodes.push_back(count_equal(h.ctx, h.input(i32, {9, 5, 3, 2}, layout::permuted, 0, 2), h.input(i32, {9, 5, 3, 2}, layout::contiguous, 0, 2)));
    nodes.push_back(acc(h.ctx, h.input(f32, {64, 5, 3, 2}, layout::contiguous), h.input(f32, {9, 2, 2, 1}, layout::strided_rows), 256, 1280, 3840, 8));
    nodes.push_back(timestep_embedding(h.ctx, h.input(f32, {7, 1, 1, 1}, layout::contiguous, 0, 20), 33));
    nodes.push_back(ssm_conv(h.ctx, h.input(f32, {12, 9, 3, 1}, layout::permuted), h.input(f32, {4, 9, 1, 1}, layout::strided_rows)));
    nodes.push_back(ssm_scan_case(h, true, 8, 1, 9, 1, 3, 3, 4, 2.0, layout::contiguous));
    nodes.push_back(ssm_scan_case(h, false, 8, 4, 6, 2, 3, 2, 2, 2.0, layout::offset));
    for (const op_kind op : {op_kind::gated_linear_attn, op_kind::rwkv_wkv6, op_kind::rwkv_wkv7})
        nodes.push_back(linear_attention_case(h, op, 8, 7, 6, 2));
    nodes.push_back(out_prod(h.ctx, h.input(q4_0, {64, 5, 1, 2}, layout::contiguous), h.input(f32, {9, 5, 3, 2}, layout::permuted)));
    nodes.push_back(soft_max(h.ctx, a, h.leaf(f32, {64, 7, 1, 2}), 0.3f));
    nodes.push_back(dup(h.ctx, a));
    nodes.push_back(cpy(h.ctx, a, h.input(q8_0, {64, 30, 1, 1}, layout::contiguous)));
    nodes.push_back(cpy(h.ctx, a, h.input(bf16, {30, 64, 1, 1}, layout::transposed)));
    nodes.push_back(mul_mat(h.ctx, h.input(q4_0, {64, 9, 3, 1}, layout::strided_rows), a));
    nodes.push_back(get_rows(h.ctx, h.leaf(q8_0, {64, 10, 3, 2}), h.leaf(i32, {4, 3, 2, 1}, 0, 9)));
    nodes.push_back(rope(h.ctx, a, h.leaf(i32, {3, 1, 1, 1}, 0, 100), 48, rope_mode::neox));
    nodes.push_back(concat(h.ctx, a, h.input(f32, {64, 5, 3, 1}, layout::offset), 3));
    tensor* rows = h.input(f16, {64, 5, 3, 2}, layout::strided_rows);
    nodes.push_back(geglu_swapped(h.ctx, rows));
    nodes.push_back(swiglu(h.ctx, h.input(f32, {64, 5, 3, 2}, layout::strided_rows))); // the fast path
    nodes.push_back(swiglu_split(h.ctx, rows, h.input(f16, {64, 5, 3, 2}, layout::offset)));
    for (tensor* node : nodes) {
        INFO(to_string(node->op));
        REQUIRE(cpu::supports_op(*node));
        REQUIRE(cpu::compute_forward(cpu::compute_params{}, *node) == errc::ok);
        const bt::ref_tensor single = bt::read(*node);
        for (int nth : {2, 3, 7, 64}) {
            // scribble over the result, then run the threads' shares in reverse order
            bt::for_each_index(node->ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
                if (i0 % block_size(node->type) != 0)
                    return;
                std::memset(static_cast<std::byte*>(node->data) + node->offset_of(i0, i1, i2, i3),
                            0x5a, type_size(node->type));
            });
            for (int ith = nth - 1; ith >= 0; --ith)
                REQUIRE(cpu::compute_forward(cpu::compute_params{ith, nth}, *node) == errc::ok);
            INFO("nth " << nth);
            CHECK(bt::compare(single, *node).mismatches == 0);
        }
    }
}

// ---------------------------------------------------------------------------------------
// supports_op agrees with the builders: every combination the builders accept is claimed
// and computes correctly.

TEST_CASE("cpu: every type combination the builders accept is supported and correct",
          "[cpu][supports]") {
    harness h(13013);
    const std::vector<elem_type> types(all_elem_types.begin(), all_elem_types.end());
    int built = 0, refused = 0;
    // Builds with the given operand types, or returns null when the builder rejects them.
    auto attempt = [&](auto&& build) -> tensor* {
        try {
            return build();
        } catch (const backplane::error&) {
            return nullptr;
        }
    };
    auto verify = [&](tensor* out, const std::string& what) {
        if (out == nullptr)
            return;
        ++built;
        if (!cpu::supports_op(*out)) {
            ++refused;
            FAIL_CHECK("the builder accepts but the CPU refuses: " << what);
            return;
        }
        const double nmse = bt::default_max_nmse(*out);
        h.check(out, {.max_nmse = nmse, .exact = nmse == 0.0}, what);
    };
    auto in = [&](elem_type t, extents ne) {
        if (t == i32)
            return h.leaf(t, ne, 0, 3);  // valid indices / positions
        return h.leaf(t, ne, 0.25, 2.0); // positive: sqrt is defined
    };
    const extents ne = {64, 4, 3, 1};
    for (elem_type ta : types) {
        const std::string a_name{to_string(ta)};
        for (auto [name, f] :
             std::initializer_list<std::pair<const char*, tensor* (*)(context&, tensor*)>>{
                 {"dup", &dup},
                 {"cont", &cont},
                 {"sqr", &sqr},
                 {"sqrt", &backplane::sqrt},
                 {"silu", &silu},
                 {"gelu", &gelu},
                 {"relu", &relu},
                 {"sum_rows", &sum_rows},
                 {"sum", &sum},
                 {"mean", &mean},
                 {"argmax", &argmax}}) {
            verify(attempt([&] { return f(h.ctx, in(ta, ne)); }), std::string(name) + " " + a_name);
        }
        verify(attempt([&] { return scale(h.ctx, in(ta, ne), 0.5f, 1.0f); }), "scale " + a_name);
        verify(attempt([&] { return rms_norm(h.ctx, in(ta, ne)); }), "rms_norm " + a_name);
        verify(attempt([&] { return norm(h.ctx, in(ta, ne)); }), "norm " + a_name);
        verify(attempt([&] { return l2_norm(h.ctx, in(ta, ne)); }), "l2_norm " + a_name);
        verify(attempt([&] { return group_norm(h.ctx, in(ta, ne), 2); }), "group_norm " + a_name);
        verify(attempt([&] { return repeat_4d(h.ctx, in(ta, ne), 128, 4, 6, 2); }), "repeat " + a_name);
        verify(attempt([&] { return repeat_back(h.ctx, in(ta, ne), h.leaf(ta, {32, 2, 3, 1})); }), "repeat_back " + a_name);
        verify(attempt([&] { return cumsum(h.ctx, in(ta, ne)); }), "cumsum " + a_name);
        verify(attempt([&] { return tri(h.ctx, in(ta, {5, 5, 2, 1}), tri_type::upper); }), "tri " + a_name);
        verify(attempt([&] { return diag(h.ctx, in(ta, {5, 1, 2, 1})); }), "diag " + a_name);
        verify(attempt([&] { return timestep_embedding(h.ctx, in(ta, {5, 1, 1, 1}), 9); }), "timestep_embedding " + a_name);
        verify(attempt([&] { return ssm_conv(h.ctx, in(ta, {6, 4, 2, 1}), in(ta, {3, 4, 1, 1})); }), "ssm_conv " + a_name);
        verify(attempt([&] { return count_equal(h.ctx, in(ta, ne), in(ta, ne)); }), "count_equal " + a_name);
        verify(attempt([&] { return acc(h.ctx, in(ta, ne), in(ta, {3, 2, 1, 1}), 256, 1024, 4096, 4); }), "acc " + a_name);
        for (elem_type tb : types)
            verify(attempt([&] { return out_prod(h.ctx, in(ta, {64, 3, 1, 1}), in(tb, {5, 3, 2, 1})); }),
                   "out_prod " + a_name + " " + std::string(to_string(tb)));
        verify(attempt([&] { return soft_max(h.ctx, in(ta, ne)); }), "soft_max " + a_name);
        verify(attempt([&] { return swiglu(h.ctx, in(ta, ne)); }), "swiglu " + a_name);
        verify(attempt([&] { return argsort(h.ctx, in(ta, ne), sort_order::desc); }), "argsort " + a_name);
        verify(attempt([&] { return top_k(h.ctx, in(ta, ne), 5); }), "top_k " + a_name);
        for (elem_type tb : types) {
            const std::string ab = a_name + " x " + std::string(to_string(tb));
            verify(attempt([&] {
                       return add(h.ctx, in(ta, ne), in(tb, {64, 1, 3, 1}));
                   }),
                   "add " + ab);
            verify(attempt([&] { return sub(h.ctx, in(ta, ne), in(tb, ne)); }), "sub " + ab);
            verify(attempt([&] {
                       return mul(h.ctx, in(ta, ne), in(tb, {1, 4, 1, 1}));
                   }),
                   "mul " + ab);
            verify(attempt([&] { return div(h.ctx, in(ta, ne), h.leaf(tb, ne, 1, 2)); }),
                   "div " + ab);
            verify(attempt([&] {
                       return cpy(h.ctx, in(ta, ne), in(tb, {64, 3, 4, 1}));
                   }),
                   "cpy " + ab);
            verify(attempt([&] {
                       return mul_mat(h.ctx, in(ta, ne), in(tb, {64, 5, 3, 2}));
                   }),
                   "mul_mat " + ab);
            verify(attempt([&] {
                       return get_rows(h.ctx, in(ta, ne), in(tb, {2, 3, 1, 1}));
                   }),
                   "get_rows " + ab);
            verify(attempt([&] {
                       return concat(h.ctx, in(ta, ne), in(tb, {64, 2, 3, 1}), 1);
                   }),
                   "concat " + ab);
            verify(attempt([&] {
                       return soft_max(h.ctx, in(ta, ne), in(tb, {64, 4, 1, 1}), 0.5f);
                   }),
                   "soft_max mask " + ab);
            verify(attempt([&] {
                       return rope(h.ctx, in(ta, ne), in(tb, {3, 1, 1, 1}), 32, rope_mode::neox);
                   }),
                   "rope " + ab);
            verify(attempt([&] { return geglu_split(h.ctx, in(ta, ne), in(tb, ne)); }), "geglu split " + ab);
        }
    }
    INFO(built << " combinations built, " << refused << " refused");
    CHECK(refused == 0);
    CHECK(built >= 130); // grows when the builders accept more; never shrinks silently
}

// ---------------------------------------------------------------------------------------
// Statuses of the backend

TEST_CASE("cpu: unsupported nodes, missing data and the abort callback are statuses",
          "[cpu][status]") {
    harness h(14014);
    cpu_backend backend;

    SECTION("a node supports_op refuses is errc::not_supported and is not computed") {
        tensor* a = h.leaf(f32, {8, 2, 1, 1});
        tensor* out = add(h.ctx, a, h.leaf(f32, {8, 1, 1, 1}));
        out->src[1]->type = i32; // an i32 operand: no kernel
        std::memset(out->data, 0, out->nbytes());
        CHECK_FALSE(cpu::supports_op(*out));
        const status st = backend.compute(graph(out));
        CHECK(st.code() == errc::not_supported);
        CHECK(bt::get(*out, 3, 1) == 0.0);

        tensor* mm = mul_mat(h.ctx, h.leaf(q8_0, {32, 2, 1, 1}), h.leaf(f32, {32, 3, 1, 1}));
        mm->type = f16; // mul_mat writes f32 only
        CHECK_FALSE(cpu::supports_op(*mm));
        CHECK(backend.compute(graph(mm)).code() == errc::not_supported);

        tensor* odd = relu(h.ctx, h.leaf(f32, {4, 1, 1, 1}));
        odd->op = static_cast<op_kind>(200); // not an op at all
        CHECK_FALSE(cpu::supports_op(*odd));
        CHECK(backend.compute(graph(odd)).code() == errc::not_supported);
    }
    SECTION("a node or source without data is errc::invalid_argument") {
        tensor* out = relu(h.ctx, h.leaf(f32, {4, 1, 1, 1}));
        out->data = nullptr;
        CHECK(backend.compute(graph(out)).code() == errc::invalid_argument);

        context meta{context_params{.no_alloc = true}};
        tensor* x = meta.new_tensor(f32, {4, 4});
        tensor* y = silu(meta, x);
        CHECK(backend.compute(graph(y)).code() == errc::invalid_argument);
    }
    SECTION("the abort callback stops the compute with errc::aborted") {
        tensor* a = h.leaf(f32, {4, 1, 1, 1});
        tensor* n1 = scale(h.ctx, a, 2.0f);
        tensor* n2 = scale(h.ctx, n1, 3.0f);
        std::memset(n2->data, 0, n2->nbytes());
        int calls = 0;
        backend.set_abort_callback([&] { return ++calls > 1; }); // let the first node run
        const status st = backend.compute(graph(n2));
        CHECK(st.code() == errc::aborted);
        CHECK(bt::get(*n1, 2) == static_cast<float>(bt::get(*a, 2) * 2.0));
        CHECK(bt::get(*n2, 2) == 0.0);

        backend.set_abort_callback([] { return false; });
        CHECK(backend.compute(graph(n2)).ok());
        CHECK(bt::get(*n2, 2) ==
              static_cast<float>(static_cast<float>(bt::get(*a, 2) * 2.0) * 3.0));
    }
}

// ---------------------------------------------------------------------------------------
// A graph of many nodes (a small attention block), checked node by node against the
// oracle applied to the kernels' own inputs, as ggml compares backends.

TEST_CASE("cpu: an attention block computes node by node like the oracle", "[cpu][graph]") {
    harness h(15015);
    const i64 d_model = 64, n_head = 4, head_dim = 16, n_tok = 5;
    tensor* x = h.leaf(f32, {d_model, n_tok, 1, 1});
    tensor* norm_w = h.leaf(f32, {d_model, 1, 1, 1});
    tensor* wq = h.leaf(q8_0, {d_model, d_model, 1, 1});
    tensor* wk = h.leaf(q4_0, {d_model, d_model, 1, 1});
    tensor* wv = h.leaf(f16, {d_model, d_model, 1, 1});
    tensor* pos = h.leaf(i32, {n_tok, 1, 1, 1}, 0, 50);
    tensor* mask = h.leaf(f16, {n_tok, n_tok, 1, 1}, -1, 1);
    for (i64 i = 0; i < n_tok; ++i)
        for (i64 j = i + 1; j < n_tok; ++j)
            bt::set(*mask, j, i, 0, 0, -std::numeric_limits<double>::infinity());

    tensor* hn = mul(h.ctx, rms_norm(h.ctx, x, 1e-5f), norm_w);
    tensor* q = rope(h.ctx, reshape(h.ctx, mul_mat(h.ctx, wq, hn), {head_dim, n_head, n_tok}), pos,
                     static_cast<int>(head_dim), rope_mode::neox);
    tensor* k = rope(h.ctx, reshape(h.ctx, mul_mat(h.ctx, wk, hn), {head_dim, n_head, n_tok}), pos,
                     static_cast<int>(head_dim), rope_mode::normal);
    tensor* v = reshape(h.ctx, mul_mat(h.ctx, wv, hn), {head_dim, n_head, n_tok});
    tensor* qp = permute(h.ctx, q, 0, 2, 1, 3); // [head_dim, n_tok, n_head]
    tensor* kp = permute(h.ctx, k, 0, 2, 1, 3);
    tensor* kq =
        soft_max(h.ctx, mul_mat(h.ctx, kp, qp), mask, 0.25f);      // [n_tok(k), n_tok(q), n_head]
    tensor* vt = cont(h.ctx, permute(h.ctx, v, 1, 2, 0, 3));       // [n_tok, head_dim, n_head]
    tensor* kqv = mul_mat(h.ctx, vt, kq);                          // [head_dim, n_tok(q), n_head]
    tensor* merged = cont(h.ctx, permute(h.ctx, kqv, 0, 2, 1, 3)); // [head_dim, n_head, n_tok]
    tensor* out = add(h.ctx, gelu(h.ctx, reshape(h.ctx, merged, {d_model, n_tok})), x);
    tensor* top = argmax(h.ctx, out);

    graph g(top);
    cpu_backend backend({.fusions = fusion_set::none()}); // every node is read: none fused away
    REQUIRE(backend.compute(g).ok());
    int checked = 0;
    for (tensor* node : g.nodes()) {
        if (is_view_op(node->op))
            continue;
        const bt::ref_tensor expected = bt::ref_forward(*node);
        const bt::comparison c = bt::compare(expected, *node);
        INFO(to_string(node->op) << ' ' << str(node->ne) << " nmse " << c.nmse);
        CHECK(c.nans == 0);
        CHECK(c.nmse <= bt::default_max_nmse(*node));
        ++checked;
    }
    CHECK(checked == 15);
}

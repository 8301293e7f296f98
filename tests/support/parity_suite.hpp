#pragma once
// The parity suite: every op, every type combination the backends under test claim, 20
// seeded random shapes each (odd sizes, non-contiguous views, broadcasting), collected
// into one graph that the CPU backend's reference kernels compute first and every
// target (the CPU fast paths at each instruction-set level and thread count, a Vulkan
// device mapped or staged, ...) computes after, compared node by node with the
// reference. One body per op serves every backend's tests: the generators below take a
// parity_suite whose targets decide which combinations are claimed, and return how
// many they added, so each test file checks its own backends' coverage.
//
// Thresholds (ggml's test-backend-ops): NMSE 1e-7, 5e-4 for mul_mat with f16 / bf16 /
// quantized weights, 1e-6 for soft_max; argmax and get_rows of unquantized rows exact;
// never a NaN (outputs are poisoned with NaN before each compute, so an element a
// kernel leaves unwritten fails too).
//
// The graph lives in host memory (the harness context); a target that computes
// elsewhere copies it there and back (tests/support/device_mirror.hpp).

#include "../backends/cpu/cpu_test_harness.hpp"

#include <backplane/backplane.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace parity {

using namespace cpu_test;

inline constexpr int shapes_per_combination = 20;

inline std::string describe(std::string_view op,
                            std::initializer_list<std::pair<const char*, const tensor*>> operands) {
    std::ostringstream s;
    s << op;
    for (auto& [name, t] : operands) {
        if (t == nullptr) continue;
        s << ' ' << name << '=' << to_string(t->type) << str(t->ne) << (t->is_contiguous() ? "" : "(nc)");
    }
    return s.str();
}

/// Element bytes set to 0xff: NaN in every float type and in a quantized block's scale.
inline void poison(tensor& t) {
    bt::for_each_index(t.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        if (i0 % block_size(t.type) != 0) return;
        std::memset(static_cast<std::byte*>(t.data) + t.offset_of(i0, i1, i2, i3), 0xff, type_size(t.type));
    });
}

/// Random shapes: odd sizes and sizes that no vector width divides, every dimension used.
struct shape_gen {
    std::mt19937& rng;

    i64 pick(std::initializer_list<i64> l) { return *(l.begin() + rng() % l.size()); }
    i64 upto(i64 n) { return 1 + static_cast<i64>(rng() % static_cast<std::uint32_t>(n)); }
    /// A row length for type t: whole blocks for quantized types.
    i64 row(elem_type t) {
        if (is_quantized(t)) return 32 * pick({1, 2, 3, 5, 7, 9});
        return pick({1, 2, 3, 5, 6, 7, 9, 10, 13, 15, 17, 18, 23, 31, 33, 34, 47, 63, 65, 67, 97, 100, 127, 129, 130,
                     257});
    }
    /// Extents for type t with at most about `budget` elements.
    extents rows(elem_type t, i64 budget = 6000) {
        extents ne{row(t), upto(7), upto(3), upto(3)};
        for (std::size_t d = 3; d >= 1; --d)
            while (ne[0] * ne[1] * ne[2] * ne[3] > budget && ne[d] > 1) --ne[d];
        return ne;
    }
    /// Extents b broadcast to ne: per dimension all of it, 1, or a divisor.
    extents broadcast(const extents& ne) {
        extents b = ne;
        for (auto& n : b) {
            const auto r = rng() % 3;
            n = r == 0 ? n : r == 1 ? 1 : random_divisor(rng, n);
        }
        return b;
    }
    layout any(elem_type t) { return nth_layout(rng(), t); }
};

/// One node to compare and how closely.
struct parity_case {
    tensor* out;
    std::string what;
    double max_nmse;
    bool exact;
};

/// A backend configuration to compare with the reference. compute(g) leaves its results
/// in the host memory of g's tensors, where the graph was built.
struct parity_target {
    std::string name;
    std::function<bool(const tensor&)> supports;
    std::function<status(graph&)> compute;
};

/// The node a builder makes, or null when it refuses these operands.
template <class F> tensor* attempt(F&& build) {
    try {
        return build();
    } catch (const backplane::error&) {
        return nullptr;
    }
}

/// Cases collected into one graph; run() computes it with the reference kernels, then
/// on every target, and compares node by node.
class parity_suite {
public:
    parity_suite(std::uint32_t seed, std::vector<parity_target> targets)
        : h(seed), gen{h.rng}, targets_(std::move(targets)) {}

    harness h;
    shape_gen gen;

    /// True when the combination that `probe` builds is claimed: the builder accepts it
    /// and every target supports the node.
    template <class F> bool claimed(F&& probe) {
        const tensor* t = attempt(probe);
        if (t == nullptr) return false;
        for (const parity_target& target : targets_)
            if (!target.supports(*t)) return false;
        return true;
    }

    /// A case. Every target must support it: a claimed combination is claimed for every
    /// shape and layout, so a supports_op that says otherwise fails here.
    void add(tensor* out, std::string what, double max_nmse = 1e-7, bool exact = false) {
        REQUIRE(out != nullptr);
        INFO(what);
        for (const parity_target& target : targets_) {
            INFO("target " << target.name);
            REQUIRE(target.supports(*out));
        }
        cases_.push_back({out, std::move(what), max_nmse, exact});
    }

    /// Counts a claimed type combination (for the coverage check).
    void combination() { ++combinations; }
    int combinations = 0;

    void run() {
        graph g;
        for (const parity_case& c : cases_) g.build_forward(c.out);

        cpu_backend ref({.n_threads = 1, .reference = true});
        poison_all();
        const status st = ref.compute(g);
        INFO("reference: " << st.describe());
        REQUIRE(st.ok());
        std::vector<bt::ref_tensor> expected;
        expected.reserve(cases_.size());
        for (const parity_case& c : cases_) {
            expected.push_back(bt::read(*c.out));
            INFO(c.what);
            std::size_t nans = 0;
            for (double v : expected.back().v) nans += std::isnan(v) ? 1 : 0;
            REQUIRE(nans == 0); // the inputs are chosen so that the reference has no NaN
        }

        int failures = 0;
        for (const parity_target& target : targets_) {
            poison_all();
            const status tst = target.compute(g);
            INFO(target.name << ": " << tst.describe());
            REQUIRE(tst.ok());
            for (std::size_t i = 0; i < cases_.size(); ++i) {
                const parity_case& c = cases_[i];
                const bt::comparison cmp = bt::compare(expected[i], *c.out);
                bool ok = cmp.nans == 0 && cmp.nmse <= c.max_nmse;
                if (c.exact) ok = ok && cmp.mismatches == 0;
                if (!ok && ++failures <= 20) // the first few in full; the count says the rest
                    FAIL_CHECK(c.what << " -> " << to_string(c.out->type) << str(c.out->ne) << " on " << target.name
                                      << ": nmse " << cmp.nmse << " (max " << c.max_nmse << "), mismatches "
                                      << cmp.mismatches << ", nans " << cmp.nans << ", max abs " << cmp.max_abs_err
                                      << " at " << cmp.worst);
            }
        }
        INFO(cases_.size() << " cases, " << combinations << " type combinations, " << targets_.size() << " targets");
        CHECK(failures == 0);
        CHECK(cases_.size() >= static_cast<std::size_t>(shapes_per_combination * combinations));
    }

private:
    void poison_all() {
        for (const parity_case& c : cases_) poison(*c.out);
    }
    std::vector<parity_target> targets_;
    std::vector<parity_case> cases_;
};

inline const std::vector<elem_type>& every_type() {
    static const std::vector<elem_type> v(all_elem_types.begin(), all_elem_types.end());
    return v;
}

// ---------------------------------------------------------------------------------------
// The cases of each op, for every type combination the suite's targets claim. Each
// returns the number of combinations it added.

/// dup, cont and cpy for every type pair.
inline int copy_cases(parity_suite& ps) {
    const int before = ps.combinations;
    auto& h = ps.h;
    for (elem_type from : every_type()) {
        for (elem_type to : every_type()) {
            const i64 k = block_size(from) > 1 || block_size(to) > 1 ? 32 : 1;
            if (!ps.claimed([&] { return cpy(h.ctx, h.leaf(from, {k, 2, 1, 1}), h.leaf(to, {k, 2, 1, 1})); })) continue;
            ps.combination();
            const bool quant = is_quantized(from) || is_quantized(to);
            for (int s = 0; s < shapes_per_combination; ++s) {
                extents ne = ps.gen.rows(quant ? q8_0 : from);
                tensor* a = h.input(from, ne, ps.gen.any(from));
                // the destination: the same shape or another one of as many elements
                extents dne = ne;
                if (s % 3 == 1) dne = {ne[0] * ne[1], ne[2], ne[3], 1};
                if (s % 3 == 2 && !quant) dne = {ne[3] * ne[0], ne[2], ne[1], 1};
                // a quantized destination must be contiguous
                const layout dl = is_quantized(to) ? (s % 2 ? layout::offset : layout::contiguous) : ps.gen.any(to);
                tensor* b = h.input(to, dne, dl);
                ps.add(cpy(h.ctx, a, b), describe("cpy", {{"a", a}, {"b", b}}));
            }
        }
        if (!ps.claimed([&] { return dup(h.ctx, h.leaf(from, {32, 1, 1, 1})); })) continue;
        ps.combination(); // dup and cont of one type
        for (int s = 0; s < shapes_per_combination; ++s) {
            tensor* a = h.input(from, ps.gen.rows(from), ps.gen.any(from));
            ps.add(s % 2 ? dup(h.ctx, a) : cont(h.ctx, a), describe(s % 2 ? "dup" : "cont", {{"a", a}}));
        }
    }
    return ps.combinations - before;
}

/// add, sub, mul, div with broadcasting for every type pair.
inline int binary_cases(parity_suite& ps) {
    const int before = ps.combinations;
    auto& h = ps.h;
    using builder = tensor* (*)(context&, tensor*, tensor*);
    const std::pair<const char*, builder> ops[] = {
        {"add", &backplane::add}, {"sub", &backplane::sub}, {"mul", &backplane::mul}, {"div", &backplane::div}};
    for (auto [name, build] : ops)
        for (elem_type ta : every_type())
            for (elem_type tb : every_type()) {
                if (!ps.claimed([&] { return build(h.ctx, h.leaf(ta, {32, 2, 1, 1}), h.leaf(tb, {32, 1, 1, 1})); }))
                    continue;
                ps.combination();
                const bool is_div = std::string_view(name) == "div";
                for (int s = 0; s < shapes_per_combination; ++s) {
                    const extents ne = ps.gen.rows(ta);
                    tensor* a = h.input(ta, ne, ps.gen.any(ta));
                    const extents nb = ps.gen.broadcast(ne);
                    tensor* b = is_div ? h.input(tb, nb, ps.gen.any(tb), 0.5, 2.0) : h.input(tb, nb, ps.gen.any(tb));
                    ps.add(build(h.ctx, a, b), describe(name, {{"a", a}, {"b", b}}));
                }
            }
    return ps.combinations - before;
}

/// scale, sqr, sqrt, silu, gelu, relu.
inline int unary_cases(parity_suite& ps) {
    const int before = ps.combinations;
    auto& h = ps.h;
    const char* ops[] = {"scale", "sqr", "sqrt", "silu", "gelu", "relu"};
    auto build = [&](std::string_view name, tensor* a) -> tensor* {
        if (name == "scale") {
            const auto sc = static_cast<float>(bt::uniform01(h.rng) * 4 - 2);
            const auto bias = static_cast<float>(bt::uniform01(h.rng) - 0.5);
            return scale(h.ctx, a, sc, bias);
        }
        if (name == "sqr") return sqr(h.ctx, a);
        if (name == "sqrt") return backplane::sqrt(h.ctx, a);
        if (name == "silu") return silu(h.ctx, a);
        if (name == "gelu") return gelu(h.ctx, a);
        return relu(h.ctx, a);
    };
    for (const char* name : ops)
        for (elem_type t : every_type()) {
            if (!ps.claimed([&] { return build(name, h.leaf(t, {32, 1, 1, 1}, 0, 1)); })) continue;
            ps.combination();
            const bool is_sqrt = std::string_view(name) == "sqrt";
            for (int s = 0; s < shapes_per_combination; ++s) {
                tensor* a = h.input(t, ps.gen.rows(t), ps.gen.any(t), is_sqrt ? 0.0 : -6.0, is_sqrt ? 4.0 : 6.0);
                ps.add(build(name, a), describe(name, {{"a", a}}));
            }
        }
    return ps.combinations - before;
}

/// sum_rows, argmax, norm, rms_norm.
inline int rows_cases(parity_suite& ps) {
    const int before = ps.combinations;
    auto& h = ps.h;
    for (elem_type t : every_type()) {
        if (ps.claimed([&] { return sum_rows(h.ctx, h.leaf(t, {32, 2, 1, 1})); })) {
            ps.combination();
            for (int s = 0; s < shapes_per_combination; ++s) {
                tensor* a = h.input(t, ps.gen.rows(t), ps.gen.any(t));
                ps.add(sum_rows(h.ctx, a), describe("sum_rows", {{"a", a}}));
            }
        }
        if (ps.claimed([&] { return argmax(h.ctx, h.leaf(t, {32, 2, 1, 1})); })) {
            ps.combination();
            for (int s = 0; s < shapes_per_combination; ++s) {
                tensor* a = h.input(t, ps.gen.rows(t), ps.gen.any(t));
                if (s % 4 == 3) // ties: a few distinct values, the first maximum wins
                    bt::for_each_index(a->ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
                        bt::set(*a, i0, i1, i2, i3, static_cast<double>(h.rng() % 4));
                    });
                ps.add(argmax(h.ctx, a), describe("argmax", {{"a", a}}), 0.0, true);
            }
        }
        for (const bool rms : {false, true}) {
            if (!ps.claimed([&] { return rms ? rms_norm(h.ctx, h.leaf(t, {32, 2, 1, 1})) : norm(h.ctx, h.leaf(t, {32, 2, 1, 1})); }))
                continue;
            ps.combination();
            const float eps[] = {1e-6f, 1e-5f, 1e-3f};
            for (int s = 0; s < shapes_per_combination; ++s) {
                tensor* a = h.input(t, ps.gen.rows(t), ps.gen.any(t), -1.0, 3.0); // not centred
                const float e = eps[s % 3];
                ps.add(rms ? rms_norm(h.ctx, a, e) : norm(h.ctx, a, e), describe(rms ? "rms_norm" : "norm", {{"a", a}}));
            }
        }
    }
    return ps.combinations - before;
}

/// soft_max without a mask and with f32 and f16 masks.
inline int soft_max_cases(parity_suite& ps) {
    const int before = ps.combinations;
    auto& h = ps.h;
    for (elem_type t : every_type())
        for (int m = 0; m <= static_cast<int>(every_type().size()); ++m) { // m: no mask, then mask type m - 1
            const bool masked = m > 0;
            const elem_type mt = masked ? every_type()[static_cast<std::size_t>(m - 1)] : f32;
            if (!ps.claimed([&] {
                    return soft_max(h.ctx, h.leaf(t, {32, 2, 1, 1}), masked ? h.leaf(mt, {32, 2, 1, 1}) : nullptr, 0.5f);
                }))
                continue;
            ps.combination();
            for (int s = 0; s < shapes_per_combination; ++s) {
                const extents ne = ps.gen.rows(t);
                tensor* a = h.input(t, ne, ps.gen.any(t), -3.0, 3.0);
                tensor* mask = nullptr;
                if (masked) {
                    const extents mne = {ne[0], ne[1] + static_cast<i64>(s % 3), random_divisor(h.rng, ne[2]),
                                         random_divisor(h.rng, ne[3])};
                    const layout ml = s % 3 == 0 ? layout::contiguous : s % 3 == 1 ? layout::strided_rows : layout::offset;
                    mask = h.input(mt, mne, ml, -2.0, 2.0);
                    if (mne[0] > 1) // a few masked positions, never a whole row
                        for (i64 r = 0; r < mne[1] * mne[2] * mne[3]; r += 2)
                            bt::set(*mask, static_cast<i64>(h.rng() % static_cast<std::uint32_t>(mne[0])), r % mne[1],
                                    (r / mne[1]) % mne[2], r / (mne[1] * mne[2]),
                                    -std::numeric_limits<double>::infinity());
                }
                const float sc = s % 2 ? 1.0f : static_cast<float>(0.1 + bt::uniform01(h.rng) * 2);
                ps.add(soft_max(h.ctx, a, mask, sc), describe("soft_max", {{"a", a}, {"mask", mask}}), 1e-6);
            }
        }
    return ps.combinations - before;
}

/// mul_mat for every weight and activation type.
inline int mul_mat_cases(parity_suite& ps) {
    const int before = ps.combinations;
    auto& h = ps.h;
    const layout b_layouts[] = {layout::contiguous,   layout::transposed,    layout::permuted,
                                layout::strided_rows, layout::strided_elems, layout::offset};
    for (elem_type ta : every_type())
        for (elem_type tb : every_type()) {
            if (!ps.claimed([&] { return mul_mat(h.ctx, h.leaf(ta, {32, 2, 1, 1}), h.leaf(tb, {32, 3, 1, 1})); }))
                continue;
            ps.combination();
            auto& g = ps.gen;
            for (int s = 0; s < shapes_per_combination; ++s) {
                const i64 k = is_quantized(ta) ? 32 * g.pick({1, 2, 3, 5, 7, 9, 10})
                                               : g.pick({1, 3, 7, 16, 17, 31, 33, 64, 65, 67, 100, 129, 255, 257});
                const i64 m = g.pick({1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 33, 47, 65});
                const i64 n = g.pick({1, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33});
                const i64 a2 = g.upto(2), a3 = g.upto(2), r2 = g.upto(3), r3 = g.upto(2);
                // a must not be transposed (the builder's rule)
                layout la = g.any(ta);
                if (la == layout::transposed) la = layout::strided_elems;
                tensor* a = h.input(ta, {k, m, a2, a3}, la);
                tensor* b = h.input(tb, {k, n, a2 * r2, a3 * r3}, b_layouts[h.rng() % 6]);
                const double nmse = ta == f32 ? 1e-7 : 5e-4; // by the weights' type
                ps.add(mul_mat(h.ctx, a, b), describe("mul_mat", {{"a", a}, {"b", b}}), nmse);
            }
        }
    return ps.combinations - before;
}

/// get_rows from every type.
inline int get_rows_cases(parity_suite& ps) {
    const int before = ps.combinations;
    auto& h = ps.h;
    for (elem_type t : every_type()) {
        if (!ps.claimed([&] { return get_rows(h.ctx, h.leaf(t, {32, 3, 1, 1}), h.leaf(i32, {2, 1, 1, 1}, 0, 2)); }))
            continue;
        ps.combination();
        for (int s = 0; s < shapes_per_combination; ++s) {
            const extents ne = ps.gen.rows(t); // a: [E, R, A2, A3]
            tensor* a = h.input(t, ne, ps.gen.any(t), -4.0, 4.0);
            const extents ine = {ps.gen.upto(9), ne[2], ne[3], 1};
            tensor* idx = h.input(i32, ine, ps.gen.any(i32));
            bt::for_each_index(idx->ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
                bt::set(*idx, i0, i1, i2, i3, static_cast<double>(h.rng() % static_cast<std::uint32_t>(ne[1])));
            });
            // rows of a float type or i32 are copied exactly
            ps.add(get_rows(h.ctx, a, idx), describe("get_rows", {{"a", a}, {"idx", idx}}),
                   is_quantized(t) ? 1e-7 : 0.0, !is_quantized(t));
        }
    }
    return ps.combinations - before;
}

/// rope normal and neox.
inline int rope_cases(parity_suite& ps) {
    const int before = ps.combinations;
    auto& h = ps.h;
    for (elem_type t : every_type())
        for (const rope_mode mode : {rope_mode::normal, rope_mode::neox}) {
            if (!ps.claimed([&] { return rope(h.ctx, h.leaf(t, {8, 2, 3, 1}), h.leaf(i32, {3, 1, 1, 1}, 0, 9), 8, mode); }))
                continue;
            ps.combination();
            for (int s = 0; s < shapes_per_combination; ++s) {
                const i64 hd = ps.gen.pick({2, 6, 10, 14, 18, 22, 34, 64, 66, 128, 130});
                const extents ne = {hd, ps.gen.upto(5), ps.gen.upto(7), ps.gen.upto(2)};
                const int n_dims = s % 3 == 0 ? static_cast<int>(hd) : std::max(2, static_cast<int>(hd / 2) & ~1);
                const float base = s % 2 ? 10000.0f : 500000.0f;
                const float fscale = s % 4 == 3 ? 0.25f : 1.0f;
                tensor* a = h.input(t, ne, ps.gen.any(t));
                tensor* pos = h.input(i32, {ne[2], 1, 1, 1}, s % 2 ? layout::strided_elems : layout::contiguous);
                bt::for_each_index(pos->ne, [&](i64 i0, i64, i64, i64) {
                    bt::set(*pos, i0, 0, 0, 0, static_cast<double>(static_cast<i64>(h.rng() % 8192) - 64));
                });
                ps.add(rope(h.ctx, a, pos, n_dims, mode, base, fscale),
                       describe(mode == rope_mode::neox ? "rope neox" : "rope normal", {{"a", a}, {"pos", pos}}) +
                           " n_dims " + std::to_string(n_dims));
            }
        }
    return ps.combinations - before;
}

/// concat along every dimension.
inline int concat_cases(parity_suite& ps) {
    const int before = ps.combinations;
    auto& h = ps.h;
    for (elem_type t : every_type()) {
        if (!ps.claimed([&] { return concat(h.ctx, h.leaf(t, {32, 2, 1, 1}), h.leaf(t, {32, 1, 1, 1}), 1); })) continue;
        ps.combination();
        for (int s = 0; s < shapes_per_combination; ++s) {
            const int dim = s % 4;
            const extents na = ps.gen.rows(t);
            extents nb = na;
            nb[static_cast<std::size_t>(dim)] = is_quantized(t) && dim == 0 ? 32 : ps.gen.upto(4);
            tensor* a = h.input(t, na, ps.gen.any(t), -100, 100);
            tensor* b = h.input(t, nb, ps.gen.any(t), -100, 100);
            ps.add(concat(h.ctx, a, b, dim), describe("concat dim " + std::to_string(dim), {{"a", a}, {"b", b}}));
        }
    }
    return ps.combinations - before;
}

} // namespace parity

#pragma once
// The parity cases: every op, every type combination the targets claim, 20 seeded random
// shapes each (odd sizes, views at odd offsets, non-contiguous and broadcast operands,
// masks, ties), batched into one graph per family (conformance/batch.hpp). Every
// backend's parity test runs these families over its own targets
// (tests/conformance/parity_cases.hpp) and checks how many type combinations each family
// found claimed.
//
// A family's cases function adds its cases to a batch and returns the number of type
// combinations it found claimed. A new op joins the family of its kind (a unary op is one
// row of the op table); a new kind of op is a new family, a row of parity_families().

#include <backplane/conformance/batch.hpp>
#include <backplane/conformance/catalogue.hpp>
#include <backplane/conformance/inputs.hpp>
#include <backplane/core/ops.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane::conformance {

/// Random shapes per claimed type combination.
inline constexpr int shapes_per_combination = 20;

/// dup, cont and cpy for every type pair.
inline int copy_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type from : all_elem_types) {
        for (elem_type to : all_elem_types) {
            const std::int64_t k = block_size(from) > 1 || block_size(to) > 1 ? 32 : 1;
            if (!cases.claimed([&] { return cpy(cases.ctx, cases.leaf(from, {k, 2, 1, 1}), cases.leaf(to, {k, 2, 1, 1})); })) continue;
            cases.combination();
            const bool quant = is_quantized(from) || is_quantized(to);
            for (int s = 0; s < shapes_per_combination; ++s) {
                extents ne = cases.gen.rows(quant ? elem_type::q8_0 : from);
                tensor* a = cases.input(from, ne, cases.any_layout(from));
                // the destination: the same shape or another one of as many elements
                extents dne = ne;
                if (s % 3 == 1) dne = {ne[0] * ne[1], ne[2], ne[3], 1};
                if (s % 3 == 2 && !quant) dne = {ne[3] * ne[0], ne[2], ne[1], 1};
                // a quantized destination must be contiguous
                const layout dl = is_quantized(to) ? (s % 2 ? layout::offset : layout::contiguous) : cases.any_layout(to);
                tensor* b = cases.input(to, dne, dl);
                cases.add(cpy(cases.ctx, a, b));
            }
        }
        if (!cases.claimed([&] { return dup(cases.ctx, cases.leaf(from, {32, 1, 1, 1})); })) continue;
        cases.combination(); // dup and cont of one type
        for (int s = 0; s < shapes_per_combination; ++s) {
            tensor* a = cases.input(from, cases.gen.rows(from), cases.any_layout(from));
            cases.add(s % 2 ? dup(cases.ctx, a) : cont(cases.ctx, a));
        }
    }
    return cases.combinations() - before;
}

/// add, sub, mul, div with broadcasting for every type pair.
inline int binary_cases(batch& cases) {
    const int before = cases.combinations();
    using builder = tensor* (*)(context&, tensor*, tensor*);
    const std::pair<const char*, builder> ops[] = {
        {"add", &backplane::add}, {"sub", &backplane::sub}, {"mul", &backplane::mul}, {"div", &backplane::div}};
    for (auto [name, build] : ops)
        for (elem_type ta : all_elem_types)
            for (elem_type tb : all_elem_types) {
                if (!cases.claimed([&] { return build(cases.ctx, cases.leaf(ta, {32, 2, 1, 1}), cases.leaf(tb, {32, 1, 1, 1})); }))
                    continue;
                cases.combination();
                const bool is_div = std::string_view(name) == "div";
                for (int s = 0; s < shapes_per_combination; ++s) {
                    const extents ne = cases.gen.rows(ta);
                    tensor* a = cases.input(ta, ne, cases.any_layout(ta));
                    const extents nb = cases.gen.broadcast(ne);
                    tensor* b = is_div ? cases.input(tb, nb, cases.any_layout(tb), 0.5, 2.0) : cases.input(tb, nb, cases.any_layout(tb));
                    cases.add(build(cases.ctx, a, b));
                }
            }
    return cases.combinations() - before;
}

/// Every unary element-wise op of the op table over every type, on the inputs each is
/// defined for (unary_input_range): a new one needs no line here.
inline int unary_cases(batch& cases) {
    const int before = cases.combinations();
    for (std::size_t k = 0; k < op_kind_count; ++k) {
        const auto op = static_cast<op_kind>(k);
        if (!is_unary_elementwise(op)) continue;
        const value_range in = unary_input_range(op);
        for (elem_type t : all_elem_types) {
            if (!cases.claimed([&] { return unary_of(cases.ctx, op, cases.leaf(t, {32, 1, 1, 1}, 0, 1), cases.rng); }))
                continue;
            cases.combination();
            for (int s = 0; s < shapes_per_combination; ++s) {
                tensor* a = cases.input(t, cases.gen.rows(t), cases.any_layout(t), in.lo, in.hi);
                cases.add(unary_of(cases.ctx, op, a, cases.rng));
            }
        }
    }
    return cases.combinations() - before;
}

/// sum_rows, argmax, norm, rms_norm.
inline int rows_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type t : all_elem_types) {
        if (cases.claimed([&] { return sum_rows(cases.ctx, cases.leaf(t, {32, 2, 1, 1})); })) {
            cases.combination();
            for (int s = 0; s < shapes_per_combination; ++s) {
                tensor* a = cases.input(t, cases.gen.rows(t), cases.any_layout(t));
                cases.add(sum_rows(cases.ctx, a));
            }
        }
        if (cases.claimed([&] { return argmax(cases.ctx, cases.leaf(t, {32, 2, 1, 1})); })) {
            cases.combination();
            for (int s = 0; s < shapes_per_combination; ++s) {
                tensor* a = cases.input(t, cases.gen.rows(t), cases.any_layout(t));
                if (s % 4 == 3) // ties: a few distinct values, the last maximum wins
                    for_each_index(a->ne, [&](std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
                        set_element(*a, i0, i1, i2, i3, static_cast<double>(cases.rng() % 4));
                    });
                cases.add(argmax(cases.ctx, a));
            }
        }
        for (const bool rms : {false, true}) {
            if (!cases.claimed([&] { return rms ? rms_norm(cases.ctx, cases.leaf(t, {32, 2, 1, 1})) : norm(cases.ctx, cases.leaf(t, {32, 2, 1, 1})); }))
                continue;
            cases.combination();
            const float eps[] = {1e-6f, 1e-5f, 1e-3f};
            for (int s = 0; s < shapes_per_combination; ++s) {
                tensor* a = cases.input(t, cases.gen.rows(t), cases.any_layout(t), -1.0, 3.0); // not centred
                const float e = eps[s % 3];
                cases.add(rms ? rms_norm(cases.ctx, a, e) : norm(cases.ctx, a, e));
            }
        }
    }
    return cases.combinations() - before;
}

/// soft_max without a mask and with a mask of every type soft_max takes.
inline int soft_max_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type t : all_elem_types)
        for (int m = 0; m <= static_cast<int>(all_elem_types.size()); ++m) { // m: no mask, then mask type m - 1
            const bool masked = m > 0;
            const elem_type mt = masked ? all_elem_types[static_cast<std::size_t>(m - 1)] : elem_type::f32;
            if (!cases.claimed([&] {
                    return soft_max(cases.ctx, cases.leaf(t, {32, 2, 1, 1}), masked ? cases.leaf(mt, {32, 2, 1, 1}) : nullptr, 0.5f);
                }))
                continue;
            cases.combination();
            for (int s = 0; s < shapes_per_combination; ++s) {
                const extents ne = cases.gen.rows(t);
                tensor* a = cases.input(t, ne, cases.any_layout(t), -3.0, 3.0);
                tensor* mask = nullptr;
                if (masked) {
                    const extents mne = {ne[0], ne[1] + static_cast<std::int64_t>(s % 3), random_divisor(cases.rng, ne[2]),
                                         random_divisor(cases.rng, ne[3])};
                    const layout ml = s % 3 == 0 ? layout::contiguous : s % 3 == 1 ? layout::strided_rows : layout::offset;
                    mask = cases.input(mt, mne, ml, -2.0, 2.0);
                    if (mne[0] > 1) // a few masked positions, never a whole row
                        for (std::int64_t r = 0; r < mne[1] * mne[2] * mne[3]; r += 2)
                            set_element(*mask, static_cast<std::int64_t>(cases.rng() % static_cast<std::uint32_t>(mne[0])), r % mne[1],
                                    (r / mne[1]) % mne[2], r / (mne[1] * mne[2]),
                                    -std::numeric_limits<double>::infinity());
                }
                const float sc = s % 2 ? 1.0f : static_cast<float>(0.1 + detail::uniform(cases.rng, 0, 1) * 2);
                cases.add(soft_max(cases.ctx, a, mask, sc));
            }
        }
    return cases.combinations() - before;
}

/// mul_mat for every weight and activation type.
inline int mul_mat_cases(batch& cases) {
    const int before = cases.combinations();
    const layout b_layouts[] = {layout::contiguous,   layout::transposed,    layout::permuted,
                                layout::strided_rows, layout::strided_elems, layout::offset};
    for (elem_type ta : all_elem_types)
        for (elem_type tb : all_elem_types) {
            if (!cases.claimed([&] { return mul_mat(cases.ctx, cases.leaf(ta, {32, 2, 1, 1}), cases.leaf(tb, {32, 3, 1, 1})); }))
                continue;
            cases.combination();
            auto& g = cases.gen;
            for (int s = 0; s < shapes_per_combination; ++s) {
                const std::int64_t k = is_quantized(ta) ? 32 * g.pick({1, 2, 3, 5, 7, 9, 10})
                                               : g.pick({1, 3, 7, 16, 17, 31, 33, 64, 65, 67, 100, 129, 255, 257});
                const std::int64_t m = g.pick({1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 33, 47, 65});
                const std::int64_t n = g.pick({1, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33});
                const std::int64_t a2 = g.upto(2), a3 = g.upto(2), r2 = g.upto(3), r3 = g.upto(2);
                // a must not be transposed (the builder's rule)
                layout la = cases.any_layout(ta);
                if (la == layout::transposed) la = layout::strided_elems;
                tensor* a = cases.input(ta, {k, m, a2, a3}, la);
                tensor* b = cases.input(tb, {k, n, a2 * r2, a3 * r3}, b_layouts[cases.rng() % 6]);
                cases.add(mul_mat(cases.ctx, a, b));
            }
        }
    return cases.combinations() - before;
}

/// mul_mat_id for every weight and activation type: one activation per token or one per
/// used expert, experts drawn at random (repeats included).
inline int mul_mat_id_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type ta : all_elem_types)
        for (elem_type tb : all_elem_types) {
            if (!cases.claimed([&] {
                    return mul_mat_id(cases.ctx, cases.leaf(ta, {32, 2, 3, 1}), cases.leaf(tb, {32, 1, 2, 1}),
                                      cases.leaf(elem_type::i32, {2, 2, 1, 1}, 0, 2));
                }))
                continue;
            cases.combination();
            auto& g = cases.gen;
            for (int s = 0; s < shapes_per_combination; ++s) {
                const std::int64_t k = is_quantized(ta) ? 32 * g.pick({1, 2, 3, 5}) : g.pick({1, 3, 16, 17, 33, 64, 65, 129});
                const std::int64_t m = g.pick({1, 2, 3, 5, 8, 13, 17, 33});
                const std::int64_t n_expert = g.upto(8), n_used = g.upto(4), n_tokens = g.upto(7);
                layout la = cases.any_layout(ta);
                if (la == layout::transposed) la = layout::strided_elems;
                tensor* as = cases.input(ta, {k, m, n_expert, 1}, la);
                tensor* b = cases.input(tb, {k, s % 2 ? 1 : n_used, n_tokens, 1}, cases.any_layout(tb));
                tensor* ids = cases.input(elem_type::i32, {n_used, n_tokens, 1, 1}, cases.any_layout(elem_type::i32));
                for_each_index(ids->ne, [&](std::int64_t i0, std::int64_t i1, std::int64_t, std::int64_t) {
                    set_element(*ids, i0, i1, 0, 0, static_cast<double>(cases.rng() % static_cast<std::uint32_t>(n_expert)));
                });
                cases.add(mul_mat_id(cases.ctx, as, b, ids));
            }
        }
    return cases.combinations() - before;
}

/// get_rows from every type.
inline int get_rows_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type t : all_elem_types) {
        if (!cases.claimed([&] { return get_rows(cases.ctx, cases.leaf(t, {32, 3, 1, 1}), cases.leaf(elem_type::i32, {2, 1, 1, 1}, 0, 2)); }))
            continue;
        cases.combination();
        for (int s = 0; s < shapes_per_combination; ++s) {
            const extents ne = cases.gen.rows(t); // a: [E, R, A2, A3]
            tensor* a = cases.input(t, ne, cases.any_layout(t), -4.0, 4.0);
            const extents ine = {cases.gen.upto(9), ne[2], ne[3], 1};
            tensor* idx = cases.input(elem_type::i32, ine, cases.any_layout(elem_type::i32));
            for_each_index(idx->ne, [&](std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
                set_element(*idx, i0, i1, i2, i3, static_cast<double>(cases.rng() % static_cast<std::uint32_t>(ne[1])));
            });
            cases.add(get_rows(cases.ctx, a, idx));
        }
    }
    return cases.combinations() - before;
}

/// set_rows into every float and quantized type, from f32, f16 and bf16 rows, by i32 and
/// i64 indices. Each index row is a permutation of the destination's rows (a case's
/// whole destination is its output, and starts poisoned); indices broadcast over dims 2
/// and 3 in every other case.
inline int set_rows_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type to : all_elem_types)
        for (elem_type from : {elem_type::f32, elem_type::f16, elem_type::bf16})
            for (elem_type it : {elem_type::i32, elem_type::i64}) {
                if (!cases.claimed([&] {
                        return set_rows(cases.ctx, cases.leaf(to, {32, 2, 1, 1}), cases.leaf(from, {32, 2, 1, 1}),
                                        cases.leaf(it, {2, 1, 1, 1}, 0, 1));
                    }))
                    continue;
                cases.combination();
                for (int s = 0; s < shapes_per_combination; ++s) {
                    const extents ne = cases.gen.rows(to); // a: [E, R, A2, A3]
                    const layout al = is_quantized(to) ? (s % 2 ? layout::offset : layout::contiguous) : cases.any_layout(to);
                    tensor* a = cases.input(to, ne, al, -4.0, 4.0);
                    tensor* b = cases.input(from, ne, cases.any_layout(from), -4.0, 4.0);
                    const extents ine = {ne[1], s % 2 ? 1 : ne[2], s % 2 ? 1 : ne[3], 1};
                    tensor* idx = cases.input(it, ine, cases.any_layout(it));
                    std::vector<std::int64_t> order(static_cast<std::size_t>(ne[1]));
                    for_each_index(idx->ne, [&](std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
                        if (i0 == 0) { // a new row of indices: a new permutation
                            for (std::size_t k = 0; k < order.size(); ++k) order[k] = static_cast<std::int64_t>(k);
                            for (std::size_t k = order.size(); k > 1; --k) std::swap(order[k - 1], order[cases.rng() % k]);
                        }
                        set_element(*idx, i0, i1, i2, i3, static_cast<double>(order[static_cast<std::size_t>(i0)]));
                    });
                    cases.add(set_rows(cases.ctx, a, b, idx));
                }
            }
    return cases.combinations() - before;
}

/// pad, with zeros and wrapped around, of every float type.
inline int pad_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type t : all_elem_types) {
        if (!cases.claimed([&] { return pad(cases.ctx, cases.leaf(t, {4, 2, 1, 1}), 1); })) continue;
        cases.combination();
        for (int s = 0; s < shapes_per_combination; ++s) {
            tensor* a = cases.input(t, cases.gen.rows(t), cases.any_layout(t));
            pad_widths w;
            for (std::size_t d = 0; d < max_dims; ++d) {
                w.lp[d] = static_cast<int>(cases.rng() % 3);
                w.rp[d] = static_cast<int>(cases.rng() % 3);
            }
            cases.add(pad_ext(cases.ctx, a, w, s % 3 == 2));
        }
    }
    return cases.combinations() - before;
}

/// arange over starts, stops and steps of several magnitudes.
inline int arange_cases(batch& cases) {
    if (!cases.claimed([&] { return arange(cases.ctx, 0.0f, 4.0f, 1.0f); })) return 0;
    cases.combination();
    for (int s = 0; s < shapes_per_combination; ++s) {
        const auto start = static_cast<float>(static_cast<int>(cases.rng() % 2001) - 1000) / 8.0f;
        const auto step = static_cast<float>(1 + cases.rng() % 999) / 64.0f;
        const auto stop = start + step * static_cast<float>(1 + cases.rng() % 300);
        cases.add(arange(cases.ctx, start, stop, step));
    }
    return 1;
}

/// rope normal and neox.
inline int rope_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type t : all_elem_types)
        for (const rope_mode mode : {rope_mode::normal, rope_mode::neox}) {
            if (!cases.claimed([&] { return rope(cases.ctx, cases.leaf(t, {8, 2, 3, 1}), cases.leaf(elem_type::i32, {3, 1, 1, 1}, 0, 9), 8, mode); }))
                continue;
            cases.combination();
            for (int s = 0; s < shapes_per_combination; ++s) {
                const std::int64_t hd = cases.gen.pick({2, 6, 10, 14, 18, 22, 34, 64, 66, 128, 130});
                const extents ne = {hd, cases.gen.upto(5), cases.gen.upto(7), cases.gen.upto(2)};
                const int n_dims = s % 3 == 0 ? static_cast<int>(hd) : std::max(2, static_cast<int>(hd / 2) & ~1);
                const float base = s % 2 ? 10000.0f : 500000.0f;
                const float fscale = s % 4 == 3 ? 0.25f : 1.0f;
                tensor* a = cases.input(t, ne, cases.any_layout(t));
                tensor* pos = cases.input(elem_type::i32, {ne[2], 1, 1, 1}, s % 2 ? layout::strided_elems : layout::contiguous);
                for_each_index(pos->ne, [&](std::int64_t i0, std::int64_t, std::int64_t, std::int64_t) {
                    set_element(*pos, i0, 0, 0, 0, static_cast<double>(static_cast<std::int64_t>(cases.rng() % 8192) - 64));
                });
                cases.add(rope(cases.ctx, a, pos, n_dims, mode, base, fscale));
            }
        }
    return cases.combinations() - before;
}

/// concat along every dimension.
inline int concat_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type t : all_elem_types) {
        if (!cases.claimed([&] { return concat(cases.ctx, cases.leaf(t, {32, 2, 1, 1}), cases.leaf(t, {32, 1, 1, 1}), 1); })) continue;
        cases.combination();
        for (int s = 0; s < shapes_per_combination; ++s) {
            const int dim = s % 4;
            const extents na = cases.gen.rows(t);
            extents nb = na;
            nb[static_cast<std::size_t>(dim)] = is_quantized(t) && dim == 0 ? 32 : cases.gen.upto(4);
            tensor* a = cases.input(t, na, cases.any_layout(t), -100, 100);
            tensor* b = cases.input(t, nb, cases.any_layout(t), -100, 100);
            cases.add(concat(cases.ctx, a, b, dim));
        }
    }
    return cases.combinations() - before;
}

/// A family of parity cases.
struct parity_family {
    std::string_view name;        ///< "binary"
    std::uint32_t seed;           ///< of the batch's generator
    int (*cases)(batch&);         ///< adds the cases, returns the combinations claimed
};

/// Every family, in a fixed order.
inline std::span<const parity_family> parity_families() {
    static constexpr parity_family families[] = {
        {"copy", 31001, &copy_cases},
        {"binary", 31002, &binary_cases},
        {"unary", 31003, &unary_cases},
        {"rows", 31004, &rows_cases},
        {"soft_max", 31005, &soft_max_cases},
        {"mul_mat", 31006, &mul_mat_cases},
        {"get_rows", 31007, &get_rows_cases},
        {"rope", 31008, &rope_cases},
        {"concat", 31009, &concat_cases},
        {"set_rows", 31010, &set_rows_cases},
        {"pad", 31011, &pad_cases},
        {"arange", 31012, &arange_cases},
        {"mul_mat_id", 31013, &mul_mat_id_cases},
    };
    return families;
}

/// The family named `name`, or null.
inline const parity_family* find_parity_family(std::string_view name) {
    return find_named(parity_families(), name);
}

} // namespace backplane::conformance

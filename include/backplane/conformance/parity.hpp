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
#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane::conformance {

/// Random shapes per claimed type combination.
inline constexpr int shapes_per_combination = 20;

/// Row length of the small leaves that probe whether a combination is claimed: 32, or a
/// whole block of the types with longer ones (the K-quants' 256).
constexpr std::int64_t probe_width(elem_type t, elem_type u = elem_type::f32) noexcept {
    const std::int64_t b = block_size(t) > block_size(u) ? block_size(t) : block_size(u);
    return b > 32 ? b : 32;
}

/// dup, cont and cpy for every type pair.
inline int copy_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type from : all_elem_types) {
        for (elem_type to : all_elem_types) {
            const std::int64_t k = probe_width(from, to);
            if (!cases.claimed([&] { return cpy(cases.ctx, cases.leaf(from, {k, 2, 1, 1}), cases.leaf(to, {k, 2, 1, 1})); })) continue;
            cases.combination();
            const bool quant = is_quantized(from) || is_quantized(to);
            for (int s = 0; s < shapes_per_combination; ++s) {
                extents ne = cases.gen.rows(block_size(to) > block_size(from) ? to : from);
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
        if (!cases.claimed([&] { return dup(cases.ctx, cases.leaf(from, {probe_width(from), 1, 1, 1})); })) continue;
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
    for (const auto& [name, build] : ops) {
        const builder op = build; // a named copy: clang before 16 cannot capture a structured binding
        for (elem_type ta : all_elem_types)
            for (elem_type tb : all_elem_types) {
                if (!cases.claimed([&] { return op(cases.ctx, cases.leaf(ta, {32, 2, 1, 1}), cases.leaf(tb, {32, 1, 1, 1})); }))
                    continue;
                cases.combination();
                const bool is_div = std::string_view(name) == "div";
                for (int s = 0; s < shapes_per_combination; ++s) {
                    const extents ne = cases.gen.rows(ta);
                    tensor* a = cases.input(ta, ne, cases.any_layout(ta));
                    const extents nb = cases.gen.broadcast(ne);
                    tensor* b = is_div ? cases.input(tb, nb, cases.any_layout(tb), 0.5, 2.0) : cases.input(tb, nb, cases.any_layout(tb));
                    cases.add(op(cases.ctx, a, b));
                }
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

/// group_norm of type t: up to 10 channels cut into 1 to C + 2 groups (so some groups are
/// shorter than the others, or empty).
inline void group_norm_cases(batch& cases, elem_type t) {
    if (!cases.claimed([&] { return group_norm(cases.ctx, cases.leaf(t, {32, 2, 4, 1}), 3); })) return;
    cases.combination();
    for (int s = 0; s < shapes_per_combination; ++s) {
        extents ne = cases.gen.rows(t, 3000);
        ne[2] = cases.gen.upto(10);
        tensor* a = cases.input(t, ne, cases.any_layout(t), -1.0, 3.0); // not centred
        cases.add(group_norm(cases.ctx, a, static_cast<int>(cases.gen.upto(ne[2] + 2)), s % 2 ? 1e-6f : 1e-3f));
    }
}

/// sum_rows, argmax, norm, rms_norm, l2_norm, group_norm.
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
        for (const op_kind op : {op_kind::norm, op_kind::rms_norm, op_kind::l2_norm}) {
            if (!cases.claimed([&] { return detail::row_norm_of(cases.ctx, op, cases.leaf(t, {32, 2, 1, 1}), 1e-5f); }))
                continue;
            cases.combination();
            const float eps[] = {1e-6f, 1e-5f, 1e-3f};
            for (int s = 0; s < shapes_per_combination; ++s) {
                tensor* a = cases.input(t, cases.gen.rows(t), cases.any_layout(t), -1.0, 3.0); // not centred
                cases.add(detail::row_norm_of(cases.ctx, op, a, eps[s % 3]));
            }
        }
        group_norm_cases(cases, t);
    }
    return cases.combinations() - before;
}

/// sum and mean of every type; inputs not centred on 0, so that no sum cancels to almost
/// nothing (its relative error would then be the rounding of much larger partial sums).
inline int reduce_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type t : all_elem_types)
        for (const bool whole : {true, false}) {
            auto build = [&](tensor* a) { return whole ? sum(cases.ctx, a) : mean(cases.ctx, a); };
            if (!cases.claimed([&] { return build(cases.leaf(t, {32, 2, 1, 1})); })) continue;
            cases.combination();
            for (int s = 0; s < shapes_per_combination; ++s)
                cases.add(build(cases.input(t, cases.gen.rows(t), cases.any_layout(t), -0.5, 1.0)));
        }
    return cases.combinations() - before;
}

/// argsort in both orders and top_k (k from 1 to ne0) of every type; every fourth shape
/// full of ties (a few distinct values), whose order is defined too. The first shapes
/// have long rows: the longest of 5000 and 3000 that every target claims (past what a
/// GPU sorts in shared memory), then 1024 and 1025 (a power of two and one more).
inline int sort_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type t : all_elem_types)
        for (const bool top : {false, true}) {
            auto build = [&](tensor* a, int s) {
                if (top) return top_k(cases.ctx, a, 1 + static_cast<std::int64_t>(cases.rng() % static_cast<std::uint32_t>(a->ne[0])));
                return argsort(cases.ctx, a, s % 2 ? sort_order::desc : sort_order::asc);
            };
            if (!cases.claimed([&] { return build(cases.leaf(t, {32, 2, 1, 1}), 0); })) continue;
            cases.combination();
            auto shape = [&](int s) -> extents {
                for (const std::int64_t n : {std::int64_t{5000}, std::int64_t{3000}})
                    if (s == 0 && cases.claimed([&] { return build(cases.leaf(t, {n, 2, 1, 1}), 0); })) return {n, 2, 1, 1};
                if (s == 1) return {1024, 3, 1, 1};
                if (s == 2) return {1025, 1, 2, 1};
                return cases.gen.rows(t);
            };
            for (int s = 0; s < shapes_per_combination; ++s) {
                tensor* a = cases.input(t, shape(s), cases.any_layout(t));
                if (s % 4 == 3)
                    for_each_index(a->ne, [&](std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
                        set_element(*a, i0, i1, i2, i3, static_cast<double>(cases.rng() % 4));
                    });
                cases.add(build(a, s));
            }
        }
    return cases.combinations() - before;
}

/// soft_max without a mask and with a mask of every type soft_max takes; then each of
/// those with sinks and, where there is a mask, ALiBi (soft_max_ext's max_bias).
inline int soft_max_cases(batch& cases) {
    const int before = cases.combinations();
    for (const bool ext : {false, true})
        for (elem_type t : all_elem_types)
            for (int m = 0; m <= static_cast<int>(all_elem_types.size()); ++m) { // m: no mask, then mask type m - 1
                const bool masked = m > 0;
                const elem_type mt = masked ? all_elem_types[static_cast<std::size_t>(m - 1)] : elem_type::f32;
                const auto build = [&](tensor* a, tensor* mask, float sc, float max_bias, tensor* sinks) {
                    tensor* r = soft_max_ext(cases.ctx, a, mask, sc, mask != nullptr ? max_bias : 0.0f);
                    return sinks != nullptr ? soft_max_add_sinks(r, sinks) : r;
                };
                if (!cases.claimed([&] {
                        return build(cases.leaf(t, {32, 2, 4, 1}), masked ? cases.leaf(mt, {32, 2, 1, 1}) : nullptr, 0.5f,
                                     ext ? 8.0f : 0.0f, ext ? cases.leaf(elem_type::f32, {4, 1, 1, 1}) : nullptr);
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
                    // ALiBi's slopes for 1 .. 8 heads and non-powers of two; sinks per head
                    const float max_bias = s % 3 == 2 ? 0.5f : 8.0f;
                    tensor* sinks = ext ? cases.input(elem_type::f32, {ne[2], 1, 1, 1},
                                                      s % 2 ? layout::strided_elems : layout::contiguous, -2.0, 2.0)
                                        : nullptr;
                    cases.add(build(a, mask, sc, ext ? max_bias : 0.0f, sinks));
                }
            }
    return cases.combinations() - before;
}

/// The rows m of a mul_mat's weight for a case whose result has m * cols values: with a
/// quantized weight, at least min_judged_values values. A target may quantize the
/// activations (ggml's CPU kernels do), which leaves each dot product a relative error
/// that grows without bound as its terms cancel; the NMSE over many values judges that
/// error against the result's spread, over one or two values it judges the luck of the draw.
inline std::int64_t judged_rows(elem_type weight, std::int64_t m, std::int64_t cols) {
    constexpr std::int64_t min_judged_values = 16;
    if (!is_quantized(weight) || m * cols >= min_judged_values) return m;
    return m * ((min_judged_values + m * cols - 1) / (m * cols));
}

/// mul_mat for every weight and activation type.
inline int mul_mat_cases(batch& cases) {
    const int before = cases.combinations();
    const layout b_layouts[] = {layout::contiguous,   layout::transposed,    layout::permuted,
                                layout::strided_rows, layout::strided_elems, layout::offset};
    for (elem_type ta : all_elem_types)
        for (elem_type tb : all_elem_types) {
            const std::int64_t w = probe_width(ta);
            if (!cases.claimed([&] { return mul_mat(cases.ctx, cases.leaf(ta, {w, 2, 1, 1}), cases.leaf(tb, {w, 3, 1, 1})); }))
                continue;
            cases.combination();
            auto& g = cases.gen;
            for (int s = 0; s < shapes_per_combination; ++s) {
                const std::int64_t k = is_quantized(ta) ? g.blocks(ta)
                                               : g.pick({1, 3, 7, 16, 17, 31, 33, 64, 65, 67, 100, 129, 255, 257});
                std::int64_t m = g.pick({1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 33, 47, 65});
                const std::int64_t n = g.pick({1, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33});
                const std::int64_t a2 = g.upto(2), a3 = g.upto(2), r2 = g.upto(3), r3 = g.upto(2);
                m = judged_rows(ta, m, n * a2 * a3 * r2 * r3);
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
                    return mul_mat_id(cases.ctx, cases.leaf(ta, {probe_width(ta), 2, 3, 1}), cases.leaf(tb, {probe_width(ta), 1, 2, 1}),
                                      cases.leaf(elem_type::i32, {2, 2, 1, 1}, 0, 2));
                }))
                continue;
            cases.combination();
            auto& g = cases.gen;
            for (int s = 0; s < shapes_per_combination; ++s) {
                const std::int64_t k = is_quantized(ta) ? g.blocks(ta) : g.pick({1, 3, 16, 17, 33, 64, 65, 129});
                std::int64_t m = g.pick({1, 2, 3, 5, 8, 13, 17, 33});
                const std::int64_t n_expert = g.upto(8), n_used = g.upto(4), n_tokens = g.upto(7);
                m = judged_rows(ta, m, n_used * n_tokens);
                layout la = cases.any_layout(ta);
                if (la == layout::transposed) la = layout::strided_elems;
                tensor* as = cases.input(ta, {k, m, n_expert, 1}, la);
                tensor* b = cases.input(tb, {k, s % 2 ? 1 : n_used, n_tokens, 1}, cases.any_layout(tb));
                tensor* ids = cases.input(elem_type::i32, {n_used, n_tokens, 1, 1}, cases.any_layout(elem_type::i32));
                fill_expert_ids(*ids, n_expert, cases.rng);
                cases.add(mul_mat_id(cases.ctx, as, b, ids));
            }
        }
    return cases.combinations() - before;
}

/// add_id (f32): a row of b per expert id added to each row of a, experts drawn at random
/// (repeats included), every layout.
inline int add_id_cases(batch& cases) {
    const int before = cases.combinations();
    constexpr elem_type f32 = elem_type::f32, i32 = elem_type::i32;
    if (!cases.claimed([&] {
            return add_id(cases.ctx, cases.leaf(f32, {32, 2, 3, 1}), cases.leaf(f32, {32, 4, 1, 1}),
                          cases.leaf(i32, {2, 3, 1, 1}, 0, 4));
        }))
        return 0;
    cases.combination();
    auto& g = cases.gen;
    for (int s = 0; s < shapes_per_combination; ++s) {
        const std::int64_t ne0 = g.pick({1, 3, 4, 16, 17, 64, 129, 2880});
        const std::int64_t n_expert = g.upto(32), n_used = g.upto(4), n_tokens = g.upto(9);
        tensor* a = cases.input(f32, {ne0, n_used, n_tokens, 1}, cases.any_layout(f32));
        tensor* b = cases.input(f32, {ne0, n_expert, 1, 1}, cases.any_layout(f32));
        tensor* ids = cases.input(i32, {n_used, n_tokens, 1, 1}, cases.any_layout(i32));
        fill_expert_ids(*ids, n_expert, cases.rng);
        cases.add(add_id(cases.ctx, a, b, ids));
    }
    return cases.combinations() - before;
}

/// flash_attn_ext for every k and v type: head sizes apart or equal, grouped-query heads,
/// two sequences, and each shape with a drawn variant of build_attention (mask, sinks,
/// softcap, ALiBi, views).
inline int flash_attn_ext_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type tk : all_elem_types)
        for (elem_type tv : all_elem_types) {
            if (!cases.claimed([&] {
                    return flash_attn_ext(cases.ctx, cases.leaf(elem_type::f32, {32, 2, 2, 1}), cases.leaf(tk, {32, 3, 1, 1}),
                                          cases.leaf(tv, {32, 3, 1, 1}), nullptr, 0.5f);
                }))
                continue;
            cases.combination();
            auto& g = cases.gen;
            const auto head_size = [&](elem_type t) {
                return is_quantized(t) ? 32 * g.pick({1, 2, 4}) : g.pick({1, 3, 16, 32, 40, 64, 65, 128});
            };
            for (int s = 0; s < shapes_per_combination; ++s) {
                const std::int64_t dk = head_size(tk);
                const std::int64_t dv = s % 3 == 0 ? head_size(tv) : is_quantized(tv) && dk % 32 != 0 ? 32 : dk;
                const std::int64_t n_head_kv = g.upto(3);
                const detail::attention_shape shape{dk,           dv,         g.pick({1, 2, 7, 16, 33, 64, 100, 200}),
                                                    g.upto(4),    n_head_kv * g.upto(3), n_head_kv, g.upto(2)};
                cases.add(detail::build_attention(cases.ctx, cases.rng, tk, tv, shape, static_cast<int>(cases.rng() % 64)));
            }
        }
    return cases.combinations() - before;
}

/// im2col, 1-D and 2-D, of f32 and f16 inputs into f32 and f16, with f32 and f16
/// kernels, strides, pads and dilations drawn (detail::random_conv), inputs in any layout.
inline int im2col_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type tb : {elem_type::f32, elem_type::f16})
        for (elem_type td : {elem_type::f32, elem_type::f16}) {
            if (!cases.claimed([&] {
                    return im2col(cases.ctx, cases.leaf(elem_type::f16, {3, 3, 2, 1}), cases.leaf(tb, {4, 4, 2, 1}), 1, 1, 1,
                                  1, 1, 1, true, td);
                }))
                continue;
            cases.combination();
            for (int s = 0; s < shapes_per_combination; ++s) {
                const detail::conv_draw c = detail::random_conv(cases.rng, s % 2 == 0);
                tensor* a = cases.leaf(s % 3 == 0 ? elem_type::f32 : elem_type::f16, c.kernel);
                tensor* b = cases.input(tb, c.input, cases.any_layout(tb));
                cases.add(im2col(cases.ctx, a, b, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1, c.two_d, td));
            }
        }
    return cases.combinations() - before;
}

/// conv_2d_direct of f32 and f16 kernels over f32 inputs in any layout, strides, pads and
/// dilations drawn (detail::random_conv); every fourth shape with 16 input and output
/// channels.
inline int conv_2d_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type tk : {elem_type::f32, elem_type::f16}) {
        if (!cases.claimed([&] {
                return conv_2d_direct(cases.ctx, cases.leaf(tk, {3, 3, 2, 2}), cases.leaf(elem_type::f32, {4, 4, 2, 1}), 1, 1,
                                      1, 1, 1, 1);
            }))
            continue;
        cases.combination();
        for (int s = 0; s < shapes_per_combination; ++s) {
            detail::conv_draw c = detail::random_conv(cases.rng, true);
            if (s % 4 == 3) { // channels enough for the CPU's fast path (K * oc >= 256)
                c.kernel[2] = c.input[2] = 16;
                c.kernel[3] = 16;
            }
            tensor* a = cases.input(tk, c.kernel, cases.any_layout(tk));
            tensor* b = cases.input(elem_type::f32, c.input, cases.any_layout(elem_type::f32));
            cases.add(conv_2d_direct(cases.ctx, a, b, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1));
        }
    }
    return cases.combinations() - before;
}

/// conv_transpose_1d and conv_transpose_2d of f32 and f16 kernels over f32 inputs in any
/// layout, strides from below to above the kernel's width (detail::random_conv_transpose).
inline int conv_transpose_cases(batch& cases) {
    const int before = cases.combinations();
    for (const bool two_d : {false, true})
        for (elem_type tk : {elem_type::f32, elem_type::f16}) {
            const auto make = [&](tensor* a, tensor* b, int stride) {
                return two_d ? conv_transpose_2d_p0(cases.ctx, a, b, stride) : conv_transpose_1d(cases.ctx, a, b, stride);
            };
            if (!cases.claimed([&] {
                    return two_d ? make(cases.leaf(tk, {3, 2, 2, 2}), cases.leaf(elem_type::f32, {4, 3, 2, 1}), 2)
                                 : make(cases.leaf(tk, {3, 2, 2, 1}), cases.leaf(elem_type::f32, {4, 2, 1, 1}), 2);
                }))
                continue;
            cases.combination();
            for (int s = 0; s < shapes_per_combination; ++s) {
                const detail::conv_transpose_draw c = detail::random_conv_transpose(cases.rng, two_d);
                tensor* a = cases.input(tk, c.kernel, cases.any_layout(tk));
                tensor* b = cases.input(elem_type::f32, c.input, cases.any_layout(elem_type::f32));
                cases.add(make(a, b, c.stride));
            }
        }
    return cases.combinations() - before;
}

/// conv_2d_dw_direct of f32 kernels over f32 inputs, strides, pads and dilations drawn
/// (detail::random_conv): every other input channel-last (ggml's CWHN: a [c, w, h, n]
/// tensor permuted, and the kernel likewise), the others in any layout.
inline int conv_2d_dw_cases(batch& cases) {
    const int before = cases.combinations();
    constexpr elem_type f32 = elem_type::f32;
    if (!cases.claimed([&] { return conv_2d_dw_direct(cases.ctx, cases.leaf(f32, {3, 3, 1, 2}), cases.leaf(f32, {4, 4, 2, 1}), 1, 1, 1, 1, 1, 1); }))
        return 0;
    cases.combination();
    for (int s = 0; s < shapes_per_combination; ++s) {
        const detail::conv_draw c = detail::random_conv(cases.rng, true);
        const extents kernel = {c.kernel[0], c.kernel[1], 1, c.input[2]};
        tensor* a = nullptr;
        tensor* b = nullptr;
        if (s % 2 == 0) {
            a = permute(cases.ctx, cases.input(f32, {kernel[3], kernel[0], kernel[1], 1}, layout::contiguous), 3, 0, 1, 2);
            b = permute(cases.ctx, cases.input(f32, {c.input[2], c.input[0], c.input[1], c.input[3]}, layout::contiguous), 2, 0, 1, 3);
        } else {
            a = cases.input(f32, kernel, cases.any_layout(f32));
            b = cases.input(f32, c.input, cases.any_layout(f32));
        }
        cases.add(conv_2d_dw_direct(cases.ctx, a, b, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1));
    }
    return cases.combinations() - before;
}

/// win_part of f32 images in any layout into windows of sides from 1 to past the image
/// (padded windows), win_unpart of windows back into images of every size they hold, and
/// get_rel_pos of f16 tables in any layout.
inline int window_cases(batch& cases) {
    const int before = cases.combinations();
    constexpr elem_type f32 = elem_type::f32;
    for (const bool part : {true, false}) {
        if (!cases.claimed([&] {
                return part ? win_part(cases.ctx, cases.leaf(f32, {3, 5, 4, 1}), 2)
                            : win_unpart(cases.ctx, cases.leaf(f32, {3, 2, 2, 6}), 5, 4, 2);
            }))
            continue;
        cases.combination();
        for (int s = 0; s < shapes_per_combination; ++s) {
            const std::int64_t c = cases.gen.upto(5), w0 = cases.gen.upto(9), h0 = cases.gen.upto(9);
            const int w = static_cast<int>(cases.gen.upto(5));
            if (part) {
                cases.add(win_part(cases.ctx, cases.input(f32, {c, w0, h0, 1}, cases.any_layout(f32)), w));
            } else {
                const extents ne = {c, w, w, windows_across(w0, w) * windows_across(h0, w)};
                cases.add(win_unpart(cases.ctx, cases.input(f32, ne, cases.any_layout(f32)), static_cast<int>(w0), static_cast<int>(h0), w));
            }
        }
    }
    if (cases.claimed([&] { return get_rel_pos(cases.ctx, cases.leaf(elem_type::f16, {4, 5, 1, 1}), 3, 3); })) {
        cases.combination();
        for (int s = 0; s < shapes_per_combination; ++s) {
            const std::int64_t c = cases.gen.upto(9), q = cases.gen.upto(8);
            tensor* a = cases.input(elem_type::f16, {c, 2 * q - 1, 1, 1}, cases.any_layout(elem_type::f16));
            cases.add(get_rel_pos(cases.ctx, a, static_cast<int>(q), static_cast<int>(q)));
        }
    }
    return cases.combinations() - before;
}

/// get_rows from every type.
inline int get_rows_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type t : all_elem_types) {
        if (!cases.claimed([&] { return get_rows(cases.ctx, cases.leaf(t, {probe_width(t), 3, 1, 1}), cases.leaf(elem_type::i32, {2, 1, 1, 1}, 0, 2)); }))
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

/// rope normal and neox (half of the shapes with frequency factors and YaRN), and the
/// M-RoPE modes (mrope, imrope, vision) of rope_multi.
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
                        return set_rows(cases.ctx, cases.leaf(to, {probe_width(to), 2, 1, 1}), cases.leaf(from, {probe_width(to), 2, 1, 1}),
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
                    fill_permutations(*idx, cases.rng);
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

/// pool_1d and pool_2d, max and avg, of every source type: kernels, strides and paddings
/// that reach past the source and windows of padding only.
inline int pool_cases(batch& cases) {
    const int before = cases.combinations();
    for (const bool two_d : {false, true})
        for (elem_type t : all_elem_types) {
            const pool_window probe{.op = pool_op::max, .k0 = 2, .avg_over_inside = !two_d};
            if (!cases.claimed([&] { return pool_of(cases.ctx, cases.leaf(t, {4, 2, 1, 1}), probe); })) continue;
            cases.combination();
            for (int s = 0; s < shapes_per_combination; ++s) {
                const extents ne{cases.gen.upto(17), cases.gen.upto(9), cases.gen.upto(3), cases.gen.upto(2)};
                tensor* a = cases.input(t, ne, cases.any_layout(t));
                cases.add(pool_of(cases.ctx, a, random_pool_window(cases.rng, ne, two_d)));
            }
        }
    return cases.combinations() - before;
}

/// upscale in every mode, corners aligned or not, up and down in every dimension.
inline int upscale_cases(batch& cases) {
    const int before = cases.combinations();
    for (const std::uint32_t mode : upscale_modes) {
        if (!cases.claimed([&] { return interpolate(cases.ctx, cases.leaf(elem_type::f32, {4, 2, 1, 1}), 8, 4, 1, 1, mode); }))
            continue;
        cases.combination();
        for (int s = 0; s < shapes_per_combination; ++s) {
            const extents ne{cases.gen.upto(9), cases.gen.upto(7), cases.gen.upto(3), cases.gen.upto(2)};
            tensor* a = cases.input(elem_type::f32, ne, cases.any_layout(elem_type::f32));
            const extents r = random_upscale_extents(cases.rng, ne);
            cases.add(interpolate(cases.ctx, a, r[0], r[1], r[2], r[3], mode | (s % 2 != 0 ? scale_align_corners : 0u)));
        }
    }
    return cases.combinations() - before;
}

/// pad_reflect_1d and roll of every float type.
inline int remap_cases(batch& cases) {
    const int before = cases.combinations();
    for (const bool reflect : {true, false})
        for (elem_type t : all_elem_types) {
            if (!cases.claimed([&] {
                    tensor* probe = cases.leaf(t, {4, 2, 1, 1});
                    return reflect ? pad_reflect_1d(cases.ctx, probe, 1, 2) : roll(cases.ctx, probe, 1, -1);
                }))
                continue;
            cases.combination();
            for (int s = 0; s < shapes_per_combination; ++s) {
                tensor* a = cases.input(t, cases.gen.rows(t, 2000), cases.any_layout(t));
                cases.add(remap_of(cases.ctx, a, reflect, cases.rng));
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
    const rope_mode modes[] = {rope_mode::normal, rope_mode::neox, rope_mode::mrope, rope_mode::imrope, rope_mode::vision};
    for (const rope_mode mode : modes)
        for (elem_type t : all_elem_types) {
            const bool multi = (static_cast<int>(mode) & 8) != 0, vision = mode == rope_mode::vision;
            const std::array<int, 4> probe_sections{1, 1, 1, 0};
            if (!cases.claimed([&] {
                    return rope_multi(cases.ctx, cases.leaf(t, {8, 2, 3, 1}), cases.leaf(elem_type::i32, {multi ? 12 : 3, 1, 1, 1}, 0, 9),
                                      nullptr, vision ? 4 : 8, probe_sections, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
                }))
                continue;
            cases.combination();
            for (int s = 0; s < shapes_per_combination; ++s) {
                // (vision rotates (k, k + ne0 / 2) with an even n_dims = ne0 / 2)
                const std::int64_t hd = vision ? cases.gen.pick({4, 8, 12, 20, 36, 64, 68, 128})
                                               : cases.gen.pick({2, 6, 10, 14, 18, 22, 34, 64, 66, 128, 130});
                const extents ne = {hd, cases.gen.upto(5), cases.gen.upto(7), cases.gen.upto(2)};
                const int n_dims = vision ? static_cast<int>(hd / 2)
                                   : s % 3 == 0 ? static_cast<int>(hd)
                                                : std::max(2, static_cast<int>(hd / 2) & ~1);
                const float base = s % 2 ? 10000.0f : 500000.0f;
                const float fscale = s % 4 == 3 ? 0.25f : 1.0f;
                tensor* a = cases.input(t, ne, cases.any_layout(t));
                tensor* pos = cases.input(elem_type::i32, {(multi ? 4 : 1) * ne[2], 1, 1, 1},
                                          s % 2 ? layout::strided_elems : layout::contiguous);
                for_each_index(pos->ne, [&](std::int64_t i0, std::int64_t, std::int64_t, std::int64_t) {
                    set_element(*pos, i0, 0, 0, 0, static_cast<double>(static_cast<std::int64_t>(cases.rng() % 8192) - 64));
                });
                if (!multi && s % 2 == 0) {
                    cases.add(rope(cases.ctx, a, pos, n_dims, mode, base, fscale));
                    continue;
                }
                // frequency factors (some shapes), YaRN (ext_factor 0, 1 or 0.5)
                const std::int64_t pairs = vision ? n_dims : n_dims / 2;
                tensor* ff = s % 3 == 1 ? nullptr
                                        : cases.input(elem_type::f32, {pairs + s % 2, 1, 1, 1},
                                                      s % 4 == 2 ? layout::strided_elems : layout::contiguous, 1.0, 40.0);
                const float ext = s % 3 == 0 ? 0.0f : s % 3 == 1 ? 1.0f : 0.5f;
                // sections adding up to at most ne0: up to an eighth each for t, h, w, and e
                const auto q = static_cast<int>(hd / 8);
                const auto some = [&] { return q > 0 ? static_cast<int>(cases.gen.upto(q)) : 0; };
                const std::array<int, 4> sections{std::max(1, q), some(), some(), q > 0 && s % 2 ? 1 : 0};
                cases.add(rope_multi(cases.ctx, a, pos, ff, n_dims, multi ? sections : std::array<int, 4>{0, 0, 0, 0}, mode,
                                     4096, base, fscale == 1.0f ? 0.5f : fscale, ext, 0.9f, 32.0f, 1.0f));
            }
        }
    return cases.combinations() - before;
}

/// concat along every dimension.
inline int concat_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type t : all_elem_types) {
        if (!cases.claimed([&] { return concat(cases.ctx, cases.leaf(t, {probe_width(t), 2, 1, 1}), cases.leaf(t, {probe_width(t), 1, 1, 1}), 1); })) continue;
        cases.combination();
        for (int s = 0; s < shapes_per_combination; ++s) {
            const int dim = s % 4;
            const extents na = cases.gen.rows(t);
            extents nb = na;
            nb[static_cast<std::size_t>(dim)] = is_quantized(t) && dim == 0 ? block_size(t) : cases.gen.upto(4);
            tensor* a = cases.input(t, na, cases.any_layout(t), -100, 100);
            tensor* b = cases.input(t, nb, cases.any_layout(t), -100, 100);
            cases.add(concat(cases.ctx, a, b, dim));
        }
    }
    return cases.combinations() - before;
}

/// glu, every function, fused (swapped or not, odd rows too) and split, of every float
/// type; rows contiguous, other strides free (the op's rule).
inline int glu_cases(batch& cases) {
    const int before = cases.combinations();
    const layout layouts[] = {layout::contiguous, layout::offset, layout::strided_rows};
    for (elem_type t : all_elem_types)
        for (const bool split : {false, true}) {
            if (!cases.claimed([&] {
                    tensor* a = cases.leaf(t, {32, 2, 1, 1});
                    return split ? swiglu_split(cases.ctx, a, cases.leaf(t, {32, 2, 1, 1})) : swiglu(cases.ctx, a);
                }))
                continue;
            cases.combination();
            for (int s = 0; s < shapes_per_combination; ++s) {
                const auto fn = static_cast<glu_op>(s % glu_op_count);
                const layout l = layouts[static_cast<std::size_t>(s) % 3];
                extents ne = cases.gen.rows(t);
                if (!split) ne[0] = 2 * ne[0] + (s / glu_op_count) % 2; // an odd row's last value is not read
                tensor* a = cases.input(t, ne, l, -6, 6);
                tensor* b = split ? cases.input(t, ne, layouts[static_cast<std::size_t>(s + 1) % 3], -6, 6) : nullptr;
                if (fn == glu_op::swiglu_oai)
                    cases.add(swiglu_oai(cases.ctx, a, b, 1.702f, 4.0f));
                else
                    cases.add(split ? glu_split(cases.ctx, a, b, fn) : glu(cases.ctx, a, fn, s % 2 == 1));
            }
        }
    return cases.combinations() - before;
}

/// repeat of every type it takes, tiled 1 to 3 times per dimension.
inline int repeat_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type t : all_elem_types) {
        if (!cases.claimed([&] { return repeat_4d(cases.ctx, cases.leaf(t, {4, 2, 1, 1}), 8, 2, 1, 1); })) continue;
        cases.combination();
        for (int s = 0; s < shapes_per_combination; ++s) {
            const extents ne = cases.gen.rows(t, 1000);
            tensor* a = cases.input(t, ne, cases.any_layout(t));
            cases.add(repeat_4d(cases.ctx, a, ne[0] * cases.gen.upto(3), ne[1] * cases.gen.upto(3), ne[2] * cases.gen.upto(2),
                                ne[3] * cases.gen.upto(2)));
        }
    }
    return cases.combinations() - before;
}

/// repeat_back, cumsum, tri (every triangle) and diag of f32 (small square matrices for
/// tri and diag).
inline int misc_cases(batch& cases) {
    const int before = cases.combinations();
    const elem_type t = elem_type::f32;
    if (cases.claimed([&] { return repeat_back(cases.ctx, cases.leaf(t, {8, 2, 1, 1}), cases.leaf(t, {4, 1, 1, 1})); })) {
        cases.combination();
        for (int s = 0; s < shapes_per_combination; ++s) {
            const extents ne = cases.gen.rows(t, 3000);
            const extents small = {ne[0] / random_divisor(cases.rng, ne[0]), ne[1] / random_divisor(cases.rng, ne[1]),
                                   ne[2] / random_divisor(cases.rng, ne[2]), ne[3]};
            cases.add(repeat_back(cases.ctx, cases.input(t, ne, cases.any_layout(t)), cases.leaf(t, small)));
        }
    }
    if (cases.claimed([&] { return cumsum(cases.ctx, cases.leaf(t, {8, 2, 1, 1})); })) {
        cases.combination();
        for (int s = 0; s < shapes_per_combination; ++s)
            cases.add(cumsum(cases.ctx, cases.input(t, cases.gen.rows(t), cases.any_layout(t))));
    }
    if (cases.claimed([&] { return tri(cases.ctx, cases.leaf(t, {4, 4, 1, 1}), tri_type::lower); })) {
        cases.combination();
        for (int s = 0; s < shapes_per_combination; ++s) {
            const std::int64_t n = cases.gen.upto(33);
            tensor* a = cases.input(t, {n, n, cases.gen.upto(3), cases.gen.upto(2)}, cases.any_layout(t));
            cases.add(tri(cases.ctx, a, static_cast<tri_type>(s % 4)));
        }
    }
    if (cases.claimed([&] { return diag(cases.ctx, cases.leaf(t, {4, 1, 1, 1})); })) {
        cases.combination();
        for (int s = 0; s < shapes_per_combination; ++s) {
            const extents ne = {cases.gen.upto(33), 1, cases.gen.upto(3), cases.gen.upto(2)};
            cases.add(diag(cases.ctx, cases.input(t, ne, cases.any_layout(t))));
        }
    }
    return cases.combinations() - before;
}

/// timestep_embedding of even and odd dims.
inline int timestep_embedding_cases(batch& cases) {
    const elem_type t = elem_type::f32;
    if (!cases.claimed([&] { return timestep_embedding(cases.ctx, cases.leaf(t, {4, 1, 1, 1}), 8); })) return 0;
    cases.combination();
    for (int s = 0; s < shapes_per_combination; ++s) {
        tensor* steps = cases.input(t, {cases.gen.upto(9), 1, 1, 1}, cases.any_layout(t), 0.0, 50.0);
        cases.add(timestep_embedding(cases.ctx, steps, static_cast<int>(cases.gen.upto(70)), s % 3 ? 10000 : 100));
    }
    return 1;
}

/// out_prod of f32 and every quantized a it takes by f32 b, broadcast over dims 2 and 3.
inline int out_prod_cases(batch& cases) {
    const int before = cases.combinations();
    for (elem_type ta : all_elem_types) {
        const std::int64_t w = probe_width(ta);
        if (!cases.claimed([&] { return out_prod(cases.ctx, cases.leaf(ta, {w, 2, 1, 1}), cases.leaf(elem_type::f32, {3, 2, 1, 1})); }))
            continue;
        cases.combination();
        for (int s = 0; s < shapes_per_combination; ++s) {
            const std::int64_t k = cases.gen.upto(17), a2 = cases.gen.upto(2), a3 = cases.gen.upto(2);
            const extents ane = {is_quantized(ta) ? cases.gen.blocks(ta) : cases.gen.upto(33), k, a2, a3};
            const extents bne = {cases.gen.upto(9), k, a2 * cases.gen.upto(2), a3};
            const layout al = is_quantized(ta) ? (s % 2 ? layout::offset : layout::contiguous) : (s % 2 ? layout::permuted : layout::strided_rows);
            tensor* a = cases.input(ta, ane, al);
            cases.add(out_prod(cases.ctx, a, cases.input(elem_type::f32, bne, cases.any_layout(elem_type::f32))));
        }
    }
    return cases.combinations() - before;
}

/// count_equal of i32 tensors (few distinct values) and acc of f32 b into a's views
/// (a's own strides or gaps between b's rows, at an offset).
inline int count_acc_cases(batch& cases) {
    int found = 0;
    const elem_type i = elem_type::i32, f = elem_type::f32;
    if (cases.claimed([&] { return count_equal(cases.ctx, cases.leaf(i, {4, 2, 1, 1}), cases.leaf(i, {4, 2, 1, 1})); })) {
        cases.combination();
        ++found;
        for (int s = 0; s < shapes_per_combination; ++s) {
            const extents ne = cases.gen.rows(i);
            cases.add(count_equal(cases.ctx, cases.input(i, ne, cases.any_layout(i), 0, 3), cases.input(i, ne, cases.any_layout(i), 0, 3)));
        }
    }
    if (cases.claimed([&] { return acc(cases.ctx, cases.leaf(f, {4, 2, 1, 1}), cases.leaf(f, {2, 1, 1, 1}), 16, 32, 32, 4); })) {
        cases.combination();
        ++found;
        for (int s = 0; s < shapes_per_combination; ++s) {
            const extents bne = cases.gen.rows(f, 1000);
            const std::int64_t gap = s % 2 ? cases.gen.upto(3) : 0; // elements between b's rows in a
            const std::int64_t nb1 = 4 * (bne[0] + gap), nb2 = nb1 * bne[1], nb3 = nb2 * bne[2];
            const std::int64_t offset = 4 * cases.gen.upto(5);
            const std::int64_t n = (offset + nb3 * bne[3]) / 4 + cases.gen.upto(4); // a holds the view and a little more
            tensor* a = cases.input(f, {n, 1, 1, 1}, layout::contiguous);
            cases.add(acc(cases.ctx, a, cases.input(f, bne, cases.any_layout(f)), static_cast<std::size_t>(nb1),
                          static_cast<std::size_t>(nb2), static_cast<std::size_t>(nb3), static_cast<std::size_t>(offset)));
        }
    }
    return found;
}

/// The state-space and linear-attention recurrences: ssm_conv over any layout, ssm_scan in
/// the Mamba-1 (A per state) and Mamba-2 (A per head, grouped B and C) layouts, with state
/// ids that pick, repeat and skip states of s; gated_linear_attn, rwkv_wkv6 and rwkv_wkv7
/// over one or more sequences.
inline int recurrent_cases(batch& cases) {
    int found = 0;
    constexpr elem_type f32 = elem_type::f32, i32 = elem_type::i32;
    auto& g = cases.gen;
    if (cases.claimed([&] { return ssm_conv(cases.ctx, cases.leaf(f32, {5, 3, 2, 1}), cases.leaf(f32, {4, 3, 1, 1})); })) {
        cases.combination();
        ++found;
        for (int s = 0; s < shapes_per_combination; ++s) {
            const std::int64_t d_conv = g.upto(5), d_inner = g.pick({1, 3, 16, 67}), n_t = g.upto(9), n_s = g.upto(3);
            tensor* sx = cases.input(f32, {d_conv - 1 + n_t, d_inner, n_s, 1}, cases.any_layout(f32));
            cases.add(ssm_conv(cases.ctx, sx, cases.input(f32, {d_conv, d_inner, 1, 1}, cases.any_layout(f32))));
        }
    }
    const auto scan = [&](bool mamba1, std::int64_t d_state, std::int64_t head_dim, std::int64_t n_head,
                          std::int64_t n_group, std::int64_t n_t, std::int64_t n_s, std::int64_t n_rs, bool big_dt) {
        const layout l = g.upto(2) == 1 ? layout::contiguous : layout::offset;
        tensor* st = cases.input(f32, {d_state, head_dim, n_head, n_rs}, layout::contiguous);
        tensor* x = cases.input(f32, {head_dim, n_head, n_t, n_s}, l);
        tensor* dt = cases.input(f32, {n_head, n_t, n_s, 1}, layout::contiguous, -3.0, big_dt ? 25.0 : 2.0);
        tensor* A = cases.input(f32, {mamba1 ? d_state : 1, n_head, 1, 1}, layout::contiguous, -2.0, -0.1);
        tensor* B = cases.input(f32, {d_state, n_group, n_t, n_s}, l);
        tensor* C = cases.input(f32, {d_state, n_group, n_t, n_s}, l);
        tensor* ids = cases.input(i32, {n_s, 1, 1, 1}, layout::contiguous);
        fill_expert_ids(*ids, n_rs, cases.rng);
        return ssm_scan(cases.ctx, st, x, dt, A, B, C, ids);
    };
    for (const bool mamba1 : {true, false}) {
        if (!cases.claimed([&] {
                return ssm_scan(cases.ctx, cases.leaf(f32, {4, 1, 2, 1}), cases.leaf(f32, {1, 2, 1, 1}),
                                cases.leaf(f32, {2, 1, 1, 1}), cases.leaf(f32, {mamba1 ? 4 : 1, 2, 1, 1}),
                                cases.leaf(f32, {4, 1, 1, 1}), cases.leaf(f32, {4, 1, 1, 1}), cases.leaf(i32, {1, 1, 1, 1}, 0, 1));
            }))
            continue;
        cases.combination();
        ++found;
        for (int s = 0; s < shapes_per_combination; ++s) {
            const std::int64_t d_state = mamba1 ? g.pick({1, 4, 16}) : g.pick({1, 8, 16, 33});
            const std::int64_t n_group = mamba1 ? 1 : g.upto(2);
            const std::int64_t n_head = mamba1 ? g.pick({1, 5, 32}) : n_group * g.upto(3);
            const std::int64_t head_dim = mamba1 ? 1 : g.pick({1, 4, 16});
            const std::int64_t n_s = g.upto(3);
            cases.add(scan(mamba1, d_state, head_dim, n_head, n_group, g.upto(6), n_s, n_s + g.upto(2) - 1, s == 0));
        }
    }
    // decays in (0, 1) (g, td, w) keep long sequences bounded, as the models' are
    for (const op_kind op : {op_kind::gated_linear_attn, op_kind::rwkv_wkv6, op_kind::rwkv_wkv7}) {
        const auto make = [&](std::int64_t S, std::int64_t H, std::int64_t T, std::int64_t n_seqs, bool probe) {
            const auto tok = [&](double lo, double hi) {
                return probe ? cases.leaf(f32, {S, H, T, 1}) : cases.input(f32, {S, H, T, 1}, layout::contiguous, lo, hi);
            };
            tensor* state = probe ? cases.leaf(f32, {S * S * H, n_seqs, 1, 1})
                                  : cases.input(f32, {S * S * H, n_seqs, 1, 1}, layout::contiguous);
            if (op == op_kind::gated_linear_attn) {
                tensor *k = tok(-1, 1), *v = tok(-1, 1), *q = tok(-1, 1), *gate = tok(0.5, 1.0);
                return gated_linear_attn(cases.ctx, k, v, q, gate, state, 0.125f * static_cast<float>(1 + g.upto(8)));
            }
            if (op == op_kind::rwkv_wkv6) {
                tensor *k = tok(-1, 1), *v = tok(-1, 1), *r = tok(-1, 1);
                tensor* tf = probe ? cases.leaf(f32, {S, H, 1, 1}) : cases.input(f32, {S, H, 1, 1}, layout::contiguous);
                return rwkv_wkv6(cases.ctx, k, v, r, tf, tok(0.5, 1.0), state);
            }
            tensor *r = tok(-1, 1), *w = tok(0.5, 1.0), *k = tok(-1, 1), *v = tok(-1, 1), *a = tok(-0.5, 0.5), *b = tok(-0.5, 0.5);
            return rwkv_wkv7(cases.ctx, r, w, k, v, a, b, state);
        };
        if (!cases.claimed([&] { return make(2, 2, 2, 1, true); })) continue;
        cases.combination();
        ++found;
        for (int s = 0; s < shapes_per_combination; ++s) {
            const std::int64_t n_seqs = g.upto(3);
            cases.add(make(g.pick({1, 4, 16, 33}), g.upto(3), n_seqs * g.upto(4), n_seqs, false));
        }
    }
    return found;
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
        {"glu", 31010, &glu_cases},
        {"reduce", 31011, &reduce_cases},
        {"sort", 31012, &sort_cases},
        {"set_rows", 31013, &set_rows_cases},
        {"pad", 31014, &pad_cases},
        {"arange", 31015, &arange_cases},
        {"mul_mat_id", 31016, &mul_mat_id_cases},
        {"add_id", 31017, &add_id_cases},
        {"flash_attn_ext", 31018, &flash_attn_ext_cases},
        {"repeat", 31019, &repeat_cases},
        {"misc", 31020, &misc_cases},
        {"timestep_embedding", 31021, &timestep_embedding_cases},
        {"out_prod", 31022, &out_prod_cases},
        {"im2col", 31019, &im2col_cases},
        {"conv_2d", 31020, &conv_2d_cases},
        {"pool", 31019, &pool_cases},
        {"upscale", 31020, &upscale_cases},
        {"remap", 31021, &remap_cases},
        {"count_acc", 31023, &count_acc_cases},
        {"conv_transpose", 31024, &conv_transpose_cases},
        {"conv_2d_dw", 31025, &conv_2d_dw_cases},
        {"window", 31026, &window_cases},
        {"recurrent", 31027, &recurrent_cases},
    };
    return families;
}

/// The family named `name`, or null.
inline const parity_family* find_parity_family(std::string_view name) {
    return find_named(parity_families(), name);
}

} // namespace backplane::conformance

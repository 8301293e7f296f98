#pragma once
// The conformance catalogue: every core op as a family of cases. A case is a plain value
// (case_spec: op, operand types, a main shape, a variant, a seed) from which the family
// builds the same graph, with the same data, every time: the seed drives a std::mt19937
// that fills the inputs. Shrinking a failing case changes only its shape; the repro
// command names all five fields.
//
// What a family's fields mean:
//   types    the operand types, in the family's order (binary: a, b; mul_mat: weights,
//            activations; cpy: from, to; soft_max: a, mask; flash_attn_ext: k, v)
//   ne       the main operand's extents (mul_mat: {k, m, n, batch})
//   variant  0 .. n_variants - 1: the layout of the main operand (contiguous, rows with a
//            stride, permuted, transposed), a broadcast pattern, a rope mode, a mask, a
//            concat dimension; see each family
// A family's build throws backplane::error for a spec it cannot make (a quantized row
// that is not whole blocks, a mask type soft_max refuses): such a spec is "invalid",
// never a failure.
//
// Thresholds are threshold_for's (conformance/thresholds.hpp); shapes come from
// shape_gen (conformance/shapes.hpp), layouts from laid_out (conformance/inputs.hpp).

#include <backplane/conformance/inputs.hpp>
#include <backplane/conformance/shapes.hpp>
#include <backplane/conformance/thresholds.hpp>
#include <backplane/core/context.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/ops.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane::conformance {

/// One case: everything needed to rebuild its graph and data.
struct case_spec {
    std::string op;
    std::vector<elem_type> types;
    extents ne{1, 1, 1, 1};
    int variant = 0;
    std::uint32_t seed = 0;
    friend bool operator==(const case_spec&, const case_spec&) = default;
};

inline std::string shape_arg(const extents& ne) {
    return std::to_string(ne[0]) + "x" + std::to_string(ne[1]) + "x" + std::to_string(ne[2]) + "x" +
           std::to_string(ne[3]);
}
inline std::string types_arg(std::span<const elem_type> types) {
    std::string s;
    for (elem_type t : types)
        s += (s.empty() ? "" : ",") + std::string(backplane::to_string(t));
    return s;
}
/// "mul_mat f16,f32 [64, 3, 2, 1] v1 seed 7"
inline std::string to_string(const case_spec& c) {
    return c.op + " " + types_arg(c.types) + " [" + std::to_string(c.ne[0]) + ", " +
           std::to_string(c.ne[1]) + ", " + std::to_string(c.ne[2]) + ", " +
           std::to_string(c.ne[3]) + "] v" + std::to_string(c.variant) + " seed " +
           std::to_string(c.seed);
}
/// The tool's arguments selecting exactly this case.
inline std::string repro_args(const case_spec& c) {
    return "--op " + c.op + " --types " + types_arg(c.types) + " --shape " + shape_arg(c.ne) +
           " --variant " + std::to_string(c.variant) + " --seed " + std::to_string(c.seed);
}

/// A case built into a context: the node under test and how to judge it.
struct built_case {
    tensor* out = nullptr;
    double max_nmse = 1e-7;
    bool exact = false;
    double flops = 0; ///< arithmetic of one compute (0: a memory-bound op, judged in bytes)
    double bytes = 0; ///< bytes read and written by one compute
};

namespace detail {

/// An input of type t with extents ne, in the layout `variant` (0 contiguous, 1 rows with
/// a stride, 2 permuted, 3 transposed; quantized types fall back from 3 to 1), filled
/// with values in [lo, hi).
inline tensor* input(context& ctx, elem_type t, const extents& ne, int variant, std::mt19937& rng,
                     double lo = -1.0, double hi = 1.0) {
    static constexpr layout by_variant[] = {layout::contiguous, layout::strided_rows,
                                            layout::permuted, layout::transposed};
    layout l = by_variant[variant & 3];
    if (!allows(l, t))
        l = layout::strided_rows;
    return laid_out(ctx, t, ne, l, [&](elem_type type, const extents& root_ne) {
        return random_leaf(ctx, type, root_ne, rng, lo, hi);
    });
}

inline double nbytes_of(const tensor* t) {
    if (t == nullptr)
        return 0;
    return static_cast<double>(t->nelements()) * static_cast<double>(type_size(t->type)) /
           static_cast<double>(block_size(t->type));
}
inline double traffic(const tensor* out) {
    double b = nbytes_of(out);
    for (const tensor* s : out->src)
        b += nbytes_of(s);
    return b;
}
inline void require(bool ok, const std::string& why) {
    if (!ok)
        throw error("conformance: " + why);
}
inline elem_type type_at(const case_spec& c, std::size_t i) {
    require(c.types.size() > i, c.op + " needs " + std::to_string(i + 1) + " operand types");
    return c.types[i];
}

} // namespace detail

/// A family of cases for one op (named apart from backplane::op_family, the kind of work
/// an op is).
struct op_cases {
    std::string_view name;
    int n_types;    ///< operand types a case names
    int n_variants; ///< variants 0 .. n_variants - 1
    /// Builds the case's graph in ctx (host data) from rng, seeded by the caller with
    /// spec.seed; throws backplane::error for a spec it cannot build.
    built_case (*build)(context& ctx, const case_spec& spec, std::mt19937& rng);
    /// A random main shape for these operand types (test mode).
    extents (*shape)(std::mt19937& rng, std::span<const elem_type> types);
    /// The main shape of the perf mode.
    extents perf_shape;
    /// Bit i set: operand type i is an index type (i32 or i64), not a value type.
    unsigned index_operands = 0;
};

/// The family's plain types: f32 for every value operand, i32 for every index operand.
inline std::vector<elem_type> plain_types(const op_cases& f) {
    std::vector<elem_type> types(static_cast<std::size_t>(f.n_types), elem_type::f32);
    for (std::size_t i = 0; i < types.size(); ++i)
        if (f.index_operands & (1u << i)) types[i] = elem_type::i32;
    return types;
}

namespace detail {

inline built_case finish(tensor* out, double flops = 0) {
    built_case b;
    b.out = out;
    const threshold th = threshold_for(*out);
    b.max_nmse = th.max_nmse;
    b.exact = th.exact;
    b.flops = flops;
    b.bytes = traffic(out);
    return b;
}

template <op_kind Op> built_case build_unary(context& ctx, const case_spec& c, std::mt19937& rng) {
    const value_range in = unary_input_range(Op);
    tensor* a = input(ctx, type_at(c, 0), c.ne, c.variant, rng, in.lo, in.hi);
    return finish(unary_of(ctx, Op, a, rng));
}

/// variant: bits 0-3 say which of b's dims are broadcast (extent 1), bits 4-5 a's layout.
template <op_kind Op> built_case build_binary(context& ctx, const case_spec& c, std::mt19937& rng) {
    const elem_type ta = type_at(c, 0), tb = type_at(c, 1);
    extents nb = c.ne;
    for (std::size_t d = 0; d < max_dims; ++d)
        if (c.variant & (1 << d))
            nb[d] = d == 0 && is_quantized(tb) ? nb[d] : 1;
    tensor* a = input(ctx, ta, c.ne, (c.variant >> 4) & 3, rng);
    tensor* b =
        Op == op_kind::div ? input(ctx, tb, nb, 0, rng, 0.5, 2.0) : input(ctx, tb, nb, 0, rng);
    tensor* r = Op == op_kind::add   ? add(ctx, a, b)
                : Op == op_kind::sub ? sub(ctx, a, b)
                : Op == op_kind::mul ? mul(ctx, a, b)
                                     : div(ctx, a, b);
    return finish(r);
}

/// norm, rms_norm or l2_norm (op) of a.
inline tensor* row_norm_of(context& ctx, op_kind op, tensor* a, float eps) {
    if (op == op_kind::norm) return norm(ctx, a, eps);
    return op == op_kind::rms_norm ? rms_norm(ctx, a, eps) : l2_norm(ctx, a, eps);
}

/// sum_rows, sum, mean, argmax, norm, rms_norm, l2_norm; variant: a's layout.
template <op_kind Op> built_case build_rows(context& ctx, const case_spec& c, std::mt19937& rng) {
    const elem_type t = type_at(c, 0);
    tensor* a = input(ctx, t, c.ne, c.variant, rng, -1.0, 3.0);
    if (Op == op_kind::argmax)
        return finish(argmax(ctx, a));
    if (Op == op_kind::sum_rows)
        return finish(sum_rows(ctx, a));
    if (Op == op_kind::sum)
        return finish(sum(ctx, a));
    if (Op == op_kind::mean)
        return finish(mean(ctx, a));
    return finish(row_norm_of(ctx, Op, a, Op == op_kind::norm ? 1e-5f : 1e-6f));
}

/// group_norm of a (f32) into 1 to C + 2 groups of its C channels (dimension 2); variant:
/// a's layout.
inline built_case build_group_norm(context& ctx, const case_spec& c, std::mt19937& rng) {
    tensor* a = input(ctx, type_at(c, 0), c.ne, c.variant, rng, -1.0, 3.0);
    const auto n_groups = 1 + static_cast<int>(rng() % static_cast<std::uint32_t>(c.ne[2] + 2));
    return finish(group_norm(ctx, a, n_groups, 1e-6f));
}

/// repeat of a (the spec's extents) tiled 1 to 3 times per dimension; variant: a's layout.
inline built_case build_repeat(context& ctx, const case_spec& c, std::mt19937& rng) {
    tensor* a = input(ctx, type_at(c, 0), c.ne, c.variant, rng);
    auto times = [&] { return 1 + static_cast<std::int64_t>(rng() % 3); };
    return finish(repeat_4d(ctx, a, c.ne[0] * times(), c.ne[1] * times(), c.ne[2] * times(), c.ne[3] * times()));
}

/// repeat_back of a (the spec's extents) down to a random divisor of each extent;
/// variant: a's layout.
inline built_case build_repeat_back(context& ctx, const case_spec& c, std::mt19937& rng) {
    tensor* a = input(ctx, type_at(c, 0), c.ne, c.variant, rng);
    extents small = c.ne;
    for (auto& n : small) n /= random_divisor(rng, n);
    return finish(repeat_back(ctx, a, ctx.new_tensor(type_at(c, 0), std::span<const std::int64_t>(small))));
}

/// cumsum; variant: a's layout.
inline built_case build_cumsum(context& ctx, const case_spec& c, std::mt19937& rng) {
    return finish(cumsum(ctx, input(ctx, type_at(c, 0), c.ne, c.variant, rng)));
}

/// tri of square matrices (the spec's ne1 is ne0's); variant: the triangle (tri_type).
inline built_case build_tri(context& ctx, const case_spec& c, std::mt19937& rng) {
    tensor* a = input(ctx, type_at(c, 0), {c.ne[0], c.ne[0], c.ne[2], c.ne[3]}, 0, rng);
    return finish(tri(ctx, a, static_cast<tri_type>(c.variant)));
}

/// diag of vectors (the spec's ne1 is 1); variant: a's layout.
inline built_case build_diag(context& ctx, const case_spec& c, std::mt19937& rng) {
    return finish(diag(ctx, input(ctx, type_at(c, 0), {c.ne[0], 1, c.ne[2], c.ne[3]}, c.variant, rng)));
}

/// timestep_embedding of ne0 timesteps in [0, 50) into ne1 values each (dim);
/// variant: max_period 10000 (0), 100 (1).
inline built_case build_timestep_embedding(context& ctx, const case_spec& c, std::mt19937& rng) {
    tensor* steps = input(ctx, type_at(c, 0), {c.ne[0], 1, 1, 1}, 0, rng, 0.0, 50.0);
    return finish(timestep_embedding(ctx, steps, static_cast<int>(c.ne[1]), c.variant == 0 ? 10000 : 100));
}

/// out_prod of a [ne0, ne1, ne2, ne3] (types[0]) by f32 b [ne1 + 2, ne1, ne2, ne3] (its
/// dim 0 a few columns); variant: bit 0 b's layout permuted.
inline built_case build_out_prod(context& ctx, const case_spec& c, std::mt19937& rng) {
    tensor* a = input(ctx, type_at(c, 0), c.ne, 0, rng);
    tensor* b = input(ctx, elem_type::f32, {c.ne[1] + 2, c.ne[1], c.ne[2], c.ne[3]}, (c.variant & 1) ? 2 : 0, rng);
    return finish(out_prod(ctx, a, b), 2.0 * static_cast<double>(c.ne[0] * c.ne[1] * (c.ne[1] + 2) * c.ne[2] * c.ne[3]));
}

/// count_equal of i32 a and b of the spec's extents, values in 0 .. 2; variant: b's layout.
inline built_case build_count_equal(context& ctx, const case_spec& c, std::mt19937& rng) {
    tensor* a = input(ctx, type_at(c, 0), c.ne, 0, rng, 0.0, 3.0);
    return finish(count_equal(ctx, a, input(ctx, type_at(c, 0), c.ne, c.variant, rng, 0.0, 3.0)));
}

/// acc of b (the spec's extents) into a contiguous a whose rows hold b's rows, variant
/// (0 .. 3) elements apart, at an offset of 1 + variant elements.
inline built_case build_acc(context& ctx, const case_spec& c, std::mt19937& rng) {
    const auto gap = static_cast<std::size_t>(c.variant);
    const std::size_t nb1 = 4 * (static_cast<std::size_t>(c.ne[0]) + gap), nb2 = nb1 * static_cast<std::size_t>(c.ne[1]),
                      nb3 = nb2 * static_cast<std::size_t>(c.ne[2]), offset = 4 * (1 + gap);
    const auto n = static_cast<std::int64_t>((offset + nb3 * static_cast<std::size_t>(c.ne[3])) / 4);
    tensor* a = input(ctx, type_at(c, 0), {n, 1, 1, 1}, 0, rng);
    return finish(acc(ctx, a, input(ctx, type_at(c, 0), c.ne, 1, rng), nb1, nb2, nb3, offset));
}

/// argsort, top_k; variant: a's layout (bits 0, 1), argsort's order (bit 2). top_k's k is
/// drawn from 1 .. ne0.
template <op_kind Op> built_case build_sort(context& ctx, const case_spec& c, std::mt19937& rng) {
    tensor* a = input(ctx, type_at(c, 0), c.ne, c.variant & 3, rng);
    if (Op == op_kind::argsort)
        return finish(argsort(ctx, a, (c.variant & 4) ? sort_order::desc : sort_order::asc));
    return finish(top_k(ctx, a, 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(c.ne[0]))));
}

/// variant: 0 no mask, 1 a mask of types[1] with a's rows, 2 a taller mask broadcast over
/// dims 2 and 3; 3 as 1 with ALiBi (max_bias 8), 4 as 2 with ALiBi and sinks, 5 no mask
/// with sinks.
inline built_case build_soft_max(context& ctx, const case_spec& c, std::mt19937& rng) {
    const elem_type t = type_at(c, 0);
    tensor* a = input(ctx, t, c.ne, 0, rng, -3.0, 3.0);
    tensor* mask = nullptr;
    const int shape = c.variant == 5 ? 0 : c.variant > 2 ? c.variant - 2 : c.variant; // the mask's
    require(shape > 0 || type_at(c, 1) == elem_type::f32, "soft_max without a mask names the mask type f32");
    if (shape > 0) {
        const extents mne = shape == 1 ? c.ne : extents{c.ne[0], c.ne[1] + 2, 1, 1};
        mask = input(ctx, type_at(c, 1), mne, 0, rng, -2.0, 2.0);
    }
    tensor* r = soft_max_ext(ctx, a, mask, static_cast<float>(uniform(rng, 0.1, 2.0)), c.variant == 3 || c.variant == 4 ? 8.0f : 0.0f);
    if (c.variant >= 4) soft_max_add_sinks(r, input(ctx, elem_type::f32, {c.ne[2], 1, 1, 1}, 0, rng, -2.0, 2.0));
    return finish(r);
}

/// ne = {k, m, n, batch}; variant: bit 0 the weights broadcast over the batch, bits 1-2
/// the activations' layout (0 contiguous, 1 strided rows, 2 permuted, 3 transposed).
inline built_case build_mul_mat(context& ctx, const case_spec& c, std::mt19937& rng) {
    const elem_type ta = type_at(c, 0), tb = type_at(c, 1);
    const auto [k, m, n, batch] = c.ne;
    tensor* a = input(ctx, ta, {k, m, (c.variant & 1) ? 1 : batch, 1}, 0, rng);
    tensor* b = input(ctx, tb, {k, n, batch, 1}, (c.variant >> 1) & 3, rng);
    return finish(mul_mat(ctx, a, b),
                  2.0 * static_cast<double>(k) * static_cast<double>(m * n * batch));
}

/// ne = {k, m, n_expert, n_tokens}: as [k, m, n_expert], 2 experts per token (fewer
/// when there are fewer); variant: bit 0 one activation per token (else one per used
/// expert), bit 1 the activations' rows strided.
inline built_case build_mul_mat_id(context& ctx, const case_spec& c, std::mt19937& rng) {
    const elem_type ta = type_at(c, 0), tb = type_at(c, 1);
    const auto [k, m, n_expert, n_tokens] = c.ne;
    const std::int64_t n_used = std::min<std::int64_t>(2, n_expert);
    tensor* as = input(ctx, ta, {k, m, n_expert, 1}, 0, rng);
    tensor* b = input(ctx, tb, {k, (c.variant & 1) ? 1 : n_used, n_tokens, 1}, (c.variant & 2) ? 1 : 0, rng);
    tensor* ids = input(ctx, elem_type::i32, {n_used, n_tokens, 1, 1}, 0, rng, 0.0, static_cast<double>(n_expert));
    return finish(mul_mat_id(ctx, as, b, ids), 2.0 * static_cast<double>(k * m * n_used * n_tokens));
}

/// ne = {ne0, n_used, n_tokens, 1} (f32 only; the type names the result's): a [ne0,
/// n_used, n_tokens], 32 experts' rows b [ne0, 32]; variant: bit 0 a's rows strided, bit
/// 1 b's.
inline built_case build_add_id(context& ctx, const case_spec& c, std::mt19937& rng) {
    if (type_at(c, 0) != elem_type::f32) return {};
    constexpr std::int64_t n_expert = 32;
    const std::int64_t n_used = c.ne[1], n_tokens = c.ne[2] * c.ne[3];
    tensor* a = input(ctx, elem_type::f32, {c.ne[0], n_used, n_tokens, 1}, c.variant & 1, rng);
    tensor* b = input(ctx, elem_type::f32, {c.ne[0], n_expert, 1, 1}, (c.variant >> 1) & 1, rng);
    tensor* ids = input(ctx, elem_type::i32, {n_used, n_tokens, 1, 1}, 0, rng, 0.0, static_cast<double>(n_expert));
    return finish(add_id(ctx, a, b, ids));
}

/// ssm_conv of ne0 channels (d_inner), ne1 tokens and ne2 sequences with d_conv 4;
/// variant: sx's layout.
inline built_case build_ssm_conv(context& ctx, const case_spec& c, std::mt19937& rng) {
    if (type_at(c, 0) != elem_type::f32) return {};
    tensor* sx = input(ctx, elem_type::f32, {3 + c.ne[1], c.ne[0], c.ne[2], 1}, c.variant, rng);
    return finish(ssm_conv(ctx, sx, input(ctx, elem_type::f32, {4, c.ne[0], 1, 1}, 0, rng)));
}

/// ssm_scan of d_state ne0, head_dim ne1, ne2 heads, ne3 tokens of two sequences (state ids
/// 1 and 0 of two states); variant: Mamba-1 (0: A per state, head_dim 1) or Mamba-2 (1: A
/// per head, two groups of heads where ne2 is even).
inline built_case build_ssm_scan(context& ctx, const case_spec& c, std::mt19937& rng) {
    if (type_at(c, 0) != elem_type::f32) return {};
    constexpr elem_type f32 = elem_type::f32;
    const bool mamba1 = c.variant == 0;
    const std::int64_t d_state = c.ne[0], head_dim = mamba1 ? 1 : c.ne[1], n_head = c.ne[2], n_t = c.ne[3];
    const std::int64_t n_group = !mamba1 && n_head % 2 == 0 ? 2 : 1;
    tensor* s = input(ctx, f32, {d_state, head_dim, n_head, 2}, 0, rng);
    tensor* x = input(ctx, f32, {head_dim, n_head, n_t, 2}, 0, rng);
    tensor* dt = input(ctx, f32, {n_head, n_t, 2, 1}, 0, rng, -3.0, 2.0);
    tensor* A = input(ctx, f32, {mamba1 ? d_state : 1, n_head, 1, 1}, 0, rng, -2.0, -0.1);
    tensor* B = input(ctx, f32, {d_state, n_group, n_t, 2}, 0, rng);
    tensor* C = input(ctx, f32, {d_state, n_group, n_t, 2}, 0, rng);
    tensor* ids = input(ctx, elem_type::i32, {2, 1, 1, 1}, 0, rng, 0.0, 2.0);
    return finish(ssm_scan(ctx, s, x, dt, A, B, C, ids));
}

/// gated_linear_attn, rwkv_wkv6 or rwkv_wkv7 (Op) of head size ne0, ne1 heads and ne3
/// sequences of ne2 tokens each; decays (g, td, w) in (0.5, 1); variant: gated_linear_attn's
/// scale 1 (0) or 1/8 (1).
template <op_kind Op>
inline built_case build_linear_attention(context& ctx, const case_spec& c, std::mt19937& rng) {
    if (type_at(c, 0) != elem_type::f32) return {};
    const std::int64_t S = c.ne[0], H = c.ne[1], T = c.ne[2] * c.ne[3];
    const auto tok = [&](double lo, double hi) { return input(ctx, elem_type::f32, {S, H, T, 1}, 0, rng, lo, hi); };
    tensor* state = input(ctx, elem_type::f32, {S * S * H, c.ne[3], 1, 1}, 0, rng);
    if constexpr (Op == op_kind::gated_linear_attn) {
        tensor *k = tok(-1, 1), *v = tok(-1, 1), *q = tok(-1, 1), *g = tok(0.5, 1);
        return finish(gated_linear_attn(ctx, k, v, q, g, state, c.variant == 0 ? 1.0f : 0.125f));
    } else if constexpr (Op == op_kind::rwkv_wkv6) {
        tensor *k = tok(-1, 1), *v = tok(-1, 1), *r = tok(-1, 1);
        tensor* tf = input(ctx, elem_type::f32, {S, H, 1, 1}, 0, rng);
        return finish(rwkv_wkv6(ctx, k, v, r, tf, tok(0.5, 1), state));
    } else {
        tensor *r = tok(-1, 1), *w = tok(0.5, 1), *k = tok(-1, 1), *v = tok(-1, 1), *a = tok(-0.5, 0.5), *b = tok(-0.5, 0.5);
        return finish(rwkv_wkv7(ctx, r, w, k, v, a, b, state));
    }
}

/// a = [ne0, ne1, ne2, 1], ne3 indices per (ne2) batch; variant: a's layout.
inline built_case build_get_rows(context& ctx, const case_spec& c, std::mt19937& rng) {
    const elem_type t = type_at(c, 0);
    tensor* a = input(ctx, t, {c.ne[0], c.ne[1], c.ne[2], 1}, c.variant, rng, -4.0, 4.0);
    tensor* idx = input(ctx, elem_type::i32, {c.ne[3], c.ne[2], 1, 1}, 0, rng, 0.0,
                        static_cast<double>(c.ne[1]));
    return finish(get_rows(ctx, a, idx));
}

/// a = [head_dim, heads, tokens, ne3]; variant 0 .. 7: bit 0 neox, bit 1 rotate half the
/// dims, bit 2 frequency factors and YaRN (ext_factor 1, freq_scale 0.25, n_ctx_orig
/// 4096); 8 mrope, 9 imrope, 10 vision (rope_multi: sections of about an eighth of
/// head_dim for t, h and w; vision needs a head_dim that is a multiple of 4).
inline built_case build_rope(context& ctx, const case_spec& c, std::mt19937& rng) {
    const elem_type t = type_at(c, 0);
    const int hd = static_cast<int>(c.ne[0]);
    if (c.variant >= 8) {
        const rope_mode modes[] = {rope_mode::mrope, rope_mode::imrope, rope_mode::vision};
        const rope_mode mode = modes[c.variant - 8];
        tensor* a = input(ctx, t, c.ne, 0, rng);
        tensor* pos = input(ctx, elem_type::i32, {4 * c.ne[2], 1, 1, 1}, 0, rng, -64.0, 8192.0);
        const int q = hd / 8;
        return finish(rope_multi(ctx, a, pos, nullptr, mode == rope_mode::vision ? hd / 2 : hd, {std::max(1, q), q, q, 0},
                                 mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f));
    }
    tensor* a = input(ctx, t, c.ne, 0, rng);
    tensor* pos = input(ctx, elem_type::i32, {c.ne[2], 1, 1, 1}, 0, rng, -64.0, 8192.0);
    const int n_dims = (c.variant & 2) ? std::max(2, (hd / 2) & ~1) : hd;
    const rope_mode mode = (c.variant & 1) ? rope_mode::neox : rope_mode::normal;
    const float base = (c.variant & 1) ? 500000.0f : 10000.0f;
    if ((c.variant & 4) == 0) return finish(rope(ctx, a, pos, n_dims, mode, base, 1.0f));
    tensor* ff = input(ctx, elem_type::f32, {n_dims / 2, 1, 1, 1}, 0, rng, 1.0, 40.0);
    return finish(rope_ext(ctx, a, pos, ff, n_dims, mode, 4096, base, 0.25f, 1.0f, 1.0f, 32.0f, 1.0f));
}

/// variant: the dimension; b's extent there is 1 + (seed-driven) up to 3 (a block when
/// quantized along dim 0).
inline built_case build_concat(context& ctx, const case_spec& c, std::mt19937& rng) {
    const elem_type t = type_at(c, 0);
    const int dim = c.variant & 3;
    extents nb = c.ne;
    nb[static_cast<std::size_t>(dim)] = dim == 0 && is_quantized(t) ? block_size(t) : shape_gen{rng}.upto(3);
    tensor* a = input(ctx, t, c.ne, 0, rng, -100, 100);
    tensor* b = input(ctx, t, nb, 0, rng, -100, 100);
    return finish(concat(ctx, a, b, dim));
}

/// glu of function Fn, ne the result's extents; variant: 0 fused (a = [2 ne0, ...]), 1
/// fused and swapped (swiglu_oai, never swapped: fused), 2 split (a and b of ne), 3 fused
/// with an odd row (a = [2 ne0 + 1, ...]). Every operand with rows of a stride but for
/// variant 0.
template <glu_op Fn> built_case build_glu(context& ctx, const case_spec& c, std::mt19937& rng) {
    const elem_type t = type_at(c, 0);
    const int v = c.variant & 3;
    extents na = c.ne;
    if (v != 2) na[0] = 2 * c.ne[0] + (v == 3 ? 1 : 0);
    const int l = v == 0 ? 0 : 1;
    tensor* a = input(ctx, t, na, l, rng, -6.0, 6.0);
    tensor* b = v == 2 ? input(ctx, t, c.ne, l, rng, -6.0, 6.0) : nullptr;
    if (Fn == glu_op::swiglu_oai) return finish(swiglu_oai(ctx, a, b, 1.702f, 7.0f));
    return finish(b != nullptr ? glu_split(ctx, a, b, Fn) : glu(ctx, a, Fn, v == 1));
}

/// set_rows of b (types[1]) into a (types[0], ne) by a permutation of a's rows (indices of
/// types[2]); variant: bit 0 the indices broadcast over dims 2 and 3, bit 1 b's rows
/// strided (a row-strided view).
inline built_case build_set_rows(context& ctx, const case_spec& c, std::mt19937& rng) {
    const elem_type to = type_at(c, 0), from = type_at(c, 1), it = type_at(c, 2);
    tensor* a = input(ctx, to, c.ne, 0, rng, -4.0, 4.0);
    tensor* b = input(ctx, from, c.ne, (c.variant & 2) ? 1 : 0, rng, -4.0, 4.0);
    const bool broadcast = (c.variant & 1) != 0;
    tensor* idx = input(ctx, it, {c.ne[1], broadcast ? 1 : c.ne[2], broadcast ? 1 : c.ne[3], 1}, 0, rng);
    fill_permutations(*idx, rng);
    return finish(set_rows(ctx, a, b, idx));
}

/// pad_ext of a (ne) by 0 to 2 elements on each side; variant: bit 0 circular, bit 1 a
/// permuted.
inline built_case build_pad(context& ctx, const case_spec& c, std::mt19937& rng) {
    tensor* a = input(ctx, type_at(c, 0), c.ne, (c.variant & 2) ? 2 : 0, rng);
    pad_widths w;
    for (std::size_t d = 0; d < max_dims; ++d) {
        w.lp[d] = static_cast<int>(rng() % 3);
        w.rp[d] = static_cast<int>(rng() % 3);
    }
    return finish(pad_ext(ctx, a, w, (c.variant & 1) != 0));
}

/// pool_1d or pool_2d of a seed-drawn window (random_pool_window); variant: a's layout.
template <op_kind Op> built_case build_pool(context& ctx, const case_spec& c, std::mt19937& rng) {
    tensor* a = input(ctx, type_at(c, 0), c.ne, c.variant, rng);
    return finish(pool_of(ctx, a, random_pool_window(rng, c.ne, Op == op_kind::pool_2d)));
}

/// upscale of a to seed-drawn extents (random_upscale_extents); variant: bits 0-1 the
/// mode (upscale_modes: nearest, bilinear, bicubic, antialiased bilinear), bit 2 aligned
/// corners, bit 3 a transposed.
inline built_case build_upscale(context& ctx, const case_spec& c, std::mt19937& rng) {
    tensor* a = input(ctx, type_at(c, 0), c.ne, (c.variant & 8) != 0 ? 3 : 0, rng);
    const extents r = random_upscale_extents(rng, c.ne);
    const std::uint32_t mode = upscale_modes[c.variant & 3] | ((c.variant & 4) != 0 ? scale_align_corners : 0u);
    return finish(interpolate(ctx, a, r[0], r[1], r[2], r[3], mode));
}

/// pad_reflect_1d or roll of a by seed-drawn pads or shifts (remap_of); variant: a's layout.
template <op_kind Op> built_case build_remap(context& ctx, const case_spec& c, std::mt19937& rng) {
    tensor* a = input(ctx, type_at(c, 0), c.ne, c.variant, rng);
    return finish(remap_of(ctx, a, Op == op_kind::pad_reflect_1d, rng));
}

/// arange of ne[0] values from a seed-driven start and step (f32 only; the type names the
/// result).
inline built_case build_arange(context& ctx, const case_spec& c, std::mt19937& rng) {
    if (type_at(c, 0) != elem_type::f32) return {};
    const auto start = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 8.0f;
    const auto step = static_cast<float>(1 + rng() % 999) / 64.0f;
    return finish(arange(ctx, start, start + step * static_cast<float>(c.ne[0]), step));
}

/// A convolution's geometry drawn at random (im2col's parity cases and catalogue rows):
/// kernel [kw, kh, ic, oc] and input [iw, ih, ic, n] (1-D: [k, ic, oc] and [iw, ic, n]),
/// strides 1 to 3, pads 0 to 2, dilations 1 to 2; the input is never smaller than the
/// dilated kernel, so every draw has an output.
struct conv_draw {
    extents kernel, input;
    int s0 = 1, s1 = 0, p0 = 0, p1 = 0, d0 = 1, d1 = 0;
    bool two_d = true;
};
inline conv_draw random_conv(std::mt19937& rng, bool two_d) {
    const auto upto = [&](int n) { return 1 + static_cast<int>(rng() % static_cast<unsigned>(n)); };
    conv_draw c;
    c.two_d = two_d;
    c.s0 = upto(3), c.p0 = upto(3) - 1, c.d0 = upto(2);
    const std::int64_t kw = upto(4), ic = upto(3), oc = upto(3), n = upto(2);
    const std::int64_t iw = c.d0 * (kw - 1) + upto(9);
    if (!two_d) {
        c.kernel = {kw, ic, oc, 1};
        c.input = {iw, ic, n, 1};
        return c;
    }
    c.s1 = upto(3), c.p1 = upto(3) - 1, c.d1 = upto(2);
    const std::int64_t kh = upto(4);
    c.kernel = {kw, kh, ic, oc};
    c.input = {iw, c.d1 * (kh - 1) + upto(7), ic, n};
    return c;
}

/// A transposed convolution's geometry drawn at random (the parity cases and catalogue
/// rows): 2-D, the kernel [kw, kh, oc, ic] and input [iw, ih, ic, n]; 1-D, [k, oc, ic] and
/// [iw, ic]; kernel extents 1 to 4, the stride 1 to 5 (below, at and above the kernel's).
struct conv_transpose_draw {
    extents kernel, input;
    int stride = 1;
};
inline conv_transpose_draw random_conv_transpose(std::mt19937& rng, bool two_d) {
    const auto upto = [&](int n) { return 1 + static_cast<std::int64_t>(rng() % static_cast<unsigned>(n)); };
    conv_transpose_draw c;
    c.stride = static_cast<int>(upto(5));
    const std::int64_t kw = upto(4), oc = upto(3), ic = upto(4), iw = upto(9);
    if (!two_d) {
        c.kernel = {kw, oc, ic, 1};
        c.input = {iw, ic, 1, 1};
        return c;
    }
    c.kernel = {kw, upto(4), oc, ic};
    c.input = {iw, upto(7), ic, upto(2)};
    return c;
}

/// conv_transpose_1d of a kernel of types[0] [k, ne1, ne2] over an f32 input [ne0, ne2];
/// variant: bits 0-1 the kernel's width and stride: (2, 2), (3, 1), (4, 2), (3, 3); bit 2
/// the input transposed.
inline built_case build_conv_transpose_1d(context& ctx, const case_spec& c, std::mt19937& rng) {
    static constexpr int widths[] = {2, 3, 4, 3}, strides[] = {2, 1, 2, 3};
    const int v = c.variant & 3;
    tensor* a = random_leaf(ctx, type_at(c, 0), {widths[v], c.ne[1], c.ne[2], 1}, rng, -1.0, 1.0);
    tensor* b = input(ctx, elem_type::f32, {c.ne[0], c.ne[2], 1, 1}, (c.variant & 4) ? 3 : 0, rng);
    tensor* out = conv_transpose_1d(ctx, a, b, strides[v]);
    return finish(out, 2.0 * static_cast<double>(widths[v] * c.ne[1] * c.ne[2] * c.ne[0]));
}

/// conv_transpose_2d_p0 of a kernel of types[0] [kw, kw, ne3, ne2] over an f32 input
/// [ne0, ne1, ne2, 1]; variant: bits 0-1 the kernel's width and stride: (2, 2), (3, 1),
/// (4, 2), (3, 3); bit 2 the input permuted.
inline built_case build_conv_transpose_2d(context& ctx, const case_spec& c, std::mt19937& rng) {
    static constexpr int widths[] = {2, 3, 4, 3}, strides[] = {2, 1, 2, 3};
    const int v = c.variant & 3;
    const extents kernel = {widths[v], widths[v], c.ne[3], c.ne[2]};
    tensor* a = random_leaf(ctx, type_at(c, 0), kernel, rng, -1.0, 1.0);
    tensor* b = input(ctx, elem_type::f32, {c.ne[0], c.ne[1], c.ne[2], 1}, (c.variant & 4) ? 2 : 0, rng);
    tensor* out = conv_transpose_2d_p0(ctx, a, b, strides[v]);
    return finish(out, 2.0 * static_cast<double>(widths[v] * widths[v] * c.ne[3]) * static_cast<double>(c.ne[0] * c.ne[1] * c.ne[2]));
}

/// conv_2d_dw_direct of an f32 kernel [kw, kw, 1, ne2] over an f32 input [ne0, ne1, ne2,
/// ne3]; variant: bits 0-1 as conv_2d's (0 a 3 x 3 kernel, stride 1, pad 1; 1 the same
/// with stride 2; 2 a 2 x 2 kernel, dilation 2, no pad; 3 as 0), bit 2 channel-last
/// (ggml's CWHN: the input and the kernel permuted from channels first).
inline built_case build_conv_2d_dw(context& ctx, const case_spec& c, std::mt19937& rng) {
    if (type_at(c, 0) != elem_type::f32) return {};
    const int v = c.variant & 3;
    const bool wide = v != 2;
    const std::int64_t kw = wide ? 3 : 2;
    tensor* a = nullptr;
    tensor* b = nullptr;
    if ((c.variant & 4) != 0) {
        a = permute(ctx, random_leaf(ctx, elem_type::f32, {c.ne[2], kw, kw, 1}, rng, -1.0, 1.0), 3, 0, 1, 2);
        b = permute(ctx, random_leaf(ctx, elem_type::f32, {c.ne[2], c.ne[0], c.ne[1], c.ne[3]}, rng, -1.0, 1.0), 2, 0, 1, 3);
    } else {
        a = random_leaf(ctx, elem_type::f32, {kw, kw, 1, c.ne[2]}, rng, -1.0, 1.0);
        b = random_leaf(ctx, elem_type::f32, c.ne, rng, -1.0, 1.0);
    }
    const int s = v == 1 ? 2 : 1, p = wide ? 1 : 0, d = wide ? 1 : 2;
    tensor* out = conv_2d_dw_direct(ctx, a, b, s, s, p, p, d, d);
    return finish(out, 2.0 * static_cast<double>(out->nelements()) * static_cast<double>(kw * kw));
}

/// win_part of an f32 image [ne0, ne1, ne2] into windows of side 2 + variant (the last
/// ones padded unless the side divides the image), or (Op win_unpart) the windows of such
/// an image back into it.
template <op_kind Op> built_case build_window(context& ctx, const case_spec& c, std::mt19937& rng) {
    if (type_at(c, 0) != elem_type::f32) return {};
    const int w = 2 + (c.variant & 7);
    if (Op == op_kind::win_part) return finish(win_part(ctx, random_leaf(ctx, elem_type::f32, {c.ne[0], c.ne[1], c.ne[2], 1}, rng), w));
    const extents ne = {c.ne[0], w, w, windows_across(c.ne[1], w) * windows_across(c.ne[2], w)};
    return finish(win_unpart(ctx, random_leaf(ctx, elem_type::f32, ne, rng), static_cast<int>(c.ne[1]), static_cast<int>(c.ne[2]), w));
}

/// get_rel_pos of an f16 table [ne0, 2 ne1 - 1] (its only type: a case naming f32, the
/// default, builds it too); variant: bit 0 the table transposed.
inline built_case build_get_rel_pos(context& ctx, const case_spec& c, std::mt19937& rng) {
    if (type_at(c, 0) != elem_type::f16 && type_at(c, 0) != elem_type::f32) return {};
    tensor* a = input(ctx, elem_type::f16, {c.ne[0], 2 * c.ne[1] - 1, 1, 1}, (c.variant & 1) ? 3 : 0, rng);
    return finish(get_rel_pos(ctx, a, static_cast<int>(c.ne[1]), static_cast<int>(c.ne[1])));
}

/// im2col of input type types[0] into types[1] (an f16 kernel), geometry drawn from the
/// seed with ne's extents as the input's where they fit; variant: bit 0 the 1-D form,
/// bit 1 the input permuted.
inline built_case build_im2col(context& ctx, const case_spec& c, std::mt19937& rng) {
    conv_draw g = random_conv(rng, (c.variant & 1) == 0);
    const std::int64_t min_w = g.input[0], min_h = g.two_d ? g.input[1] : 1;
    g.input[0] = std::max(c.ne[0], min_w);
    if (g.two_d) g.input[1] = std::max(c.ne[1], min_h);
    tensor* a = random_leaf(ctx, elem_type::f16, g.kernel, rng, -1.0, 1.0);
    tensor* b = input(ctx, type_at(c, 0), g.input, (c.variant & 2) ? 2 : 0, rng);
    return finish(im2col(ctx, a, b, g.s0, g.s1, g.p0, g.p1, g.d0, g.d1, g.two_d, type_at(c, 1)));
}

/// conv_2d_direct of a kernel of types[0] [kw, kh, ne2, ne3] over an f32 input [ne0, ne1,
/// ne2, 1]; variant: 0 a 3 x 3 kernel, stride 1, pad 1 (the size kept), 1 the same with
/// stride 2, 2 a 2 x 2 kernel, dilation 2, no pad, 3 as 0 with the input permuted.
inline built_case build_conv_2d(context& ctx, const case_spec& c, std::mt19937& rng) {
    const bool wide = c.variant != 2;
    const std::int64_t kw = wide ? 3 : 2;
    const extents kernel = {kw, kw, c.ne[2], c.ne[3]};
    tensor* a = random_leaf(ctx, type_at(c, 0), kernel, rng, -1.0, 1.0);
    tensor* b = input(ctx, elem_type::f32, {c.ne[0], c.ne[1], c.ne[2], 1}, c.variant == 3 ? 2 : 0, rng);
    const int s = c.variant == 1 ? 2 : 1, p = wide ? 1 : 0, d = wide ? 1 : 2;
    tensor* out = conv_2d_direct(ctx, a, b, s, s, p, p, d, d);
    return finish(out, 2.0 * static_cast<double>(out->nelements()) * static_cast<double>(kernel[0] * kernel[1] * kernel[2]));
}

/// cpy types[0] -> types[1]; variant: bit 0 the source permuted, bit 1 the destination
/// a row-strided view (unquantized destinations only).
inline built_case build_cpy(context& ctx, const case_spec& c, std::mt19937& rng) {
    const elem_type from = type_at(c, 0), to = type_at(c, 1);
    tensor* a = input(ctx, from, c.ne, (c.variant & 1) ? 2 : 0, rng);
    tensor* b = input(ctx, to, c.ne, (c.variant & 2) && !is_quantized(to) ? 1 : 0, rng);
    return finish(cpy(ctx, a, b));
}

/// cont of a (permuted, strided or transposed: variant + 1) and dup (variant 3).
inline built_case build_cont(context& ctx, const case_spec& c, std::mt19937& rng) {
    const elem_type t = type_at(c, 0);
    if (c.variant == 3)
        return finish(dup(ctx, input(ctx, t, c.ne, 0, rng)));
    return finish(cont(ctx, input(ctx, t, c.ne, c.variant + 1, rng)));
}

/// The extents of a flash_attn_ext case: q [dk, n_q, n_head, ne3], k [dk, n_kv,
/// n_head_kv, ne3], v [dv, n_kv, n_head_kv, ne3].
struct attention_shape {
    std::int64_t dk, dv, n_kv, n_q, n_head, n_head_kv, ne3;
};

/// flash_attn_ext with k of type tk and v of type tv (the parity cases' and the
/// catalogue's). variant: bit 0 an f16 mask (a few positions masked, query 2 everywhere;
/// extra rows when bit 5 is set), bit 1 sinks, bit 2 a logit softcap, bit 3 ALiBi (with a
/// mask), bit 5 views (q a permutation of [dk, n_head, n_q], k a window of a larger cache,
/// v permuted in dims 1..3, the mask broadcast over heads); bit 4 is the catalogue's
/// (grouped-query heads).
inline tensor* build_attention(context& ctx, std::mt19937& rng, elem_type tk, elem_type tv, const attention_shape& s,
                               int variant) {
    const auto in = [&](elem_type t, const extents& ne, layout l, double lo, double hi) {
        return laid_out(ctx, t, ne, l, [&](elem_type type, const extents& root) { return random_leaf(ctx, type, root, rng, lo, hi); });
    };
    const bool views = (variant & 32) != 0;
    constexpr elem_type f32 = elem_type::f32;
    tensor* q = views ? permute(ctx, in(f32, {s.dk, s.n_head, s.n_q, s.ne3}, layout::contiguous, -3.0, 3.0), 0, 2, 1, 3)
                      : in(f32, {s.dk, s.n_q, s.n_head, s.ne3}, layout::contiguous, -3.0, 3.0);
    tensor* k = in(tk, {s.dk, s.n_kv, s.n_head_kv, s.ne3}, views ? layout::strided_rows : layout::offset, -1.0, 1.0);
    tensor* v = in(tv, {s.dv, s.n_kv, s.n_head_kv, s.ne3}, views ? layout::permuted_rows : layout::contiguous, -1.0, 1.0);
    tensor* mask = nullptr;
    if (variant & 1) {
        const extents mne{s.n_kv, s.n_q + (views ? 3 : 0), views ? 1 : s.n_head, s.ne3};
        mask = in(elem_type::f16, mne, layout::contiguous, -2.0, 2.0);
        constexpr double ninf = -std::numeric_limits<double>::infinity();
        for_each_index(mne, [&](std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
            if (i1 == 2 || (i0 == static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(mne[0])) && i1 % 2 == 0))
                set_element(*mask, i0, i1, i2, i3, ninf);
        });
    }
    const float scale = static_cast<float>(uniform(rng, 0.5, 2.0) / std::sqrt(static_cast<double>(s.dk)));
    const float max_bias = (variant & 8) && mask != nullptr ? 8.0f : 0.0f;
    tensor* r = flash_attn_ext(ctx, q, k, v, mask, scale, max_bias, (variant & 4) ? 2.0f : 0.0f);
    if (variant & 2) flash_attn_ext_add_sinks(r, in(f32, {s.n_head, 1, 1, 1}, layout::contiguous, -2.0, 2.0));
    return r;
}

/// ne = {head size, n_kv, n_q, n_head}; types: k, v (q f32, the mask f16); variant as
/// build_attention's, bit 4 grouped-query heads (n_head / 2 key/value heads, for an even
/// n_head), bit 5 also two sequences (ne3 = 2).
inline built_case build_flash_attn_ext(context& ctx, const case_spec& c, std::mt19937& rng) {
    const auto [d, n_kv, n_q, n_head] = c.ne;
    const std::int64_t n_head_kv = (c.variant & 16) && n_head % 2 == 0 ? n_head / 2 : n_head;
    const attention_shape s{d, d, n_kv, n_q, n_head, n_head_kv, (c.variant & 32) ? 2 : 1};
    tensor* r = build_attention(ctx, rng, type_at(c, 0), type_at(c, 1), s, c.variant);
    return finish(r, 2.0 * static_cast<double>(n_q * n_head * s.ne3 * n_kv * 2 * d));
}

inline extents shape_rows(std::mt19937& rng, std::span<const elem_type> types) {
    elem_type t = types.empty() ? elem_type::f32 : types[0];
    for (elem_type x : types)
        if (is_quantized(x))
            t = x;
    return shape_gen{rng}.rows(t);
}
/// Matrices of up to 33 x 33 (tri's squares, diag's vectors: their builders read ne0).
inline extents shape_matrix(std::mt19937& rng, std::span<const elem_type>) {
    shape_gen g{rng};
    const std::int64_t n = g.upto(33);
    return {n, n, g.upto(3), g.upto(3)};
}
inline extents shape_mul_mat(std::mt19937& rng, std::span<const elem_type> types) {
    shape_gen g{rng};
    const bool quant = !types.empty() && is_quantized(types[0]);
    const std::int64_t k = quant ? g.blocks(types[0]) : g.pick({1, 3, 7, 16, 17, 33, 64, 65, 100, 129});
    return {k, g.pick({1, 2, 3, 7, 8, 16, 17, 33}), g.pick({1, 2, 3, 5, 8, 9, 17}), g.upto(3)};
}
inline extents shape_get_rows(std::mt19937& rng, std::span<const elem_type> types) {
    shape_gen g{rng};
    return {g.row(types.empty() ? elem_type::f32 : types[0]), g.upto(9), g.upto(3), g.upto(7)};
}
inline extents shape_attention(std::mt19937& rng, std::span<const elem_type> types) {
    shape_gen g{rng};
    bool quant = false;
    for (elem_type t : types) quant = quant || is_quantized(t);
    const std::int64_t d = quant ? 32 * g.pick({1, 2, 3, 4}) : g.pick({1, 5, 16, 33, 64, 80, 128});
    return {d, g.pick({1, 2, 7, 32, 100, 257}), g.upto(5), g.pick({1, 2, 3, 4, 8})};
}
/// A convolution's input width and height (at least 4, so that conv_2d's 3 x 3 windows
/// with dilation 2 fit; im2col draws the rest of its geometry), and conv_2d's input and
/// output channels.
inline extents shape_conv(std::mt19937& rng, std::span<const elem_type>) {
    shape_gen g{rng};
    return {g.pick({4, 5, 8, 17, 32}), g.pick({4, 5, 7, 16}), g.upto(4), g.upto(5)};
}
inline extents shape_rope(std::mt19937& rng, std::span<const elem_type>) {
    shape_gen g{rng};
    return {g.pick({2, 6, 10, 18, 34, 64, 66, 128}), g.upto(5), g.upto(7), g.upto(2)};
}

} // namespace detail

/// Every family, in a fixed order.
inline std::span<const op_cases> catalogue() {
    using namespace detail;
    static const op_cases families[] = {
        {"add", 2, 64, &build_binary<op_kind::add>, &shape_rows, {4096, 1024, 1, 1}},
        {"sub", 2, 64, &build_binary<op_kind::sub>, &shape_rows, {4096, 1024, 1, 1}},
        {"mul", 2, 64, &build_binary<op_kind::mul>, &shape_rows, {4096, 1024, 1, 1}},
        {"div", 2, 64, &build_binary<op_kind::div>, &shape_rows, {4096, 1024, 1, 1}},
        {"scale", 1, 4, &build_unary<op_kind::scale>, &shape_rows, {4096, 1024, 1, 1}},
        {"sqr", 1, 4, &build_unary<op_kind::sqr>, &shape_rows, {4096, 1024, 1, 1}},
        {"sqrt", 1, 4, &build_unary<op_kind::sqrt>, &shape_rows, {4096, 1024, 1, 1}},
        {"silu", 1, 4, &build_unary<op_kind::silu>, &shape_rows, {4096, 1024, 1, 1}},
        {"gelu", 1, 4, &build_unary<op_kind::gelu>, &shape_rows, {4096, 1024, 1, 1}},
        {"relu", 1, 4, &build_unary<op_kind::relu>, &shape_rows, {4096, 1024, 1, 1}},
        {"neg", 1, 4, &build_unary<op_kind::neg>, &shape_rows, {4096, 1024, 1, 1}},
        {"abs", 1, 4, &build_unary<op_kind::abs>, &shape_rows, {4096, 1024, 1, 1}},
        {"sgn", 1, 4, &build_unary<op_kind::sgn>, &shape_rows, {4096, 1024, 1, 1}},
        {"step", 1, 4, &build_unary<op_kind::step>, &shape_rows, {4096, 1024, 1, 1}},
        {"tanh", 1, 4, &build_unary<op_kind::tanh>, &shape_rows, {4096, 1024, 1, 1}},
        {"sigmoid", 1, 4, &build_unary<op_kind::sigmoid>, &shape_rows, {4096, 1024, 1, 1}},
        {"exp", 1, 4, &build_unary<op_kind::exp>, &shape_rows, {4096, 1024, 1, 1}},
        {"log", 1, 4, &build_unary<op_kind::log>, &shape_rows, {4096, 1024, 1, 1}},
        {"sin", 1, 4, &build_unary<op_kind::sin>, &shape_rows, {4096, 1024, 1, 1}},
        {"cos", 1, 4, &build_unary<op_kind::cos>, &shape_rows, {4096, 1024, 1, 1}},
        {"elu", 1, 4, &build_unary<op_kind::elu>, &shape_rows, {4096, 1024, 1, 1}},
        {"hardsigmoid", 1, 4, &build_unary<op_kind::hardsigmoid>, &shape_rows, {4096, 1024, 1, 1}},
        {"hardswish", 1, 4, &build_unary<op_kind::hardswish>, &shape_rows, {4096, 1024, 1, 1}},
        {"softplus", 1, 4, &build_unary<op_kind::softplus>, &shape_rows, {4096, 1024, 1, 1}},
        {"gelu_erf", 1, 4, &build_unary<op_kind::gelu_erf>, &shape_rows, {4096, 1024, 1, 1}},
        {"gelu_quick", 1, 4, &build_unary<op_kind::gelu_quick>, &shape_rows, {4096, 1024, 1, 1}},
        {"leaky_relu", 1, 4, &build_unary<op_kind::leaky_relu>, &shape_rows, {4096, 1024, 1, 1}},
        {"clamp", 1, 4, &build_unary<op_kind::clamp>, &shape_rows, {4096, 1024, 1, 1}},
        {"sum_rows", 1, 4, &build_rows<op_kind::sum_rows>, &shape_rows, {4096, 1024, 1, 1}},
        {"argmax", 1, 4, &build_rows<op_kind::argmax>, &shape_rows, {32000, 32, 1, 1}},
        {"sum", 1, 4, &build_rows<op_kind::sum>, &shape_rows, {4096, 1024, 1, 1}},
        {"mean", 1, 4, &build_rows<op_kind::mean>, &shape_rows, {4096, 1024, 1, 1}},
        {"argsort", 1, 8, &build_sort<op_kind::argsort>, &shape_rows, {1024, 512, 1, 1}},
        {"top_k", 1, 4, &build_sort<op_kind::top_k>, &shape_rows, {1024, 512, 1, 1}},
        {"norm", 1, 4, &build_rows<op_kind::norm>, &shape_rows, {4096, 512, 1, 1}},
        {"rms_norm", 1, 4, &build_rows<op_kind::rms_norm>, &shape_rows, {4096, 512, 1, 1}},
        {"l2_norm", 1, 4, &build_rows<op_kind::l2_norm>, &shape_rows, {4096, 512, 1, 1}},
        {"group_norm", 1, 4, &build_group_norm, &shape_rows, {64, 64, 320, 1}},
        {"repeat", 1, 4, &build_repeat, &shape_rows, {4096, 256, 1, 1}},
        {"repeat_back", 1, 4, &build_repeat_back, &shape_rows, {4096, 1024, 1, 1}},
        {"cumsum", 1, 4, &build_cumsum, &shape_rows, {4096, 1024, 1, 1}},
        {"tri", 1, 4, &build_tri, &shape_matrix, {1024, 1024, 4, 1}},
        {"diag", 1, 4, &build_diag, &shape_matrix, {1024, 1, 4, 1}},
        {"timestep_embedding", 1, 2, &build_timestep_embedding, &shape_matrix, {512, 320, 1, 1}},
        {"out_prod", 1, 2, &build_out_prod, &shape_rows, {1024, 256, 1, 1}},
        {"count_equal", 1, 4, &build_count_equal, &shape_rows, {4096, 1024, 1, 1}, 0b1},
        {"acc", 1, 4, &build_acc, &shape_rows, {4096, 512, 1, 1}},
        {"ssm_conv", 1, 4, &build_ssm_conv, &shape_matrix, {1536, 512, 1, 1}},
        {"ssm_scan", 1, 2, &build_ssm_scan, &shape_matrix, {16, 64, 32, 128}},
        {"gated_linear_attn", 1, 2, &build_linear_attention<op_kind::gated_linear_attn>, &shape_matrix, {64, 32, 128, 1}},
        {"rwkv_wkv6", 1, 1, &build_linear_attention<op_kind::rwkv_wkv6>, &shape_matrix, {64, 32, 128, 1}},
        {"rwkv_wkv7", 1, 1, &build_linear_attention<op_kind::rwkv_wkv7>, &shape_matrix, {64, 32, 128, 1}},
        {"soft_max", 2, 6, &build_soft_max, &shape_rows, {512, 512, 8, 1}},
        {"mul_mat", 2, 8, &build_mul_mat, &shape_mul_mat, {1024, 1024, 64, 1}},
        {"mul_mat_id", 2, 4, &build_mul_mat_id, &shape_mul_mat, {2048, 768, 8, 512}},
        {"add_id", 1, 4, &build_add_id, &shape_rows, {2880, 4, 512, 1}},
        {"flash_attn_ext", 2, 64, &build_flash_attn_ext, &shape_attention, {128, 4096, 1, 32}},
        {"get_rows", 1, 4, &build_get_rows, &shape_get_rows, {4096, 32000, 1, 512}},
        {"rope", 1, 11, &build_rope, &shape_rope, {128, 32, 512, 1}},
        {"concat", 1, 4, &build_concat, &shape_rows, {4096, 512, 1, 1}},
        {"reglu", 1, 4, &build_glu<glu_op::reglu>, &shape_rows, {4096, 1024, 1, 1}},
        {"geglu", 1, 4, &build_glu<glu_op::geglu>, &shape_rows, {4096, 1024, 1, 1}},
        {"swiglu", 1, 4, &build_glu<glu_op::swiglu>, &shape_rows, {4096, 1024, 1, 1}},
        {"swiglu_oai", 1, 4, &build_glu<glu_op::swiglu_oai>, &shape_rows, {4096, 1024, 1, 1}},
        {"geglu_erf", 1, 4, &build_glu<glu_op::geglu_erf>, &shape_rows, {4096, 1024, 1, 1}},
        {"geglu_quick", 1, 4, &build_glu<glu_op::geglu_quick>, &shape_rows, {4096, 1024, 1, 1}},
        {"set_rows", 3, 4, &build_set_rows, &shape_rows, {4096, 4096, 1, 1}, 0b100},
        {"pad", 1, 4, &build_pad, &shape_rows, {4096, 1024, 1, 1}},
        {"arange", 1, 1, &build_arange, &shape_rows, {1 << 20, 1, 1, 1}},
        {"cpy", 2, 4, &build_cpy, &shape_rows, {4096, 1024, 1, 1}},
        {"cont", 1, 4, &build_cont, &shape_rows, {4096, 1024, 1, 1}},
        {"im2col", 2, 4, &build_im2col, &shape_conv, {64, 64, 1, 1}},
        {"conv_2d", 1, 4, &build_conv_2d, &shape_conv, {64, 64, 256, 256}},
        {"conv_transpose_1d", 1, 8, &build_conv_transpose_1d, &shape_conv, {1024, 256, 256, 1}},
        {"conv_transpose_2d", 1, 8, &build_conv_transpose_2d, &shape_conv, {64, 64, 256, 128}},
        {"conv_2d_dw", 1, 8, &build_conv_2d_dw, &shape_conv, {64, 64, 256, 1}},
        {"win_part", 1, 8, &build_window<op_kind::win_part>, &shape_rows, {768, 64, 64, 1}},
        {"win_unpart", 1, 8, &build_window<op_kind::win_unpart>, &shape_rows, {768, 64, 64, 1}},
        {"get_rel_pos", 1, 2, &build_get_rel_pos, &shape_rows, {64, 64, 1, 1}},
        {"pool_1d", 1, 4, &build_pool<op_kind::pool_1d>, &shape_rows, {4096, 256, 1, 1}},
        {"pool_2d", 1, 4, &build_pool<op_kind::pool_2d>, &shape_rows, {256, 256, 16, 1}},
        {"upscale", 1, 16, &build_upscale, &shape_rows, {256, 256, 8, 1}},
        {"pad_reflect_1d", 1, 4, &build_remap<op_kind::pad_reflect_1d>, &shape_rows, {4096, 1024, 1, 1}},
        {"roll", 1, 4, &build_remap<op_kind::roll>, &shape_rows, {4096, 1024, 1, 1}},
    };
    return families;
}

/// The entry of `table` whose `name` is `name`, or null.
template <class Entry>
const Entry* find_named(std::span<const Entry> table, std::string_view name) {
    for (const Entry& e : table)
        if (e.name == name)
            return &e;
    return nullptr;
}

/// The family named `op`, or null.
inline const op_cases* find_family(std::string_view op) { return find_named(catalogue(), op); }

/// Builds spec's case in ctx; nullopt when the spec is invalid (an unknown op, types or a
/// shape the family cannot build).
inline std::optional<built_case> build(context& ctx, const case_spec& spec) {
    const op_cases* f = find_family(spec.op);
    if (f == nullptr || static_cast<int>(spec.types.size()) != f->n_types || spec.variant < 0 ||
        spec.variant >= f->n_variants)
        return std::nullopt;
    for (auto n : spec.ne)
        if (n <= 0 || n > (std::int64_t{1} << 24))
            return std::nullopt;
    std::mt19937 rng(spec.seed);
    try {
        built_case b = f->build(ctx, spec, rng);
        if (b.out == nullptr)
            return std::nullopt;
        return b;
    } catch (const error&) {
        return std::nullopt;
    }
}

/// Every operand type combination of family f (types^n_types, in a fixed order).
inline std::vector<std::vector<elem_type>> type_combinations(const op_cases& f) {
    std::vector<std::vector<elem_type>> out{{}};
    for (int i = 0; i < f.n_types; ++i) {
        std::vector<std::vector<elem_type>> next;
        for (const auto& prefix : out)
            for (elem_type t : all_elem_types) {
                next.push_back(prefix);
                next.back().push_back(t);
            }
        out = std::move(next);
    }
    return out;
}

} // namespace backplane::conformance

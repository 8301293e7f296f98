#pragma once
// Seeded random graphs of each fused group (core/fusion.hpp), shared by the backends'
// fusion tests: each case builds its graph in a context (the same values for the same
// seed) and returns the group's result (for rope_set_rows the set_rows node: the whole
// cache). Shapes, types and operand orders vary from case to case: rows broadcast or
// not, the broadcast operand first or second, weights of four quantized types, one to
// nine columns, caches of f16 and f32, both rope modes, soft_max with its scale, its
// mask or both.

#include <backplane/backplane.hpp>
#include <backplane/conformance/inputs.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace backplane::test {

/// A graph of one fused group.
struct fusion_case {
    fusion kind;
    std::string name;
    std::function<tensor*(context& ctx, std::mt19937& rng)> build;
};

namespace fusion_cases_detail {

using i64 = std::int64_t;

inline void fill(tensor* t, std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
    conformance::detail::fill(*t, rng, lo, hi);
}
inline i64 pick(std::mt19937& rng, i64 lo, i64 hi) {
    return lo + static_cast<i64>(rng() % static_cast<std::uint32_t>(hi - lo + 1));
}
inline std::string dims(std::initializer_list<i64> v) {
    std::string s;
    for (i64 x : v) s += (s.empty() ? "" : "x") + std::to_string(x);
    return s;
}

inline constexpr elem_type weight_types[] = {elem_type::q8_0, elem_type::q4_0, elem_type::q4_K, elem_type::q6_K};

inline tensor* rope_of(context& ctx, tensor* k, tensor* pos, rope_mode mode) {
    return rope_ext(ctx, k, pos, nullptr, static_cast<int>(k->ne[0]), mode, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f,
                    0.0f);
}

inline fusion_case rms_norm_mul_case(std::mt19937& shapes) {
    const i64 n = pick(shapes, 1, 300), r = pick(shapes, 1, 5), h = pick(shapes, 1, 3);
    const bool w_rows = shapes() % 2 == 0, w_first = shapes() % 2 == 0;
    return {fusion::rms_norm_mul, "rms_norm_mul " + dims({n, r, h}) + (w_rows ? " w rows" : "") + (w_first ? " w first" : ""),
            [=](context& ctx, std::mt19937& rng) {
                tensor* x = ctx.new_tensor_4d(elem_type::f32, n, r, h, 1);
                // broadcast only as the second operand: a first one has the norm's shape
                tensor* w = w_first ? ctx.new_tensor_4d(elem_type::f32, n, r, h, 1)
                                    : ctx.new_tensor_4d(elem_type::f32, n, w_rows ? r : 1, 1, 1);
                fill(x, rng, -3.0, 3.0);
                fill(w, rng);
                tensor* norm = rms_norm(ctx, x, 1e-5f);
                return w_first ? mul(ctx, w, norm) : mul(ctx, norm, w);
            }};
}

inline fusion_case mul_mat_add_case(std::mt19937& shapes, elem_type wt) {
    const i64 K = block_size(wt) * pick(shapes, 1, 3), M = pick(shapes, 1, 100), N = pick(shapes, 1, 9),
              B = pick(shapes, 1, 2);
    const bool b_cols = shapes() % 3 == 0, b_first = shapes() % 4 == 0;
    return {fusion::mul_mat_add,
            "mul_mat_add " + std::string(to_string(wt)) + " " + dims({K, M, N, B}) + (b_cols ? " bias columns" : "") +
                (b_first ? " bias first" : ""),
            [=](context& ctx, std::mt19937& rng) {
                tensor* w = ctx.new_tensor_3d(wt, K, M, 1);
                tensor* x = ctx.new_tensor_3d(elem_type::f32, K, N, B);
                tensor* bias = b_first ? ctx.new_tensor_3d(elem_type::f32, M, N, B)
                                       : ctx.new_tensor_3d(elem_type::f32, M, b_cols ? N : 1, 1);
                fill(w, rng);
                fill(x, rng);
                fill(bias, rng);
                tensor* y = mul_mat(ctx, w, x);
                return b_first ? add(ctx, bias, y) : add(ctx, y, bias);
            }};
}

inline fusion_case glu_pair_case(std::mt19937& shapes, elem_type wt) {
    const i64 K = block_size(wt) * pick(shapes, 1, 3), M = pick(shapes, 1, 130), N = pick(shapes, 1, 9);
    return {fusion::glu_pair, "glu_pair " + std::string(to_string(wt)) + " " + dims({K, M, N}),
            [=](context& ctx, std::mt19937& rng) {
                tensor* wg = ctx.new_tensor_2d(wt, K, M);
                tensor* wu = ctx.new_tensor_2d(wt, K, M);
                tensor* x = ctx.new_tensor_2d(elem_type::f32, K, N);
                fill(wg, rng);
                fill(wu, rng);
                fill(x, rng);
                return swiglu_split(ctx, mul_mat(ctx, wg, x), mul_mat(ctx, wu, x));
            }};
}

inline fusion_case rope_set_rows_case(std::mt19937& shapes, int c) {
    const i64 hd = 2 * pick(shapes, 2, 32), nh = pick(shapes, 1, 4), T = pick(shapes, 1, 6);
    const i64 n_ctx = T + pick(shapes, 0, 10);
    const elem_type ct = c % 2 == 0 ? elem_type::f16 : elem_type::f32;
    const rope_mode mode = c % 3 == 0 ? rope_mode::normal : rope_mode::neox;
    return {fusion::rope_set_rows,
            "rope_set_rows " + dims({hd, nh, T}) + " cache " + std::to_string(n_ctx) + " " +
                std::string(to_string(ct)) + (mode == rope_mode::neox ? " neox" : " normal"),
            [=](context& ctx, std::mt19937& rng) {
                tensor* k = ctx.new_tensor_3d(elem_type::f32, hd, nh, T);
                tensor* pos = ctx.new_tensor_1d(elem_type::i32, T);
                tensor* idx = ctx.new_tensor_1d(elem_type::i32, T);
                tensor* cache = ctx.new_tensor_2d(ct, hd * nh, n_ctx);
                fill(k, rng);
                fill(cache, rng);
                fill(pos, rng, 0.0, 3000.0);
                std::vector<std::int32_t> rows(static_cast<std::size_t>(n_ctx));
                for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int32_t>(i);
                std::shuffle(rows.begin(), rows.end(), rng);
                std::memcpy(idx->data, rows.data(), static_cast<std::size_t>(T) * sizeof(std::int32_t));
                tensor* r = rope_of(ctx, k, pos, mode);
                return set_rows(ctx, cache, reshape(ctx, r, {hd * nh, T}), idx); // the cache's memory
            }};
}

inline fusion_case soft_max_case(std::mt19937& shapes, int c) {
    const i64 n = pick(shapes, 1, 100), r = pick(shapes, 1, 6), h = pick(shapes, 1, 4);
    const bool scaled = c % 3 != 1, masked = c % 3 != 2, mask_heads = shapes() % 2 == 0;
    return {fusion::soft_max_scale_mask,
            "soft_max " + dims({n, r, h}) + (scaled ? " scaled" : "") + (masked ? " masked" : ""),
            [=](context& ctx, std::mt19937& rng) {
                tensor* x = ctx.new_tensor_3d(elem_type::f32, n, r, h);
                tensor* mask = ctx.new_tensor_3d(elem_type::f32, n, r, mask_heads ? h : 1);
                fill(x, rng, -4.0, 4.0);
                fill(mask, rng, -2.0, 0.0);
                const float masked_out = -std::numeric_limits<float>::infinity();
                std::memcpy(mask->data, &masked_out, sizeof masked_out);
                tensor* t = x;
                if (scaled) t = scale(ctx, t, 0.125f);
                if (masked) t = add(ctx, t, mask);
                return soft_max(ctx, t);
            }};
}

} // namespace fusion_cases_detail

/// A rope_set_rows group whose second index (4) is past the cache's 4 rows: the set_rows
/// node.
inline tensor* rope_set_rows_out_of_range(context& ctx) {
    namespace d = fusion_cases_detail;
    std::mt19937 rng(8);
    tensor* k = ctx.new_tensor_3d(elem_type::f32, 16, 2, 3);
    tensor* pos = ctx.new_tensor_1d(elem_type::i32, 3);
    tensor* idx = ctx.new_tensor_1d(elem_type::i32, 3);
    tensor* cache = ctx.new_tensor_2d(elem_type::f16, 32, 4);
    d::fill(k, rng);
    d::fill(pos, rng, 0.0, 100.0);
    const std::int32_t rows[] = {0, 4, 1};
    std::memcpy(idx->data, rows, sizeof rows);
    return set_rows(ctx, cache, reshape(ctx, d::rope_of(ctx, k, pos, rope_mode::neox), {32, 3}), idx);
}

/// t's values as f32 (a contiguous float tensor in host memory).
inline std::vector<float> values_of(const tensor& t) {
    std::vector<float> v(static_cast<std::size_t>(t.nelements()));
    to_float_row(t.type, t.data, v.data(), t.nelements());
    return v;
}

/// sum (want - got)^2 / sum want^2 (the plain sum of squares where want is all 0).
inline double nmse(const std::vector<float>& want, const std::vector<float>& got) {
    if (want.size() != got.size()) return std::numeric_limits<double>::infinity();
    double err = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const double d = static_cast<double>(want[i]) - got[i];
        err += d * d;
        norm += static_cast<double>(want[i]) * want[i];
    }
    return norm > 0.0 ? err / norm : err;
}

/// n cases of each kind, from `seed`.
inline std::vector<fusion_case> fusion_cases(std::uint32_t seed, int n) {
    namespace d = fusion_cases_detail;
    std::mt19937 shapes(seed);
    std::vector<fusion_case> all;
    for (int c = 0; c < n; ++c) {
        const elem_type wt = d::weight_types[static_cast<std::size_t>(c) % std::size(d::weight_types)];
        all.push_back(d::rms_norm_mul_case(shapes));
        all.push_back(d::mul_mat_add_case(shapes, wt));
        all.push_back(d::glu_pair_case(shapes, wt));
        all.push_back(d::rope_set_rows_case(shapes, c));
        all.push_back(d::soft_max_case(shapes, c));
    }
    return all;
}

} // namespace backplane::test

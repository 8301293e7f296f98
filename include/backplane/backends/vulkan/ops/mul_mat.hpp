#pragma once
// mul_mat (mul_mat.comp): dst f32 [M, N, ne2, ne3] = a [K, M, ...] times b [K, N, ne2, ne3]
// per batch, a broadcast over b's batches. Weights (a): f32, f16, bf16 and every quantized
// type (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4, q2_K, q3_K, q4_K, q5_K, q6_K, q8_K;
// iq4_xs, tq1_0, tq2_0 and iq2_xxs ... iq1_m but in mul_mat_id; shaders/quants.glsl
// dequantizes the ones past q4_0); activations (b): f32, f16, bf16;
// any strides. Everything 16-bit (all but f32) needs 16-bit storage, mxfp4 (read as
// bytes) 8-bit storage too.
//
// Three kernels, picked by their estimated cost for the node's M and N:
//   tiled    128 x 128 blocks of dst per workgroup (64 invocations, 16 KiB shared)
//   narrow   128 x 32 blocks (64 invocations, 10 KiB shared), for few columns
//   mat-vec  8 rows of a against one column of b per workgroup (16 invocations, 512
//            bytes shared): decoding, or few rows
// mul_mat_id runs the mat-vec kernel per result column, its matrix picked by the column's
// expert id (MUL_MAT_ID in mul_mat.comp).
// All fit every Vulkan device (the guaranteed minima are 128 invocations and 16 KiB); a
// device reporting less gets the kernels that fit, the mat-vec one at least, or nothing.

#include <backplane/backends/vulkan/ops/common.hpp>

#include <algorithm>
#include <array>
#include <string_view>

namespace backplane::vulkan::detail {

namespace mul_mat_detail {

/// A kernel's shape (mul_mat.comp) and the variants by weights (f32, f16 or bf16, q8_0,
/// q4_0, then more_quants, then read_quants in their order; an empty name: none) and
/// activations (f32, f16 or bf16).
struct kernel {
    std::uint32_t rows, columns; ///< of dst per workgroup
    std::uint32_t invocations;
    std::size_t shared; ///< bytes
    /// Throughput on full blocks relative to the tiled kernel's (measured on lavapipe;
    /// on GPUs the choice matters less): the smaller blocks cost more per element.
    double speed;
    std::string_view shaders[4 + n_more_quants + n_read_quants][2];
};

inline constexpr kernel tiled{128, 128, 64, (128 + 128) * 16 * 4, 1.0,
                              {{"mul_mat_f32_f32", "mul_mat_f32_half"},
                               {"mul_mat_half_f32", "mul_mat_half_half"},
                               {"mul_mat_q8_0_f32", "mul_mat_q8_0_half"},
                               {"mul_mat_q4_0_f32", "mul_mat_q4_0_half"},
                               {"mul_mat_q4_1_f32", "mul_mat_q4_1_half"},
                               {"mul_mat_q5_0_f32", "mul_mat_q5_0_half"},
                               {"mul_mat_q5_1_f32", "mul_mat_q5_1_half"},
                               {"mul_mat_iq4_nl_f32", "mul_mat_iq4_nl_half"},
                               {"mul_mat_mxfp4_f32", "mul_mat_mxfp4_half"},
                               {"mul_mat_q2_K_f32", "mul_mat_q2_K_half"},
                               {"mul_mat_q3_K_f32", "mul_mat_q3_K_half"},
                               {"mul_mat_q4_K_f32", "mul_mat_q4_K_half"},
                               {"mul_mat_q5_K_f32", "mul_mat_q5_K_half"},
                               {"mul_mat_q6_K_f32", "mul_mat_q6_K_half"},
                               {"mul_mat_q8_K_f32", "mul_mat_q8_K_half"},
                               {"mul_mat_iq4_xs_f32", "mul_mat_iq4_xs_half"},
                               {"mul_mat_tq1_0_f32", "mul_mat_tq1_0_half"},
                               {"mul_mat_tq2_0_f32", "mul_mat_tq2_0_half"},
                               {"mul_mat_iq2_xxs_f32", "mul_mat_iq2_xxs_half"},
                               {"mul_mat_iq2_xs_f32", "mul_mat_iq2_xs_half"},
                               {"mul_mat_iq2_s_f32", "mul_mat_iq2_s_half"},
                               {"mul_mat_iq3_xxs_f32", "mul_mat_iq3_xxs_half"},
                               {"mul_mat_iq3_s_f32", "mul_mat_iq3_s_half"},
                               {"mul_mat_iq1_s_f32", "mul_mat_iq1_s_half"},
                               {"mul_mat_iq1_m_f32", "mul_mat_iq1_m_half"}}};
inline constexpr kernel narrow{128, 32, 64, (128 + 32) * 16 * 4, 0.55,
                               {{"mul_mat_narrow_f32_f32", "mul_mat_narrow_f32_half"},
                                {"mul_mat_narrow_half_f32", "mul_mat_narrow_half_half"},
                                {"mul_mat_narrow_q8_0_f32", "mul_mat_narrow_q8_0_half"},
                                {"mul_mat_narrow_q4_0_f32", "mul_mat_narrow_q4_0_half"},
                                {"mul_mat_narrow_q4_1_f32", "mul_mat_narrow_q4_1_half"},
                                {"mul_mat_narrow_q5_0_f32", "mul_mat_narrow_q5_0_half"},
                                {"mul_mat_narrow_q5_1_f32", "mul_mat_narrow_q5_1_half"},
                                {"mul_mat_narrow_iq4_nl_f32", "mul_mat_narrow_iq4_nl_half"},
                                {"mul_mat_narrow_mxfp4_f32", "mul_mat_narrow_mxfp4_half"},
                                {"mul_mat_narrow_q2_K_f32", "mul_mat_narrow_q2_K_half"},
                                {"mul_mat_narrow_q3_K_f32", "mul_mat_narrow_q3_K_half"},
                                {"mul_mat_narrow_q4_K_f32", "mul_mat_narrow_q4_K_half"},
                                {"mul_mat_narrow_q5_K_f32", "mul_mat_narrow_q5_K_half"},
                                {"mul_mat_narrow_q6_K_f32", "mul_mat_narrow_q6_K_half"},
                                {"mul_mat_narrow_q8_K_f32", "mul_mat_narrow_q8_K_half"},
                                {"mul_mat_narrow_iq4_xs_f32", "mul_mat_narrow_iq4_xs_half"},
                                {"mul_mat_narrow_tq1_0_f32", "mul_mat_narrow_tq1_0_half"},
                                {"mul_mat_narrow_tq2_0_f32", "mul_mat_narrow_tq2_0_half"},
                                {"mul_mat_narrow_iq2_xxs_f32", "mul_mat_narrow_iq2_xxs_half"},
                                {"mul_mat_narrow_iq2_xs_f32", "mul_mat_narrow_iq2_xs_half"},
                                {"mul_mat_narrow_iq2_s_f32", "mul_mat_narrow_iq2_s_half"},
                                {"mul_mat_narrow_iq3_xxs_f32", "mul_mat_narrow_iq3_xxs_half"},
                                {"mul_mat_narrow_iq3_s_f32", "mul_mat_narrow_iq3_s_half"},
                                {"mul_mat_narrow_iq1_s_f32", "mul_mat_narrow_iq1_s_half"},
                                {"mul_mat_narrow_iq1_m_f32", "mul_mat_narrow_iq1_m_half"}}};
inline constexpr kernel mat_vec{8, 1, 16, 2 * 16 * 4 * 4, 0.24,
                                {{"mul_mat_vec_f32_f32", "mul_mat_vec_f32_half"},
                                 {"mul_mat_vec_half_f32", "mul_mat_vec_half_half"},
                                 {"mul_mat_vec_q8_0_f32", "mul_mat_vec_q8_0_half"},
                                 {"mul_mat_vec_q4_0_f32", "mul_mat_vec_q4_0_half"},
                                 {"mul_mat_vec_q4_1_f32", "mul_mat_vec_q4_1_half"},
                                 {"mul_mat_vec_q5_0_f32", "mul_mat_vec_q5_0_half"},
                                 {"mul_mat_vec_q5_1_f32", "mul_mat_vec_q5_1_half"},
                                 {"mul_mat_vec_iq4_nl_f32", "mul_mat_vec_iq4_nl_half"},
                                 {"mul_mat_vec_mxfp4_f32", "mul_mat_vec_mxfp4_half"},
                                 {"mul_mat_vec_q2_K_f32", "mul_mat_vec_q2_K_half"},
                                 {"mul_mat_vec_q3_K_f32", "mul_mat_vec_q3_K_half"},
                                 {"mul_mat_vec_q4_K_f32", "mul_mat_vec_q4_K_half"},
                                 {"mul_mat_vec_q5_K_f32", "mul_mat_vec_q5_K_half"},
                                 {"mul_mat_vec_q6_K_f32", "mul_mat_vec_q6_K_half"},
                                 {"mul_mat_vec_q8_K_f32", "mul_mat_vec_q8_K_half"},
                                 {"mul_mat_vec_iq4_xs_f32", "mul_mat_vec_iq4_xs_half"},
                                 {"mul_mat_vec_tq1_0_f32", "mul_mat_vec_tq1_0_half"},
                                 {"mul_mat_vec_tq2_0_f32", "mul_mat_vec_tq2_0_half"},
                                 {"mul_mat_vec_iq2_xxs_f32", "mul_mat_vec_iq2_xxs_half"},
                                 {"mul_mat_vec_iq2_xs_f32", "mul_mat_vec_iq2_xs_half"},
                                 {"mul_mat_vec_iq2_s_f32", "mul_mat_vec_iq2_s_half"},
                                 {"mul_mat_vec_iq3_xxs_f32", "mul_mat_vec_iq3_xxs_half"},
                                 {"mul_mat_vec_iq3_s_f32", "mul_mat_vec_iq3_s_half"},
                                 {"mul_mat_vec_iq1_s_f32", "mul_mat_vec_iq1_s_half"},
                                 {"mul_mat_vec_iq1_m_f32", "mul_mat_vec_iq1_m_half"}}};
/// mul_mat_id's kernel: the mat-vec one, its matrix picked per column by an expert id
/// (none for read_quants: the CPU computes those).
inline constexpr kernel mat_vec_id{8, 1, 16, 2 * 16 * 4 * 4, 0.24,
                                   {{"mul_mat_id_f32_f32", "mul_mat_id_f32_half"},
                                    {"mul_mat_id_half_f32", "mul_mat_id_half_half"},
                                    {"mul_mat_id_q8_0_f32", "mul_mat_id_q8_0_half"},
                                    {"mul_mat_id_q4_0_f32", "mul_mat_id_q4_0_half"},
                                    {"mul_mat_id_q4_1_f32", "mul_mat_id_q4_1_half"},
                                    {"mul_mat_id_q5_0_f32", "mul_mat_id_q5_0_half"},
                                    {"mul_mat_id_q5_1_f32", "mul_mat_id_q5_1_half"},
                                    {"mul_mat_id_iq4_nl_f32", "mul_mat_id_iq4_nl_half"},
                                    {"mul_mat_id_mxfp4_f32", "mul_mat_id_mxfp4_half"},
                                    {"mul_mat_id_q2_K_f32", "mul_mat_id_q2_K_half"},
                                    {"mul_mat_id_q3_K_f32", "mul_mat_id_q3_K_half"},
                                    {"mul_mat_id_q4_K_f32", "mul_mat_id_q4_K_half"},
                                    {"mul_mat_id_q5_K_f32", "mul_mat_id_q5_K_half"},
                                    {"mul_mat_id_q6_K_f32", "mul_mat_id_q6_K_half"},
                                    {"mul_mat_id_q8_K_f32", "mul_mat_id_q8_K_half"}}};

constexpr int weight_index(elem_type t) noexcept {
    switch (t) {
    case elem_type::f32: return 0;
    case elem_type::f16:
    case elem_type::bf16: return 1;
    case elem_type::q8_0: return 2;
    case elem_type::q4_0: return 3;
    default: {
        const int q = more_quant_index(t), r = read_quant_index(t);
        return q >= 0 ? 4 + q : r >= 0 ? 4 + static_cast<int>(n_more_quants) + r : -1;
    }
    }
}

constexpr bool fits(const kernel& k, const features& f) noexcept {
    return f.max_invocations >= k.invocations && f.shared_memory >= k.shared;
}

/// The work of M x N results in k's blocks (rounded up to whole ones), over its speed.
constexpr double cost(const kernel& k, std::uint64_t M, std::uint64_t N) noexcept {
    const auto up = [](std::uint64_t n, std::uint64_t b) { return static_cast<double>((n + b - 1) / b * b); };
    return up(M, k.rows) * up(N, k.columns) / k.speed;
}

/// Whether t's rows can be read 4 elements at a time as far as its shape tells: contiguous
/// rows of a multiple of 4 elements, row strides multiples of 4 elements (the shader
/// checks the offset). Quantized rows are read block by block anyway.
inline bool rows_vectorizable(const tensor& t) noexcept {
    if (is_quantized(t.type)) return true;
    const std::size_t quad = 4 * type_size(t.type);
    return t.nb[0] == type_size(t.type) && t.ne[0] % 4 == 0 && t.nb[1] % quad == 0 && t.nb[2] % quad == 0 &&
           t.nb[3] % quad == 0;
}

/// A grid of at least `items` workgroups, at most 65535 along each dimension (the shaders
/// number them x fastest; those past the last item leave at once).
constexpr std::array<std::uint32_t, 3> grid(std::uint64_t items) noexcept {
    constexpr std::uint64_t most = 65535;
    const std::uint64_t x = std::clamp<std::uint64_t>(items, 1, most);
    const std::uint64_t y = std::clamp<std::uint64_t>((items + x - 1) / x, 1, most);
    const std::uint64_t z = std::max<std::uint64_t>((items + x * y - 1) / (x * y), 1);
    return {static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(y), static_cast<std::uint32_t>(z)};
}

/// The variant index of a and b (weight_index, and f32 0 or f16 / bf16 1), or false.
inline bool variant_of(const tensor& t, const features& f, int& ia, int& ib) noexcept {
    const tensor* a = t.src[0];
    const tensor* b = t.src[1];
    if (a == nullptr || b == nullptr || t.type != elem_type::f32) return false;
    ia = weight_index(a->type);
    ib = b->type == elem_type::f32 ? 0 : b->type == elem_type::f16 || b->type == elem_type::bf16 ? 1 : -1;
    if (ia < 0 || ib < 0) return false;
    return storable(a->type, f) && storable(b->type, f);
}

/// The push constants both ops share: the shapes, the bf16 bits, whether rows are read
/// in vectors.
inline push_constants push_of(const tensor& t) noexcept {
    push_constants pc = shapes_of(t);
    const tensor& a = *t.src[0];
    const tensor& b = *t.src[1];
    pc.prm[0] = (a.type == elem_type::bf16 ? 1u : 0u) | (b.type == elem_type::bf16 ? 2u : 0u);
    pc.prm[1] = rows_vectorizable(a) && rows_vectorizable(b) ? 1u : 0u;
    return pc;
}

} // namespace mul_mat_detail

inline bool plan_mul_mat(const tensor& t, const features& f, dispatch& d) noexcept {
    using namespace mul_mat_detail;
    int ia = -1, ib = -1;
    if (!variant_of(t, f, ia, ib)) return false;

    const auto M = static_cast<std::uint64_t>(t.ne[0]), N = static_cast<std::uint64_t>(t.ne[1]);
    const kernel* best = nullptr;
    for (const kernel* k : {&mat_vec, &narrow, &tiled})
        if (fits(*k, f) && (best == nullptr || cost(*k, M, N) < cost(*best, M, N))) best = k;
    if (best == nullptr) return false;

    d.shader = best->shaders[ia][ib];
    d.pc = push_of(t);
    const std::uint64_t blocks = (M + best->rows - 1) / best->rows * ((N + best->columns - 1) / best->columns);
    d.groups = grid(blocks * static_cast<std::uint64_t>(t.ne[2] * t.ne[3]));
    return true;
}

/// mul_mat_id: the mat-vec kernel per result column, its expert's matrix picked by the id
/// of source 2 (i32; its strides in prm.z and prm.w, its offset in offs.w).
inline bool plan_mul_mat_id(const tensor& t, const features& f, dispatch& d) noexcept {
    using namespace mul_mat_detail;
    int ia = -1, ib = -1;
    if (!variant_of(t, f, ia, ib) || !fits(mat_vec_id, f)) return false;
    const tensor* ids = t.src[2];
    std::array<std::uint32_t, 4> ne{}, nb{};
    if (ids == nullptr || ids->type != elem_type::i32 || !shape32(*ids, ne, nb)) return false;
    d.shader = mat_vec_id.shaders[ia][ib];
    if (d.shader.empty()) return false;
    d.pc = push_of(t);
    d.pc.prm[2] = nb[0];
    d.pc.prm[3] = nb[1];
    const auto M = static_cast<std::uint64_t>(t.ne[0]);
    d.groups = grid((M + mat_vec_id.rows - 1) / mat_vec_id.rows * static_cast<std::uint64_t>(t.ne[1] * t.ne[2]));
    return true;
}

} // namespace backplane::vulkan::detail

#pragma once
// Geometry of a K-quant mul_mat (weights q2_K ... q6_K): which nodes the fast path takes,
// the layout of the work buffer, and how the node is cut into jobs for the threads.
//
// Work buffer (64-byte aligned, shared by the node's threads): the quantized b.
// every column n of b (a row of the tensor, K values) becomes K/256 records
// of rec_bytes, one per super-block, columns one after the other (matrix by matrix):
//
//   qs[256]    int8   the q8_K codes (core's quantize_row_q8_K, bit for bit), in value
//                     order or in the order of the kernel's steps (b_order below)
//   ex[16]     f32    minimum types (q2_K per 16 values, q4_K and q5_K per 32): d * (sum
//                     of the sub-block's codes), met with the weights' dmin * m, so that
//                     no kernel recomputes it per weight row; offset types (q3_K, q6_K):
//                     int32 -c * bsum[j], where the panel kernel starts its sums
//   bsum[16]   int16  sums of each 16 codes (q8_K's bsums)
//   d          f32    q8_K's scale
//
// Jobs: (matrix of b, chunk of columns, panel of 32 rows), panel fastest, as in
// fast/quant/plan.hpp: chunks hold as many columns as keep their quantized b within a
// cache budget, smaller when there are fewer jobs than threads.

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/jobs.hpp>
#include <backplane/backends/cpu/fast/kquant_entry.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/kquants.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace backplane::cpu::fast::kquant {

using i64 = std::int64_t;

inline constexpr i64 qk = qk_k;            ///< values per super-block
// rec_bytes (kquant_entry.hpp): one quantized b record, 384 bytes (a 64-byte multiple)
inline constexpr i64 rec_ex = 256;         ///< offset of ex[16] in a record
inline constexpr i64 rec_bsum = 320;       ///< offset of bsum[16]
inline constexpr i64 rec_d = 352;          ///< offset of d
using jobs::panel_rows;

/// What the kernels need to know about a weight type.
struct type_traits {
    int sub = 32;       ///< values per sub-block (one scale, and minimum where there is one)
    int offset = 0;     ///< c of value = d * sc * (code - c); 0 for the minimum types
    bool has_min = false; ///< value = d * sc * code - dmin * m
    [[nodiscard]] constexpr int subs() const noexcept { return qk_k / sub; }
};

constexpr type_traits traits_of(elem_type t) noexcept {
    switch (t) {
    case elem_type::q2_K: return {16, 0, true};
    case elem_type::q3_K: return {16, 4, false};
    case elem_type::q4_K: return {32, 0, true};
    case elem_type::q5_K: return {32, 0, true};
    case elem_type::q6_K: return {16, 32, false};
    default: return {};
    }
}

/// The order of b's 256 codes in a record: value order, or (the AVX-512 q4_K / q5_K tiles,
/// kquant/decode_avx512.hpp) the middle 32-byte quarters of each 128 values swapped, so
/// that 64 consecutive codes meet sub-blocks a and a + 2. The sums stay in value order.
enum class b_order : std::uint8_t { values, pairs };

inline b_order b_order_for(elem_type t, isa level) noexcept {
    return level == isa::avx512 && (t == elem_type::q4_K || t == elem_type::q5_K) ? b_order::pairs : b_order::values;
}

/// Everything derived from the node's shape that the kernels need.
struct plan {
    elem_type wtype{};
    type_traits tt{};
    i64 K = 0, nblk = 0, M = 0, N = 0, B2 = 1, B3 = 1, r2 = 1, r3 = 1;
    std::size_t wbytes = 0;      ///< bytes of one weight super-block
    std::size_t b_bytes = 0;     ///< quantized b, rounded up to 64
    b_order order = b_order::values; ///< chosen with the kernels' level (b_order_for)

    [[nodiscard]] i64 matrices() const noexcept { return B2 * B3; }
    [[nodiscard]] i64 col_bytes() const noexcept { return nblk * rec_bytes; }
    /// Column n of matrix bi of the quantized b.
    [[nodiscard]] std::byte* column(std::byte* qb, i64 bi, i64 n) const noexcept {
        return qb + static_cast<std::size_t>((bi * N + n) * col_bytes());
    }
    [[nodiscard]] const std::byte* column(const std::byte* qb, i64 bi, i64 n) const noexcept {
        return qb + static_cast<std::size_t>((bi * N + n) * col_bytes());
    }
};

/// True when the fast kernels compute this node; fills *out when given.
/// A pure function of the node (types, extents, strides).
inline bool make_plan(const tensor& dst, plan* out) noexcept {
    if (!jobs::mul_mat_shape_ok(dst, qk) || !is_kquant(dst.src[0]->type)) return false;
    const tensor* a = dst.src[0];
    const tensor* b = dst.src[1];
    plan p;
    p.wtype = a->type;
    p.tt = traits_of(a->type);
    p.K = a->ne[0];
    p.nblk = p.K / qk;
    p.M = a->ne[1];
    p.N = b->ne[1];
    p.B2 = b->ne[2];
    p.B3 = b->ne[3];
    p.r2 = b->ne[2] / a->ne[2];
    p.r3 = b->ne[3] / a->ne[3];
    p.wbytes = type_size(a->type);
    if (!jobs::quantized_b_bytes(*b, p.nblk, rec_bytes, p.b_bytes)) return false;
    if (out != nullptr) *out = p;
    return true;
}

/// Whether the AVX-512 level runs the panel kernel (kquant/panel_avx512.hpp): enough
/// columns to pay for unpacking the weights (it decodes every K-quant type).
inline bool kpanel_candidate(const plan& p) noexcept { return p.N >= 8; }
/// One thread's packed weight panel (kquant/panel_avx512.hpp): 2 super-blocks of 32 rows.
inline constexpr std::size_t kpanel_bytes = 2 * (8192 + 16 * 128 + 16 * 128);

/// Bytes of the work buffer: the quantized b, shared, then (panel kernel candidates) a
/// packing area per thread.
inline std::size_t work_bytes(const plan& p, int nth) noexcept {
    return p.b_bytes + (kpanel_candidate(p) ? static_cast<std::size_t>(nth < 1 ? 1 : nth) * kpanel_bytes : 0);
}

using jobs::dst_at;
using jobs::effective_level;
using jobs::job;
using jobs::job_at;
using jobs::job_grid;
using jobs::load_f16;
using jobs::load_f32;
using jobs::load_i32;
using jobs::make_grid;
using jobs::store_f32;
using jobs::weight_row;
inline float load_f16_as_f32(const void* p) noexcept { return f16_to_f32(jobs::load_f16(p)); }

} // namespace backplane::cpu::fast::kquant

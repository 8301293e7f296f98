#pragma once
// mul_mat's choice of kernels and its scratch layout, made the same way when the scratch
// is sized (mul_mat_scratch) and when the node is launched, so the two always agree. It
// reads only types, extents, strides and address alignment; when a tensor has no data yet
// (scratch sized before allocation), a view's alignment comes from its offset, buffers
// being at least 256-byte aligned.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/mm/cublas.cuh>

#include <climits>
#include <cstddef>
#include <cstdint>

namespace backplane::cuda::kernels::mm {

enum class path : std::uint8_t {
    generic, ///< generic_kernel: any layout, no scratch
    gemv,    ///< f32 / f16 / bf16 weights, N <= small_n
    qmv,     ///< q8_0 / q4_0 weights, N <= small_n, rows at one address modulo 16
             ///< (the other quantized types take gemv, dequantized as they are read)
    gemm,    ///< a product on one of the engines below
};

enum class engine : std::uint8_t { tc, simt, blas };

inline constexpr i64 small_n = 8;                               ///< mat-vec up to this many columns of b
inline constexpr std::size_t stage_cap = std::size_t{64} << 20; ///< bytes of staged weights at a time

struct plan {
    path kind = path::generic;
    engine eng = engine::simt;
    elem_type ct = elem_type::f32; ///< the operand type of the product
    i64 k = 0, m = 0, n = 0, a2 = 1, a3 = 1, b2 = 1, b3 = 1, r2 = 1, r3 = 1;
    bool a_stage = false; ///< a converted / dequantized to ct rows at a_off, leading dimension a_ld
    bool a_whole = true;  ///< all of a at once; else a_rows rows of one matrix at a time
    i64 a_ld = 0, a_rows = 0;
    std::size_t a_off = 0;
    bool b_stage = false; ///< b converted to ct (f32 for gemv) rows at b_off, leading dimension b_ld
    i64 b_ld = 0;
    std::size_t b_off = 0;
    i64 q_units = 0; ///< qmv: 16-byte units per column image
    std::size_t img_off = 0, img_bytes = 0, meta_off = 0;
    std::size_t total = 0; ///< scratch bytes

    /// Reserves bytes of scratch (256-byte aligned) and returns their offset.
    std::size_t take(std::size_t bytes) noexcept {
        const std::size_t off = (total + 255) & ~std::size_t{255};
        total = off + bytes;
        return off;
    }
};

/// The low bits of t's address: from its data, or before allocation from its view offset.
inline std::uintptr_t address_bits(const tensor& t) noexcept {
    if (t.data != nullptr) return reinterpret_cast<std::uintptr_t>(t.data);
    return t.view_src != nullptr ? static_cast<std::uintptr_t>(t.view_offs) : 0;
}

/// t's address and its strides over dims 1..3 (where the extent is above 1) are multiples of al.
inline bool aligned_rows(const tensor& t, std::size_t al) noexcept {
    if (address_bits(t) % al != 0) return false;
    for (std::size_t d = 1; d < 4; ++d)
        if (t.ne[d] > 1 && t.nb[d] % al != 0) return false;
    return true;
}

/// The values of a row are adjacent.
inline bool packed_rows(const tensor& t) noexcept {
    return t.ne[0] <= 1 || t.nb[0] == type_size(t.type);
}

/// Every row of t lies at the same address modulo 16 (2-byte aligned, as blocks are).
inline bool uniform_phase(const tensor& t) noexcept {
    if (address_bits(t) % 2 != 0) return false;
    for (std::size_t d = 1; d < 4; ++d)
        if (t.ne[d] > 1 && t.nb[d] % 16 != 0) return false;
    return true;
}

inline std::size_t to_size(i64 v) noexcept {
    return static_cast<std::size_t>(v);
}

inline plan make_plan(const tensor& node, const detail::launch_context& ctx) noexcept {
    plan p;
    const tensor& a = *node.src[0];
    const tensor& b = *node.src[1];
    p.k = a.ne[0];
    p.m = a.ne[1];
    p.n = b.ne[1];
    p.a2 = a.ne[2];
    p.a3 = a.ne[3];
    p.b2 = b.ne[2];
    p.b3 = b.ne[3];
    constexpr i64 imax = INT_MAX;
    // nothing to compute, K = 0 (zeros), sizes past int, or an f32 result not at float
    // alignment: the generic kernel
    if (node.nelements() == 0 || p.k <= 0 || p.a2 <= 0 || p.a3 <= 0) return p;
    if (p.k > imax / 2 || p.m > imax || p.n > imax) return p;
    if (node.nb[0] % 4 != 0 || !aligned_rows(node, 4)) return p;
    p.r2 = p.b2 / p.a2;
    p.r3 = p.b3 / p.a3;

    const bool quantized = is_quantized(a.type);
    const i64 ld8 = (p.k + 7) / 8 * 8; // staged rows: 16-byte aligned for every type
    const i64 cols = p.n * p.b2 * p.b3;

    if (p.n <= small_n) {
        if (quantized && !quant::extended(a.type)) {
            const i64 row_bytes = p.k / 32 * static_cast<i64>(type_size(a.type));
            if (!uniform_phase(a) || row_bytes + 32 > imax) return p;
            p.kind = path::qmv;
            // the image spans the row's 16-byte units for any phase (at most 14 bytes before)
            p.q_units = (14 + row_bytes + 15) / 16 * (a.type == elem_type::q4_0 ? 2 : 1);
            p.img_bytes = to_size(cols * p.q_units * 16);
            p.img_off = p.take(p.img_bytes);
            p.meta_off = p.take(to_size(cols * (p.k / 32)) * sizeof(float2));
            return p;
        }
        p.kind = path::gemv;
        if (!(b.type == elem_type::f32 && packed_rows(b) && aligned_rows(b, 4))) {
            p.b_stage = true;
            p.b_ld = ld8;
            p.b_off = p.take(to_size(cols * ld8) * sizeof(float));
        }
        return p;
    }

    const bool blas_c = node.nb[0] == 4 && (node.ne[1] <= 1 || (static_cast<i64>(node.nb[1] / 4) >= p.m &&
                                                               static_cast<i64>(node.nb[1] / 4) <= imax));
    const bool blas = BACKPLANE_CUDA_MM_CUBLAS != 0 && ctx.cublas != nullptr && blas_c;
    const elem_type half_type = quantized ? elem_type::f16 : a.type; // 16-bit operands for a not f32
    if (a.type == elem_type::f32) {
        p.ct = elem_type::f32;
        p.eng = blas ? engine::blas : engine::simt;
    } else if (blas && (half_type == elem_type::f16 || ctx.cc >= 80)) { // bf16 GEMMs need sm_80
        p.ct = half_type;
        p.eng = engine::blas;
    } else if (ctx.cc >= 80) {
        p.ct = half_type;
        p.eng = engine::tc;
    } else { // no tensor-core kernel before sm_80: FP32 on operands staged as f32
        p.ct = elem_type::f32;
        p.eng = blas ? engine::blas : engine::simt;
    }
    if (p.eng != engine::blas) {
        const i64 tiles_m = (p.m + 127) / 128, tiles_n = (p.n + 127) / 128;
        if (tiles_m * tiles_n > imax || tiles_n > imax / 8) return p;
    }
    p.kind = path::gemm;

    const std::size_t es = type_size(p.ct);
    const std::size_t al = p.eng == engine::tc ? 16 : es; // cp.async moves 16-byte chunks
    const auto ld_ok = [&](const tensor& t) {             // cuBLAS: k <= leading dimension <= INT_MAX
        if (p.eng != engine::blas || t.ne[1] <= 1) return true;
        const auto ld = static_cast<i64>(t.nb[1] / es);
        return ld >= p.k && ld <= imax;
    };
    const bool a_direct = a.type == p.ct && packed_rows(a) && aligned_rows(a, al) && ld_ok(a);
    const bool b_direct = b.type == p.ct && packed_rows(b) && aligned_rows(b, al) && ld_ok(b);
    if (!b_direct) {
        p.b_stage = true;
        p.b_ld = ld8;
        p.b_off = p.take(to_size(cols * ld8) * es);
    }
    if (!a_direct) {
        p.a_stage = true;
        p.a_ld = ld8;
        const std::size_t row_bytes = to_size(ld8) * es;
        const std::size_t whole = to_size(p.a2 * p.a3 * p.m) * row_bytes;
        if (whole <= stage_cap) {
            p.a_whole = true;
            p.a_rows = p.m;
            p.a_off = p.take(whole);
        } else {
            p.a_whole = false;
            i64 rows = static_cast<i64>(stage_cap / row_bytes) / 128 * 128;
            rows = rows < 128 ? 128 : rows;
            p.a_rows = rows < p.m ? rows : p.m;
            p.a_off = p.take(to_size(p.a_rows) * row_bytes);
        }
    }
    return p;
}

} // namespace backplane::cuda::kernels::mm

#pragma once
// Element-wise ops, computed in f32 as the CPU's reference kernels (cpu/kernels/binary.hpp,
// unary.hpp) compute them:
//   - add, sub, mul, div: dst = a op b, dst of a's type and shape (f32, f16, bf16), b of
//     any of those types, broadcast over a by repetition (b's index is a's index modulo
//     b's extent, in every dimension);
//   - scale (x * s + bias; s in param slot 0, bias in slot 1), sqr, sqrt, silu, gelu
//     (ggml's tanh approximation, in the CPU's form x / (1 + exp(-2u))), relu.
// Multiplies and adds are written as __fmul_rn / __fadd_rn and divisions as __fdiv_rn, so
// no build flag fuses or approximates them: results are the CPU's bits except where expf
// is involved (silu, gelu: CUDA's expf is within 2 ulp).
//
// Any strides; in place (dst sharing a's memory and layout) is fine, each element being
// read before the same element is written. Contiguous operands take vectorised kernels
// (4 values per thread) when aligned: flat for unary ops and same-shape binary ops, per
// row for a b broadcast by rows.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/copy.cuh> // elem_io
#include <backplane/core/unary_functions.hpp>

namespace backplane::cuda::kernels {

namespace ew_detail {

using namespace elem_io;

// -- the functions ---------------------------------------------------------------------

struct op_add {
    __device__ float operator()(float x, float y) const { return __fadd_rn(x, y); }
};
struct op_sub {
    __device__ float operator()(float x, float y) const { return __fsub_rn(x, y); }
};
struct op_mul {
    __device__ float operator()(float x, float y) const { return __fmul_rn(x, y); }
};
struct op_div {
    __device__ float operator()(float x, float y) const { return __fdiv_rn(x, y); }
};

struct op_scale {
    float s, bias;
    __device__ float operator()(float x) const { return __fadd_rn(__fmul_rn(x, s), bias); }
};
struct op_sqr {
    __device__ float operator()(float x) const { return __fmul_rn(x, x); }
};
struct op_sqrt {
    __device__ float operator()(float x) const { return __fsqrt_rn(x); }
};
struct op_silu {
    __device__ float operator()(float x) const { return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x))); }
};
/// 0.5x(1 + tanh(u)), u = sqrt(2/pi)(x + 0.044715x^3), as x / (1 + exp(-2u)) (the CPU's
/// form: no cancellation for negative x), in the CPU's order of operations.
struct op_gelu {
    __device__ float operator()(float x) const {
        constexpr float sqrt_2_over_pi = 0.79788456080286535588f;
        const float u = __fmul_rn(__fmul_rn(sqrt_2_over_pi, x), __fadd_rn(1.0f, __fmul_rn(__fmul_rn(0.044715f, x), x)));
        return __fdiv_rn(x, __fadd_rn(1.0f, expf(__fmul_rn(-2.0f, u))));
    }
};
struct op_relu {
    __device__ float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
struct op_neg {
    __device__ float operator()(float x) const { return -x; }
};

// -- binary ----------------------------------------------------------------------------

/// Any strides; b broadcast by repetition.
template <elem_type TA, elem_type TB, class Op>
__global__ void k_binary(tview d, tview a, tview b, Op op) {
    const i64 n0 = d.ne[0];
    const i64 bn0 = b.ne[0];
    const i64 rows = d.nrows();
    for (i64 r = row_first(); r < rows; r += row_step()) {
        i64 i1, i2, i3;
        unravel_row(r, d.ne, i1, i2, i3);
        char* pd = d.row(i1, i2, i3);
        const char* pa = a.row(i1, i2, i3);
        const char* pb = b.row(i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
        for (i64 i0 = col_first(); i0 < n0; i0 += col_step()) {
            const i64 j0 = bn0 == n0 ? i0 : bn0 == 1 ? 0 : i0 % bn0;
            st<TA>(pd + i0 * d.nb[0], op(ld<TA>(pa + i0 * a.nb[0]), ld<TB>(pb + j0 * b.nb[0])));
        }
    }
}

/// d, a and b contiguous with the same extents, aligned to 4 values: n values, 4 per
/// thread, then the tail.
template <elem_type TA, elem_type TB, class Op>
__global__ void k_binary_flat(char* d, const char* a, const char* b, i64 n, Op op) {
    constexpr i64 sa = unit_bytes<TA>, sb = unit_bytes<TB>;
    const i64 first = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
    const i64 step = static_cast<i64>(gridDim.x) * blockDim.x;
    const i64 nv = n / 4;
    for (i64 v = first; v < nv; v += step) {
        float x[4], y[4];
        ld4<TA>(a + v * 4 * sa, x);
        ld4<TB>(b + v * 4 * sb, y);
#pragma unroll
        for (int k = 0; k < 4; ++k) x[k] = op(x[k], y[k]);
        st4<TA>(d + v * 4 * sa, x);
    }
    for (i64 i = nv * 4 + first; i < n; i += step) st<TA>(d + i * sa, op(ld<TA>(a + i * sa), ld<TB>(b + i * sb)));
}

/// d and a contiguous, b's rows contiguous and as long as a's (b.nb0 = its element size,
/// b.ne0 = ne0, any row strides, broadcast over rows), ne0 a multiple of 4, every row
/// aligned to 4 values: 4 values per thread.
template <elem_type TA, elem_type TB, class Op>
__global__ void k_binary_rows4(char* d, const char* a, tview b, i64 ne0, i64 ne1, i64 ne2, i64 rows, Op op) {
    constexpr i64 sa = unit_bytes<TA>, sb = unit_bytes<TB>;
    const i64 nv = ne0 / 4;
    const bool one_row = b.ne[1] == 1 && b.ne[2] == 1 && b.ne[3] == 1;
    for (i64 r = row_first(); r < rows; r += row_step()) {
        i64 boff = 0;
        if (!one_row) {
            const i64 i1 = r % ne1, i23 = r / ne1;
            const i64 i2 = i23 % ne2, i3 = i23 / ne2;
            boff = (i1 % b.ne[1]) * b.nb[1] + (i2 % b.ne[2]) * b.nb[2] + (i3 % b.ne[3]) * b.nb[3];
        }
        char* pd = d + r * ne0 * sa;
        const char* pa = a + r * ne0 * sa;
        const char* pb = b.data + boff;
        for (i64 v = col_first(); v < nv; v += col_step()) {
            float x[4], y[4];
            ld4<TA>(pa + v * 4 * sa, x);
            ld4<TB>(pb + v * 4 * sb, y);
#pragma unroll
            for (int k = 0; k < 4; ++k) x[k] = op(x[k], y[k]);
            st4<TA>(pd + v * 4 * sa, x);
        }
    }
}

template <class Op>
cudaError_t binary(const tensor& node, const tensor& at, const tensor& bt, Op op, const detail::launch_context& ctx) noexcept {
    const tview d = view_of(node), a = view_of(at), b = view_of(bt);
    return visit_float(at.type, [&](auto atag) -> cudaError_t {
        constexpr elem_type TA = decltype(atag)::value;
        return visit_float(bt.type, [&](auto btag) -> cudaError_t {
            constexpr elem_type TB = decltype(btag)::value;
            constexpr std::size_t va = 4 * unit_bytes<TA>, vb = 4 * unit_bytes<TB>;
            const bool contiguous = node.is_contiguous() && at.is_contiguous();
            const bool vec_ok = contiguous && aligned(node.data, va) && aligned(at.data, va) && aligned(bt.data, vb);
            if (vec_ok && bt.is_contiguous() && bt.ne == at.ne) {
                const i64 n = node.nelements();
                k_binary_flat<TA, TB><<<blocks_for((n + 3) / 4, 256), 256, 0, ctx.stream>>>(
                    d.data, a.data, b.data, n, op);
                return cudaGetLastError();
            }
            bool rows4 = vec_ok && node.ne[0] % 4 == 0 && bt.ne[0] == node.ne[0] && b.nb[0] == unit_bytes<TB>;
            for (int i = 1; i < 4 && rows4; ++i)
                rows4 = b.ne[i] == 1 || b.nb[i] % static_cast<i64>(vb) == 0;
            if (rows4) {
                const rows_grid g = rows_geometry(node.ne[0] / 4, node.nrows());
                k_binary_rows4<TA, TB><<<g.grid, g.block, 0, ctx.stream>>>(
                    d.data, a.data, b, node.ne[0], node.ne[1], node.ne[2], node.nrows(), op);
                return cudaGetLastError();
            }
            const rows_grid g = rows_geometry(node.ne[0], node.nrows());
            k_binary<TA, TB><<<g.grid, g.block, 0, ctx.stream>>>(d, a, b, op);
            return cudaGetLastError();
        });
    });
}

// -- unary -----------------------------------------------------------------------------

/// Any strides.
template <elem_type T, class Op>
__global__ void k_unary(tview d, tview a, Op op) {
    const i64 n0 = d.ne[0];
    const i64 rows = d.nrows();
    for (i64 r = row_first(); r < rows; r += row_step()) {
        i64 i1, i2, i3;
        unravel_row(r, d.ne, i1, i2, i3);
        char* pd = d.row(i1, i2, i3);
        const char* pa = a.row(i1, i2, i3);
        for (i64 i0 = col_first(); i0 < n0; i0 += col_step())
            st<T>(pd + i0 * d.nb[0], op(ld<T>(pa + i0 * a.nb[0])));
    }
}

/// d and a contiguous, aligned to 4 values: n values, 4 per thread, then the tail.
template <elem_type T, class Op>
__global__ void k_unary_flat(char* d, const char* a, i64 n, Op op) {
    constexpr i64 s = unit_bytes<T>;
    const i64 first = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
    const i64 step = static_cast<i64>(gridDim.x) * blockDim.x;
    const i64 nv = n / 4;
    for (i64 v = first; v < nv; v += step) {
        float x[4];
        ld4<T>(a + v * 4 * s, x);
#pragma unroll
        for (int k = 0; k < 4; ++k) x[k] = op(x[k]);
        st4<T>(d + v * 4 * s, x);
    }
    for (i64 i = nv * 4 + first; i < n; i += step) st<T>(d + i * s, op(ld<T>(a + i * s)));
}

template <class Op>
cudaError_t unary(const tensor& node, const tensor& at, Op op, const detail::launch_context& ctx) noexcept {
    const tview d = view_of(node), a = view_of(at);
    return visit_float(at.type, [&](auto tag) -> cudaError_t {
        constexpr elem_type T = decltype(tag)::value;
        constexpr std::size_t v = 4 * unit_bytes<T>;
        if (node.is_contiguous() && at.is_contiguous() && aligned(node.data, v) && aligned(at.data, v)) {
            const i64 n = node.nelements();
            k_unary_flat<T><<<blocks_for((n + 3) / 4, 256), 256, 0, ctx.stream>>>(d.data, a.data, n, op);
        } else {
            const rows_grid g = rows_geometry(node.ne[0], node.nrows());
            k_unary<T><<<g.grid, g.block, 0, ctx.stream>>>(d, a, op);
        }
        return cudaGetLastError();
    });
}

} // namespace ew_detail

/// add / sub / mul / div (kernel_table::launch): a and b f32, f16 or bf16 in any
/// combination, dst of a's type and shape, b broadcast by repetition.
inline cudaError_t launch_binary(const tensor& node, const detail::launch_context& ctx) noexcept {
    const tensor* a = node.src[0];
    const tensor* b = node.src[1];
    if (a == nullptr || b == nullptr || node.type != a->type) return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    if (b->nelements() <= 0) return cudaErrorInvalidValue; // nothing to broadcast (refused by supports_op)
    switch (node.op) {
    case op_kind::add: return ew_detail::binary(node, *a, *b, ew_detail::op_add{}, ctx);
    case op_kind::sub: return ew_detail::binary(node, *a, *b, ew_detail::op_sub{}, ctx);
    case op_kind::mul: return ew_detail::binary(node, *a, *b, ew_detail::op_mul{}, ctx);
    case op_kind::div: return ew_detail::binary(node, *a, *b, ew_detail::op_div{}, ctx);
    default: return cudaErrorNotSupported;
    }
}

/// scale / sqr / sqrt / silu / gelu / relu / neg and the functions of
/// core/unary_functions.hpp (kernel_table::launch): f32, f16 or bf16, dst of a's type and
/// shape.
inline cudaError_t launch_unary(const tensor& node, const detail::launch_context& ctx) noexcept {
    const tensor* a = node.src[0];
    if (a == nullptr || node.type != a->type) return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    switch (node.op) {
    case op_kind::scale:
        return ew_detail::unary(node, *a, ew_detail::op_scale{node.param<float>(0), node.param<float>(1)}, ctx);
    case op_kind::sqr: return ew_detail::unary(node, *a, ew_detail::op_sqr{}, ctx);
    case op_kind::sqrt: return ew_detail::unary(node, *a, ew_detail::op_sqrt{}, ctx);
    case op_kind::silu: return ew_detail::unary(node, *a, ew_detail::op_silu{}, ctx);
    case op_kind::gelu: return ew_detail::unary(node, *a, ew_detail::op_gelu{}, ctx);
    case op_kind::relu: return ew_detail::unary(node, *a, ew_detail::op_relu{}, ctx);
    case op_kind::neg: return ew_detail::unary(node, *a, ew_detail::op_neg{}, ctx);
    default: break;
    }
    cudaError_t err = cudaErrorNotSupported;
    unary_fn::with_unary_function(node, [&](auto fn) { err = ew_detail::unary(node, *a, fn, ctx); });
    return err;
}

} // namespace backplane::cuda::kernels

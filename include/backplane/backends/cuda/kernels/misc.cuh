#pragma once
// repeat, repeat_back, cumsum, tri, diag and timestep_embedding, as the CPU's reference
// kernels (backends/cpu/kernels/misc.hpp): repeat, tri and diag copy values as bits (U:
// an unsigned integer of the element's size) and write zeros elsewhere; repeat_back sums
// in double; cumsum adds in f32 from the left (one thread per row); timestep_embedding
// computes in f32 (expf, cosf, sinf); count_equal counts per thread and adds with one
// atomicAdd each; acc adds b in f32 through core/acc_view.hpp's view. Any strides.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/copy.cuh> // elem_io
#include <backplane/core/acc_view.hpp>
#include <backplane/core/tri_type.hpp>

#include <cmath>
#include <cstdint>

namespace backplane::cuda::kernels {

namespace misc_detail {

using namespace elem_io;

/// Which element of a each element of dst copies.
enum class pick : int { repeat, tri, diag };

__device__ __forceinline__ const char* element(const tview& t, i64 i0, i64 i1, i64 i2, i64 i3) {
    return t.row(i1, i2, i3) + i0 * t.nb[0];
}

/// The element of a that dst's element (i0, i1, i2, i3) copies, or null for a zero.
__device__ __forceinline__ const char* source_of(pick how, const tview& a, std::int32_t type, i64 i0, i64 i1, i64 i2,
                                                 i64 i3) {
    switch (how) {
    case pick::repeat: return element(a, i0 % a.ne[0], i1 % a.ne[1], i2 % a.ne[2], i3 % a.ne[3]);
    case pick::tri: return tri_keeps(type, i0, i1) ? element(a, i0, i1, i2, i3) : nullptr;
    default: return i0 == i1 ? element(a, i0, 0, i2, i3) : nullptr;
    }
}

template <class U>
__global__ void k_copy_or_zero(tview d, tview a, pick how, std::int32_t type) {
    const i64 rows = d.nrows();
    for (i64 r = row_first(); r < rows; r += row_step()) {
        i64 i1, i2, i3;
        unravel_row(r, d.ne, i1, i2, i3);
        char* pd = d.row(i1, i2, i3);
        for (i64 i0 = col_first(); i0 < d.ne[0]; i0 += col_step()) {
            const char* s = source_of(how, a, type, i0, i1, i2, i3);
            *reinterpret_cast<U*>(pd + i0 * d.nb[0]) = s != nullptr ? *reinterpret_cast<const U*>(s) : U{0};
        }
    }
}

__global__ void k_repeat_back(tview d, tview a) {
    const i64 rows = d.nrows();
    for (i64 r = row_first(); r < rows; r += row_step()) {
        i64 i1, i2, i3;
        unravel_row(r, d.ne, i1, i2, i3);
        for (i64 i0 = col_first(); i0 < d.ne[0]; i0 += col_step()) {
            double sum = 0.0;
            for (i64 j3 = i3; j3 < a.ne[3]; j3 += d.ne[3])
                for (i64 j2 = i2; j2 < a.ne[2]; j2 += d.ne[2])
                    for (i64 j1 = i1; j1 < a.ne[1]; j1 += d.ne[1])
                        for (i64 j0 = i0; j0 < a.ne[0]; j0 += d.ne[0])
                            sum += *reinterpret_cast<const float*>(element(a, j0, j1, j2, j3));
            *reinterpret_cast<float*>(d.row(i1, i2, i3) + i0 * d.nb[0]) = static_cast<float>(sum);
        }
    }
}

__global__ void k_cumsum(tview d, tview a) {
    const i64 rows = d.nrows();
    for (i64 r = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
         r += static_cast<i64>(gridDim.x) * blockDim.x) {
        i64 i1, i2, i3;
        unravel_row(r, d.ne, i1, i2, i3);
        float sum = 0.0f;
        for (i64 i0 = 0; i0 < d.ne[0]; ++i0) {
            const float x = *reinterpret_cast<const float*>(element(a, i0, i1, i2, i3));
            sum = i0 == 0 ? x : __fadd_rn(sum, x);
            *reinterpret_cast<float*>(d.row(i1, i2, i3) + i0 * d.nb[0]) = sum;
        }
    }
}

__global__ void k_timestep_embedding(tview d, tview a, int half, float log_period) {
    const i64 rows = d.nrows();
    for (i64 r = row_first(); r < rows; r += row_step()) {
        const float t = *reinterpret_cast<const float*>(element(a, r, 0, 0, 0));
        for (i64 i0 = col_first(); i0 < d.ne[0]; i0 += col_step()) {
            const int j = static_cast<int>(i0 < half ? i0 : i0 - half);
            const float arg = __fmul_rn(t, expf(__fdiv_rn(__fmul_rn(-log_period, static_cast<float>(j)), static_cast<float>(half))));
            const float v = i0 < half ? cosf(arg) : i0 < 2 * static_cast<i64>(half) ? sinf(arg) : 0.0f;
            *reinterpret_cast<float*>(d.row(r, 0, 0) + i0 * d.nb[0]) = v;
        }
    }
}

__global__ void k_count_equal(tview a, tview b, unsigned long long* count) {
    const i64 n = a.nelements();
    unsigned long long mine = 0;
    for (i64 e = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += static_cast<i64>(gridDim.x) * blockDim.x) {
        const i64 i0 = e % a.ne[0];
        i64 i1, i2, i3;
        unravel_row(e / a.ne[0], a.ne, i1, i2, i3);
        mine += *reinterpret_cast<const std::int32_t*>(element(a, i0, i1, i2, i3)) ==
                *reinterpret_cast<const std::int32_t*>(element(b, i0, i1, i2, i3));
    }
    if (mine != 0) atomicAdd(count, mine);
}

__global__ void k_acc(tview d, tview a, tview b, acc_view view) {
    const i64 rows = d.nrows();
    const bool any = b.nelements() > 0;
    for (i64 r = row_first(); r < rows; r += row_step()) {
        i64 i1, i2, i3;
        unravel_row(r, d.ne, i1, i2, i3);
        for (i64 i0 = col_first(); i0 < d.ne[0]; i0 += col_step()) {
            const char* pa = element(a, i0, i1, i2, i3);
            float v = *reinterpret_cast<const float*>(pa);
            i64 j[4] = {};
            if (any && acc_source(view, b.ne, pa - a.data, j))
                v = __fadd_rn(v, *reinterpret_cast<const float*>(element(b, j[0], j[1], j[2], j[3])));
            *reinterpret_cast<float*>(d.row(i1, i2, i3) + i0 * d.nb[0]) = v;
        }
    }
}

inline cudaError_t launch_copy_or_zero(const tview& d, const tview& a, pick how, std::int32_t type, cudaStream_t s) {
    const rows_grid g = rows_geometry(d.ne[0], d.nrows());
    if (type_size(d.type) == 4)
        k_copy_or_zero<std::uint32_t><<<g.grid, g.block, 0, s>>>(d, a, how, type);
    else
        k_copy_or_zero<std::uint16_t><<<g.grid, g.block, 0, s>>>(d, a, how, type);
    return cudaGetLastError();
}

} // namespace misc_detail

/// repeat (f32, f16, bf16, i32), repeat_back, cumsum, tri, diag, timestep_embedding, acc
/// (f32), count_equal (i32) (kernel_table::launch).
inline cudaError_t launch_misc(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace misc_detail;
    const tensor* a = node.src[0];
    if (a == nullptr || (a->type != node.type && node.op != op_kind::count_equal)) return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    const tview d = view_of(node), va = view_of(*a);
    switch (node.op) {
    case op_kind::repeat: return launch_copy_or_zero(d, va, pick::repeat, 0, ctx.stream);
    case op_kind::tri: return launch_copy_or_zero(d, va, pick::tri, node.param<std::int32_t>(0), ctx.stream);
    case op_kind::diag: return launch_copy_or_zero(d, va, pick::diag, 0, ctx.stream);
    case op_kind::repeat_back: {
        const rows_grid g = rows_geometry(d.ne[0], d.nrows());
        k_repeat_back<<<g.grid, g.block, 0, ctx.stream>>>(d, va);
        return cudaGetLastError();
    }
    case op_kind::cumsum:
        k_cumsum<<<blocks_for(d.nrows(), 128), 128, 0, ctx.stream>>>(d, va);
        return cudaGetLastError();
    case op_kind::count_equal: {
        if (cudaError_t e = cudaMemsetAsync(d.data, 0, sizeof(std::int64_t), ctx.stream); e != cudaSuccess) return e;
        k_count_equal<<<blocks_for(va.nelements(), 256 * 8), 256, 0, ctx.stream>>>(va, view_of(*node.src[1]),
                                                                              reinterpret_cast<unsigned long long*>(d.data));
        return cudaGetLastError();
    }
    case op_kind::acc: {
        const rows_grid g = rows_geometry(d.ne[0], d.nrows());
        k_acc<<<g.grid, g.block, 0, ctx.stream>>>(d, va, view_of(*node.src[1]), acc_view_of(node));
        return cudaGetLastError();
    }
    case op_kind::timestep_embedding: {
        const rows_grid g = rows_geometry(d.ne[0], d.nrows());
        k_timestep_embedding<<<g.grid, g.block, 0, ctx.stream>>>(d, va, node.param<std::int32_t>(0) / 2,
                                                                 std::log(static_cast<float>(node.param<std::int32_t>(1))));
        return cudaGetLastError();
    }
    default: return cudaErrorNotSupported;
    }
}

} // namespace backplane::cuda::kernels

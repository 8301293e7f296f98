#pragma once
// The CUDA backend's kernels (nvcc only). One header per op family under kernels/; this
// one routes a node to its family and, in the one translation unit that defines
// BACKPLANE_CUDA_DEFINE_KERNEL_TABLE before including it, defines the kernel table the
// host code calls (kernel_api.hpp). backplane::cuda compiles that translation unit
// (src/backplane_cuda_kernels.cu) for you.
//
// Every family handles any layout its op accepts (byte strides, views, permutations,
// broadcasting) and every type combination the op table's rules allow
// (core/op_traits.hpp): the CUDA backend refuses no valid node.

#ifndef __CUDACC__
#error "<backplane/backends/cuda/kernels.cuh> holds CUDA kernels: include it only from a translation unit compiled by nvcc (linking backplane::cuda builds it for you)"
#endif

#include <backplane/backends/cuda/kernel_api.hpp>
#include <backplane/backends/cuda/kernels/add_id.cuh>
#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/concat.cuh>
#include <backplane/backends/cuda/kernels/conv.cuh>
#include <backplane/backends/cuda/kernels/copy.cuh>
#include <backplane/backends/cuda/kernels/elementwise.cuh>
#include <backplane/backends/cuda/kernels/flash_attn.cuh>
#include <backplane/backends/cuda/kernels/get_rows.cuh>
#include <backplane/backends/cuda/kernels/glu.cuh>
#include <backplane/backends/cuda/kernels/image.cuh>
#include <backplane/backends/cuda/kernels/layout.cuh>
#include <backplane/backends/cuda/kernels/misc.cuh>
#include <backplane/backends/cuda/kernels/out_prod.cuh>
#include <backplane/backends/cuda/kernels/recurrent.cuh>
#include <backplane/backends/cuda/kernels/mul_mat.cuh>
#include <backplane/backends/cuda/kernels/mul_mat_id.cuh>
#include <backplane/backends/cuda/kernels/rope.cuh>
#include <backplane/backends/cuda/kernels/rows.cuh>
#include <backplane/backends/cuda/kernels/set_rows.cuh>
#include <backplane/backends/cuda/kernels/sort.cuh>
#include <backplane/core/op_traits.hpp>

namespace backplane::cuda::kernels {

/// Scratch bytes of a node (kernel_table::scratch_bytes).
inline std::size_t scratch_bytes(const tensor& node, const detail::launch_context& ctx) noexcept {
    switch (node.op) {
    case op_kind::mul_mat: return mul_mat_scratch(node, ctx);
    case op_kind::argsort:
    case op_kind::top_k: return sort_scratch(node, ctx);
    default: return 0;
    }
}

/// Queues node's kernels (kernel_table::launch).
inline cudaError_t launch(const tensor& node, const detail::launch_context& ctx) noexcept {
    if (is_binary_elementwise(node.op)) return launch_binary(node, ctx);
    if (is_unary_elementwise(node.op)) return launch_unary(node, ctx);
    if (is_copy(node.op)) return launch_copy(node, ctx);
    switch (node.op) {
    case op_kind::sum_rows:
    case op_kind::mean:
    case op_kind::sum:
    case op_kind::argmax:
    case op_kind::norm:
    case op_kind::rms_norm:
    case op_kind::l2_norm:
    case op_kind::group_norm: return launch_rows(node, ctx);
    case op_kind::soft_max: return launch_soft_max(node, ctx);
    case op_kind::argsort:
    case op_kind::top_k: return launch_sort(node, ctx);
    case op_kind::mul_mat: return launch_mul_mat(node, ctx);
    case op_kind::get_rows: return launch_get_rows(node, ctx);
    case op_kind::rope: return launch_rope(node, ctx);
    case op_kind::concat: return launch_concat(node, ctx);
    case op_kind::glu: return launch_glu(node, ctx);
    case op_kind::set_rows: return launch_set_rows(node, ctx);
    case op_kind::pad: return launch_pad(node, ctx);
    case op_kind::arange: return launch_arange(node, ctx);
    case op_kind::mul_mat_id: return launch_mul_mat_id(node, ctx);
    case op_kind::add_id: return launch_add_id(node, ctx);
    case op_kind::flash_attn_ext: return launch_flash_attn(node, ctx);
    case op_kind::repeat:
    case op_kind::repeat_back:
    case op_kind::cumsum:
    case op_kind::tri:
    case op_kind::diag:
    case op_kind::timestep_embedding:
    case op_kind::count_equal:
    case op_kind::acc: return launch_misc(node, ctx);
    case op_kind::out_prod: return launch_out_prod(node, ctx);
    case op_kind::im2col: return launch_im2col(node, ctx);
    case op_kind::conv_2d: return launch_conv_2d(node, ctx);
    case op_kind::conv_transpose_1d:
    case op_kind::conv_transpose_2d: return launch_conv_transpose(node, ctx);
    case op_kind::conv_2d_dw: return launch_conv_2d_dw(node, ctx);
    case op_kind::win_part:
    case op_kind::win_unpart:
    case op_kind::get_rel_pos: return launch_window(node, ctx);
    case op_kind::pool_1d:
    case op_kind::pool_2d: return launch_pool(node, ctx);
    case op_kind::upscale: return launch_upscale(node, ctx);
    case op_kind::pad_reflect_1d:
    case op_kind::roll: return launch_remap(node, ctx);
    case op_kind::ssm_conv:
    case op_kind::ssm_scan:
    case op_kind::gated_linear_attn:
    case op_kind::rwkv_wkv6:
    case op_kind::rwkv_wkv7: return launch_recurrent(node, ctx);
    default: return cudaErrorNotSupported;
    }
}

} // namespace backplane::cuda::kernels

#ifdef BACKPLANE_CUDA_DEFINE_KERNEL_TABLE
const backplane::cuda::detail::kernel_table& backplane::cuda::detail::kernel_table_instance() noexcept {
    static const kernel_table table = [] {
        kernel_table t;
        t.version = kernel_api_version;
        t.with_cublas = kernels::with_cublas;
        t.scratch_bytes = &kernels::scratch_bytes;
        t.launch = &kernels::launch;
        t.cublas_create = &kernels::cublas_create;
        t.cublas_destroy = &kernels::cublas_destroy;
        return t;
    }();
    return table;
}
#endif

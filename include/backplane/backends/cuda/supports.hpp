#pragma once
// What the CUDA backend computes: every node the CPU backend computes (cpu::supports_op,
// the table in backends/cpu/supports.hpp), in any layout. The kernels
// (kernels/*.cuh) read every tensor through its byte strides, so views, permutations,
// broadcasting and strided rows need no copies on the host side; the fast paths
// (contiguous rows, tensor cores, cuBLAS) are chosen per node inside the kernels.

#include <backplane/backends/cpu/supports.hpp>
#include <backplane/core/tensor.hpp>

namespace backplane::cuda {

/// Whether the CUDA kernels compute t (views and leafs compute nothing: always).
inline bool supports_op(const tensor& t) noexcept {
    if (t.op == op_kind::none || is_view_op(t.op)) return true;
    return cpu::supports_op(t);
}

} // namespace backplane::cuda

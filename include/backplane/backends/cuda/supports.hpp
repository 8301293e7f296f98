#pragma once
// What the CUDA backend computes: every node its op defines (core/op_traits.hpp, whose
// header lists the rules), in any layout, except flash_attn_ext (no kernel yet). The kernels (kernels/*.cuh) read every tensor
// through its byte strides, so views, permutations, broadcasting and strided rows need no
// copies on the host side; the fast paths (contiguous rows, tensor cores, cuBLAS) are
// chosen per node inside the kernels.

#include <backplane/core/op_traits.hpp>
#include <backplane/core/tensor.hpp>

namespace backplane::cuda {

/// What the CUDA kernels narrow from a node its op defines: flash_attn_ext, which has no
/// CUDA kernel yet (the scheduler places it on another backend).
constexpr bool supports_defined_op(const tensor& t) noexcept { return t.op != op_kind::flash_attn_ext; }

/// Whether the CUDA kernels compute t (views and leafs compute nothing).
inline bool supports_op(const tensor& t) noexcept { return is_defined(t) && supports_defined_op(t); }

} // namespace backplane::cuda

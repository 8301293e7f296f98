#pragma once
// What the CUDA backend computes: every node its op defines (core/op_traits.hpp, whose
// header lists the rules), in any layout. The kernels (kernels/*.cuh) read every tensor
// through its byte strides, so views, permutations, broadcasting and strided rows need no
// copies on the host side; the fast paths (contiguous rows, tensor cores, cuBLAS) are
// chosen per node inside the kernels.

#include <backplane/core/op_traits.hpp>
#include <backplane/core/tensor.hpp>

namespace backplane::cuda {

/// Whether the CUDA kernels compute t (views and leafs compute nothing).
inline bool supports_op(const tensor& t) noexcept { return is_defined(t); }

} // namespace backplane::cuda

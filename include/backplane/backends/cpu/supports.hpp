#pragma once
// What the CPU backend computes: every node its op defines (core/op_traits.hpp, whose
// header lists the rules), in any layout. The CPU is the reference: it narrows nothing,
// so no valid graph is refused by it, and the other backends narrow from here.

#include <backplane/core/op_traits.hpp>
#include <backplane/core/tensor.hpp>

namespace backplane::cpu {

/// What the CPU narrows from a node its op defines: nothing.
constexpr bool supports_defined_op(const tensor&) noexcept { return true; }

/// True when compute_forward computes t (its op, with its element types) correctly.
inline bool supports_op(const tensor& t) noexcept { return is_defined(t) && supports_defined_op(t); }

} // namespace backplane::cpu

#pragma once
// How a builder makes a computing node: it describes the node it is about to make (result
// type and extents, sources, parameters), the op's rule (core/op_traits.hpp) judges that
// description, and only a node the op defines is made in the context. A refused node
// leaves nothing behind; the error names the op, the rule's reason and the operands.

#include <backplane/core/context.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/core/op_traits.hpp>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <utility>

namespace backplane::detail {

using operand_list = std::initializer_list<std::pair<std::string_view, const tensor*>>;

/// The node op would make: a result of `type` and extents `ne` (contiguous) over `srcs`.
/// Parameters are set on it with set_param before make_node.
inline tensor proposed(op_kind op, elem_type type, const std::array<std::int64_t, max_dims>& ne,
                       std::initializer_list<tensor*> srcs) {
    tensor t;
    t.op = op;
    t.type = type;
    t.ne = ne;
    t.nb = contiguous_strides(type, ne);
    std::size_t j = 0;
    for (tensor* s : srcs) t.src[j++] = s;
    return t;
}

/// Throws the op's error when `node` is not a node its op defines.
inline void require_defined(const tensor& node, operand_list operands) {
    const std::string_view why = why_undefined(node);
    if (!why.empty()) op_error(to_string(node.op), why, operands);
}

/// Checks `node` (from proposed()) and makes it in ctx, with memory of its own.
inline tensor* make_node(context& ctx, const tensor& node, operand_list operands) {
    require_defined(node, operands);
    tensor* r = ctx.new_result(node.type, node.ne);
    r->op = node.op;
    r->src = node.src;
    r->op_params = node.op_params;
    return r;
}

} // namespace backplane::detail

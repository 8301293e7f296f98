#pragma once
// What each op is, in one place: a row per op_kind with everything generic about it (its
// name, its sources, its parameters, whether it computes anything, whether its result
// may take its first source's memory, the family of work it is). Whatever asks one of
// these questions reads the row: the graph builders, the graph allocator, the cost model,
// the backends. A backend narrows the answers (what it computes); it never restates them.
// Adding an op: docs/adding-an-op.md.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace backplane {

/// The core op set. View ops (view, reshape, permute, transpose) compute nothing.
enum class op_kind : std::uint8_t {
    none, // a leaf: data provided from outside
    dup,
    cpy,
    cont,
    view,
    reshape,
    permute,
    transpose,
    add,
    sub,
    mul,
    div,
    scale,
    sqr,
    sqrt,
    sum_rows,
    mul_mat,
    get_rows,
    rms_norm,
    norm,
    soft_max,
    rope,
    silu,
    gelu,
    relu,
    concat,
    argmax,
};
inline constexpr std::size_t op_kind_count = static_cast<std::size_t>(op_kind::argmax) + 1;

/// The kind of work an op is (the cost model prices each family by its own rate).
enum class op_family : std::uint8_t {
    none,        ///< computes nothing: leafs and views
    mul_mat,     ///< matrix products: compute- or weight-bound
    elementwise, ///< each result element from the same elements of the sources: memory-bound
    rows,        ///< per-row reductions and transforms: norms, soft_max, rope, sum_rows, argmax
    data,        ///< data movement: copies, cont, get_rows, concat
};

/// The generic facts of one op.
struct op_traits {
    std::string_view name;  ///< as ggml names the op (lower case)
    std::uint8_t min_srcs;  ///< sources that must be set (src[0] .. src[min_srcs - 1])
    std::uint8_t max_srcs;  ///< sources it may have; those past min_srcs are optional
    std::uint8_t n_params;  ///< op_params slots it reads
    bool view;              ///< reinterprets src[0]'s memory: computes nothing
    bool inplace;           ///< its result may be written over src[0] (same layout, last reader)
    op_family family;
};

namespace detail {
using fam = op_family;
/// One row per op_kind, in its order. Sources and parameters, by op:
///   cpy (a, destination); permute, transpose (axes[4]); scale (s, bias);
///   rms_norm, norm (eps); soft_max (a, optional mask; scale); rope (a, positions;
///   n_dims, mode, freq_base, freq_scale); concat (a, b; dim); get_rows (a, indices).
inline constexpr std::array<op_traits, op_kind_count> op_table = {{
    // name       srcs  params view   inplace family
    {"none",      0, 0, 0, false, false, fam::none},
    {"dup",       1, 1, 0, false, false, fam::data},
    {"cpy",       2, 2, 0, false, false, fam::data},
    {"cont",      1, 1, 0, false, false, fam::data},
    {"view",      1, 1, 0, true,  false, fam::none},
    {"reshape",   1, 1, 0, true,  false, fam::none},
    {"permute",   1, 1, 4, true,  false, fam::none},
    {"transpose", 1, 1, 4, true,  false, fam::none},
    {"add",       2, 2, 0, false, true,  fam::elementwise},
    {"sub",       2, 2, 0, false, true,  fam::elementwise},
    {"mul",       2, 2, 0, false, true,  fam::elementwise},
    {"div",       2, 2, 0, false, true,  fam::elementwise},
    {"scale",     1, 1, 2, false, true,  fam::elementwise},
    {"sqr",       1, 1, 0, false, true,  fam::elementwise},
    {"sqrt",      1, 1, 0, false, true,  fam::elementwise},
    {"sum_rows",  1, 1, 0, false, false, fam::rows},
    {"mul_mat",   2, 2, 0, false, false, fam::mul_mat},
    {"get_rows",  2, 2, 0, false, false, fam::data},
    {"rms_norm",  1, 1, 1, false, true,  fam::rows},
    {"norm",      1, 1, 1, false, false, fam::rows},
    {"soft_max",  1, 2, 1, false, true,  fam::rows},
    {"rope",      2, 2, 4, false, true,  fam::rows},
    {"silu",      1, 1, 0, false, true,  fam::elementwise},
    {"gelu",      1, 1, 0, false, true,  fam::elementwise},
    {"relu",      1, 1, 0, false, true,  fam::elementwise},
    {"concat",    2, 2, 1, false, false, fam::data},
    {"argmax",    1, 1, 0, false, false, fam::rows},
}};

/// The row answered for a value outside op_kind (read from a corrupt or hand-made tensor).
inline constexpr op_traits unknown_op{"?", 0, 0, 0, false, false, fam::none};

consteval bool op_table_in_order() {
    // names are unique and none is empty: a row added out of order shows up as a
    // duplicate or a missing name
    for (std::size_t i = 0; i < op_kind_count; ++i) {
        if (op_table[i].name.empty() || op_table[i].min_srcs > op_table[i].max_srcs) return false;
        for (std::size_t j = 0; j < i; ++j)
            if (op_table[i].name == op_table[j].name) return false;
    }
    return op_table[static_cast<std::size_t>(op_kind::argmax)].name == "argmax";
}
static_assert(op_table_in_order(), "op_table has one row per op_kind, in its order");
} // namespace detail

/// The generic facts of op (unknown_op's for a value outside op_kind).
constexpr const op_traits& traits(op_kind op) noexcept {
    const auto i = static_cast<std::size_t>(op);
    return i < op_kind_count ? detail::op_table[i] : detail::unknown_op;
}

constexpr std::string_view to_string(op_kind op) noexcept { return traits(op).name; }

/// True for ops that only reinterpret their source's memory.
constexpr bool is_view_op(op_kind op) noexcept { return traits(op).view; }

/// True for the values op_kind names.
constexpr bool is_valid(op_kind op) noexcept { return static_cast<std::size_t>(op) < op_kind_count; }

} // namespace backplane

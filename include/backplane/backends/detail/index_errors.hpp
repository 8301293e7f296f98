#pragma once
// Index errors of device backends: what a kernel found out of range, as a status.
//
// A get_rows index outside its source's rows, a set_rows index outside its destination's
// rows, a mul_mat_id or add_id expert id outside its experts and an ssm_scan state id
// outside its states is errc::out_of_range on
// every backend. The CPU sees it while computing; a device kernel runs after compute()
// returned, so it never reads or writes out of bounds (get_rows writes the row with
// zeros, mul_mat_id the column, add_id the row, set_rows writes nothing, as on the CPU) and raises a flag
// in a small device-side error word instead. The backend keeps the nodes that can raise
// it (index_checks), and synchronize() turns a raised flag into the status, naming the
// node, in the CPU's words.

#include <backplane/core/detail/describe.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane::detail {

/// Whether a kernel of this node reads or writes at indices found in its data (and checks
/// them).
constexpr bool reads_by_index(op_kind op) noexcept {
    return op == op_kind::get_rows || op == op_kind::set_rows || op == op_kind::mul_mat_id || op == op_kind::add_id ||
           op == op_kind::ssm_scan;
}

/// What an index out of range in node means, in the CPU's words.
inline std::string index_error_of(const tensor& node) {
    if (node.op == op_kind::mul_mat_id)
        return "mul_mat_id node " + describe(&node) + " reads outside a source (an expert id beyond the experts of " +
               describe(node.src[0]) + "; its columns are zeros)";
    if (node.op == op_kind::add_id)
        return "add_id node " + describe(&node) + " reads outside a source (an expert id beyond the rows of " +
               describe(node.src[1]) + "; its rows are zeros)";
    if (node.op == op_kind::ssm_scan)
        return "ssm_scan node " + describe(&node) + " reads outside a source (a state id beyond the states of " +
               describe(node.src[0]) + "; that sequence's outputs and states are zeros)";
    if (node.op == op_kind::set_rows)
        return "set_rows node " + describe(&node) + " writes outside its destination (a set_rows index beyond the rows of " +
               describe(node.src[2]) + "; the rows it could not write are left as they were)";
    return "get_rows node " + describe(&node) + " reads outside a source (a get_rows index beyond the rows of " +
           describe(node.src[0]) + "; the rows it could not read are zeros)";
}

/// The nodes queued since the last synchronize whose kernels check their indices.
class index_checks {
public:
    /// Past this many distinct nodes, the message names no more.
    static constexpr std::size_t max_named = 8;

    /// Notes a node of a queued compute (nothing when its op reads by no index).
    void note(const tensor& node) {
        if (!reads_by_index(node.op)) return;
        std::string what = index_error_of(node);
        for (const auto& n : named_)
            if (n == what) return;
        if (named_.size() < max_named)
            named_.push_back(std::move(what));
        else
            more_ = true;
    }

    /// The status for the error flag (`raised`), and forgets the nodes: ok when nothing
    /// was raised, else errc::out_of_range naming the node that could raise it (the
    /// candidates when several could).
    [[nodiscard]] status take(bool raised, std::string_view prefix) {
        const std::vector<std::string> named = std::exchange(named_, {});
        const bool more = std::exchange(more_, false);
        if (!raised) return {};
        std::string msg(prefix);
        if (named.size() == 1 && !more) {
            msg += named.front();
        } else {
            msg += "an index is beyond the rows it names in one of the nodes queued since the last synchronize:";
            for (const auto& n : named) msg += " " + n + ";";
            if (more) msg += " or another;";
        }
        return {errc::out_of_range, std::move(msg)};
    }

private:
    std::vector<std::string> named_;
    bool more_ = false; // more nodes than max_named were noted
};

} // namespace backplane::detail

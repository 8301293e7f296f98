#pragma once
// The CPU backend: computes graphs on the host, node after node.

#include <backplane/backends/cpu/compute.hpp>
#include <backplane/backends/cpu/device.hpp>
#include <backplane/core/concepts.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace backplane {

class cpu_backend {
public:
    /// Called between nodes; returning true stops the compute, which then returns
    /// errc::aborted.
    using abort_callback = std::function<bool()>;

    cpu_backend() = default;

    [[nodiscard]] std::string_view name() const noexcept { return "CPU"; }
    [[nodiscard]] const cpu_device& device() const noexcept { return cpu_device::instance(); }
    [[nodiscard]] const cpu_buffer_type& buffer_type() const noexcept { return cpu_buffer_type::instance(); }
    [[nodiscard]] bool supports_op(const tensor& t) const noexcept { return cpu::supports_op(t); }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const { return bt.is_host(); }

    void set_abort_callback(abort_callback cb) { abort_ = std::move(cb); }

    /// Computes the nodes of g in order. Every node and source must have host data
    /// (context data or a host buffer); an unsupported node is a status, not an abort.
    status compute(graph_view g) {
        for (tensor* node : g) {
            if (abort_ && abort_()) return {errc::aborted, "cpu: compute aborted by the abort callback"};
            if (is_view_op(node->op) || node->op == op_kind::none) continue;
            if (auto s = check_node(*node); !s) return s;
            if (errc e = cpu::compute_forward(cpu::compute_params{}, *node); e != errc::ok)
                return {e, "cpu: " + std::string(to_string(node->op)) + " node '" + node->name +
                               "' reads outside a source (a get_rows index beyond the rows of '" +
                               (node->src[0] ? node->src[0]->name : std::string()) + "')"};
        }
        return {};
    }
    status synchronize() noexcept { return {}; }

private:
    static status host_data(const tensor& t, const tensor& node, const char* role) {
        if (t.data == nullptr)
            return {errc::invalid_argument,
                    "cpu: " + std::string(role) + " '" + t.name + "' of node '" + node.name + "' (" +
                        std::string(to_string(node.op)) + ") has no data; allocate the graph first"};
        if (t.buffer != nullptr && !t.buffer->is_host())
            return {errc::invalid_argument, "cpu: " + std::string(role) + " '" + t.name + "' of node '" + node.name +
                                                "' lives in a non-host buffer (" + std::string(t.buffer->type().name()) +
                                                ")"};
        return {};
    }
    static status check_node(const tensor& node) {
        if (!cpu::supports_op(node))
            return {errc::not_supported, "cpu: op " + std::string(to_string(node.op)) + " on node '" + node.name +
                                             "' with these types or layouts is not supported"};
        if (auto s = host_data(node, node, "output"); !s) return s;
        for (const tensor* s : node.src)
            if (s != nullptr)
                if (auto st = host_data(*s, node, "source"); !st) return st;
        return {};
    }

    abort_callback abort_;
};

inline cpu_backend cpu_device::make_backend() const { return cpu_backend{}; }

static_assert(backplane::device<cpu_device>);
static_assert(backplane::host_buffer_device<cpu_device>);
static_assert(backplane::host_ptr_device<cpu_device>);
static_assert(backplane::backend<cpu_backend>);
static_assert(backplane::host_backend<cpu_backend>);

} // namespace backplane

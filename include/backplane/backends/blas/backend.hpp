#pragma once
// The BLAS backend: big mul_mats through the BLAS library's sgemm, on host memory.
//
//   blas_backend blas({.n_threads = 8});        // or blas_device::instance().make_backend()
//   if (blas.supports_op(*node)) ...            // mul_mat f32 x f32/f16/bf16, big enough
//   status s = blas.compute(g);                 // every node checked first, then computed
//
// It computes mul_mat only (blas::supports_op, backends/blas/supports.hpp, says exactly
// which); view ops and leafs compute nothing and are accepted anywhere in a graph. Its
// buffer type is the CPU's, so in a scheduler listed before the CPU backend it takes
// over the big products of a graph whose tensors live in CPU buffers (the upgrade pass)
// and leaves everything else to the CPU. A backend is a stream: one compute at a time.

#include <backplane/backends/blas/device.hpp>
#include <backplane/backends/blas/mul_mat.hpp>
#include <backplane/backends/blas/supports.hpp>
#include <backplane/core/concepts.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

namespace backplane {

namespace blas::detail {

inline int hardware_threads() noexcept {
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
}

/// t has data the host can read and write (context data, or a host buffer).
inline status host_data(const tensor& t, const tensor& node, const char* role) {
    if (t.data == nullptr)
        return {errc::invalid_argument, "blas: " + std::string(role) + " " + backplane::detail::describe(&t) +
                                            " of node " + backplane::detail::describe(&node) + " (" +
                                            std::string(to_string(node.op)) + ") has no data; allocate the graph first"};
    if (t.buffer != nullptr && !t.buffer->is_host())
        return {errc::invalid_argument, "blas: " + std::string(role) + " " + backplane::detail::describe(&t) +
                                            " of node " + backplane::detail::describe(&node) +
                                            " lives in a non-host buffer (" + std::string(t.buffer->type().name()) +
                                            ")"};
    return {};
}

/// The node can be computed here: supports_op with this min_batch, and host data for it
/// and its sources.
inline status check_node(const tensor& node, int min_batch) {
    if (const std::string_view why = refusal(node, min_batch); !why.empty()) {
        std::string msg = "blas: node " + backplane::detail::describe(&node) + " (" +
                          std::string(to_string(node.op)) + ") is not supported: " + std::string(why);
        const char* sep = "; ";
        for (const tensor* s : node.src) {
            if (s == nullptr) continue;
            msg += sep;
            msg += "src " + backplane::detail::describe(s);
            sep = ", ";
        }
        return {errc::not_supported, std::move(msg)};
    }
    if (auto s = host_data(node, node, "output"); !s) return s;
    for (const tensor* src : node.src)
        if (src != nullptr)
            if (auto s = host_data(*src, node, "source"); !s) return s;
    return {};
}

} // namespace blas::detail

/// The BLAS backend; use it as `blas_backend` (= basic_blas_backend<>). A class template
/// only so that compute, and the product under it, is instantiated in the translation
/// units that call it and nowhere else (as basic_cpu_backend, backends/cpu/compute.hpp).
template <class Tag>
class basic_blas_backend {
public:
    basic_blas_backend() : basic_blas_backend(blas_backend_params{}) {}
    explicit basic_blas_backend(const blas_backend_params& params) noexcept
        : n_threads_(params.n_threads > 0 ? params.n_threads : blas::detail::hardware_threads()),
          min_batch_(std::max(params.min_batch, 0)) {}

    /// Movable, not copyable: the work buffer moves with it, and a moved-from backend
    /// (with none) can be assigned to, destroyed, or used again.
    basic_blas_backend(basic_blas_backend&& o) noexcept
        : n_threads_(o.n_threads_), min_batch_(o.min_batch_), work_(std::move(o.work_)),
          work_elements_(std::exchange(o.work_elements_, 0)) {}
    basic_blas_backend& operator=(basic_blas_backend&& o) noexcept {
        n_threads_ = o.n_threads_;
        min_batch_ = o.min_batch_;
        work_ = std::move(o.work_);
        work_elements_ = std::exchange(o.work_elements_, 0);
        return *this;
    }

    [[nodiscard]] std::string_view name() const noexcept { return "BLAS"; }
    [[nodiscard]] const blas_device& device() const noexcept { return blas_device::instance(); }
    [[nodiscard]] const cpu_buffer_type& buffer_type() const noexcept { return cpu_buffer_type::instance(); }
    /// blas::supports_op with this backend's min_batch.
    [[nodiscard]] bool supports_op(const tensor& t) const noexcept { return blas::supports_op(t, min_batch_); }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const { return bt.is_host(); }

    /// Threads of the next computes, the calling thread included (at least 1; 0 or less
    /// is errc::invalid_argument and changes nothing). The BLAS library is told before
    /// each compute that has a product to run (OpenBLAS keeps one process-wide count).
    status set_n_threads(int n) {
        if (n <= 0)
            return {errc::invalid_argument, "blas: set_n_threads(" + std::to_string(n) + "): need at least 1 thread"};
        n_threads_ = n;
        return {};
    }
    [[nodiscard]] int n_threads() const noexcept { return n_threads_; }

    /// Smallest M, N and K taken from now on (0 or less: every size).
    void set_min_batch(int n) noexcept { min_batch_ = std::max(n, 0); }
    [[nodiscard]] int min_batch() const noexcept { return min_batch_; }

    /// Bytes of the work buffer (f16 / bf16 weights converted to f32) this backend keeps
    /// between computes; it only grows.
    [[nodiscard]] std::size_t work_size() const noexcept { return work_elements_ * sizeof(float); }

    /// Computes the nodes of g in order. Every node is checked first, and then nothing is
    /// computed when one fails: a node supports_op refuses is errc::not_supported (the
    /// message names it, its sources and the reason), a node or source without host data
    /// errc::invalid_argument, no memory for the work buffer errc::alloc_failed. View ops
    /// and leafs compute nothing, so a graph of views only returns at once.
    status compute(graph_view g) {
        try {
            std::size_t need = 0;
            bool work = false;
            for (const tensor* node : g) {
                if (node == nullptr) return {errc::invalid_argument, "blas: a graph node is null"};
                if (node->op == op_kind::none || is_view_op(node->op)) continue;
                if (auto s = blas::detail::check_node(*node, min_batch_); !s) return s;
                need = std::max(need, blas::detail::work_elements(*node));
                work = true;
            }
            if (!work) return {};
            if (auto s = reserve(need); !s) return s;
        } catch (const std::bad_alloc&) {
            return {errc::alloc_failed, "blas: out of memory checking a graph"};
        }
        blas::detail::set_library_threads(n_threads_);
        for (tensor* node : g)
            if (node->op == op_kind::mul_mat) blas::detail::mul_mat(*node, work_.get(), n_threads_);
        return {};
    }

    /// Nothing to wait for: compute returns when the graph is done.
    status synchronize() noexcept { return {}; }

private:
    /// Makes the work buffer hold at least n floats (its contents are not kept).
    status reserve(std::size_t n) {
        if (n <= work_elements_) return {};
        std::unique_ptr<float[]> w(new (std::nothrow) float[n]);
        if (!w)
            return {errc::alloc_failed, "blas: cannot allocate a work buffer of " +
                                            std::to_string(n * sizeof(float)) + " bytes to convert weights"};
        work_ = std::move(w);
        work_elements_ = n;
        return {};
    }

    int n_threads_;
    int min_batch_;
    std::unique_ptr<float[]> work_; ///< f32 copy of one weight matrix, kept between computes
    std::size_t work_elements_ = 0;
};

inline blas_backend blas_device::make_backend(const blas_backend_params& params) const { return blas_backend{params}; }

static_assert(backplane::device<blas_device>);
static_assert(backplane::host_ptr_device<blas_device>);
static_assert(backplane::backend<blas_backend>);
static_assert(backplane::host_backend<blas_backend>);

} // namespace backplane

#pragma once
// compute_forward: one node on the host, dispatched by op to the kernel that computes
// it; n_tasks and work_size: how many threads a node is worth and how much shared
// scratch memory they need.
//
// Two paths per op:
//  * the reference kernels (backends/cpu/kernels/, one family per header): plain,
//    portable, any layout; the oracle that other backends' tests compare against;
//  * fast paths where they exist, written per instruction set (p.level): fast::mul_mat
//    (fast/mul_mat.hpp) and the element-wise and row kernels for contiguous f32 rows
//    (fast/rowwise.hpp).
// p.reference picks the reference kernels for every node. Otherwise a fast path runs
// when it applies to the node; whether it applies is a pure function of the node, so
// every thread of a node takes the same path.
//
// The caller has checked supports_op and that every tensor has host data; each kernel
// computes only the share of the work that p assigns to thread p.ith of p.nth, so the
// same call serves one thread or a pool.
//
// Lazy instantiation: every function on the path from the backend's compute down to the
// kernels (compute_forward, the kernel entry points, fast::mul_mat, fast::rowwise, the
// plan executor, and basic_cpu_backend itself) is a template, most of them with a
// defaulted dummy parameter (`template <class = void>`; callers write the plain call).
// A template's body instantiates nothing until it is used, so the hundreds of kernel
// specialisations (types x instruction sets x tile sizes) are built only in the
// translation units that call compute, and a file that merely includes
// <backplane/backplane.hpp> stays cheap (docs/benchmarks.md, compile time).

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/mul_mat.hpp>
#include <backplane/backends/cpu/fast/rowwise.hpp>
#include <backplane/backends/cpu/kernels/binary.hpp>
#include <backplane/backends/cpu/kernels/concat.hpp>
#include <backplane/backends/cpu/kernels/copy.hpp>
#include <backplane/backends/cpu/kernels/matmul.hpp>
#include <backplane/backends/cpu/kernels/rope.hpp>
#include <backplane/backends/cpu/kernels/rows.hpp>
#include <backplane/backends/cpu/kernels/unary.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace backplane::cpu {

namespace detail {

/// Work a thread should have at least before a node is split further, in the units of
/// work_units() (~0.1 ns each). Measured on a 2-core AVX-512 VM (docs/backends/cpu.md):
/// a barrier costs ~165 ns; an f32 add split over 2 threads breaks even at ~4K elements
/// and saves 40% at 16K. On a busy machine a barrier costs more, hence the margin.
inline constexpr std::int64_t default_min_work_per_thread = 8 * 1024;
inline std::atomic<std::int64_t> min_work_per_thread_setting{default_min_work_per_thread};

inline bool involves_f16(const tensor& node) noexcept {
    if (node.type == elem_type::f16) return true;
    for (const tensor* s : node.src)
        if (s != nullptr && s->type == elem_type::f16) return true;
    return false;
}

/// The node's work in units of about 0.1 ns on one core: one element of a fast f32
/// add. Per element, measured with the kernels of the default (fast) mode: a fast f32
/// kernel 1-4 units, a reference kernel about 10 times its fast counterpart, f16
/// conversions (no fast path yet) 8 times more, rope's pow/cos/sin ~160; mul_mat per
/// multiply-add: 1/4 with a fast kernel, 8 with the reference one. Only ratios matter:
/// n_tasks compares this with min_work_per_thread().
inline std::int64_t work_units(const tensor& node) noexcept {
    const tensor* a = node.src[0];
    const std::int64_t n = node.nelements();
    const std::int64_t conv = involves_f16(node) ? 8 : 1;
    if (traits(node.op).family == op_family::elementwise) {
        // an exp per element costs 4 units, a square root 2, the rest 1
        const std::int64_t per = node.op == op_kind::silu || node.op == op_kind::gelu ? 4
                                 : node.op == op_kind::sqrt                         ? 2
                                                                                    : 1;
        return (fast::rowwise_applies(node) ? 1 : 10 * conv) * per * n;
    }
    switch (node.op) {
    case op_kind::dup:
    case op_kind::cont:
    case op_kind::cpy:
        return (is_quantized(node.type) || is_quantized(a->type) ? 40 : 10) * conv * n;
    case op_kind::norm:
    case op_kind::rms_norm:
        return (fast::rowwise_applies(node) ? 2 : 20) * n;
    case op_kind::soft_max:
        return (fast::rowwise_applies(node) ? 4 : 80) * n;
    case op_kind::sum_rows:
    case op_kind::argmax:
        return 10 * conv * a->nelements();
    case op_kind::rope:
        return 160 * conv * n; // a pow, a cos and a sin per pair
    case op_kind::get_rows:
    case op_kind::concat:
        return 10 * conv * n;
    case op_kind::mul_mat: {
        const std::int64_t macs = n * std::max<std::int64_t>(a->ne[0], 1);
        return fast::mul_mat_applies(node) ? macs / 4 + n : 8 * conv * macs + n;
    }
    default:
        return n;
    }
}

/// How many threads can share the node at all: its kernel splits rows (of dst, or of
/// src[0] for the row reductions). A fast mul_mat may split any way it likes.
inline std::int64_t split_units(const tensor& node) noexcept {
    switch (node.op) {
    case op_kind::sum_rows:
    case op_kind::argmax:
        return node.src[0]->nrows();
    case op_kind::mul_mat:
        return fast::mul_mat_applies(node) ? node.nelements() : node.nrows();
    default:
        return node.nrows();
    }
}

/// The fast mul_mat can run with what p offers: its work buffer, and a barrier when
/// several threads share the node. Callers that hand-roll compute_params (tests calling
/// one thread's share at a time) get the reference kernel instead of a kernel that
/// would wait on a barrier nobody else reaches.
inline bool fast_mul_mat_ready(const compute_params& p, const tensor& node) noexcept {
    if (p.nth > 1 && p.barrier_fn == nullptr) return false;
    const std::size_t need = fast::mul_mat_work_size(node, p.nth);
    return need == 0 || (p.wdata != nullptr && p.wsize >= need);
}

} // namespace detail

/// The work per thread below which n_tasks stops splitting nodes (process-wide; it
/// applies to plans made after the call). set_min_work_per_thread(1) splits every node
/// over as many threads as it has rows, which tests use to run the kernels' thread
/// splits on small shapes. Meant for tests and benchmarks; a value below 1 counts as 1.
inline void set_min_work_per_thread(std::int64_t units) noexcept {
    detail::min_work_per_thread_setting.store(units < 1 ? 1 : units, std::memory_order_relaxed);
}
inline void reset_min_work_per_thread() noexcept {
    detail::min_work_per_thread_setting.store(detail::default_min_work_per_thread, std::memory_order_relaxed);
}
[[nodiscard]] inline std::int64_t min_work_per_thread() noexcept {
    return detail::min_work_per_thread_setting.load(std::memory_order_relaxed);
}

/// Threads worth giving `node` out of n_threads: 0 for view ops and leafs (nothing to
/// compute), 1 for small nodes (a barrier costs more than the split saves), else as
/// many as have at least min_work_per_thread() each, at most one per row the kernel
/// can split.
[[nodiscard]] inline int n_tasks(const tensor& node, int n_threads) noexcept {
    if (node.op == op_kind::none || is_view_op(node.op)) return 0;
    if (n_threads <= 1) return 1;
    const std::int64_t work = detail::work_units(node);
    const std::int64_t per_thread = min_work_per_thread();
    if (work / 2 < per_thread) return 1; // most nodes of a big graph (a shift, not a division)
    std::int64_t n = work / per_thread;
    n = std::min<std::int64_t>(n, detail::split_units(node));
    return static_cast<int>(std::clamp<std::int64_t>(n, 1, n_threads));
}

/// Bytes of shared work buffer the node needs when nth threads compute it: the fast
/// mul_mat's scratch (for example the activations quantized once for all threads); 0
/// for everything else and in reference mode (the reference kernels need none).
[[nodiscard]] inline std::size_t work_size(const tensor& node, int nth, bool reference) noexcept {
    if (reference || node.op != op_kind::mul_mat || !fast::mul_mat_applies(node)) return 0;
    return fast::mul_mat_work_size(node, nth < 1 ? 1 : nth);
}

/// Computes `node` from its sources (thread p.ith of p.nth). View ops and leafs compute
/// nothing; an op without a kernel leaves the node untouched (supports_op says false).
/// Returns errc::ok, or errc::out_of_range when the data asks for a read outside a
/// tensor (a get_rows index beyond the rows): such reads are never made; a fast kernel
/// may report its own failure.
template <class = void>
[[nodiscard]] inline errc compute_forward(const compute_params& p, tensor& node) noexcept {
    const bool fast = !p.reference;
    switch (node.op) {
    case op_kind::none:
    case op_kind::view:
    case op_kind::reshape:
    case op_kind::permute:
    case op_kind::transpose:
        return errc::ok;
    case op_kind::dup:
    case op_kind::cont:
    case op_kind::cpy:
        kernels::copy(p, node);
        return errc::ok;
    case op_kind::add:
    case op_kind::sub:
    case op_kind::mul:
    case op_kind::div:
        if (fast && fast::rowwise_applies(node)) return fast::rowwise(p, node);
        kernels::binary(p, node);
        return errc::ok;
    case op_kind::scale:
    case op_kind::sqr:
    case op_kind::sqrt:
    case op_kind::silu:
    case op_kind::gelu:
    case op_kind::relu:
    case op_kind::neg:
        if (fast && fast::rowwise_applies(node)) return fast::rowwise(p, node);
        kernels::unary(p, node);
        return errc::ok;
    case op_kind::sum_rows:
        kernels::sum_rows(p, node);
        return errc::ok;
    case op_kind::argmax:
        kernels::argmax(p, node);
        return errc::ok;
    case op_kind::norm:
    case op_kind::rms_norm:
        if (fast && fast::rowwise_applies(node)) return fast::rowwise(p, node);
        kernels::norm(p, node);
        return errc::ok;
    case op_kind::soft_max:
        if (fast && fast::rowwise_applies(node)) return fast::rowwise(p, node);
        kernels::soft_max(p, node);
        return errc::ok;
    case op_kind::mul_mat:
        if (fast && fast::mul_mat_applies(node) && detail::fast_mul_mat_ready(p, node))
            return fast::mul_mat(p, node);
        kernels::mul_mat(p, node);
        return errc::ok;
    case op_kind::get_rows:
        return kernels::get_rows(p, node) ? errc::ok : errc::out_of_range;
    case op_kind::rope:
        kernels::rope(p, node);
        return errc::ok;
    case op_kind::concat:
        kernels::concat(p, node);
        return errc::ok;
    }
    return errc::ok;
}

} // namespace backplane::cpu

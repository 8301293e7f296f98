#pragma once
// compute_forward: one node on the host, run by the kernel that computes it;
// choose_kernel: which kernel that is (kernel_kind), decided once per node of a plan;
// n_tasks and work_size: how many threads a node is worth and how much shared scratch
// memory they need.
//
// Two paths per op:
//  * the reference kernels (backends/cpu/kernels/, one family per header): plain,
//    portable, any layout; the oracle that other backends' tests compare against;
//  * fast paths where they exist, written per instruction set (p.level): fast::mul_mat
//    (fast/mul_mat.hpp), the element-wise and row kernels for contiguous f32 rows
//    (fast/rowwise.hpp), flash_attn_ext's tiled kernel for f32 and f16 k and v
//    (fast/attention.hpp) and conv_2d as unrolled windows times the kernel
//    (fast/conv.hpp).
// Reference mode picks the reference kernels for every node. Otherwise a fast path runs
// when it applies to the node; whether it applies is a pure function of the node, so
// every thread of a node takes the same path, and a plan can decide it once
// (plan_step::kernel) for every compute.
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
#include <backplane/backends/cpu/fast/attention.hpp>
#include <backplane/backends/cpu/fast/conv.hpp>
#include <backplane/backends/cpu/fast/mul_mat.hpp>
#include <backplane/backends/cpu/fast/mul_mat_id.hpp>
#include <backplane/backends/cpu/fast/rowwise.hpp>
#include <backplane/backends/cpu/kernels/attention.hpp>
#include <backplane/backends/cpu/kernels/binary.hpp>
#include <backplane/backends/cpu/kernels/concat.hpp>
#include <backplane/backends/cpu/kernels/conv.hpp>
#include <backplane/backends/cpu/kernels/copy.hpp>
#include <backplane/backends/cpu/kernels/glu.hpp>
#include <backplane/backends/cpu/kernels/image.hpp>
#include <backplane/backends/cpu/kernels/layout.hpp>
#include <backplane/backends/cpu/kernels/matmul.hpp>
#include <backplane/backends/cpu/kernels/misc.hpp>
#include <backplane/backends/cpu/kernels/out_prod.hpp>
#include <backplane/backends/cpu/kernels/recurrent.hpp>
#include <backplane/backends/cpu/kernels/rope.hpp>
#include <backplane/backends/cpu/kernels/rows.hpp>
#include <backplane/backends/cpu/kernels/set_rows.hpp>
#include <backplane/backends/cpu/kernels/sort.hpp>
#include <backplane/backends/cpu/kernels/unary.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/op_traits.hpp>
#include <backplane/core/tensor.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace backplane::cpu {

/// The kernel that computes a node: a reference kernel (kernels/) or a fast path (fast/).
/// Ops reach the reference kernels through reference_kernel(), the fast paths through
/// choose_kernel().
enum class kernel_kind : std::uint8_t {
    nothing,      ///< view ops and leafs: nothing to compute
    copy,         ///< kernels::copy: dup, cont, cpy
    binary,       ///< kernels::binary: the element-wise ops of two operands
    unary,        ///< kernels::unary: the element-wise ops of one operand
    sum_rows,     ///< kernels::sum_rows: sum_rows, mean
    sum,          ///< kernels::sum
    sort_rows,    ///< kernels::sort_rows: argsort, top_k
    argmax,       ///< kernels::argmax
    norm,         ///< kernels::norm: norm, rms_norm, l2_norm
    soft_max,     ///< kernels::soft_max
    mul_mat,      ///< kernels::mul_mat
    get_rows,     ///< kernels::get_rows
    rope,         ///< kernels::rope
    concat,       ///< kernels::concat
    glu,          ///< kernels::glu: the gated linear units
    set_rows,     ///< kernels::set_rows
    pad,          ///< kernels::pad
    arange,       ///< kernels::arange
    mul_mat_id,   ///< kernels::mul_mat_id
    add_id,       ///< kernels::add_id
    flash_attn_ext, ///< kernels::flash_attn_ext
    group_norm,   ///< kernels::group_norm
    repeat,       ///< kernels::repeat
    repeat_back,  ///< kernels::repeat_back
    cumsum,       ///< kernels::cumsum
    tri,          ///< kernels::tri
    diag,         ///< kernels::diag
    timestep_embedding, ///< kernels::timestep_embedding
    out_prod,     ///< kernels::out_prod
    im2col,       ///< kernels::im2col
    conv_2d,      ///< kernels::conv_2d
    pool,         ///< kernels::pool: pool_1d, pool_2d
    upscale,      ///< kernels::upscale
    remap,        ///< kernels::remap: pad_reflect_1d, roll
    count_equal,  ///< kernels::count_equal
    acc,          ///< kernels::acc
    conv_transpose, ///< kernels::conv_transpose: conv_transpose_1d, conv_transpose_2d
    conv_2d_dw,   ///< kernels::conv_2d_dw
    window,       ///< kernels::window: win_part, win_unpart, get_rel_pos
    ssm_conv,     ///< kernels::ssm_conv
    ssm_scan,     ///< kernels::ssm_scan
    linear_attention, ///< kernels::linear_attention: gated_linear_attn, rwkv_wkv6, rwkv_wkv7
    fast_rowwise, ///< fast::rowwise: element-wise and row ops on f32 rows, swiglu
    fast_mul_mat, ///< fast::mul_mat: gemm for float weights, quant for quantized ones
    fast_mul_mat_id, ///< fast::mul_mat_id: each expert's columns grouped, then fast::mul_mat
    fast_attention, ///< fast::attention: flash_attn_ext with f32 or f16 k and v
    fast_conv_2d, ///< fast::conv_2d: conv_2d as unrolled windows times the kernel (the fast GEMM)
    fused,        ///< a fused group of nodes (fused.hpp; plan_step::group says which)
};

inline constexpr std::size_t kernel_kind_count = static_cast<std::size_t>(kernel_kind::fused) + 1;

/// The kernel's name, as the enumerator reads.
constexpr std::string_view to_string(kernel_kind k) noexcept {
    constexpr std::array<std::string_view, kernel_kind_count> names = {
        "nothing", "copy", "binary", "unary", "sum_rows", "sum", "sort_rows", "argmax", "norm",
        "soft_max", "mul_mat", "get_rows", "rope", "concat", "glu", "set_rows", "pad", "arange",
        "mul_mat_id", "add_id", "flash_attn_ext", "group_norm", "repeat", "repeat_back", "cumsum", "tri", "diag",
        "timestep_embedding", "out_prod", "im2col", "conv_2d", "pool", "upscale", "remap", "count_equal", "acc",
        "conv_transpose", "conv_2d_dw", "window", "ssm_conv", "ssm_scan", "linear_attention", "fast_rowwise",
        "fast_mul_mat", "fast_mul_mat_id", "fast_attention", "fast_conv_2d", "fused"};
    const auto i = static_cast<std::size_t>(k);
    return i < names.size() ? names[i] : "unknown";
}

namespace detail {
/// The reference kernel of op (nothing for view ops and leafs). Element-wise ops go by the
/// op table's row (binary or unary by their sources).
constexpr kernel_kind reference_kernel_of(op_kind op) noexcept {
    if (is_binary_elementwise(op)) return kernel_kind::binary;
    if (is_unary_elementwise(op)) return kernel_kind::unary;
    if (is_copy(op)) return kernel_kind::copy;
    switch (op) {
    case op_kind::sum_rows:
    case op_kind::mean: return kernel_kind::sum_rows;
    case op_kind::sum: return kernel_kind::sum;
    case op_kind::argsort:
    case op_kind::top_k: return kernel_kind::sort_rows;
    case op_kind::argmax: return kernel_kind::argmax;
    case op_kind::norm:
    case op_kind::rms_norm:
    case op_kind::l2_norm: return kernel_kind::norm;
    case op_kind::group_norm: return kernel_kind::group_norm;
    case op_kind::repeat: return kernel_kind::repeat;
    case op_kind::repeat_back: return kernel_kind::repeat_back;
    case op_kind::cumsum: return kernel_kind::cumsum;
    case op_kind::tri: return kernel_kind::tri;
    case op_kind::diag: return kernel_kind::diag;
    case op_kind::timestep_embedding: return kernel_kind::timestep_embedding;
    case op_kind::out_prod: return kernel_kind::out_prod;
    case op_kind::count_equal: return kernel_kind::count_equal;
    case op_kind::acc: return kernel_kind::acc;
    case op_kind::ssm_conv: return kernel_kind::ssm_conv;
    case op_kind::ssm_scan: return kernel_kind::ssm_scan;
    case op_kind::gated_linear_attn:
    case op_kind::rwkv_wkv6:
    case op_kind::rwkv_wkv7: return kernel_kind::linear_attention;
    case op_kind::soft_max: return kernel_kind::soft_max;
    case op_kind::mul_mat: return kernel_kind::mul_mat;
    case op_kind::get_rows: return kernel_kind::get_rows;
    case op_kind::rope: return kernel_kind::rope;
    case op_kind::concat: return kernel_kind::concat;
    case op_kind::glu: return kernel_kind::glu;
    case op_kind::set_rows: return kernel_kind::set_rows;
    case op_kind::pad: return kernel_kind::pad;
    case op_kind::arange: return kernel_kind::arange;
    case op_kind::mul_mat_id: return kernel_kind::mul_mat_id;
    case op_kind::add_id: return kernel_kind::add_id;
    case op_kind::flash_attn_ext: return kernel_kind::flash_attn_ext;
    case op_kind::im2col: return kernel_kind::im2col;
    case op_kind::conv_2d: return kernel_kind::conv_2d;
    case op_kind::pool_1d:
    case op_kind::pool_2d: return kernel_kind::pool;
    case op_kind::upscale: return kernel_kind::upscale;
    case op_kind::pad_reflect_1d:
    case op_kind::roll: return kernel_kind::remap;
    case op_kind::conv_transpose_1d:
    case op_kind::conv_transpose_2d: return kernel_kind::conv_transpose;
    case op_kind::conv_2d_dw: return kernel_kind::conv_2d_dw;
    case op_kind::win_part:
    case op_kind::win_unpart:
    case op_kind::get_rel_pos: return kernel_kind::window;
    default: return kernel_kind::nothing;
    }
}

/// reference_kernel_of per op_kind (a load per node when plans are made).
inline constexpr std::array<kernel_kind, op_kind_count> reference_kernels = [] {
    std::array<kernel_kind, op_kind_count> t{};
    for (std::size_t i = 0; i < op_kind_count; ++i) t[i] = reference_kernel_of(static_cast<op_kind>(i));
    return t;
}();

/// Every op that computes something has a reference kernel here, and only those.
constexpr bool every_op_has_a_kernel() noexcept {
    for (std::size_t i = 0; i < op_kind_count; ++i) {
        const auto op = static_cast<op_kind>(i);
        if ((reference_kernels[i] == kernel_kind::nothing) != (op == op_kind::none || is_view_op(op))) return false;
    }
    return true;
}
static_assert(every_op_has_a_kernel(),
              "an op without a CPU kernel: add it to reference_kernel_of (backends/cpu/compute.hpp)");
} // namespace detail

/// The reference kernel of op: nothing for view ops, leafs and values outside op_kind.
constexpr kernel_kind reference_kernel(op_kind op) noexcept {
    const auto i = static_cast<std::size_t>(op);
    return i < op_kind_count ? detail::reference_kernels[i] : kernel_kind::nothing;
}

/// The kernel that computes node: in reference mode its reference kernel, else the fast
/// path where one applies (a pure function of the node), else the reference kernel. The
/// one place the CPU backend decides it: plans record it per step, n_tasks and work_size
/// price it, compute_forward runs it.
inline kernel_kind choose_kernel(const tensor& node, bool reference) noexcept {
    const kernel_kind k = reference_kernel(node.op);
    if (reference) return k;
    switch (k) {
    case kernel_kind::binary:
    case kernel_kind::unary:
    case kernel_kind::norm:
    case kernel_kind::soft_max:
    case kernel_kind::glu: return fast::rowwise_applies(node) ? kernel_kind::fast_rowwise : k;
    case kernel_kind::mul_mat: return fast::mul_mat_applies(node) ? kernel_kind::fast_mul_mat : k;
    case kernel_kind::mul_mat_id: return fast::mul_mat_id_applies(node) ? kernel_kind::fast_mul_mat_id : k;
    case kernel_kind::flash_attn_ext: return fast::attention_applies(node) ? kernel_kind::fast_attention : k;
    case kernel_kind::conv_2d: return fast::conv_2d_applies(node) ? kernel_kind::fast_conv_2d : k;
    default: return k;
    }
}

/// True for the fast paths (fast/), false for the reference kernels and nothing.
[[nodiscard]] constexpr bool is_fast_path(kernel_kind k) noexcept {
    return k == kernel_kind::fast_rowwise || k == kernel_kind::fast_mul_mat || k == kernel_kind::fast_mul_mat_id ||
           k == kernel_kind::fast_attention || k == kernel_kind::fast_conv_2d;
}

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

/// The node's work in units of about 0.1 ns on one core, computed by kernel k: one
/// element of a fast f32 add. Per element, measured with the kernels of the default
/// (fast) mode: a fast f32 kernel 1-4 units, a reference kernel about 10 times its fast
/// counterpart, f16 conversions (no fast path yet) 8 times more, rope's pow/cos/sin ~160
/// (once per pair and token: kernels/rope.hpp);
/// mul_mat per multiply-add: 1/4 with a fast kernel, 8 with the reference one. Only
/// ratios matter: n_tasks compares this with min_work_per_thread().
inline std::int64_t work_units(const tensor& node, kernel_kind k) noexcept {
    const tensor* a = node.src[0];
    const std::int64_t n = node.nelements();
    const std::int64_t conv = involves_f16(node) ? 8 : 1;
    const bool fast = is_fast_path(k);
    switch (reference_kernel(node.op)) {
    case kernel_kind::binary:
    case kernel_kind::unary: {
        // an exp per element costs 4 units, a square root 2, the rest 1
        const std::int64_t per = node.op == op_kind::silu || node.op == op_kind::gelu ? 4
                                 : node.op == op_kind::sqrt                         ? 2
                                                                                    : 1;
        return (fast ? 1 : 10 * conv) * per * n;
    }
    case kernel_kind::copy:
        return (is_quantized(node.type) || is_quantized(a->type) ? 40 : 10) * conv * n;
    case kernel_kind::norm:
        return (fast ? 2 : 20) * n;
    case kernel_kind::group_norm: // three passes over each group
        return 30 * n;
    case kernel_kind::repeat_back: // every element of a read once
    case kernel_kind::count_equal:
        return 10 * a->nelements();
    case kernel_kind::timestep_embedding: // an exp, a cos and a sin per pair
        return 80 * n;
    case kernel_kind::ssm_conv: // a multiply-add per tap
        return 10 * n * std::max<std::int64_t>(node.src[1]->ne[0], 1);
    case kernel_kind::ssm_scan: // per value of x, two multiply-adds (and an exp for Mamba-1) per state
        return 40 * node.src[1]->nelements() * std::max<std::int64_t>(node.src[0]->ne[0], 1);
    case kernel_kind::linear_attention: // a few multiply-adds per state value and token: S per channel
        return 30 * node.ne[0] * node.ne[1] * std::max<std::int64_t>(node.ne[0] / std::max<std::int64_t>(node.src[node.op == op_kind::rwkv_wkv7 ? 2 : 0]->ne[1], 1), 1);
    case kernel_kind::out_prod: // a multiply-add per value of dst and of dimension 1, a dequantized
        return 8 * conv * n * std::max<std::int64_t>(a->ne[1], 1) + n;
    case kernel_kind::soft_max:
        return (fast ? 4 : 80) * n;
    case kernel_kind::sum_rows:
    case kernel_kind::sum:
    case kernel_kind::argmax:
        return 10 * conv * a->nelements();
    case kernel_kind::sort_rows: // n log2(n) comparisons per row of n
        return 20 * conv * a->nelements() * std::max<std::int64_t>(std::bit_width(static_cast<std::uint64_t>(a->ne[0])), 1);
    case kernel_kind::rope: // a pow, a cos and a sin per pair and token (shared by its heads), a rotation per pair
        return (160 * a->ne[0] / 2 * a->ne[2] * a->ne[3] + 4 * n) * conv;
    case kernel_kind::get_rows:
    case kernel_kind::concat:
    case kernel_kind::im2col:
        return 10 * conv * n;
    case kernel_kind::glu:
        return (fast ? 4 : 40 * conv) * n; // an exp or erf and a product per element (fast: swiglu)
    case kernel_kind::set_rows:
        return (is_quantized(node.type) ? 40 : 10) * conv * node.src[0]->nelements();
    case kernel_kind::pool: { // a load and a max or sum per cell of each window
        const pool_window w = pool_window_of(node);
        return 10 * conv * n * std::max<std::int64_t>(std::int64_t{w.k0} * w.k1, 1);
    }
    case kernel_kind::upscale: // up to 16 loads and their weights per element (bicubic)
        return 40 * n;
    case kernel_kind::mul_mat: {
        const std::int64_t macs = n * std::max<std::int64_t>(a->ne[0], 1);
        return fast ? macs / 4 + n : 8 * conv * macs + n;
    }
    case kernel_kind::mul_mat_id: {
        const std::int64_t macs = n * std::max<std::int64_t>(a->ne[0], 1);
        return fast ? macs / 4 + n : 8 * conv * macs + n;
    }
    case kernel_kind::conv_2d: { // the kernel's taps times the input channels per result element
        const std::int64_t macs = n * std::max<std::int64_t>(conv_2d_geometry_of(node).taps(), 1);
        return fast ? macs / 4 + n : 8 * conv * macs + n;
    }
    case kernel_kind::conv_transpose: { // the taps that reach each result element, times the input channels
        const conv_transpose_geometry g = conv_transpose_geometry_of(node);
        const std::int64_t reach = ((g.kw + g.s0 - 1) / std::max<std::int64_t>(g.s0, 1)) *
                                   ((g.kh + g.s1 - 1) / std::max<std::int64_t>(g.s1, 1));
        const std::int64_t macs = n * std::max<std::int64_t>(reach * g.ic, 1);
        return 8 * conv * macs + n;
    }
    case kernel_kind::conv_2d_dw: // a multiply-add per tap of its channel's kernel plane
        return 8 * n * std::max<std::int64_t>(node.src[0]->ne[0] * node.src[0]->ne[1], 1) + n;
    case kernel_kind::flash_attn_ext: { // per query row: a dot product of D_k and a D_v update per position
        const tensor& keys = *node.src[1];
        const std::int64_t macs = a->nrows() * keys.ne[1] * (keys.ne[0] + node.ne[0]);
        return fast ? macs / 4 + n : 8 * conv * macs + n;
    }
    default:
        return n;
    }
}

/// How many threads can share the node at all: its kernel splits rows (of dst, or of
/// src[0] for the row reductions). A fast mul_mat may split any way it likes.
inline std::int64_t split_units(const tensor& node, kernel_kind k) noexcept {
    switch (k) {
    case kernel_kind::sum_rows:
    case kernel_kind::argmax:
    case kernel_kind::sort_rows:
        return node.src[0]->nrows();
    case kernel_kind::sum:
    case kernel_kind::count_equal:
        return 1; // one result element
    case kernel_kind::set_rows:
        return node.src[0]->nrows();
    case kernel_kind::arange:
        return node.ne[0];
    case kernel_kind::group_norm:
        return kernels::group_norm_units(node);
    case kernel_kind::ssm_scan:
        return kernels::ssm_scan_units(node);
    case kernel_kind::linear_attention:
        return kernels::linear_attention_units(node);
    case kernel_kind::fast_mul_mat:
    case kernel_kind::fast_mul_mat_id:
        return node.nelements();
    case kernel_kind::fast_attention:
        return fast::attention_split_units(node);
    case kernel_kind::fast_conv_2d:
        return node.nelements();
    default:
        return node.nrows();
    }
}

/// Bytes of shared work buffer kernel k needs for node with nth threads (0 for every
/// kernel but the fast mul_mat's, mul_mat_id's, attention's and conv_2d's).
inline std::size_t kernel_work_size(const tensor& node, int nth, kernel_kind k) noexcept {
    if (k == kernel_kind::fast_mul_mat) return fast::mul_mat_work_size(node, nth);
    if (k == kernel_kind::fast_mul_mat_id) return fast::mul_mat_id_work_size(node, nth);
    if (k == kernel_kind::fast_attention) return fast::attention_work_size(node, nth);
    if (k == kernel_kind::fast_conv_2d) return fast::conv_2d_work_size(node, nth);
    return 0;
}

/// The fast mul_mat, mul_mat_id and attention can run with what p offers: their work
/// buffer, and a barrier when several threads share the node (the attention needs one
/// only with a work buffer). Callers that hand-roll compute_params (tests calling one
/// thread's share at a time) get the reference kernel instead of a kernel that would
/// wait on a barrier nobody else reaches.
inline bool fast_kernel_ready(const compute_params& p, const tensor& node, kernel_kind k) noexcept {
    const std::size_t need = kernel_work_size(node, p.nth, k);
    if (p.nth > 1 && p.barrier_fn == nullptr && (k != kernel_kind::fast_attention || need > 0)) return false;
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

/// Threads worth giving `node` out of n_threads when kernel k computes it: 0 for view ops
/// and leafs (nothing to compute), 1 for small nodes (a barrier costs more than the split
/// saves), else as many as have at least min_work_per_thread() each, at most one per row
/// the kernel can split. Plans pass the default mode's kernel (choose_kernel(node,
/// false)) in either mode, so both modes split a node alike.
[[nodiscard]] inline int n_tasks(const tensor& node, int n_threads, kernel_kind k) noexcept {
    if (k == kernel_kind::nothing) return 0;
    if (n_threads <= 1) return 1;
    const std::int64_t work = detail::work_units(node, k);
    const std::int64_t per_thread = min_work_per_thread();
    if (work / 2 < per_thread) return 1; // most nodes of a big graph (a shift, not a division)
    std::int64_t n = work / per_thread;
    n = std::min<std::int64_t>(n, detail::split_units(node, k));
    return static_cast<int>(std::clamp<std::int64_t>(n, 1, n_threads));
}
/// n_tasks with the kernel the default mode chooses for node.
[[nodiscard]] inline int n_tasks(const tensor& node, int n_threads) noexcept {
    return n_tasks(node, n_threads, choose_kernel(node, false));
}

/// Bytes of shared work buffer the node needs when nth threads compute it with kernel k:
/// the fast mul_mat's scratch (for example the activations quantized once for all
/// threads) and the fast attention's partials (a single query split along its
/// positions); 0 for every other kernel (the reference kernels need none).
[[nodiscard]] inline std::size_t work_size(const tensor& node, int nth, kernel_kind k) noexcept {
    return detail::kernel_work_size(node, nth < 1 ? 1 : nth, k);
}
/// work_size with the kernel chosen for node in this mode.
[[nodiscard]] inline std::size_t work_size(const tensor& node, int nth, bool reference) noexcept {
    return work_size(node, nth, choose_kernel(node, reference));
}

/// Runs kernel k (choose_kernel's choice for node, in p's mode) for thread p.ith of p.nth.
/// The fast mul_mat needs what a plan's step gets: a work buffer of work_size(node, p.nth,
/// k) bytes and, when p.nth > 1, a barrier. Returns errc::ok, or errc::out_of_range when
/// the data asks for a read or write outside a tensor (a get_rows, set_rows, mul_mat_id or
/// add_id index beyond what it indexes): such reads and writes are never made; errc::alloc_failed
/// when a sort or flash_attn_ext finds no memory for its row buffers; a fast kernel may report
/// its own
/// failure.
template <class = void>
[[nodiscard]] inline errc run_kernel_here(const compute_params& p, tensor& node, kernel_kind k) noexcept {
    switch (k) {
    case kernel_kind::nothing: return errc::ok;
    case kernel_kind::copy: kernels::copy(p, node); return errc::ok;
    case kernel_kind::binary: kernels::binary(p, node); return errc::ok;
    case kernel_kind::unary: kernels::unary(p, node); return errc::ok;
    case kernel_kind::sum_rows: kernels::sum_rows(p, node); return errc::ok;
    case kernel_kind::sum: kernels::sum(p, node); return errc::ok;
    case kernel_kind::sort_rows: return kernels::sort_rows(p, node) ? errc::ok : errc::alloc_failed;
    case kernel_kind::argmax: kernels::argmax(p, node); return errc::ok;
    case kernel_kind::norm: kernels::norm(p, node); return errc::ok;
    case kernel_kind::soft_max: kernels::soft_max(p, node); return errc::ok;
    case kernel_kind::mul_mat: kernels::mul_mat(p, node); return errc::ok;
    case kernel_kind::get_rows: return kernels::get_rows(p, node) ? errc::ok : errc::out_of_range;
    case kernel_kind::rope: kernels::rope(p, node); return errc::ok;
    case kernel_kind::concat: kernels::concat(p, node); return errc::ok;
    case kernel_kind::glu: kernels::glu(p, node); return errc::ok;
    case kernel_kind::set_rows: return kernels::set_rows(p, node) ? errc::ok : errc::out_of_range;
    case kernel_kind::pad: kernels::pad(p, node); return errc::ok;
    case kernel_kind::arange: kernels::arange(p, node); return errc::ok;
    case kernel_kind::mul_mat_id: return kernels::mul_mat_id(p, node) ? errc::ok : errc::out_of_range;
    case kernel_kind::add_id: return kernels::add_id(p, node) ? errc::ok : errc::out_of_range;
    case kernel_kind::flash_attn_ext: return kernels::flash_attn_ext(p, node) ? errc::ok : errc::alloc_failed;
    case kernel_kind::group_norm: kernels::group_norm(p, node); return errc::ok;
    case kernel_kind::repeat: kernels::repeat(p, node); return errc::ok;
    case kernel_kind::repeat_back: kernels::repeat_back(p, node); return errc::ok;
    case kernel_kind::cumsum: kernels::cumsum(p, node); return errc::ok;
    case kernel_kind::tri: kernels::tri(p, node); return errc::ok;
    case kernel_kind::diag: kernels::diag(p, node); return errc::ok;
    case kernel_kind::timestep_embedding: kernels::timestep_embedding(p, node); return errc::ok;
    case kernel_kind::out_prod: kernels::out_prod(p, node); return errc::ok;
    case kernel_kind::im2col: kernels::im2col(p, node); return errc::ok;
    case kernel_kind::conv_2d: kernels::conv_2d(p, node); return errc::ok;
    case kernel_kind::pool: kernels::pool(p, node); return errc::ok;
    case kernel_kind::upscale: kernels::upscale(p, node); return errc::ok;
    case kernel_kind::remap: kernels::remap(p, node); return errc::ok;
    case kernel_kind::count_equal: kernels::count_equal(p, node); return errc::ok;
    case kernel_kind::acc: kernels::acc(p, node); return errc::ok;
    case kernel_kind::conv_transpose: kernels::conv_transpose(p, node); return errc::ok;
    case kernel_kind::conv_2d_dw: kernels::conv_2d_dw(p, node); return errc::ok;
    case kernel_kind::window: kernels::window(p, node); return errc::ok;
    case kernel_kind::ssm_conv: kernels::ssm_conv(p, node); return errc::ok;
    case kernel_kind::ssm_scan: return kernels::ssm_scan(p, node) ? errc::ok : errc::out_of_range;
    case kernel_kind::linear_attention: kernels::linear_attention(p, node); return errc::ok;
    case kernel_kind::fast_rowwise: return fast::rowwise(p, node);
    case kernel_kind::fast_mul_mat: return fast::mul_mat(p, node);
    case kernel_kind::fast_mul_mat_id: return fast::mul_mat_id(p, node);
    case kernel_kind::fast_attention: return fast::attention(p, node);
    case kernel_kind::fast_conv_2d: return fast::conv_2d(p, node);
    case kernel_kind::fused: return errc::not_supported; // a group's step runs run_fused (fused.hpp)
    }
    return errc::ok;
}

#ifdef BACKPLANE_CPU_SEPARATE_KERNELS
namespace detail {
/// run_kernel_here, compiled once in the program's one translation unit that defines
/// BACKPLANE_CPU_DEFINE_KERNELS (see run_kernel).
[[nodiscard]] errc run_kernel_separate(const compute_params& p, tensor& node, kernel_kind k) noexcept;
} // namespace detail
#endif

/// run_kernel_here, or, in a program whose every translation unit defines
/// BACKPLANE_CPU_SEPARATE_KERNELS, a call into the one that also defines
/// BACKPLANE_CPU_DEFINE_KERNELS (src/backplane_cpu_kernels.cpp; the test programs link it
/// as the static library backplane_cpu_kernels): the hundreds of kernel specialisations are then compiled
/// once per program instead of once per translation unit that computes (docs/backends/cpu.md,
/// "Kernels compiled once").
template <class = void>
[[nodiscard]] inline errc run_kernel(const compute_params& p, tensor& node, kernel_kind k) noexcept {
#ifdef BACKPLANE_CPU_SEPARATE_KERNELS
    return detail::run_kernel_separate(p, node, k);
#else
    return run_kernel_here(p, node, k);
#endif
}

/// Computes `node` from its sources (thread p.ith of p.nth), choosing its kernel now (a
/// plan chose it once: run_kernel). View ops and leafs compute nothing. The fast mul_mat
/// and attention run only when p offers what they need (a work buffer, and a barrier when
/// several threads share the node), else the reference kernel does. Returns as
/// run_kernel.
template <class = void>
[[nodiscard]] inline errc compute_forward(const compute_params& p, tensor& node) noexcept {
    kernel_kind k = choose_kernel(node, p.reference);
    if ((k == kernel_kind::fast_mul_mat || k == kernel_kind::fast_mul_mat_id || k == kernel_kind::fast_attention ||
         k == kernel_kind::fast_conv_2d) &&
        !detail::fast_kernel_ready(p, node, k))
        k = reference_kernel(node.op);
    return run_kernel(p, node, k);
}

} // namespace backplane::cpu

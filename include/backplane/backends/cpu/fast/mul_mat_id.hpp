#pragma once
// Fast mul_mat_id (mixture of experts): the columns routed to each expert are grouped and
// multiplied by that expert's matrix with the fast mul_mat kernels (the packed GEMM or
// mat-vec of fast/gemm.hpp for float experts; the q8_0 activation path of fast/quant.hpp
// for quantized ones), as dense mul_mats of the same sizes would be.
//
// The node's threads go through four steps, a barrier after each but the last:
//  1. routing (thread 0): for each expert, the result columns c = s + n_used * t whose
//     id ids[s, t] names it, in order (a counting sort); an id out of range names no
//     expert: its column is written as zeros and every thread returns errc::out_of_range,
//     as the reference kernel does;
//  2. gather: each routed column's activation (column s % B1 of token t of b), the
//     columns of an expert next to each other: copied as f32 for float experts, quantized
//     straight into the q8_0 blocks the quantized kernels read for quantized ones (each
//     column once, as a dense mul_mat quantizes its own);
//  3. for each expert, chunks of at most chunk_cols of its columns: the expert's matrix
//     [K, M] times the chunk's columns into a contiguous scratch result, the node's
//     threads sharing each product as they share a dense mul_mat (float experts: one fast
//     mul_mat per chunk, a barrier after each since they share its work buffer;
//     quantized experts: the quantized kernels' jobs, with no barrier in between);
//  4. scatter: each result column copied from the scratch to its place in dst.
//
// Work buffer (shared by the node's threads):
//   [ float: the inner mul_mat's work, quantized: the kernels' panel scratch | routing |
//     gathered activations | scratch result ]
// Its size depends on the node only (not on the ids): the inner work is the largest a
// chunk of 1 .. chunk_cols columns needs.

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/mul_mat.hpp>
#include <backplane/backends/cpu/fast/quant.hpp>
#include <backplane/backends/cpu/kernels/common.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace backplane::cpu::fast {

namespace mul_mat_id_detail {

using i64 = std::int64_t;

/// Columns of one expert per inner mul_mat at most (bounds the inner work buffer; the
/// packing of the expert's rows is repeated per chunk, a small cost against the chunk's
/// multiply-adds).
inline constexpr i64 chunk_cols = 256;

inline std::size_t round64(std::size_t n) noexcept { return (n + 63) / 64 * 64; }

/// The pieces of one inner mul_mat: expert e's matrix, n gathered columns and their
/// scratch result, as tensors the fast mul_mat kernels take.
struct inner_node {
    tensor a, b, dst;

    inner_node(const tensor& as, i64 e, i64 n, float* cols, float* out) noexcept {
        a.type = as.type;
        a.ne = {as.ne[0], as.ne[1], 1, 1};
        a.nb = {as.nb[0], as.nb[1], as.nb[1] * static_cast<std::size_t>(as.ne[1]),
                as.nb[1] * static_cast<std::size_t>(as.ne[1])};
        a.data = static_cast<std::byte*>(as.data) + static_cast<std::size_t>(e) * as.nb[2];
        b.type = elem_type::f32;
        b.ne = {as.ne[0], n, 1, 1};
        set_contiguous(b);
        b.data = cols;
        dst.type = elem_type::f32;
        dst.op = op_kind::mul_mat;
        dst.ne = {as.ne[1], n, 1, 1};
        set_contiguous(dst);
        dst.data = out;
        dst.src[0] = &a;
        dst.src[1] = &b;
    }
    inner_node(const inner_node&) = delete;
    inner_node& operator=(const inner_node&) = delete;

    static void set_contiguous(tensor& t) noexcept {
        t.nb[0] = sizeof(float);
        for (std::size_t i = 1; i < max_dims; ++i) t.nb[i] = t.nb[i - 1] * static_cast<std::size_t>(t.ne[i - 1]);
    }
};

/// The node's sizes and the layout of its work buffer.
struct layout {
    i64 K = 0, M = 0, n_expert = 0, n_used = 0, n_cols = 0;
    bool quantized = false;  ///< quantized experts: the activations are gathered as q8_0
    std::size_t col_bytes = 0; ///< one gathered column (K f32, or K / 32 q8_0 records)
    std::size_t inner = 0;   ///< float: the inner mul_mat's work; quantized: the panels (at the start)
    std::size_t gathered = 0, scratch = 0, bytes = 0; ///< offsets from the routing's start

    layout(const tensor& dst, int nth) noexcept {
        const tensor& as = *dst.src[0];
        K = as.ne[0];
        M = as.ne[1];
        n_expert = as.ne[2];
        n_used = dst.ne[1];
        n_cols = dst.ne[1] * dst.ne[2];
        quantized = is_quantized(as.type);
        if (quantized) {
            col_bytes = static_cast<std::size_t>(K / quant::qk * quant::rec_bytes);
            inner_node in(as, 0, 1, nullptr, nullptr);
            quant::plan pl;
            if (quant::make_plan(in.dst, &pl)) inner = static_cast<std::size_t>(nth) * pl.panel_bytes;
        } else {
            col_bytes = static_cast<std::size_t>(K) * sizeof(float);
            for (i64 n = 1; n <= std::min(n_cols, chunk_cols); ++n) {
                inner_node in(as, 0, n, nullptr, nullptr);
                inner = std::max(inner, mul_mat_work_size(in.dst, nth));
            }
        }
        // each expert's columns start 64-byte aligned: room for that per expert
        gathered = round64(routing_bytes());
        scratch = gathered + round64(static_cast<std::size_t>(n_cols) * col_bytes + 64 * static_cast<std::size_t>(n_expert));
        bytes = 64 + round64(inner) + 64 + scratch + static_cast<std::size_t>(M * n_cols) * sizeof(float); // + alignment
    }

    /// Routing: a flag (an id out of range); for each expert where its columns start in
    /// `order` (n_expert + 1 values), a cursor (n_expert) and where its gathered columns
    /// start, in bytes (n_expert); `order`, the columns by expert; `where`, each column's
    /// place in order (-1 for an id out of range).
    [[nodiscard]] std::size_t routing_bytes() const noexcept {
        return static_cast<std::size_t>(1 + (n_expert + 1) + 2 * n_expert + 2 * n_cols) * sizeof(i64);
    }
};

/// The 64-byte aligned address at or after p.
inline std::byte* align64(std::byte* p) noexcept {
    const auto u = reinterpret_cast<std::uintptr_t>(p);
    return p + ((64 - u % 64) % 64);
}

/// The work buffer's parts.
struct parts {
    std::byte* inner; ///< float: the inner mul_mat's work; quantized: the panels
    i64* bad;         ///< nonzero when an id is out of range
    i64* start;       ///< [n_expert + 1]
    i64* cursor;      ///< [n_expert]
    i64* offset;      ///< [n_expert] bytes from `gathered`
    i64* order;       ///< [n_cols]
    i64* where;       ///< [n_cols]
    std::byte* gathered;
    float* scratch;

    parts(void* wdata, const layout& l) noexcept {
        inner = align64(static_cast<std::byte*>(wdata));
        std::byte* base = align64(inner + l.inner);
        bad = reinterpret_cast<i64*>(base);
        start = bad + 1;
        cursor = start + l.n_expert + 1;
        offset = cursor + l.n_expert;
        order = offset + l.n_expert;
        where = order + l.n_cols;
        gathered = base + l.gathered;
        scratch = reinterpret_cast<float*>(base + l.scratch);
    }

    /// Where gathered column q of expert e starts.
    [[nodiscard]] std::byte* column(const layout& l, i64 e, i64 q) const noexcept {
        return gathered + offset[e] + static_cast<std::size_t>(q - start[e]) * l.col_bytes;
    }
};

/// Step 1 (one thread): the columns of each expert, in order, by a counting sort.
inline void route(const tensor& ids, const layout& l, const parts& w) noexcept {
    const auto id_of = [&](i64 c) -> i64 {
        return kernels::load_i32(static_cast<const std::byte*>(ids.data) +
                                 static_cast<std::size_t>(c % l.n_used) * ids.nb[0] +
                                 static_cast<std::size_t>(c / l.n_used) * ids.nb[1]);
    };
    *w.bad = 0;
    std::fill(w.start, w.start + l.n_expert + 1, i64{0});
    for (i64 c = 0; c < l.n_cols; ++c) {
        const i64 e = id_of(c);
        if (e >= 0 && e < l.n_expert) ++w.start[e + 1];
    }
    // each expert's gathered columns 64-byte aligned, then the counts' prefix sums
    std::size_t at = 0;
    for (i64 e = 0; e < l.n_expert; ++e) {
        w.offset[e] = static_cast<i64>(at);
        at = round64(at + static_cast<std::size_t>(w.start[e + 1]) * l.col_bytes);
        w.start[e + 1] += w.start[e];
    }
    std::copy(w.start, w.start + l.n_expert, w.cursor);
    for (i64 c = 0; c < l.n_cols; ++c) {
        const i64 e = id_of(c);
        if (e < 0 || e >= l.n_expert) {
            *w.bad = 1;
            w.where[c] = -1;
            continue;
        }
        w.where[c] = w.cursor[e]++;
        w.order[w.where[c]] = c;
    }
}

/// The expert whose columns hold place q of `order`.
inline i64 expert_at(const layout& l, const parts& w, i64 q) noexcept {
    return static_cast<i64>(std::upper_bound(w.start, w.start + l.n_expert + 1, q) - w.start) - 1;
}

/// Column n of the n_chunk columns of a chunk, quantized at `level` from the f32 values
/// read from src (type t, element stride nb0) into the chunk's q8_0 records at base.
inline void quantize_column(isa level, elem_type t, const std::byte* src, std::size_t nb0, i64 K, std::int32_t corr_c,
                            std::byte* base, i64 n, i64 n_chunk) noexcept {
    quant::plan pl; // what column() reads: the chunk's width and K's blocks
    pl.N = n_chunk;
    pl.nblk = K / quant::qk;
    const quant::column_ref col = pl.column(base, 0, n, quant::tile_width(level, n_chunk));
    if (t == elem_type::f32 && nb0 == sizeof(float) && reinterpret_cast<std::uintptr_t>(src) % alignof(float) == 0) {
        quant::quantize_row(level, reinterpret_cast<const float*>(src), pl.nblk, col, corr_c);
        return;
    }
    alignas(64) float tmp[quant::qk];
    for (i64 kb = 0; kb < pl.nblk; ++kb) {
        kernels::read_row_f32(t, src, nb0, kb * quant::qk, quant::qk, tmp);
        quant::quantize_row(level, tmp, 1, col.from_block(kb), corr_c);
    }
}

/// Step 2 (thread p.ith's share): the routed columns' activations, by expert.
inline void gather(const compute_params& p, const tensor& dst, const layout& l, const parts& w) noexcept {
    const tensor& b = *dst.src[1];
    const isa level = quant::effective_level(p.level);
    const std::int32_t corr_c = dst.src[0]->type == elem_type::q8_0 ? 128 : 8;
    const auto [q0, q1] = split_work(w.start[l.n_expert], p);
    for (i64 q = q0; q < q1; ++q) {
        const i64 c = w.order[q];
        const std::byte* src = kernels::row_ptr(b, (c % l.n_used) % b.ne[1], c / l.n_used, 0);
        const i64 e = expert_at(l, w, q);
        if (!l.quantized) {
            kernels::read_row_f32(b.type, src, b.nb[0], 0, l.K, reinterpret_cast<float*>(w.column(l, e, q)));
            continue;
        }
        const i64 c0 = w.start[e] + (q - w.start[e]) / chunk_cols * chunk_cols; // the chunk's first
        quantize_column(level, b.type, src, b.nb[0], l.K, corr_c, w.column(l, e, c0), q - c0,
                        std::min(chunk_cols, w.start[e + 1] - c0));
    }
}

/// Step 3 for one chunk: expert e's matrix times columns q .. q + n - 1 into the scratch.
/// Float experts: a fast mul_mat (its barriers included); quantized ones: the quantized
/// kernels' jobs on the chunk's q8_0 columns. Returns as the fast mul_mat.
inline errc multiply(const compute_params& p, const tensor& as, const layout& l, const parts& w, i64 e, i64 q,
                     i64 n) noexcept {
    inner_node in(as, e, n, reinterpret_cast<float*>(w.column(l, e, q)),
                  w.scratch + static_cast<std::size_t>(q * l.M));
    if (!l.quantized) {
        compute_params inner = p;
        inner.wdata = w.inner;
        inner.wsize = l.inner;
        return mul_mat(inner, in.dst);
    }
    quant::plan pl;
    if (!quant::make_plan(in.dst, &pl)) return errc::not_supported;
    quant_jobs(p, pl, in.a, in.dst, w.column(l, e, q), w.inner, quant::effective_level(p.level));
    return errc::ok;
}

/// Step 4 (thread p.ith's share): every column of dst from the scratch, or zeros.
inline void scatter(const compute_params& p, tensor& dst, const layout& l, const parts& w) noexcept {
    const auto [c0, c1] = split_work(l.n_cols, p);
    for (i64 c = c0; c < c1; ++c) {
        std::byte* pd = kernels::row_ptr(dst, c % l.n_used, c / l.n_used, 0);
        const i64 q = w.where[c];
        const float* from = q >= 0 ? w.scratch + static_cast<std::size_t>(q * l.M) : nullptr;
        for (i64 m = 0; m < l.M; ++m)
            kernels::store<float>(pd + static_cast<std::size_t>(m) * dst.nb[0], from != nullptr ? from[m] : 0.0f);
    }
}

} // namespace mul_mat_id_detail

/// True when the fast path computes this mul_mat_id node: the fast mul_mat takes an
/// expert's matrix times contiguous f32 columns. Quantized experts need quant.hpp's
/// kernels (q8_0, q4_0), whose q8_0 columns this path gathers; K-quant experts are left
/// to the reference kernel.
inline bool mul_mat_id_applies(const tensor& dst) noexcept {
    const tensor* as = dst.src[0];
    if (as == nullptr || dst.src[1] == nullptr || dst.src[2] == nullptr || dst.nelements() <= 0) return false;
    mul_mat_id_detail::inner_node in(*as, 0, 1, nullptr, nullptr);
    return is_quantized(as->type) ? quant_applies(in.dst) : mul_mat_applies(in.dst);
}

/// Work buffer bytes the node needs with nth threads (0 when the fast path does not apply).
inline std::size_t mul_mat_id_work_size(const tensor& dst, int nth) noexcept {
    return mul_mat_id_applies(dst) ? mul_mat_id_detail::layout(dst, nth < 1 ? 1 : nth).bytes : 0;
}

/// Thread p.ith's share of the node (see the header comment). Needs a work buffer of
/// mul_mat_id_work_size(dst, p.nth) bytes and, when p.nth > 1, a barrier; returns
/// invalid_argument without them (every thread alike, before any barrier),
/// out_of_range when an id is out of range (its column zeros, as the reference kernel).
template <class = void>
inline errc mul_mat_id(const compute_params& p, tensor& dst) noexcept {
    namespace d = mul_mat_id_detail;
    if (!mul_mat_id_applies(dst) || p.ith < 0 || p.ith >= p.nth || (p.nth > 1 && p.barrier_fn == nullptr))
        return errc::invalid_argument;
    const d::layout l(dst, p.nth);
    if (p.wdata == nullptr || p.wsize < l.bytes) return errc::invalid_argument;
    const d::parts w(p.wdata, l);
    const tensor& as = *dst.src[0];

    if (p.ith == 0) d::route(*dst.src[2], l, w);
    p.barrier();
    d::gather(p, dst, l, w);
    p.barrier();
    for (d::i64 e = 0; e < l.n_expert; ++e) {
        for (d::i64 q = w.start[e]; q < w.start[e + 1]; q += d::chunk_cols) {
            if (const errc r = d::multiply(p, as, l, w, e, q, std::min(d::chunk_cols, w.start[e + 1] - q)); r != errc::ok)
                return r;
            if (!l.quantized) p.barrier(); // the inner work buffer is the next chunk's
        }
    }
    if (l.quantized) p.barrier();
    d::scatter(p, dst, l, w);
    return *w.bad != 0 ? errc::out_of_range : errc::ok;
}

} // namespace backplane::cpu::fast

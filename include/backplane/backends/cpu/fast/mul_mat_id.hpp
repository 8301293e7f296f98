#pragma once
// Fast mul_mat_id (mixture of experts): the columns routed to each expert are grouped and
// multiplied by that expert's matrix with the fast mul_mat kernels, as dense mul_mats of
// the same sizes would be. Each family of expert types is a small policy (float_experts,
// quant_experts, kquant_experts below) that the steps call: how a gathered column is
// stored, how much inner work the node needs, how a column is gathered and how a chunk of
// an expert's columns is multiplied:
//  * float experts (f32, f16, bf16): columns as f32, the packed GEMM or mat-vec of
//    fast/gemm.hpp through the fast mul_mat;
//  * quant experts (the types of fast/quant.hpp): columns quantized to the q8_0 records
//    its kernels read, its jobs;
//  * K-quant experts (q2_K ... q6_K, fast/kquant.hpp through kquant_entry.hpp's table,
//    when the program has the K-quant kernels): columns quantized to q8_K records in the
//    order its kernels read, its jobs.
//
// The node's threads go through four steps, a barrier after each but the last:
//  1. routing (thread 0): for each expert, the result columns c = s + n_used * t whose
//     id ids[s, t] names it, in order (a counting sort); an id out of range names no
//     expert: its column is written as zeros and every thread returns errc::out_of_range,
//     as the reference kernel does;
//  2. gather: each routed column's activation (column s % B1 of token t of b), the
//     columns of an expert next to each other, stored as the family's kernels read them
//     (quantized families: each column quantized once, as a dense mul_mat quantizes its
//     own);
//  3. for each expert, chunks of at most chunk_cols of its columns: the expert's matrix
//     [K, M] times the chunk's columns into a contiguous scratch result, the node's
//     threads sharing each product as they share a dense mul_mat (float experts: one fast
//     mul_mat per chunk, a barrier after each since they share its work buffer;
//     quantized families: the kernels' jobs, with no barrier in between);
//  4. scatter: each result column copied from the scratch to its place in dst.
//
// Work buffer (shared by the node's threads):
//   [ inner work (float: the inner mul_mat's; quantized: the kernels' per-thread panel
//     scratch) | routing | gathered activations | scratch result ]
// Its size depends on the node only (not on the ids): the inner work is the largest a
// chunk of 1 .. chunk_cols columns needs.

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/kquant_entry.hpp>
#include <backplane/backends/cpu/fast/mul_mat.hpp>
#include <backplane/backends/cpu/fast/quant.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/backends/cpu/kernels/common.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

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

// The families of expert types. Each provides, for the steps below:
//  * col_bytes(K): bytes of one gathered column;
//  * inner_bytes(as, n, nth): the inner work a chunk of up to n columns needs;
//  * a constructor from the experts' tensor and the requested level (what gathering and
//    multiplying need, derived once per call);
//  * put_column(src, t, nb0, K, chunk, n, n_chunk): b's column at src (type t, element
//    stride nb0) stored as column n of the n_chunk columns of a chunk starting at chunk;
//  * multiply(p, in, inner, inner_size): thread p.ith's share of one inner product, the
//    chunk's gathered columns at in.b.data;
//  * shares_inner_work: whether the node's threads use the inner work together (a barrier
//    then follows each chunk).

/// Float experts: columns as f32, one fast mul_mat per chunk.
struct float_experts {
    static constexpr bool shares_inner_work = true;

    float_experts(const tensor&, isa) noexcept {}

    static std::size_t col_bytes(i64 K) noexcept { return static_cast<std::size_t>(K) * sizeof(float); }
    static std::size_t inner_bytes(const tensor& as, i64 n_max, int nth) noexcept {
        std::size_t bytes = 0;
        for (i64 n = 1; n <= n_max; ++n) {
            inner_node in(as, 0, n, nullptr, nullptr);
            bytes = std::max(bytes, mul_mat_work_size(in.dst, nth));
        }
        return bytes;
    }

    void put_column(const std::byte* src, elem_type t, std::size_t nb0, i64 K, std::byte* chunk, i64 n,
                    i64 /*n_chunk*/) const noexcept {
        auto* col = reinterpret_cast<float*>(chunk + static_cast<std::size_t>(n) * col_bytes(K));
        kernels::read_row_f32(t, src, nb0, 0, K, col);
    }
    errc multiply(const compute_params& p, inner_node& in, std::byte* inner, std::size_t inner_size) const noexcept {
        compute_params q = p;
        q.wdata = inner;
        q.wsize = inner_size;
        return mul_mat(q, in.dst);
    }
};

/// Quant experts (fast/quant.hpp): columns as the q8_0 records its kernels read, in the
/// arrangement of the tile width a chunk's width selects; its jobs.
struct quant_experts {
    static constexpr bool shares_inner_work = false;
    isa level;
    std::int32_t corr_c = 0; ///< the weight type's code offset (quant/plan.hpp)

    quant_experts(const tensor& as, isa requested) noexcept : level(quant::effective_level(requested)) {
        inner_node in(as, 0, 1, nullptr, nullptr);
        quant::plan pl;
        if (quant::make_plan(in.dst, &pl)) corr_c = pl.corr_c;
    }

    static std::size_t col_bytes(i64 K) noexcept { return static_cast<std::size_t>(K / quant::qk * quant::rec_bytes); }
    static std::size_t inner_bytes(const tensor& as, i64 n_max, int nth) noexcept {
        inner_node in(as, 0, n_max, nullptr, nullptr);
        quant::plan pl;
        return quant::make_plan(in.dst, &pl) ? static_cast<std::size_t>(nth) * pl.panel_bytes : 0;
    }

    void put_column(const std::byte* src, elem_type t, std::size_t nb0, i64 K, std::byte* chunk, i64 n,
                    i64 n_chunk) const noexcept {
        quant::plan pl; // what column() reads: the chunk's width and K's blocks
        pl.N = n_chunk;
        pl.nblk = K / quant::qk;
        const quant::column_ref col = pl.column(chunk, 0, n, quant::tile_width(level, n_chunk));
        jobs::for_each_b_block<quant::qk>(t, src, nb0, pl.nblk, [&](i64 kb, const float* x, i64 blocks) {
            quant::quantize_row(level, x, blocks, col.from_block(kb), corr_c);
        });
    }
    errc multiply(const compute_params& p, inner_node& in, std::byte* inner,
                  std::size_t /*inner_size*/) const noexcept {
        quant::plan pl;
        if (!quant::make_plan(in.dst, &pl)) return errc::not_supported;
        quant_jobs(p, pl, in.a, in.dst, static_cast<std::byte*>(in.b.data), inner, level);
        return errc::ok;
    }
};

/// K-quant experts (fast/kquant.hpp, through kquant_entry.hpp's table): columns as q8_K
/// records, the codes in the order its kernels read at this level; its jobs (the panel
/// kernel's packing areas as inner work).
struct kquant_experts {
    static constexpr bool shares_inner_work = false;
    const kquant_entry_points* k = kquant_entry(); ///< not null: family_of checked
    isa level;
    elem_type wtype;

    kquant_experts(const tensor& as, isa requested) noexcept
        : level(quant::effective_level(requested)), wtype(as.type) {}

    static std::size_t col_bytes(i64 K) noexcept {
        return static_cast<std::size_t>(K / qk_k * kquant::rec_bytes);
    }
    static std::size_t inner_bytes(const tensor& as, i64 n_max, int nth) noexcept {
        inner_node in(as, 0, n_max, nullptr, nullptr);
        return kquant_entry()->expert_work_size(in.dst, nth);
    }

    void put_column(const std::byte* src, elem_type t, std::size_t nb0, i64 K, std::byte* chunk, i64 n,
                    i64 /*n_chunk*/) const noexcept {
        std::byte* col = chunk + static_cast<std::size_t>(n) * col_bytes(K);
        jobs::for_each_b_block<qk_k>(t, src, nb0, K / qk_k, [&](i64 kb, const float* x, i64 blocks) {
            k->quantize_records(wtype, level, x, blocks, col + kb * kquant::rec_bytes);
        });
    }
    errc multiply(const compute_params& p, inner_node& in, std::byte* inner,
                  std::size_t /*inner_size*/) const noexcept {
        return k->multiply(p, in.a, in.dst, static_cast<const std::byte*>(in.b.data), inner, level);
    }
};

/// Which family computes a node's experts (none: the fast path does not apply).
enum class family : std::uint8_t { none, floats, quant, kquant };

inline family family_of(const tensor& dst) noexcept {
    const tensor* as = dst.src[0];
    if (as == nullptr || dst.src[1] == nullptr || dst.src[2] == nullptr || dst.nelements() <= 0) return family::none;
    const inner_node in(*as, 0, 1, nullptr, nullptr);
    if (kquant::is_kquant(as->type)) {
        const kquant_entry_points* k = kquant_entry();
        return k != nullptr && k->applies(in.dst) ? family::kquant : family::none;
    }
    if (is_quantized(as->type)) return quant_applies(in.dst) ? family::quant : family::none;
    return mul_mat_applies(in.dst) ? family::floats : family::none;
}

/// fn(std::type_identity<F>{}) for the family F of f (not none).
template <class Fn>
inline decltype(auto) with_family(family f, Fn&& fn) noexcept {
    switch (f) {
    case family::kquant: return fn(std::type_identity<kquant_experts>{});
    case family::quant: return fn(std::type_identity<quant_experts>{});
    default: return fn(std::type_identity<float_experts>{});
    }
}

/// The node's sizes and the layout of its work buffer.
struct layout {
    i64 K = 0, M = 0, n_expert = 0, n_used = 0, n_cols = 0;
    std::size_t col_bytes = 0; ///< one gathered column (the family's)
    std::size_t inner = 0;     ///< the family's inner work (at the start)
    std::size_t gathered = 0, scratch = 0, bytes = 0; ///< offsets from the routing's start

    template <class Family>
    layout(std::type_identity<Family>, const tensor& dst, int nth) noexcept {
        const tensor& as = *dst.src[0];
        K = as.ne[0];
        M = as.ne[1];
        n_expert = as.ne[2];
        n_used = dst.ne[1];
        n_cols = dst.ne[1] * dst.ne[2];
        col_bytes = Family::col_bytes(K);
        inner = Family::inner_bytes(as, std::min(n_cols, chunk_cols), nth);
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
    std::byte* inner; ///< the family's inner work
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

/// Step 2 (thread p.ith's share): the routed columns' activations, by expert, each stored
/// as the family stores it in its chunk.
template <class Family>
inline void gather(const compute_params& p, const Family& fam, const tensor& dst, const layout& l,
                   const parts& w) noexcept {
    const tensor& b = *dst.src[1];
    const auto [q0, q1] = split_work(w.start[l.n_expert], p);
    for (i64 q = q0; q < q1; ++q) {
        const i64 c = w.order[q];
        const std::byte* src = kernels::row_ptr(b, (c % l.n_used) % b.ne[1], c / l.n_used, 0);
        const i64 e = expert_at(l, w, q);
        const i64 c0 = w.start[e] + (q - w.start[e]) / chunk_cols * chunk_cols; // the chunk's first
        fam.put_column(src, b.type, b.nb[0], l.K, w.column(l, e, c0), q - c0,
                       std::min(chunk_cols, w.start[e + 1] - c0));
    }
}

/// Step 3 for one chunk: expert e's matrix times columns q .. q + n - 1 into the scratch,
/// by the family's kernels. Returns as they do.
template <class Family>
inline errc multiply(const compute_params& p, const Family& fam, const tensor& as, const layout& l, const parts& w,
                     i64 e, i64 q, i64 n) noexcept {
    inner_node in(as, e, n, reinterpret_cast<float*>(w.column(l, e, q)), w.scratch + static_cast<std::size_t>(q * l.M));
    return fam.multiply(p, in, w.inner, l.inner);
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

/// The node with the experts of family Family (see the header comment and mul_mat_id).
template <class Family>
inline errc run(const compute_params& p, tensor& dst) noexcept {
    const layout l(std::type_identity<Family>{}, dst, p.nth);
    if (p.wdata == nullptr || p.wsize < l.bytes) return errc::invalid_argument;
    const parts w(p.wdata, l);
    const tensor& as = *dst.src[0];
    const Family fam(as, p.level);

    if (p.ith == 0) route(*dst.src[2], l, w);
    p.barrier();
    gather(p, fam, dst, l, w);
    p.barrier();
    for (i64 e = 0; e < l.n_expert; ++e) {
        for (i64 q = w.start[e]; q < w.start[e + 1]; q += chunk_cols) {
            const errc r = multiply(p, fam, as, l, w, e, q, std::min(chunk_cols, w.start[e + 1] - q));
            if (r != errc::ok) return r;
            if constexpr (Family::shares_inner_work) p.barrier(); // the inner work is the next chunk's
        }
    }
    if constexpr (!Family::shares_inner_work) p.barrier();
    scatter(p, dst, l, w);
    return *w.bad != 0 ? errc::out_of_range : errc::ok;
}

} // namespace mul_mat_id_detail

/// True when the fast path computes this mul_mat_id node: a family's kernels take an
/// expert's matrix times its gathered columns (the float, quant and K-quant families).
inline bool mul_mat_id_applies(const tensor& dst) noexcept {
    return mul_mat_id_detail::family_of(dst) != mul_mat_id_detail::family::none;
}

/// Work buffer bytes the node needs with nth threads (0 when the fast path does not apply).
inline std::size_t mul_mat_id_work_size(const tensor& dst, int nth) noexcept {
    namespace d = mul_mat_id_detail;
    const d::family f = d::family_of(dst);
    if (f == d::family::none) return 0;
    return d::with_family(f, [&](auto family) { return d::layout(family, dst, nth < 1 ? 1 : nth).bytes; });
}

/// Thread p.ith's share of the node (see the header comment). Needs a work buffer of
/// mul_mat_id_work_size(dst, p.nth) bytes and, when p.nth > 1, a barrier; returns
/// invalid_argument without them (every thread alike, before any barrier),
/// out_of_range when an id is out of range (its column zeros, as the reference kernel).
template <class = void>
inline errc mul_mat_id(const compute_params& p, tensor& dst) noexcept {
    namespace d = mul_mat_id_detail;
    const d::family f = d::family_of(dst);
    if (f == d::family::none || p.ith < 0 || p.ith >= p.nth || (p.nth > 1 && p.barrier_fn == nullptr))
        return errc::invalid_argument;
    return d::with_family(f, [&](auto family) { return d::run<typename decltype(family)::type>(p, dst); });
}

} // namespace backplane::cpu::fast

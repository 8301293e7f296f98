#pragma once
// Fast mul_mat_id (mixture of experts): the columns routed to each expert are grouped and
// multiplied by that expert's matrix with the fast mul_mat kernels (fast/mul_mat.hpp: the
// packed GEMM or mat-vec for float weights, the q8_0 activation path for quantized ones),
// as dense mul_mats of the same sizes would be.
//
// The node's threads go through four steps, a barrier after each:
//  1. routing (thread 0): for each expert, the result columns c = s + n_used * t whose
//     id ids[s, t] names it, in order; an id out of range names no expert (its column is
//     written as zeros and every thread returns errc::out_of_range, as the reference
//     kernel does);
//  2. gather: each routed column's activation (column s % B1 of token t of b) is copied,
//     as f32, into one contiguous matrix, the columns of an expert next to each other;
//  3. for each expert, chunks of at most chunk_cols of its columns: one fast mul_mat of
//     the expert's matrix [K, M] by the chunk's gathered columns into a contiguous
//     scratch result, shared by all the node's threads as a dense mul_mat is;
//  4. scatter: each result column copied from the scratch to its place in dst.
//
// Work buffer (shared by the node's threads):
//   [ the inner mul_mat's work | routing | gathered activations | scratch result ]
// The inner work is the largest a chunk of 1 .. chunk_cols columns needs, so the buffer
// depends on the node only (not on the ids).

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/mul_mat.hpp>
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
    std::size_t inner = 0;   ///< the inner mul_mat's work bytes (at the buffer's start)
    std::size_t routing = 0; ///< offsets from the 64-byte aligned address after the inner work
    std::size_t gathered = 0, scratch = 0, bytes = 0;

    layout(const tensor& dst, int nth) noexcept {
        const tensor& as = *dst.src[0];
        K = as.ne[0];
        M = as.ne[1];
        n_expert = as.ne[2];
        n_used = dst.ne[1];
        n_cols = dst.ne[1] * dst.ne[2];
        for (i64 n = 1; n <= std::min(n_cols, chunk_cols); ++n) {
            inner_node in(as, 0, n, nullptr, nullptr);
            inner = std::max(inner, mul_mat_work_size(in.dst, nth));
        }
        gathered = round64(routing_bytes());
        scratch = gathered + round64(static_cast<std::size_t>(K * n_cols) * sizeof(float));
        bytes = inner + 64 + scratch + static_cast<std::size_t>(M * n_cols) * sizeof(float);
    }

    /// Routing: a flag (an id out of range); for each expert where its columns start in
    /// `order` (n_expert + 1 values) and a cursor (n_expert); `order`, the columns by
    /// expert; `where`, each column's place in order (-1 for an id out of range).
    [[nodiscard]] std::size_t routing_bytes() const noexcept {
        return static_cast<std::size_t>(1 + (n_expert + 1) + n_expert + 2 * n_cols) * sizeof(i64);
    }
};

/// The 64-byte aligned address at or after p.
inline std::byte* align64(std::byte* p) noexcept {
    const auto u = reinterpret_cast<std::uintptr_t>(p);
    return p + ((64 - u % 64) % 64);
}

/// The work buffer's parts.
struct parts {
    i64* bad;    ///< nonzero when an id is out of range
    i64* start;  ///< [n_expert + 1]
    i64* cursor; ///< [n_expert]
    i64* order;  ///< [n_cols]
    i64* where;  ///< [n_cols]
    float* gathered;
    float* scratch;

    parts(void* wdata, const layout& l) noexcept {
        std::byte* base = align64(static_cast<std::byte*>(wdata) + l.inner);
        bad = reinterpret_cast<i64*>(base);
        start = bad + 1;
        cursor = start + l.n_expert + 1;
        order = cursor + l.n_expert;
        where = order + l.n_cols;
        gathered = reinterpret_cast<float*>(base + l.gathered);
        scratch = reinterpret_cast<float*>(base + l.scratch);
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
    for (i64 e = 0; e < l.n_expert; ++e) w.start[e + 1] += w.start[e];
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

/// Step 2 (thread p.ith's share): the routed columns' activations, as f32, in order.
inline void gather(const compute_params& p, const tensor& b, const layout& l, const parts& w) noexcept {
    const i64 routed = w.start[l.n_expert];
    const auto [q0, q1] = split_work(routed, p);
    for (i64 q = q0; q < q1; ++q) {
        const i64 c = w.order[q];
        const i64 s = c % l.n_used, t = c / l.n_used;
        kernels::read_row_f32(b.type, kernels::row_ptr(b, s % b.ne[1], t, 0), b.nb[0], 0, l.K,
                              w.gathered + static_cast<std::size_t>(q * l.K));
    }
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
/// expert's matrix times contiguous f32 columns.
inline bool mul_mat_id_applies(const tensor& dst) noexcept {
    const tensor* as = dst.src[0];
    if (as == nullptr || dst.src[1] == nullptr || dst.src[2] == nullptr || dst.nelements() <= 0) return false;
    mul_mat_id_detail::inner_node in(*as, 0, 1, nullptr, nullptr);
    return mul_mat_applies(in.dst);
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
    d::gather(p, *dst.src[1], l, w);
    p.barrier();
    compute_params inner = p;
    inner.wsize = l.inner;
    for (d::i64 e = 0; e < l.n_expert; ++e) {
        for (d::i64 q = w.start[e]; q < w.start[e + 1]; q += d::chunk_cols) {
            const d::i64 n = std::min(d::chunk_cols, w.start[e + 1] - q);
            d::inner_node in(as, e, n, w.gathered + static_cast<std::size_t>(q * l.K),
                             w.scratch + static_cast<std::size_t>(q * l.M));
            if (const errc r = fast::mul_mat(inner, in.dst); r != errc::ok) return r;
            p.barrier(); // the inner work buffer is the next chunk's
        }
    }
    d::scatter(p, dst, l, w);
    return *w.bad != 0 ? errc::out_of_range : errc::ok;
}

} // namespace backplane::cpu::fast

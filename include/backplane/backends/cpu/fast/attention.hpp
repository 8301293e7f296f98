#pragma once
// flash_attn_ext's fast kernel, for k and v of f32 or f16 (any pair): a tiled online
// softmax per query row (query, head, sequence). A tile of 8 positions is scored first
// (the dot products of q with k's rows, vectorised, f16 widened with F16C; AVX-512 reads
// four rows side by side), the running maximum M moves once per tile (the sum S and the
// weighted sum of v rescaled then), and the tile's values are added to the sum (exp(score
// - M) v; AVX-512 keeps 128 values of the sum in registers over the tile). k's and v's
// rows stream side by side, each prefetched well ahead (`prefetch`).
//
// Grouped-query heads: on AVX-512 (and AVX2, for heads whose sizes are multiples of 8) the
// query heads that read one key-value head are taken together, 2, 4 or 8 at a time
// (attention_group.hpp: each k and v row read and widened once for the group, a tile of
// 16 positions, no horizontal sum per dot product); a single head goes through the row
// kernel above. A work unit is such a piece of a group for one query.
//
// Threads share the units. A single query (decode: n_q == 1) with fewer units than the
// threads can keep busy is also split along the positions: each chunk of positions
// leaves its partial (M, S, sum) per row in the work buffer, and after a barrier each
// thread reduces the partials of its share of the rows (rescaling each to the largest M).
// The sinks join at the end, as one more partial without a value.
//
// Numerics against the reference kernel (kernels/attention.hpp): the same f32 formulas,
// with the dot products summed over vector lanes, the rescaling done per tile (per chunk,
// then once more in the reduction) rather than per position, on AVX-512 and AVX2 the
// weights' exp a polynomial accurate to about 1 ulp and the soft-cap's tanh to about
// 2 ulp (fast/rowwise.hpp's).

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/attention_group.hpp>
#include <backplane/backends/cpu/fast/rowwise.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/backends/cpu/kernels/common.hpp>
#include <backplane/core/alibi.hpp>
#include <backplane/core/detail/unroll.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>

#if BACKPLANE_HAS_X86_KERNELS
#include <backplane/backends/cpu/detail/x86_intrinsics.hpp>
#endif

namespace backplane::cpu::fast {

namespace attention_detail {

using i64 = std::int64_t;
using kernels::load;

/// Positions scored before the running maximum moves and their values are added: a few,
/// so that k's and v's rows stream from memory side by side (64 positions of k, then 64
/// of v, left one thread at 0.8 of this speed on the 2-core VM).
inline constexpr i64 tile = 8;
inline constexpr i64 min_chunk = 64; ///< positions at least in a chunk of a split query
/// Bytes read ahead of each k and v row (into the next rows of a contiguous cache). On the
/// 2-core VM (one thread, decode over 4096 positions of 32 f16 heads of 128) the hardware
/// prefetcher alone gave about a fifth of the unfused mat-vecs' speed, 1024 bytes ahead
/// (the mat-vec's distance, gemm/avx512.hpp) about half, 3072 and 8192 0.8 to 0.9: two
/// streams side by side want more lead than the mat-vec's four.
inline constexpr std::size_t prefetch = 8192;

// ---------------------------------------------------------------------------------------
// The vector primitives, per instruction-set level: dot(q, row) and acc += w * row for a
// row of T (float or f16_t) at any address; and over a tile of rows (ld bytes apart):
// the scores and the weighted sum (the weights exp(score - m) and the rescaling are
// rowwise.hpp's exp_shift and scale_row, `V::rows`). The tile
// functions of row_tiles call the row functions once per row; AVX-512 has its own
// (several rows per pass, the sum kept in registers).

template <class P> struct row_tiles {
    /// s[j] = dot(q, row j) for the tile's `count` rows of n values.
    template <class T>
    static void dot_tile(const float* q, const std::byte* k, std::size_t ld, i64 count, i64 n, float* s) noexcept {
        for (i64 j = 0; j < count; ++j) s[j] = P::template dot<T>(q, k + static_cast<std::size_t>(j) * ld, n);
    }
    /// acc += w[j] * row j over the tile's rows of n values.
    template <class T>
    static void axpy_tile(const float* w, const std::byte* v, std::size_t ld, i64 count, float* acc, i64 n) noexcept {
        for (i64 j = 0; j < count; ++j)
            if (w[j] != 0.0f) P::template axpy<T>(w[j], v + static_cast<std::size_t>(j) * ld, acc, n);
    }
};

struct portable : row_tiles<portable> {
    template <class T> static float dot(const float* q, const std::byte* k, i64 n) noexcept {
        float acc[8] = {};
        i64 i = 0;
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; ++j) acc[j] += q[i + j] * load<T>(k + (i + j) * i64{sizeof(T)});
        for (int j = 0; i < n; ++i, ++j) acc[j] += q[i] * load<T>(k + i * i64{sizeof(T)});
        return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
    template <class T> static void axpy(float w, const std::byte* v, float* acc, i64 n) noexcept {
        for (i64 i = 0; i < n; ++i) acc[i] += w * load<T>(v + i * i64{sizeof(T)});
    }
    using rows = rowwise_detail::portable; ///< exp_shift (the weights) and scale_row (rescaling)
    /// A tile's scores turned into logits in place (as avx512_group::logits): times scale,
    /// soft-capped, plus slope times the f16 mask; a position masked with -inf is -inf.
    static float logits(float* s, i64 n, float scale, float cap, const std::byte* mask, float slope) noexcept {
        float tmax = ninf;
        for (i64 j = 0; j < n; ++j) {
            const float mv = mask ? slope * load<f16_t>(mask + j * 2) : 0.0f;
            float x = s[j] * scale;
            if (cap != 0.0f) x = cap * std::tanh(x);
            s[j] = mv == ninf ? ninf : x + mv;
            tmax = std::max(tmax, s[j]);
        }
        return tmax;
    }
};

#if BACKPLANE_HAS_X86_KERNELS

BACKPLANE_X86_KERNELS_BEGIN

struct avx512 {
    using rows = rowwise_detail::avx512;
    using io = avx512_group; ///< lanes, load16, fetch_at
    static constexpr auto logits = &io::logits;
    BACKPLANE_TARGET_AVX512 static inline __mmask16 lanes(i64 left) noexcept { return io::lanes(left); }
    /// Values [i, i + 16) of a row of T, the lanes past n zero.
    template <class T> BACKPLANE_TARGET_AVX512 static inline __m512 row16(const std::byte* p, i64 i, i64 n) noexcept {
        const std::byte* at = p + i * i64{sizeof(T)};
        io::fetch_at<T>(at, i, prefetch);
        return io::load16<T>(at, lanes(n - i));
    }
    template <class T>
    BACKPLANE_TARGET_AVX512 static float dot(const float* q, const std::byte* k, i64 n) noexcept {
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        i64 i = 0;
        for (; i + 32 <= n; i += 32) {
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), row16<T>(k, i, n), a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i + 16), row16<T>(k, i + 16, n), a1);
        }
        for (; i < n; i += 16) {
            const __mmask16 m = lanes(n - i);
            a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + i), row16<T>(k, i, n), a0);
        }
        return rowwise_detail::avx512::hsum(_mm512_add_ps(a0, a1));
    }
    template <class T>
    BACKPLANE_TARGET_AVX512 static void axpy(float w, const std::byte* v, float* acc, i64 n) noexcept {
        const __m512 wv = _mm512_set1_ps(w);
        for (i64 i = 0; i < n; i += 16) {
            const __mmask16 m = lanes(n - i);
            const __m512 a = _mm512_maskz_loadu_ps(m, acc + i);
            _mm512_mask_storeu_ps(acc + i, m, _mm512_fmadd_ps(wv, row16<T>(v, i, n), a));
        }
    }

    /// Four rows per pass: q's vector loaded once for the four, four streams read side by
    /// side.
    template <class T>
    BACKPLANE_TARGET_AVX512 static void dot_tile(const float* q, const std::byte* k, std::size_t ld, i64 count, i64 n,
                                                 float* s) noexcept {
        i64 j = 0;
        for (; j + 4 <= count; j += 4) {
            const std::byte* r = k + static_cast<std::size_t>(j) * ld;
            __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
            for (i64 i = 0; i < n; i += 16) {
                const __m512 qv = _mm512_maskz_loadu_ps(lanes(n - i), q + i);
BACKPLANE_UNROLL(4)
                for (int t = 0; t < 4; ++t)
                    a[t] = _mm512_fmadd_ps(qv, row16<T>(r + static_cast<std::size_t>(t) * ld, i, n), a[t]);
            }
BACKPLANE_UNROLL(4)
            for (int t = 0; t < 4; ++t) s[j + t] = rowwise_detail::avx512::hsum(a[t]);
        }
        for (; j < count; ++j) s[j] = dot<T>(q, k + static_cast<std::size_t>(j) * ld, n);
    }

    /// The sum kept in registers: 128 values of it at a time (a head of 128 in one pass,
    /// each row read once, start to end), over every row of the tile.
    template <class T>
    BACKPLANE_TARGET_AVX512 static void axpy_tile(const float* w, const std::byte* v, std::size_t ld, i64 count,
                                                  float* acc, i64 n) noexcept {
        constexpr int nv = 8;
        for (i64 d0 = 0; d0 < n; d0 += 16 * nv) {
            __mmask16 m[nv];
            __m512 a[nv];
BACKPLANE_UNROLL(8)
            for (int t = 0; t < nv; ++t) {
                m[t] = lanes(n - d0 - 16 * t);
                a[t] = _mm512_maskz_loadu_ps(m[t], acc + d0 + 16 * t);
            }
            const std::byte* p = v + d0 * i64{sizeof(T)};
            for (i64 j = 0; j < count; ++j, p += ld) {
                if (w[j] == 0.0f) continue;
                const __m512 wv = _mm512_set1_ps(w[j]);
BACKPLANE_UNROLL(8)
                for (int t = 0; t < nv; ++t) {
                    if (m[t] == 0) break;
                    const std::byte* pt = p + 16 * t * i64{sizeof(T)};
                    io::fetch_at<T>(pt, 16 * t, prefetch);
                    a[t] = _mm512_fmadd_ps(wv, io::load16<T>(pt, m[t]), a[t]);
                }
            }
BACKPLANE_UNROLL(8)
            for (int t = 0; t < nv; ++t) _mm512_mask_storeu_ps(acc + d0 + 16 * t, m[t], a[t]);
        }
    }
};

struct avx2 : row_tiles<avx2> {
    using rows = rowwise_detail::avx2;
    using io = avx2_group; ///< load8, fetch_at
    static constexpr auto logits = &io::logits;
    /// Values [i, i + 8) of a row of T (all eight there).
    template <class T> BACKPLANE_TARGET_AVX2 static inline __m256 row8(const std::byte* p, i64 i) noexcept {
        const std::byte* at = p + i * i64{sizeof(T)};
        io::fetch_at<T>(at, i, prefetch);
        return io::load8<T>(at);
    }
    template <class T> BACKPLANE_TARGET_AVX2 static float dot(const float* q, const std::byte* k, i64 n) noexcept {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        i64 i = 0;
        for (; i + 16 <= n; i += 16) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), row8<T>(k, i), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), row8<T>(k, i + 8), a1);
        }
        for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), row8<T>(k, i), a0);
        float r = rowwise_detail::avx2::hsum(_mm256_add_ps(a0, a1));
        for (; i < n; ++i) r += q[i] * load<T>(k + i * i64{sizeof(T)});
        return r;
    }
    template <class T> BACKPLANE_TARGET_AVX2 static void axpy(float w, const std::byte* v, float* acc, i64 n) noexcept {
        const __m256 wv = _mm256_set1_ps(w);
        i64 i = 0;
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, row8<T>(v, i), _mm256_loadu_ps(acc + i)));
        for (; i < n; ++i) acc[i] += w * load<T>(v + i * i64{sizeof(T)});
    }
};

BACKPLANE_X86_KERNELS_END

#endif // BACKPLANE_HAS_X86_KERNELS

// ---------------------------------------------------------------------------------------
// The driver

/// The running state of one query row over some positions: maximum, sum, weighted sum.
struct partial {
    float m = ninf;
    float s = 0.0f;
    float* acc = nullptr; ///< D_v values
};

/// What every row of the node shares: its tensors and parameters.
struct problem {
    const tensor& q;
    const tensor& k;
    const tensor& v;
    const tensor* mask;
    const tensor* sinks;
    i64 dk, dv, n_kv, group, rows;
    float scale, softcap, max_bias;

    explicit problem(const tensor& dst) noexcept
        : q(*dst.src[0]), k(*dst.src[1]), v(*dst.src[2]), mask(dst.src[3]), sinks(dst.src[4]), dk(q.ne[0]),
          dv(v.ne[0]), n_kv(k.ne[1]), group(q.ne[2] / k.ne[2]), rows(q.nrows()),
          scale(dst.param<float>(2) != 0.0f ? dst.param<float>(0) / dst.param<float>(2) : dst.param<float>(0)),
          softcap(dst.param<float>(2)), max_bias(dst.param<float>(1)) {}
};

/// Moves st's running maximum up to m (m > st.m), rescaling its sum and weighted sum.
template <class V> void raise_max(partial& st, float m, i64 dv) noexcept {
    const float ms = std::exp(st.m - m);
    V::rows::scale_row(st.acc, dv, ms);
    st.s *= ms;
    st.m = m;
}

/// Folds a tile's logits s[0..n) (their maximum tmax, not -inf) into st's maximum and sum;
/// s becomes the weights exp(s - M), 0 for a logit of -inf.
template <class V> void absorb(partial& st, float* s, i64 n, float tmax, i64 dv) noexcept {
    if (tmax > st.m) raise_max<V>(st, tmax, dv);
    st.s += V::rows::exp_shift(s, n, st.m);
}

/// Adds positions [c0, c1) of query row r (q already in qf) to st, a tile at a time.
template <class V, class TK, class TV>
void attend(const problem& pb, i64 r, const float* qf, i64 c0, i64 c1, partial& st) noexcept {
    const auto [iq, h, i3] = kernels::row_of(r, pb.q.ne);
    const std::byte* kbase = kernels::row_ptr(pb.k, 0, h / pb.group, i3);
    const std::byte* vbase = kernels::row_ptr(pb.v, 0, h / pb.group, i3);
    const std::byte* pm = pb.mask ? kernels::row_ptr(*pb.mask, iq, h % pb.mask->ne[2], i3 % pb.mask->ne[3]) : nullptr;
    const float slope = alibi::slope(pb.max_bias, static_cast<int>(pb.q.ne[2]), static_cast<int>(h));
    alignas(64) float s[group_tile]; // scores, logits, then weights (the logits pass writes 16)
    for (i64 j0 = c0; j0 < c1; j0 += tile) {
        const i64 n = std::min(tile, c1 - j0);
        V::template dot_tile<TK>(qf, kbase + static_cast<std::size_t>(j0) * pb.k.nb[1], pb.k.nb[1], n, pb.dk, s);
        // a position masked with -inf is skipped, as ggml skips it
        const float tmax = V::logits(s, n, pb.scale, pb.softcap, pm ? pm + j0 * 2 : nullptr, slope);
        if (tmax == ninf) continue; // every position of the tile masked
        absorb<V>(st, s, n, tmax, pb.dv);
        V::template axpy_tile<TV>(s, vbase + static_cast<std::size_t>(j0) * pb.v.nb[1], pb.v.nb[1], n, st.acc, pb.dv);
    }
}

/// Folds `from` (its sum `from_acc`, or no value when null: a sink) into `into`.
template <class V> void merge(partial& into, float m, float s, const float* from_acc, i64 dv) noexcept {
    if (m == ninf) return;
    if (m > into.m) raise_max<V>(into, m, dv);
    const float f = std::exp(m - into.m);
    into.s += s * f;
    if (from_acc != nullptr)
        for (i64 d = 0; d < dv; ++d) into.acc[d] += f * from_acc[d];
}

/// Row r's result from its state: the sink folded in, then the sum divided by S.
template <class V> void finish(const problem& pb, tensor& dst, i64 r, partial& st) noexcept {
    const auto [iq, h, i3] = kernels::row_of(r, pb.q.ne);
    if (pb.sinks != nullptr) {
        const float sink = load<float>(kernels::row_ptr(*pb.sinks, 0, 0, 0) + static_cast<std::size_t>(h) * pb.sinks->nb[0]);
        merge<V>(st, sink, 1.0f, nullptr, pb.dv);
    }
    const float inv = st.s == 0.0f ? 0.0f : 1.0f / st.s;
    std::byte* out = kernels::row_ptr(dst, h, iq, i3);
    for (i64 d = 0; d < pb.dv; ++d) kernels::store<float>(out + static_cast<std::size_t>(d) * dst.nb[0], st.acc[d] * inv);
}

/// The query rows a work item computes together: G heads of one query (iq, sequence i3)
/// that read the same key-value head, G a piece of the group (attention_group.hpp).
struct unit {
    i64 iq, h0, rows, i3;
};

/// Pieces per key-value head, and the units of the node: per query, sequence, key-value
/// head and piece.
inline i64 unit_count(const tensor& dst) noexcept {
    const tensor& q = *dst.src[0];
    const i64 group = q.ne[2] / dst.src[1]->ne[2];
    return q.ne[1] * dst.src[1]->ne[2] * pieces_of(group) * q.ne[3];
}
inline unit unit_of(const problem& pb, i64 u) noexcept {
    const i64 n_q = pb.q.ne[1], pieces = pieces_of(pb.group), n_kv_head = pb.k.ne[2];
    const i64 iq = u % n_q;
    u /= n_q;
    const piece pc = piece_of(pb.group, u % pieces);
    u /= pieces;
    const i64 hk = u % n_kv_head;
    return {iq, hk * pb.group + pc.first, pc.rows, u / n_kv_head};
}
/// Row number of head h of the unit (rows are numbered query first, as q's).
inline i64 row_in(const problem& pb, const unit& un, i64 g) noexcept {
    return un.iq + pb.q.ne[1] * (un.h0 + g + pb.q.ne[2] * un.i3);
}

/// Chunks of positions per unit with nth threads: more than one only for a single query
/// whose units are too few for the threads, each chunk at least min_chunk positions.
inline i64 chunks_of(const tensor& dst, int nth) noexcept {
    const i64 units = unit_count(dst), n_kv = dst.src[1]->ne[1];
    if (dst.src[0]->ne[1] != 1 || nth <= 1 || units <= 0 || units >= 4 * nth) return 1;
    return std::clamp<i64>((4 * nth + units - 1) / units, 1, std::max<i64>(1, n_kv / min_chunk));
}

/// Floats of one partial in the work buffer: M, S, then D_v sums.
inline i64 partial_floats(const tensor& dst) noexcept { return 2 + dst.ne[0]; }

#if BACKPLANE_HAS_X86_KERNELS
/// Positions [c0, c1) of the G rows of a unit (their q in qf, G x dk; their sums in
/// st[g].acc, G x dv contiguous) with a group kernel (Kern's scores and sums; V's logits,
/// rescaling and weights), a tile of 16 at a time.
template <class Kern, class V, int G, class TK, class TV>
void attend_group(const problem& pb, const unit& un, const float* qf, i64 c0, i64 c1, partial* st) noexcept {
    const i64 hk = un.h0 / pb.group;
    const std::byte* kbase = kernels::row_ptr(pb.k, 0, hk, un.i3);
    const std::byte* vbase = kernels::row_ptr(pb.v, 0, hk, un.i3);
    const std::byte* pm[G];
    float slope[G];
    for (int g = 0; g < G; ++g) {
        const i64 h = un.h0 + g;
        pm[g] = pb.mask ? kernels::row_ptr(*pb.mask, un.iq, h % pb.mask->ne[2], un.i3 % pb.mask->ne[3]) : nullptr;
        slope[g] = alibi::slope(pb.max_bias, static_cast<int>(pb.q.ne[2]), static_cast<int>(h));
    }
    alignas(64) float s[G * group_tile]; // scores, then weights
    for (i64 j0 = c0; j0 < c1; j0 += group_tile) {
        const i64 n = std::min(group_tile, c1 - j0);
        Kern::template scores<G, TK>(qf, pb.dk, kbase + static_cast<std::size_t>(j0) * pb.k.nb[1], pb.k.nb[1], n, prefetch, s);
        for (int g = 0; g < G; ++g) {
            float* sg = s + g * group_tile;
            const float tmax = V::logits(sg, n, pb.scale, pb.softcap, pm[g] ? pm[g] + j0 * 2 : nullptr, slope[g]);
            if (tmax == ninf) { // every position of the tile masked for this row
                std::fill(sg, sg + group_tile, 0.0f);
                continue;
            }
            absorb<V>(st[g], sg, n, tmax, pb.dv);
        }
        Kern::template accumulate<G, TV>(s, vbase + static_cast<std::size_t>(j0) * pb.v.nb[1], pb.v.nb[1], n, st[0].acc, pb.dv,
                                         prefetch);
    }
}

/// Positions [c0, c1) of a unit of 2, 4 or 8 rows with the group kernel Kern.
template <class Kern, class V, class TK, class TV>
void attend_grouped(const problem& pb, const unit& un, const float* qf, i64 c0, i64 c1, partial* st) noexcept {
    switch (un.rows) {
    case 2: return attend_group<Kern, V, 2, TK, TV>(pb, un, qf, c0, c1, st);
    case 4: return attend_group<Kern, V, 4, TK, TV>(pb, un, qf, c0, c1, st);
    default: return attend_group<Kern, V, 8, TK, TV>(pb, un, qf, c0, c1, st);
    }
}
#endif

/// Positions [c0, c1) of the rows of a unit: a group kernel for several rows on AVX-512
/// (AVX2: heads whose sizes are multiples of 8), else row by row.
template <class V, class TK, class TV>
void attend_unit(const problem& pb, const unit& un, const float* qf, i64 c0, i64 c1, partial* st) noexcept {
#if BACKPLANE_HAS_X86_KERNELS
    if (un.rows > 1) {
        if constexpr (std::is_same_v<V, avx512>) return attend_grouped<avx512_group, V, TK, TV>(pb, un, qf, c0, c1, st);
        if constexpr (std::is_same_v<V, avx2>)
            if (pb.dk % 8 == 0 && pb.dv % 8 == 0) return attend_grouped<avx2_group, V, TK, TV>(pb, un, qf, c0, c1, st);
    }
#endif
    for (i64 g = 0; g < un.rows; ++g) attend<V, TK, TV>(pb, row_in(pb, un, g), qf + g * pb.dk, c0, c1, st[g]);
}

/// Work items [b, e) of thread p (items are units x chunks, unit-major): each computed
/// into its rows' partials (several chunks) or straight into dst (one chunk).
template <class V, class TK, class TV>
bool run_items(const compute_params& p, tensor& dst, const problem& pb, i64 chunks) noexcept {
    constexpr i64 G = max_group_rows;
    const std::unique_ptr<float[]> buf(new (std::nothrow) float[static_cast<std::size_t>(G * (pb.dk + pb.dv))]);
    if (!buf) return false;
    float* qf = buf.get();
    float* acc = qf + G * pb.dk;
    const i64 span = (pb.n_kv + chunks - 1) / chunks;
    const auto [b, e] = split_work(unit_count(dst) * chunks, p);
    for (i64 item = b; item < e; ++item) {
        const unit un = unit_of(pb, item / chunks);
        const i64 c = item % chunks;
        partial st[G];
        for (i64 g = 0; g < un.rows; ++g) {
            const i64 h = un.h0 + g;
            kernels::read_row_f32(pb.q.type, kernels::row_ptr(pb.q, un.iq, h, un.i3), pb.q.nb[0], 0, pb.dk, qf + g * pb.dk);
            st[g].acc = acc + g * pb.dv;
        }
        std::fill(acc, acc + un.rows * pb.dv, 0.0f);
        attend_unit<V, TK, TV>(pb, un, qf, c * span, std::min(pb.n_kv, (c + 1) * span), st);
        for (i64 g = 0; g < un.rows; ++g) {
            const i64 r = row_in(pb, un, g);
            if (chunks == 1) {
                finish<V>(pb, dst, r, st[g]);
                continue;
            }
            float* out = static_cast<float*>(p.wdata) + (r * chunks + c) * partial_floats(dst);
            out[0] = st[g].m;
            out[1] = st[g].s;
            std::memcpy(out + 2, st[g].acc, static_cast<std::size_t>(pb.dv) * sizeof(float));
        }
    }
    return true;
}

/// After the barrier: thread p's rows from their chunks' partials.
template <class V> bool reduce_rows(const compute_params& p, tensor& dst, const problem& pb, i64 chunks) noexcept {
    const std::unique_ptr<float[]> acc(new (std::nothrow) float[static_cast<std::size_t>(pb.dv)]);
    if (!acc) return false;
    const auto [b, e] = split_work(pb.rows, p);
    for (i64 r = b; r < e; ++r) {
        std::fill(acc.get(), acc.get() + pb.dv, 0.0f);
        partial st{.acc = acc.get()};
        for (i64 c = 0; c < chunks; ++c) {
            const float* part = static_cast<const float*>(p.wdata) + (r * chunks + c) * partial_floats(dst);
            merge<V>(st, part[0], part[1], part + 2, pb.dv);
        }
        finish<V>(pb, dst, r, st);
    }
    return true;
}

template <class V, class TK, class TV> errc run(const compute_params& p, tensor& dst) noexcept {
    const problem pb(dst);
    const i64 chunks = chunks_of(dst, p.nth);
    bool ok = run_items<V, TK, TV>(p, dst, pb, chunks);
    if (chunks == 1) return ok ? errc::ok : errc::alloc_failed;
    p.barrier(); // every thread reaches it, even one that failed, or the others would wait forever
    ok = reduce_rows<V>(p, dst, pb, chunks) && ok;
    return ok ? errc::ok : errc::alloc_failed;
}

template <class V> errc run_types(const compute_params& p, tensor& dst) noexcept {
    const bool k16 = dst.src[1]->type == elem_type::f16, v16 = dst.src[2]->type == elem_type::f16;
    if (k16 && v16) return run<V, f16_t, f16_t>(p, dst);
    if (k16) return run<V, f16_t, float>(p, dst);
    if (v16) return run<V, float, f16_t>(p, dst);
    return run<V, float, float>(p, dst);
}

} // namespace attention_detail

/// True when the fast kernel computes this flash_attn_ext node: k and v of f32 or f16
/// (q is f32 and every row contiguous by the op's rule).
inline bool attention_applies(const tensor& dst) noexcept {
    const auto f = [](const tensor* t) { return t->type == elem_type::f32 || t->type == elem_type::f16; };
    return dst.op == op_kind::flash_attn_ext && f(dst.src[1]) && f(dst.src[2]);
}

/// How many threads can share the node: its query rows, times the chunks of positions a
/// single query may be split into.
inline std::int64_t attention_split_units(const tensor& dst) noexcept {
    const std::int64_t units = attention_detail::unit_count(dst);
    return dst.src[0]->ne[1] == 1 ? units * std::max<std::int64_t>(1, dst.src[1]->ne[1] / attention_detail::min_chunk)
                                  : units;
}

/// Work buffer bytes with nth threads: the partials when the positions are split.
inline std::size_t attention_work_size(const tensor& dst, int nth) noexcept {
    const std::int64_t chunks = attention_detail::chunks_of(dst, nth);
    if (chunks == 1) return 0;
    return static_cast<std::size_t>(dst.src[0]->nrows() * chunks * attention_detail::partial_floats(dst)) * sizeof(float);
}

/// Thread p.ith's share of the node. Call only when attention_applies(dst), with a work
/// buffer of attention_work_size(dst, p.nth) bytes and, when that is not 0, a barrier.
/// errc::alloc_failed when a thread finds no memory for its rows of q and the sum.
template <class = void>
[[nodiscard]] inline errc attention(const compute_params& p, tensor& dst) noexcept {
#if BACKPLANE_HAS_X86_KERNELS
    if (p.level == isa::avx512) return attention_detail::run_types<attention_detail::avx512>(p, dst);
    if (p.level == isa::avx2) return attention_detail::run_types<attention_detail::avx2>(p, dst);
#endif
    return attention_detail::run_types<attention_detail::portable>(p, dst);
}

} // namespace backplane::cpu::fast

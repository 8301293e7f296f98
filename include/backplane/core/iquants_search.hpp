#pragma once
// The quantizers of the lattice i-quants, for model files only (quantize_weights_row): a
// lattice type's blocks index a grid of allowed magnitude patterns, so its quantizer is a
// search, which ggml's CPU does not run in its ops (no from_float). Here, bit for bit,
// ggml's quantizers without an importance matrix (what llama-quantize runs for a tensor
// it has none for): iq3_xxs (quantize_iq3_xxs), iq3_s (quantize_iq3_s), iq2_s
// (quantize_iq2_s) and iq1_m (quantize_iq1_m). iq2_xxs, iq2_xs and iq1_s ggml quantizes
// only with one (ggml_quantize_requires_imatrix). llama-quantize also asks for one for
// iq3_xxs, iq2_s and iq1_m, but for the token embedding and output; ggml's quantizers take
// them without.
//
// The searches need, for every pattern of codes a group of values can round to (a key), the
// grid entry it is, or the grid entries nearest to it; ggml builds those tables at
// ggml_quantize_init, here they are built once, on first use, thread-safely (a
// function-local static per grid: iq3xxs_lattice(), iq3s_lattice(), iq2s_lattice(),
// iq1_lattice()).

#include <backplane/core/detail/iq_grids.hpp>
#include <backplane/core/detail/unfused.hpp>
#include <backplane/core/iquants.hpp>
#include <backplane/core/kquants.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

namespace backplane {

namespace detail {

/// A grid as its quantizer sees it: each entry a group of Dim codes of Bits bits (the
/// magnitudes, or levels, the group's values round to), keyed by the codes packed from the
/// lowest bits up. The search rounds a group to codes in [0, max_code] only, so only those
/// keys have a neighbour list.
template <int Dim, int Bits> struct iq_lattice {
    static constexpr int dim = Dim;
    static constexpr int keys = 1 << (Dim * Bits);

    int max_code = 0;
    std::vector<std::array<std::uint8_t, Dim>> codes; ///< entry g's codes
    /// Per key: its entry (>= 0), or -(offset + 1) of its neighbour list in `neighbours`: a
    /// count n, then n entries. -1 for a key with a code above max_code (never looked up).
    std::vector<int> map;
    std::vector<std::uint16_t> neighbours;

    static int key_of(const std::uint8_t* l) noexcept {
        int key = 0;
        for (int i = 0; i < Dim; ++i)
            key |= l[i] << (Bits * i);
        return key;
    }
    static int code_of_key(int key, int i) noexcept {
        return (key >> (Bits * i)) & ((1 << Bits) - 1);
    }

    bool reachable(int key) const noexcept {
        for (int i = 0; i < Dim; ++i)
            if (code_of_key(key, i) > max_code)
                return false;
        return true;
    }

    /// The list of an off-grid key: its count, then its entries.
    const std::uint16_t* neighbours_of(int key) const noexcept {
        return neighbours.data() - map[key] - 1;
    }

    /// `entries` entries, entry g's i-th code code_of(g, i); an off-grid key lists the
    /// entries at the `distances` smallest distances from it (squared, in codes) that any
    /// entry has, nearest first, equals in entry order: ggml's lists (iq2xs_init_impl,
    /// iq3xs_init_impl).
    template <class CodeOf>
    iq_lattice(int entries, CodeOf code_of, int max_code_, int distances)
        : max_code(max_code_), codes(static_cast<std::size_t>(entries)), map(keys, -1) {
        for (int g = 0; g < entries; ++g) {
            for (int i = 0; i < Dim; ++i)
                codes[g][i] = static_cast<std::uint8_t>(code_of(g, i));
            map[key_of(codes[g].data())] = g;
        }
        std::vector<int> d2(codes.size());
        for (int key = 0; key < keys; ++key)
            if (map[key] < 0 && reachable(key))
                add_neighbours(key, distances, d2);
    }

  private:
    void add_neighbours(int key, int distances, std::vector<int>& d2) {
        std::vector<int> nearest; // the smallest distinct distances, ascending
        for (std::size_t g = 0; g < codes.size(); ++g) {
            int d = 0;
            for (int i = 0; i < Dim; ++i) {
                const int diff = codes[g][i] - code_of_key(key, i);
                d += diff * diff;
            }
            d2[g] = d;
            const auto at = std::lower_bound(nearest.begin(), nearest.end(), d);
            if ((at == nearest.end() || *at != d) && at - nearest.begin() < distances) {
                nearest.insert(at, d);
                if (static_cast<int>(nearest.size()) > distances)
                    nearest.pop_back();
            }
        }
        map[key] = -(static_cast<int>(neighbours.size()) + 1);
        const std::size_t count_at = neighbours.size();
        neighbours.push_back(0);
        for (const int d : nearest)
            for (std::size_t g = 0; g < codes.size(); ++g)
                if (d2[g] == d)
                    neighbours.push_back(static_cast<std::uint16_t>(g));
        neighbours[count_at] = static_cast<std::uint16_t>(neighbours.size() - count_at - 1);
    }
};

using iq3_lattice = iq_lattice<4, 3>; ///< iq3_xxs, iq3_s: 4 magnitudes 2 l + 1, l in [0, 7]
using iq2_lattice = iq_lattice<8, 2>; ///< iq2_s: 8 magnitudes, iq1_m: 8 levels; codes in [0, 2]

/// iq3_xxs's lattice (ggml's iq3xs_init_impl(256)): bytes 8 l + 4 (62 for 7); two distances.
inline const iq3_lattice& iq3xxs_lattice() {
    static const iq3_lattice lattice(
        256, [](int g, int i) { return grid_byte(iq3xxs_grid[g], i) >> 3; }, 7, 2);
    return lattice;
}

/// iq3_s's lattice (ggml's iq3xs_init_impl(512)): bytes 2 l + 1; three distances.
inline const iq3_lattice& iq3s_lattice() {
    static const iq3_lattice lattice(
        512, [](int g, int i) { return grid_byte(iq3s_grid[g], i) >> 1; }, 7, 3);
    return lattice;
}

/// iq2_s's lattice (ggml's iq2xs_init_impl for iq2_s): bytes 8, 25, 43 for l = 0, 1, 2; one
/// distance.
inline const iq2_lattice& iq2s_lattice() {
    static const iq2_lattice lattice(
        1024, [](int g, int i) { return (grid_byte(iq2s_grid[g], i) - 8) / 17; }, 2, 1);
    return lattice;
}

/// iq1_s's and iq1_m's lattice (ggml's iq2xs_init_impl for iq1_m): signed bytes -1, 0, 1 for
/// levels l = 0, 1, 2; three distances.
inline const iq2_lattice& iq1_lattice() {
    static const iq2_lattice lattice(
        2048, [](int g, int i) { return static_cast<std::int8_t>(grid_byte(iq1s_grid[g], i)) + 1; },
        2, 3);
    return lattice;
}

/// The magnitude of code l on the iq2 and iq3 grids (in units of the scale): 2 l + 1.
inline float odd_level(int l) noexcept {
    return static_cast<float>(2 * l + 1);
}

/// The neighbour of an off-grid key nearest to the group's values x at `scale`: least
/// sum w (scale level(code) - x)^2, the first of equals (ggml's iq3_find_best_neighbour,
/// iq2_find_best_neighbour, iq1_find_best_neighbour2); its codes are written to l. Where
/// no distance is finite (ggml asserts), the first neighbour.
template <class Lattice, class Level>
int nearest_neighbour(const Lattice& lat, int key, const float* x, const float* w, float scale,
                      Level level, std::uint8_t* l) noexcept {
    const std::uint16_t* list = lat.neighbours_of(key);
    float best_d2 = std::numeric_limits<float>::max();
    int best = list[1];
    for (int j = 1; j <= list[0]; ++j) {
        float d2 = 0.0f;
        for (int i = 0; i < Lattice::dim; ++i) {
            const float diff = unfused(scale * level(lat.codes[list[j]][i])) - x[i];
            d2 += unfused(w[i] * diff * diff);
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = list[j];
        }
    }
    std::memcpy(l, lat.codes[best].data(), Lattice::dim);
    return best;
}

/// The codes of a group's magnitudes x at inverse scale id: round((id x - 1) / 2) in
/// [0, max_code].
template <class Lattice>
void odd_codes(const Lattice& lat, const float* x, float id, std::uint8_t* l) noexcept {
    for (int i = 0; i < Lattice::dim; ++i) {
        const int c = kquant_detail::nearest_int(0.5f * (unfused(id * x[i]) - 1.0f));
        l[i] = static_cast<std::uint8_t>(std::clamp(c, 0, lat.max_code));
    }
}

/// Snaps a group's codes l (of magnitudes x) to the grid: unchanged when on it, else the
/// nearest neighbour at `scale` (weights w). Returns whether they were on it.
template <class Lattice>
bool snap_odd(const Lattice& lat, const float* x, const float* w, float scale,
              std::uint8_t* l) noexcept {
    const int key = Lattice::key_of(l);
    if (lat.map[key] >= 0)
        return true;
    nearest_neighbour(lat, key, x, w, scale, odd_level, l);
    return false;
}

/// The least-squares sums of N codes l (magnitudes 2 l + 1) against magnitudes x, weights w.
template <int N> struct odd_fit {
    float sumqx = 0.0f, sumq2 = 0.0f;
    odd_fit(const float* x, const float* w, const std::uint8_t* l) noexcept {
        for (int i = 0; i < N; ++i) {
            const float q = odd_level(l[i]);
            sumqx += unfused(w[i] * x[i] * q);
            sumq2 += unfused(w[i] * q * q);
        }
    }
};

/// How a sub-block's grid search tries scales: max / (base + step k), k in [-half, half];
/// then, at the best, it rounds again the groups that were off the grid (or, refit_all,
/// every group when any was, or when no trial fitted).
struct grid_search_params {
    int half;
    float step, base;
    bool refit_all;
};

/// The codes of one trial scale (inverse id): each group rounded and snapped at 1 / id.
/// Writes which groups were on the grid.
template <class Lattice, int N>
void grid_trial(const Lattice& lat, const float* xval, const float* wr, float id, std::uint8_t* l,
                bool* on_grid) noexcept {
    const float scale = 1.0f / id;
    for (int k = 0; k < N / Lattice::dim; ++k) {
        odd_codes(lat, xval + Lattice::dim * k, id, l + Lattice::dim * k);
        on_grid[k] = snap_odd(lat, xval + Lattice::dim * k, wr + Lattice::dim * k, scale,
                              l + Lattice::dim * k);
    }
}

/// One sub-block of N magnitudes xval (weights w, their roots wr): the scale of the best
/// trial by (sum w q x)^2 / sum w q^2, its codes in l; the groups to refit then rounded
/// and snapped again at that scale and the scale refitted (ggml's loops in
/// quantize_row_iq3_xxs_impl, quantize_row_iq3_s_impl, quantize_row_iq2_s_impl). Returns the
/// scale.
template <int N, class Lattice>
float grid_search(const Lattice& lat, const grid_search_params& p, const float* xval,
                  const float* w, const float* wr, std::uint8_t* l) noexcept {
    constexpr int groups = N / Lattice::dim;
    std::memset(l, 0, N);
    const float max = *std::max_element(xval, xval + N);
    float best = 0.0f, scale = max / p.base;
    bool on_grid[groups];
    std::fill(on_grid, on_grid + groups, !p.refit_all);
    for (int is = -p.half; is <= p.half; ++is) {
        const float id = (p.base + unfused(static_cast<float>(is) * p.step)) / max;
        std::uint8_t trial[N];
        bool trial_on[groups];
        grid_trial<Lattice, N>(lat, xval, wr, id, trial, trial_on);
        const odd_fit<N> f(xval, w, trial);
        if (f.sumq2 > 0.0f && f.sumqx * f.sumqx > best * f.sumq2) {
            scale = f.sumqx / f.sumq2;
            best = scale * f.sumqx;
            std::memcpy(l, trial, N);
            std::copy(trial_on, trial_on + groups, on_grid);
        }
    }
    if (std::count(on_grid, on_grid + groups, false) == 0 || !(scale > 0.0f))
        return scale;
    const float id = 1.0f / scale;
    for (int k = 0; k < groups; ++k) {
        if (on_grid[k] && !p.refit_all)
            continue;
        odd_codes(lat, xval + Lattice::dim * k, id, l + Lattice::dim * k);
        snap_odd(lat, xval + Lattice::dim * k, wr + Lattice::dim * k, scale, l + Lattice::dim * k);
    }
    const odd_fit<N> f(xval, w, l);
    return f.sumq2 > 0.0f ? f.sumqx / f.sumq2 : scale;
}

/// A group of 8 values: their magnitudes into xval, their signs as the bits of a byte.
inline std::uint8_t split_signs(const float* x, float* xval) noexcept {
    unsigned s = 0;
    for (int i = 0; i < 8; ++i) {
        xval[i] = x[i] >= 0.0f ? x[i] : -x[i];
        if (!(x[i] >= 0.0f))
            s |= 1u << i;
    }
    return static_cast<std::uint8_t>(s);
}

/// Sign groups of a sub-block of 32: each 8 values' magnitudes into xval and their signs as
/// 7 bits (an odd count of negatives flips the sign of the value of least w x^2, the first
/// of equals, so the group's eighth sign is their parity).
inline void iq3_signs(const float* xb, const float* w, float* xval, std::uint8_t* groups) noexcept {
    for (int k = 0; k < 4; ++k) {
        unsigned s = split_signs(xb + 8 * k, xval + 8 * k);
        if (std::popcount(s) % 2) {
            int imin = 0;
            float min = w[8 * k] * xb[8 * k] * xb[8 * k];
            for (int i = 1; i < 8; ++i) {
                const float a = w[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                if (a < min) {
                    min = a;
                    imin = i;
                }
            }
            xval[8 * k + imin] = -xval[8 * k + imin];
            s ^= 1u << imin;
        }
        groups[k] = static_cast<std::uint8_t>(s & 127u);
    }
}

/// iq1_m's three levels of a group of 8 (-1, 0, 1 in units of the scale), shifted by
/// +iq1_delta (shift 0) or -iq1_delta (shift 1).
inline float iq1m_level(int shift, int l) noexcept {
    return static_cast<float>(l - 1) + (shift ? -iq1_delta : iq1_delta);
}

/// The shift of group g (0 or 1) of a sub-block of 16 whose shifts are packed as k: the
/// first group's in bit 1, the second's in bit 0 (ggml's 0: +,+ 1: +,- 2: -,+ 3: -,-).
constexpr int iq1m_shift(int k, int g) noexcept {
    return g == 0 ? k >> 1 : k & 1;
}

/// The order of 16 values ascending, equals in their order (as glibc's qsort, a stable
/// merge sort, leaves ggml's pairs).
inline void ascending_order(const float* x, int* order) noexcept {
    for (int i = 0; i < 16; ++i) {
        int j = i; // insertion: stable, and in bounds whatever the comparisons say (NaN)
        for (; j > 0 && x[i] < x[order[j - 1]]; --j)
            order[j] = order[j - 1];
        order[j] = i;
    }
}

/// iq1_m's best split of a sub-block of 16 values xb (weights w) into levels 0, 1, 2:
/// in ascending order, the first i1 at level 0, up to i2 at level 1, the rest at level 2,
/// with the shifts packed as `shifts`; best by (sum w q x)^2 / sum w q^2 over every
/// i1 <= i2 and shifts, the first of equals, its scale sum w q x / sum w q^2 (ggml's
/// exhaustive search in quantize_row_iq1_m_impl). shifts < 0 where none fits.
struct iq1m_split {
    int shifts = -1;
    float scale = 0.0f;
    std::uint8_t l[16] = {};

    iq1m_split(const float* xb, const float* w) noexcept {
        int order[16];
        ascending_order(xb, order);
        // per position in order, level and shift: w q x and w q^2
        float qx[16][3][2], q2[16][3][2];
        for (int j = 0; j < 16; ++j)
            for (int lev = 0; lev < 3; ++lev)
                for (int s = 0; s < 2; ++s) {
                    const int i = order[j];
                    const float q = iq1m_level(s, lev);
                    qx[j][lev][s] = unfused(w[i] * q * xb[i]);
                    q2[j][lev][s] = unfused(w[i] * q * q);
                }
        float best = -std::numeric_limits<float>::max();
        int best_i1 = 0, best_i2 = 0;
        for (int i1 = 0; i1 <= 16; ++i1)
            for (int i2 = i1; i2 <= 16; ++i2)
                for (int k = 0; k < 4; ++k) {
                    float sumqx = 0.0f, sumq2 = 0.0f;
                    for (int j = 0; j < 16; ++j) {
                        const int lev = j < i1 ? 0 : j < i2 ? 1 : 2;
                        const int s = iq1m_shift(k, order[j] < 8 ? 0 : 1);
                        sumqx += qx[j][lev][s];
                        sumq2 += q2[j][lev][s];
                    }
                    if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
                        scale = sumqx / sumq2;
                        best = scale * sumqx;
                        best_i1 = i1;
                        best_i2 = i2;
                        shifts = k;
                    }
                }
        for (int j = 0; j < 16; ++j)
            l[order[j]] = static_cast<std::uint8_t>(j < best_i1 ? 0 : j < best_i2 ? 1 : 2);
    }
};

/// One iq1_m sub-block of 16 values xb (weights w = x^2) on the grid: the best split
/// (iq1m_split), mirrored if its scale is negative; each group of 8 not on the grid snapped
/// to its nearest neighbour at that scale and, if one was, the scale refitted. Writes the
/// two grid entries and returns the scale and shifts; scale 0 and shifts 0 (entries 0)
/// where no split fits.
inline std::pair<float, int> iq1m_sub_block(const iq2_lattice& lat, const float* xb, const float* w,
                                            int* entries) noexcept {
    iq1m_split split(xb, w);
    entries[0] = entries[1] = 0;
    if (split.shifts < 0)
        return {0.0f, 0};
    float scale = split.scale;
    int k = split.shifts;
    if (scale < 0.0f) {
        for (std::uint8_t& l : split.l)
            l = static_cast<std::uint8_t>(2 - l);
        scale = -scale;
        k = 3 - k;
    }
    bool all_on_grid = true;
    for (int g = 0; g < 2; ++g) {
        const int key = iq2_lattice::key_of(split.l + 8 * g);
        entries[g] = lat.map[key];
        if (entries[g] < 0) {
            all_on_grid = false;
            const int shift = iq1m_shift(k, g);
            entries[g] = nearest_neighbour(
                lat, key, xb + 8 * g, w + 8 * g, scale,
                [shift](int l) { return iq1m_level(shift, l); }, split.l + 8 * g);
        }
    }
    if (all_on_grid)
        return {scale, k};
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int g = 0; g < 2; ++g)
        for (int j = 0; j < 8; ++j) {
            const float q = iq1m_level(iq1m_shift(k, g), lat.codes[entries[g]][j]);
            sumqx += unfused(w[8 * g + j] * q * xb[8 * g + j]);
            sumq2 += unfused(w[8 * g + j] * q * q);
        }
    if (sumqx > 0.0f && sumq2 > 0.0f)
        scale = sumqx / sumq2;
    return {scale, k};
}

/// A sub-block scale's code at inverse super-block scale id: round((id scale - 1) / 2) in
/// [0, max].
inline int odd_scale_code(float id, float scale, int max) noexcept {
    return std::clamp(kquant_detail::nearest_int(0.5f * (unfused(id * scale) - 1.0f)), 0, max);
}

/// Packs sub-block scales two by two into 4-bit odd-scale codes (iq3_s, iq2_s): d = the
/// largest / 31 (max_scale > 0), each code round((scale / d - 1) / 2). Returns d, which
/// the caller stores with its type's fudge factor.
inline float pack_scale_pairs(const float* scales, int count, float max_scale, std::uint8_t* packed) noexcept {
    const float d = max_scale / 31.0f;
    const float id = 1.0f / d;
    for (int ib = 0; ib < count; ib += 2)
        packed[ib / 2] = static_cast<std::uint8_t>(odd_scale_code(id, scales[ib], 15) |
                                                   odd_scale_code(id, scales[ib + 1], 15) << 4);
    return d;
}

/// Weights x^2 of n values, and their roots.
inline void square_weights(const float* x, int n, float* w, float* wr) noexcept {
    for (int i = 0; i < n; ++i)
        w[i] = x[i] * x[i];
    for (int i = 0; i < n; ++i)
        wr[i] = std::sqrt(w[i]);
}

} // namespace detail

/// ggml's iq3_xxs quantizer without an importance matrix (quantize_iq3_xxs; its
/// quantize_row_iq3_xxs_ref): per sub-block of 32, sign groups and a grid search (31 trial
/// scales max / (15 + 0.2 k)) with weights x^2; d = (the largest sub-block scale) / 31,
/// stored times 1.0125 (ggml's fudge factor), each sub-block's 4-bit scale
/// round((scale / d - 1) / 2). A super-block whose scales are all 0 stores zeros.
inline void quantize_row_iq3_xxs(const float* x, block_iq3_xxs* y, std::int64_t n) {
    const detail::iq3_lattice& lat = detail::iq3xxs_lattice();
    constexpr detail::grid_search_params search{15, 0.2f, 15.0f, false};
    for (std::int64_t b = 0; b < n / qk_k; ++b, x += qk_k) {
        std::memset(&y[b], 0, sizeof y[b]);
        float scales[qk_k / 32];
        std::uint32_t signs_and_scales[qk_k / 32] = {};
        float max_scale = 0.0f;
        for (int ib = 0; ib < qk_k / 32; ++ib) {
            const float* xb = x + 32 * ib;
            float w[32], wr[32], xval[32];
            detail::square_weights(xb, 32, w, wr);
            std::uint8_t groups[4], l[32];
            detail::iq3_signs(xb, w, xval, groups);
            scales[ib] = 0.0f;
            if (*std::max_element(xval, xval + 32) < 1e-8f)
                continue; // stays zero
            float scale = detail::grid_search<32>(lat, search, xval, w, wr, l);
            if (scale < 0.0f) { // never, but as ggml: a positive scale, the signs flipped
                scale = -scale;
                for (std::uint8_t& g : groups)
                    g = static_cast<std::uint8_t>(~g & 127u);
            }
            scales[ib] = scale;
            for (int k = 0; k < 8; ++k)
                y[b].qs[8 * ib + k] =
                    static_cast<std::uint8_t>(lat.map[detail::iq3_lattice::key_of(l + 4 * k)]);
            signs_and_scales[ib] = groups[0] | groups[1] << 7 | groups[2] << 14 |
                                   static_cast<std::uint32_t>(groups[3]) << 21;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (max_scale == 0.0f) {
            std::memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const float d = max_scale / 31.0f;
        y[b].d = f32_to_f16(d * 1.0125f);
        const float id = 1.0f / d;
        for (int ib = 0; ib < qk_k / 32; ++ib)
            signs_and_scales[ib] |=
                static_cast<std::uint32_t>(detail::odd_scale_code(id, scales[ib], 15)) << 28;
        std::memcpy(y[b].qs + qk_k / 4, signs_and_scales, sizeof signs_and_scales);
    }
}

/// ggml's iq3_s quantizer without an importance matrix (quantize_iq3_s; its
/// quantize_row_iq3_s_ref): per sub-block of 32, the 8 signs of each 8 values as they are
/// and a grid search (19 trial scales max / (15 + 0.2 k), every group rounded again at the
/// best) with weights x^2; d = (the largest sub-block scale) / 31, stored times 1.033
/// (ggml's fudge factor), each sub-block's 4-bit scale round((scale / d - 1) / 2).
/// A sub-block of zeros has scale 0 and writes nothing, and, as ggml's does, its grid
/// indices' low bytes and its signs are not skipped either: the next sub-block's are
/// written where they would have gone (the high bits in qh stay in place). A super-block
/// whose scales are all 0 stores zeros.
inline void quantize_row_iq3_s(const float* x, block_iq3_s* y, std::int64_t n) {
    const detail::iq3_lattice& lat = detail::iq3s_lattice();
    constexpr detail::grid_search_params search{9, 0.2f, 15.0f, true};
    for (std::int64_t b = 0; b < n / qk_k; ++b, x += qk_k) {
        block_iq3_s& out = y[b];
        std::memset(&out, 0, sizeof out);
        float scales[qk_k / 32];
        float max_scale = 0.0f;
        int written = 0; // sub-blocks written to qs and signs
        for (int ib = 0; ib < qk_k / 32; ++ib) {
            const float* xb = x + 32 * ib;
            float w[32], wr[32], xval[32];
            detail::square_weights(xb, 32, w, wr);
            std::uint8_t signs[4], l[32];
            for (int k = 0; k < 4; ++k)
                signs[k] = detail::split_signs(xb + 8 * k, xval + 8 * k);
            scales[ib] = 0.0f;
            if (*std::max_element(xval, xval + 32) == 0.0f)
                continue;
            float scale = detail::grid_search<32>(lat, search, xval, w, wr, l);
            if (scale < 0.0f) { // never, but as ggml: a positive scale, the signs flipped
                scale = -scale;
                for (std::uint8_t& s : signs)
                    s = static_cast<std::uint8_t>(~s);
            }
            for (int k = 0; k < 8; ++k) {
                const int g = lat.map[detail::iq3_lattice::key_of(l + 4 * k)];
                out.qs[8 * written + k] = static_cast<std::uint8_t>(g & 255);
                out.qh[ib] = static_cast<std::uint8_t>(out.qh[ib] | (g >> 8) << k);
            }
            std::memcpy(out.signs + 4 * written, signs, 4);
            ++written;
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (max_scale == 0.0f)
            continue;
        out.d = f32_to_f16(detail::pack_scale_pairs(scales, qk_k / 32, max_scale, out.scales) * 1.033f);
    }
}

/// ggml's iq2_s quantizer without an importance matrix (quantize_iq2_s; its
/// quantize_row_iq2_s_ref): per sub-block of 16, the 8 signs of each 8 values as they are
/// and a grid search (19 trial scales max / (5 + 0.1 k)) with weights sigma^2 / 2 + x^2,
/// sigma^2 the super-block's mean square; d = (the largest sub-block scale) / 31, stored
/// times 0.9875 (ggml's fudge factor), each sub-block's 4-bit scale round((scale / d - 1) / 2).
/// A sub-block whose magnitudes are all below 1e-8 has scale 0 and writes nothing; a
/// super-block whose scales are all 0 stores zeros.
inline void quantize_row_iq2_s(const float* x, block_iq2_s* y, std::int64_t n) {
    const detail::iq2_lattice& lat = detail::iq2s_lattice();
    constexpr detail::grid_search_params search{9, 0.1f, 5.0f, false};
    for (std::int64_t b = 0; b < n / qk_k; ++b, x += qk_k) {
        block_iq2_s& out = y[b];
        std::memset(&out, 0, sizeof out);
        float sumx2 = 0.0f;
        for (int i = 0; i < qk_k; ++i)
            sumx2 += detail::unfused(x[i] * x[i]);
        const float sigma2 = 2.0f * sumx2 / qk_k;
        float scales[qk_k / 16];
        float max_scale = 0.0f;
        for (int ib = 0; ib < qk_k / 16; ++ib) {
            const float* xb = x + 16 * ib;
            float w[16], wr[16], xval[16];
            for (int i = 0; i < 16; ++i)
                w[i] = detail::unfused(0.25f * sigma2) + detail::unfused(xb[i] * xb[i]);
            for (int i = 0; i < 16; ++i)
                wr[i] = std::sqrt(w[i]);
            std::uint8_t signs[2], l[16];
            for (int k = 0; k < 2; ++k)
                signs[k] = detail::split_signs(xb + 8 * k, xval + 8 * k);
            scales[ib] = 0.0f;
            if (*std::max_element(xval, xval + 16) < 1e-8f)
                continue;
            float scale = detail::grid_search<16>(lat, search, xval, w, wr, l);
            if (scale < 0.0f) { // never, but as ggml: a positive scale, the signs flipped
                scale = -scale;
                for (std::uint8_t& s : signs)
                    s = static_cast<std::uint8_t>(~s);
            }
            for (int k = 0; k < 2; ++k) {
                const int g = lat.map[detail::iq2_lattice::key_of(l + 8 * k)];
                const int i8 = 2 * ib + k;
                out.qs[i8] = static_cast<std::uint8_t>(g & 255);
                out.qh[i8 / 4] =
                    static_cast<std::uint8_t>(out.qh[i8 / 4] | (g >> 8) << 2 * (i8 % 4));
                out.qs[qk_k / 8 + i8] = signs[k];
            }
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (max_scale == 0.0f)
            continue;
        out.d = f32_to_f16(detail::pack_scale_pairs(scales, qk_k / 16, max_scale, out.scales) * 0.9875f);
    }
}

/// ggml's iq1_m quantizer without an importance matrix (quantize_iq1_m): per sub-block of
/// 16 with weights x^2, the best split into three levels and the grid entries of its two
/// groups of 8 (detail::iq1m_sub_block); a sub-block whose magnitudes are all below 1e-7
/// has scale 0 and entries 0. The 3-bit sub-block scales are round((scale / d - 1) / 2) at
/// d = (the largest sub-block scale) / 15, and d is then refitted over the whole
/// super-block to the values those scales and entries give, stored times 1.1125 (ggml's
/// fudge factor) in the top nibbles of the four scale words. A super-block whose scales
/// are all 0 stores zeros.
inline void quantize_row_iq1_m(const float* x, block_iq1_m* y, std::int64_t n) {
    const detail::iq2_lattice& lat = detail::iq1_lattice();
    for (std::int64_t b = 0; b < n / qk_k; ++b, x += qk_k) {
        block_iq1_m& out = y[b];
        std::memset(&out, 0, sizeof out);
        float scales[qk_k / 16];
        int shifts[qk_k / 16];
        float max_scale = 0.0f;
        for (int ib = 0; ib < qk_k / 16; ++ib) {
            const float* xb = x + 16 * ib;
            float w[16];
            for (int i = 0; i < 16; ++i)
                w[i] = xb[i] * xb[i];
            scales[ib] = 0.0f;
            shifts[ib] = 0;
            float max = 0.0f;
            for (int i = 0; i < 16; ++i)
                max = std::max(max, std::fabs(xb[i]));
            if (max < 1e-7f)
                continue;
            int entries[2];
            std::tie(scales[ib], shifts[ib]) = detail::iq1m_sub_block(lat, xb, w, entries);
            out.qs[2 * ib] = static_cast<std::uint8_t>(entries[0] & 255);
            out.qs[2 * ib + 1] = static_cast<std::uint8_t>(entries[1] & 255);
            out.qh[ib] = static_cast<std::uint8_t>(entries[0] >> 8 | (entries[1] >> 8) << 4);
            max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
        }
        if (max_scale == 0.0f)
            continue;
        std::uint16_t sc[4] = {};
        float d = max_scale / 15.0f;
        const float id = 1.0f / d;
        float sumqx = 0.0f, sumq2 = 0.0f;
        for (int ib = 0; ib < qk_k / 16; ++ib) {
            const int l = detail::odd_scale_code(id, scales[ib], 7);
            sc[ib / 4] = static_cast<std::uint16_t>(sc[ib / 4] | l << 3 * (ib % 4));
            constexpr std::uint8_t shift_bits[4] = {0x00, 0x80, 0x08, 0x88};
            out.qh[ib] = static_cast<std::uint8_t>(out.qh[ib] | shift_bits[shifts[ib]]);
            const float* xb = x + 16 * ib;
            for (int g = 0; g < 2; ++g) {
                const int entry = out.qs[2 * ib + g] | ((out.qh[ib] >> 4 * g) & 7) << 8;
                const int shift = detail::iq1m_shift(shifts[ib], g);
                for (int j = 0; j < 8; ++j) {
                    const float v = xb[8 * g + j];
                    const float w = v * v;
                    const float q = detail::iq1m_level(shift, lat.codes[entry][j]) *
                                    static_cast<float>(2 * l + 1);
                    sumqx += detail::unfused(w * q * v);
                    sumq2 += detail::unfused(w * q * q);
                }
            }
        }
        if (sumq2 > 0.0f)
            d = sumqx / sumq2;
        const std::uint16_t s = f32_to_f16(d * 1.1125f).bits;
        sc[0] = static_cast<std::uint16_t>(sc[0] | (s & 0x000f) << 12);
        sc[1] = static_cast<std::uint16_t>(sc[1] | (s & 0x00f0) << 8);
        sc[2] = static_cast<std::uint16_t>(sc[2] | (s & 0x0f00) << 4);
        sc[3] = static_cast<std::uint16_t>(sc[3] | (s & 0xf000));
        std::memcpy(out.scales, sc, sizeof sc);
    }
}

} // namespace backplane

#pragma once
// The quantizers of the lattice i-quants, for model files only (quantize_weights_row): a
// lattice type's blocks index a grid of allowed magnitude patterns, so its quantizer is a
// search, which ggml's CPU does not run in its ops (no from_float). Here: iq3_xxs, bit
// for bit ggml's quantize_iq3_xxs without an importance matrix (what llama-quantize runs
// for IQ3_XXS files without one). iq3_s, iq2_s and iq1_m, which ggml also quantizes
// without an importance matrix, are not written here; iq2_xxs, iq2_xs and iq1_s ggml
// quantizes only with one.
//
// The search needs, for every pattern of four 3-bit codes (a 12-bit key), the grid entry
// it is, or the grid entries nearest to it; ggml builds those tables at
// ggml_quantize_init, here they are built once, on first use, thread-safely
// (iq3xxs_lattice()).

#include <backplane/core/detail/iq_grids.hpp>
#include <backplane/core/detail/unfused.hpp>
#include <backplane/core/iquants.hpp>
#include <backplane/core/kquants.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace backplane {

namespace detail {

/// iq3_xxs's grid as its quantizer sees it (ggml's iq3xs_init_impl(256)). Entry g holds
/// four codes l (magnitudes 2 l + 1; its dequantized bytes are 8 l + 4, but 62 for 7).
struct iq3_lattice {
    static constexpr int keys = 4096; ///< 4 codes of 3 bits

    std::array<std::array<std::uint8_t, 4>, 256> codes{}; ///< entry g's codes
    /// Per key: its entry (>= 0), or -(offset + 1) of its neighbour list in `neighbours`:
    /// a count n, then n entries, nearest first.
    std::array<int, keys> map{};
    std::vector<std::uint16_t> neighbours;

    static int key_of(const std::uint8_t* l) noexcept {
        return l[0] | l[1] << 3 | l[2] << 6 | l[3] << 9;
    }

    iq3_lattice() {
        map.fill(-1);
        for (int g = 0; g < 256; ++g) {
            for (int i = 0; i < 4; ++i)
                codes[g][i] = static_cast<std::uint8_t>(grid_byte(iq3xxs_grid[g], i) >> 3);
            map[key_of(codes[g].data())] = g;
        }
        for (int key = 0; key < keys; ++key)
            if (map[key] < 0)
                add_neighbours(key);
    }

  private:
    /// The entries whose squared distance of magnitudes to key's is one of the two
    /// smallest there are, nearest first (ties: the lower entry first), as ggml lists them.
    void add_neighbours(int key) {
        std::array<std::pair<int, int>, 256> by_distance; // (distance, entry)
        for (int g = 0; g < 256; ++g) {
            int d2 = 0;
            for (int i = 0; i < 4; ++i) {
                const int diff = 2 * (codes[g][i] - ((key >> (3 * i)) & 7));
                d2 += diff * diff;
            }
            by_distance[g] = {d2, g};
        }
        std::sort(by_distance.begin(), by_distance.end());
        map[key] = -(static_cast<int>(neighbours.size()) + 1);
        const std::size_t at = neighbours.size();
        neighbours.push_back(0);
        int distances = 1;
        for (int j = 0, d2 = by_distance[0].first; j < 256; ++j) {
            if (by_distance[j].first > d2) {
                if (distances == 2)
                    break;
                d2 = by_distance[j].first;
                ++distances;
            }
            neighbours.push_back(static_cast<std::uint16_t>(by_distance[j].second));
        }
        neighbours[at] = static_cast<std::uint16_t>(neighbours.size() - at - 1);
    }
};

/// iq3_xxs's lattice, built on first use (a function-local static: thread-safe).
inline const iq3_lattice& iq3xxs_lattice() {
    static const iq3_lattice lattice;
    return lattice;
}

/// The neighbour of an off-grid key nearest to four values x at `scale` (weighted squared
/// distance, weights w; the first of equals), its codes written to l. ggml's
/// iq3_find_best_neighbour.
inline int iq3_nearest_neighbour(const iq3_lattice& lat, int key, const float* x, const float* w,
                                 float scale, std::uint8_t* l) noexcept {
    const std::uint16_t* list = lat.neighbours.data() - lat.map[key] - 1;
    float best_d2 = std::numeric_limits<float>::max();
    int best = list[1];
    for (int j = 1; j <= list[0]; ++j) {
        float d2 = 0.0f;
        for (int i = 0; i < 4; ++i) {
            const float diff =
                unfused(scale * static_cast<float>(2 * lat.codes[list[j]][i] + 1)) - x[i];
            d2 += unfused(w[i] * diff * diff);
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = list[j];
        }
    }
    std::memcpy(l, lat.codes[best].data(), 4);
    return best;
}

/// The codes of four values x at inverse scale id: round((id x - 1) / 2) in [0, 7].
inline int iq3_codes(const float* x, float id, std::uint8_t* l) noexcept {
    for (int i = 0; i < 4; ++i) {
        const int c = kquant_detail::nearest_int(0.5f * (unfused(id * x[i]) - 1.0f));
        l[i] = static_cast<std::uint8_t>(std::clamp(c, 0, 7));
    }
    return iq3_lattice::key_of(l);
}

/// Snaps the four codes l (of values x) to the grid: unchanged when on it, else the
/// nearest neighbour at `scale`. Returns whether they were on it.
inline bool iq3_snap(const iq3_lattice& lat, const float* x, const float* w, float scale,
                     std::uint8_t* l) noexcept {
    const int key = iq3_lattice::key_of(l);
    if (lat.map[key] >= 0)
        return true;
    iq3_nearest_neighbour(lat, key, x, w, scale, l);
    return false;
}

/// The least-squares sums of codes l (magnitudes 2 l + 1) against values x, weights w.
struct iq3_fit {
    float sumqx = 0.0f, sumq2 = 0.0f;
    iq3_fit(const float* x, const float* w, const std::uint8_t* l) noexcept {
        for (int i = 0; i < 32; ++i) {
            const float q = static_cast<float>(2 * l[i] + 1);
            sumqx += unfused(w[i] * x[i] * q);
            sumq2 += unfused(w[i] * q * q);
        }
    }
};

/// Sign groups of a sub-block of 32: each 8 values' magnitudes into xval and their signs as
/// 7 bits (an odd count of negatives flips the sign of the value of least w x^2, the first
/// of equals, so the group's eighth sign is their parity).
inline void iq3_signs(const float* xb, const float* w, float* xval, std::uint8_t* groups) noexcept {
    for (int k = 0; k < 4; ++k) {
        unsigned s = 0;
        int flips = 0;
        for (int i = 0; i < 8; ++i) {
            const float v = xb[8 * k + i];
            xval[8 * k + i] = v >= 0.0f ? v : -v;
            if (v < 0.0f) {
                ++flips;
                s |= 1u << i;
            }
        }
        if (flips % 2) {
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

/// One iq3_xxs sub-block of 32 (magnitudes xval, weights w = x^2, their roots wr): the
/// scale of the best of 31 trial scales (max / (15 + 0.2 k), k in [-15, 15]) by
/// (sum w q x)^2 / sum w q^2, codes l snapped to the grid at each trial's scale; the codes
/// that were off the grid then chosen again at the best scale and the scale refitted.
/// Returns the scale.
inline float iq3xxs_sub_block(const iq3_lattice& lat, const float* xval, const float* w,
                              const float* wr, std::uint8_t* l) noexcept {
    std::memset(l, 0, 32);
    const float max = *std::max_element(xval, xval + 32);
    float best = 0.0f, scale = max / 15.0f;
    bool on_grid[8] = {true, true, true, true, true, true, true, true};
    for (int is = -15; is <= 15; ++is) {
        const float id = (15.0f + unfused(static_cast<float>(is) * 0.2f)) / max;
        const float this_scale = 1.0f / id;
        std::uint8_t trial[32];
        bool trial_on[8];
        for (int k = 0; k < 8; ++k) {
            iq3_codes(xval + 4 * k, id, trial + 4 * k);
            trial_on[k] = iq3_snap(lat, xval + 4 * k, wr + 4 * k, this_scale, trial + 4 * k);
        }
        const iq3_fit f(xval, w, trial);
        if (f.sumq2 > 0.0f && f.sumqx * f.sumqx > best * f.sumq2) {
            scale = f.sumqx / f.sumq2;
            best = scale * f.sumqx;
            std::memcpy(l, trial, 32);
            std::copy(trial_on, trial_on + 8, on_grid);
        }
    }
    if (std::count(on_grid, on_grid + 8, false) > 0 && scale > 0.0f) {
        const float id = 1.0f / scale;
        for (int k = 0; k < 8; ++k) {
            if (on_grid[k])
                continue;
            iq3_codes(xval + 4 * k, id, l + 4 * k);
            iq3_snap(lat, xval + 4 * k, wr + 4 * k, scale, l + 4 * k);
        }
        const iq3_fit f(xval, w, l);
        if (f.sumq2 > 0.0f)
            scale = f.sumqx / f.sumq2;
    }
    return scale;
}

} // namespace detail

/// ggml's iq3_xxs quantizer without an importance matrix (quantize_iq3_xxs; its
/// quantize_row_iq3_xxs_ref): per sub-block of 32, sign groups and a grid search
/// (detail::iq3xxs_sub_block) with weights x^2; d = (the largest sub-block scale) / 31,
/// stored times 1.0125 (ggml's fudge factor), each sub-block's 4-bit scale
/// round((scale / d - 1) / 2). A super-block whose scales are all 0 stores zeros.
inline void quantize_row_iq3_xxs(const float* x, block_iq3_xxs* y, std::int64_t n) {
    const detail::iq3_lattice& lat = detail::iq3xxs_lattice();
    for (std::int64_t b = 0; b < n / qk_k; ++b, x += qk_k) {
        std::memset(&y[b], 0, sizeof y[b]);
        float scales[qk_k / 32];
        std::uint32_t signs_and_scales[qk_k / 32] = {};
        float max_scale = 0.0f;
        for (int ib = 0; ib < qk_k / 32; ++ib) {
            const float* xb = x + 32 * ib;
            float w[32], wr[32], xval[32];
            for (int i = 0; i < 32; ++i)
                w[i] = xb[i] * xb[i];
            for (int i = 0; i < 32; ++i)
                wr[i] = std::sqrt(w[i]);
            std::uint8_t groups[4], l[32];
            detail::iq3_signs(xb, w, xval, groups);
            scales[ib] = 0.0f;
            if (*std::max_element(xval, xval + 32) < 1e-8f)
                continue; // stays zero
            float scale = detail::iq3xxs_sub_block(lat, xval, w, wr, l);
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
        for (int ib = 0; ib < qk_k / 32; ++ib) {
            const int l = std::clamp(
                kquant_detail::nearest_int(0.5f * (detail::unfused(id * scales[ib]) - 1.0f)), 0,
                15);
            signs_and_scales[ib] |= static_cast<std::uint32_t>(l) << 28;
        }
        std::memcpy(y[b].qs + qk_k / 4, signs_and_scales, sizeof signs_and_scales);
    }
}

} // namespace backplane

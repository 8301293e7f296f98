#pragma once
// Random shapes for conformance cases: odd sizes and sizes that no vector width divides,
// every dimension used, rows of whole blocks for quantized types, broadcast extents. The
// catalogue's families and the batched parity cases draw their shapes here.
//
//     std::mt19937 rng(7);
//     conformance::shape_gen gen{rng};
//     extents a = gen.rows(elem_type::q8_0);  // {32 * k, ...}, about 6000 elements at most
//     extents b = gen.broadcast(a);           // per dimension all of a's, 1 or a divisor

#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <vector>

namespace backplane::conformance {

using extents = std::array<std::int64_t, max_dims>;

/// A random divisor of n (1 and n included).
inline std::int64_t random_divisor(std::mt19937& rng, std::int64_t n) {
    std::vector<std::int64_t> d;
    for (std::int64_t k = 1; k <= n; ++k)
        if (n % k == 0)
            d.push_back(k);
    return d[rng() % d.size()];
}

/// Draws shapes from a generator it does not own.
struct shape_gen {
    std::mt19937& rng;

    std::int64_t pick(std::initializer_list<std::int64_t> l) {
        return *(l.begin() + rng() % l.size());
    }
    /// 1 .. n.
    std::int64_t upto(std::int64_t n) {
        return 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(n));
    }
    /// A length of whole blocks of quantized type t: 1 to 9 blocks of 32, 1 to 3 of the
    /// K-quants' 256 (their rows are long already).
    std::int64_t blocks(elem_type t) {
        return block_size(t) > 32 ? block_size(t) * pick({1, 2, 3}) : block_size(t) * pick({1, 2, 3, 5, 7, 9});
    }
    /// A row length for type t: whole blocks for quantized types.
    std::int64_t row(elem_type t) {
        if (is_quantized(t))
            return blocks(t);
        return pick({1,  2,  3,  5,  6,  7,  9,  10, 13,  15,  17,  18,  23,
                     31, 33, 34, 47, 63, 65, 67, 97, 100, 127, 129, 130, 257});
    }
    /// Extents for an op over rows of type t, at most about `budget` elements.
    extents rows(elem_type t, std::int64_t budget = 6000) {
        extents ne{row(t), upto(7), upto(3), upto(3)};
        for (std::size_t d = 3; d >= 1; --d)
            while (ne[0] * ne[1] * ne[2] * ne[3] > budget && ne[d] > 1)
                --ne[d];
        return ne;
    }
    /// Extents broadcast to ne: per dimension all of it, 1, or a divisor.
    extents broadcast(const extents& ne) {
        extents b = ne;
        for (auto& n : b) {
            const auto r = rng() % 3;
            n = r == 0 ? n : r == 1 ? 1 : random_divisor(rng, n);
        }
        return b;
    }
};

} // namespace backplane::conformance

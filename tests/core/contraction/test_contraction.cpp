// Core's quantizers give the same bytes whatever the compiler contracts: every quantized
// type, through each path that converts f32 to it (quantize_every_type.hpp), compiled
// -O2 -march=native -ffp-contract=fast (g++ and clang++ then fuse a * b + c into an FMA
// wherever they may) and compiled -ffp-contract=off without -march, as ggml's base
// library is, whose bytes the quantizers reproduce. Seeded rows of many scales with
// ties, few levels, all-positive, all-zero, tiny (below ggml's 1e-15 threshold and
// subnormal) and huge blocks. Where the native build has no FMA the two agree trivially.

#include "quantize_every_type.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

constexpr std::int64_t n = 256; // one K-quant super-block, 8 blocks of 32

/// Seeded rows of n values: at each scale, normal and uniform rows, all-positive rows,
/// values on quarter steps (ties of the 4- and 5-bit formats), five levels, and rows with
/// zero blocks; then all-zero rows, rows of one non-zero value and tiny rows.
std::vector<float> test_rows(std::uint32_t seed, std::int64_t& rows) {
    std::mt19937 rng(seed);
    std::vector<float> x;
    const auto add = [&](int count, auto value) {
        for (int i = 0; i < count * n; ++i)
            x.push_back(value(i));
    };
    for (const float scale : {1e-6f, 1e-3f, 0.1f, 1.0f, 7.0f, 300.0f, 3e4f, 6e4f, 1e6f}) {
        std::normal_distribution<float> nd(0.0f, scale);
        std::uniform_real_distribution<float> ud(-scale, scale), pos(0.0f, scale);
        add(64, [&](int i) { return i % 2 ? nd(rng) : ud(rng); });
        add(12, [&](int) { return pos(rng); });
        add(12, [&](int) { return std::round(ud(rng) * 4.0f) / 4.0f; });
        add(12, [&](int) { return scale * static_cast<float>(static_cast<int>(rng() % 5) - 2); });
        add(12, [&](int i) { return (i / 32) % 3 == 0 ? 0.0f : nd(rng); });
    }
    add(2, [](int) { return 0.0f; });
    add(2, [](int i) { return i == 77 ? -1.5f : 0.0f; });
    std::normal_distribution<float> tiny(0.0f, 1e-20f), subnormal(0.0f, 1e-39f);
    add(4, [&](int) { return tiny(rng); });
    add(4, [&](int) { return subnormal(rng); });
    rows = static_cast<std::int64_t>(x.size()) / n;
    return x;
}

} // namespace

TEST_CASE("contraction: core's quantizers built with -march=native -ffp-contract=fast give the "
          "contraction-free bytes",
          "[quants][contraction]") {
    std::int64_t rows = 0;
    const std::vector<float> x = test_rows(1, rows);
    const auto native = contraction::quantize_every_type_native(x.data(), rows, n);
    const auto plain = contraction::quantize_every_type_plain(x.data(), rows, n);
    REQUIRE(native.size() == plain.size());
    REQUIRE(native.size() == 16 * 4 + 4); // every quantized type f32 converts into, every path; the lattice types' file quantizers
    for (std::size_t k = 0; k < native.size(); ++k) {
        REQUIRE(native[k].what == plain[k].what);
        REQUIRE(native[k].bytes.size() == plain[k].bytes.size());
        const std::int64_t held = native[k].rows; // the lattice types' file quantizers take some rows
        REQUIRE((held == rows || (held > 0 && held < rows)));
        // the rows whose bytes differ, counted
        const std::size_t row_bytes = native[k].bytes.size() / static_cast<std::size_t>(held);
        std::int64_t differ = 0, first = -1;
        for (std::int64_t r = 0; r < held; ++r)
            if (std::memcmp(native[k].bytes.data() + row_bytes * static_cast<std::size_t>(r),
                            plain[k].bytes.data() + row_bytes * static_cast<std::size_t>(r),
                            row_bytes) != 0) {
                if (first < 0)
                    first = r;
                ++differ;
            }
        INFO(native[k].what << ": " << differ << " of " << held << " rows differ, the first "
                            << first);
        CHECK(differ == 0);
    }
}

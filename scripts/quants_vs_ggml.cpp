// Compares backplane's reference quantizers and dequantizers (core/types.hpp,
// core/quants.hpp, core/kquants.hpp, core/iquants.hpp) with ggml's quantize_row_<type>_ref
// and dequantize_row_<type> on seeded rows: many scales, ties, all-positive, few-level,
// constant and zero blocks; the two quantizers of model files that differ from those
// ("file": quantize_weights_row's q8_0 and iq4_nl) with what llama-quantize calls,
// quantize_row_q8_0_ref and quantize_iq4_nl, and the lattice types' grid searches
// (core/iquants_search.hpp) with ggml's quantize_<type> without an importance matrix
// (quantize_row_iq3_xxs_ref, quantize_row_iq3_s_ref, quantize_row_iq2_s_ref,
// quantize_iq1_m); and the dequantizers of the types f32 does not convert into (iq3_xxs ... iq1_m) on seeded
// random blocks.
// Built and run by scripts/check_quants_ggml against a ggml checkout; not part of the build.

#include <backplane/core/iquants.hpp>
#include <backplane/core/iquants_search.hpp>
#include <backplane/core/kquants.hpp>
#include <backplane/core/quants.hpp>

#include "ggml-quants.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace bp = backplane;

namespace {

/// Rows of the given block length: every kind of data, at scales from 1e-6 to 3e4.
std::vector<float> test_rows(int block, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<float> x;
    const auto add = [&](int blocks, auto value) {
        for (int i = 0; i < blocks * block; ++i) x.push_back(value(i));
    };
    for (const float scale : {1e-6f, 1e-3f, 0.1f, 1.0f, 7.0f, 300.0f, 3e4f}) {
        std::normal_distribution<float> nd(0.0f, scale);
        std::uniform_real_distribution<float> ud(-scale, scale), pos(0.0f, scale);
        const int n = 256 * 256 / block; // 65,536 values of each kind per scale
        add(n, [&](int i) { return i % 2 ? nd(rng) : ud(rng); });
        add(n / 8, [&](int) { return pos(rng); });
        add(n / 8, [&](int) { return std::round(ud(rng) * 4) / 4; });
        add(n / 16, [&](int) { return scale * static_cast<float>(static_cast<int>(rng() % 5) - 2); });
        add(n / 16, [&](int i) { return (i / 32) % 3 == 0 ? 0.0f : nd(rng); });
    }
    add(1, [](int) { return 0.0f; });
    add(1, [](int) { return 1.5f; });
    return x;
}

/// Quantizes x both ways and compares the bytes, then dequantizes backplane's blocks both
/// ways and compares the values. Returns the number of differences.
template <class Ours, class Theirs, int block>
int compare(const char* name, void (*q_ours)(const float*, Ours*, std::int64_t),
            void (*q_theirs)(const float*, Theirs*, std::int64_t), void (*d_ours)(const Ours*, float*, std::int64_t),
            void (*d_theirs)(const Theirs*, float*, std::int64_t), const std::vector<float>& x) {
    static_assert(sizeof(Ours) == sizeof(Theirs));
    const auto n = static_cast<std::int64_t>(x.size());
    std::vector<Ours> a(x.size() / block);
    std::vector<Theirs> b(x.size() / block);
    std::memset(a.data(), 0, a.size() * sizeof(Ours));
    std::memset(b.data(), 0, b.size() * sizeof(Theirs));
    q_ours(x.data(), a.data(), n);
    q_theirs(x.data(), b.data(), n);
    int bad = 0;
    for (std::size_t i = 0; i < a.size(); ++i) bad += std::memcmp(&a[i], &b[i], sizeof(Ours)) != 0;
    std::vector<float> ya(x.size()), yb(x.size());
    d_ours(a.data(), ya.data(), n);
    d_theirs(reinterpret_cast<const Theirs*>(a.data()), yb.data(), n);
    const bool same = std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)) == 0;
    std::printf("%-11s %6zu blocks: %d differ; dequantized values %s\n", name, a.size(), bad, same ? "identical" : "DIFFER");
    return bad + (same ? 0 : 1);
}

/// Dequantizes seeded random blocks both ways (every scale a random f16 of magnitude
/// 2^-14 to 2^3 where the block has one at its start) and compares the values (NaN
/// equal to NaN). Returns the number of blocks that differ.
template <class Ours, class Theirs>
int compare_dequantize(const char* name, void (*d_ours)(const Ours*, float*, std::int64_t),
                       void (*d_theirs)(const Theirs*, float*, std::int64_t), unsigned seed, bool scale_first = true) {
    static_assert(sizeof(Ours) == sizeof(Theirs));
    constexpr int blocks = 4096, qk = 256;
    std::mt19937 rng(seed);
    std::vector<Ours> a(blocks);
    auto* bytes = reinterpret_cast<unsigned char*>(a.data());
    for (std::size_t i = 0; i < a.size() * sizeof(Ours); ++i) bytes[i] = static_cast<unsigned char>(rng());
    if (scale_first)
        for (std::size_t b = 0; b < a.size(); ++b) {
            const auto h = static_cast<std::uint16_t>((rng() & 0x8000u) | ((1u + rng() % 18u) << 10) | (rng() & 0x3ffu));
            std::memcpy(bytes + b * sizeof(Ours), &h, 2);
        }
    std::vector<float> ya(blocks * qk), yb(blocks * qk);
    d_ours(a.data(), ya.data(), blocks * qk);
    d_theirs(reinterpret_cast<const Theirs*>(a.data()), yb.data(), blocks * qk);
    int bad = 0;
    for (int b = 0; b < blocks; ++b) {
        bool same = true;
        for (int j = 0; j < qk; ++j) {
            const float u = ya[b * qk + j], v = yb[b * qk + j];
            same = same && (std::memcmp(&u, &v, sizeof u) == 0 || (std::isnan(u) && std::isnan(v)));
        }
        bad += !same;
    }
    std::printf("%-11s %6d random blocks: dequantized values of %d differ\n", name, blocks, bad);
    return bad;
}

/// Drops the blocks whose magnitudes are all below 1e-15 (ggml's iq4_nl leaves their
/// nibbles as the block before left them).
std::vector<float> without_tiny_blocks(const std::vector<float>& x) {
    std::vector<float> out;
    for (std::size_t b = 0; b + 32 <= x.size(); b += 32) {
        float amax = 0.0f;
        for (std::size_t j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[b + j]));
        if (amax >= 1e-15f) out.insert(out.end(), x.begin() + static_cast<std::ptrdiff_t>(b), x.begin() + static_cast<std::ptrdiff_t>(b + 32));
    }
    return out;
}

/// ggml's quantize_iq4_nl (what llama-quantize runs; no importance weights) on one row.
void quantize_iq4_nl_rows(const float* x, block_iq4_nl* y, std::int64_t n) { quantize_iq4_nl(x, y, 1, n, nullptr); }

/// ggml's quantize_iq1_m without an importance matrix on one row (it has no _ref).
void quantize_iq1_m_rows(const float* x, block_iq1_m* y, std::int64_t n) { quantize_iq1_m(x, y, 1, n, nullptr); }

} // namespace

int main(int argc, char** argv) {
    const unsigned seed = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 1u;
    const std::vector<float> small = test_rows(32, seed), large = test_rows(256, seed + 1);
    int bad = 0;
    bad += compare<bp::block_q8_0, block_q8_0, 32>("q8_0 file", bp::quantize_row_q8_0_ties_away, quantize_row_q8_0_ref, bp::dequantize_row_q8_0, dequantize_row_q8_0, small);
    bad += compare<bp::block_q4_0, block_q4_0, 32>("q4_0", bp::quantize_row_q4_0, quantize_row_q4_0_ref, bp::dequantize_row_q4_0, dequantize_row_q4_0, small);
    bad += compare<bp::block_q4_1, block_q4_1, 32>("q4_1", bp::quantize_row_q4_1, quantize_row_q4_1_ref, bp::dequantize_row_q4_1, dequantize_row_q4_1, small);
    bad += compare<bp::block_q5_0, block_q5_0, 32>("q5_0", bp::quantize_row_q5_0, quantize_row_q5_0_ref, bp::dequantize_row_q5_0, dequantize_row_q5_0, small);
    bad += compare<bp::block_q5_1, block_q5_1, 32>("q5_1", bp::quantize_row_q5_1, quantize_row_q5_1_ref, bp::dequantize_row_q5_1, dequantize_row_q5_1, small);
    bad += compare<bp::block_iq4_nl, block_iq4_nl, 32>("iq4_nl", bp::quantize_row_iq4_nl, quantize_row_iq4_nl_ref, bp::dequantize_row_iq4_nl, dequantize_row_iq4_nl, without_tiny_blocks(small));
    bad += compare<bp::block_iq4_nl, block_iq4_nl, 32>("iq4_nl file", bp::quantize_row_iq4_nl_search, quantize_iq4_nl_rows, bp::dequantize_row_iq4_nl, dequantize_row_iq4_nl, small);
    bad += compare<bp::block_mxfp4, block_mxfp4, 32>("mxfp4", bp::quantize_row_mxfp4, quantize_row_mxfp4_ref, bp::dequantize_row_mxfp4, dequantize_row_mxfp4, small);
    bad += compare<bp::block_q2_K, block_q2_K, 256>("q2_K", bp::quantize_row_q2_K, quantize_row_q2_K_ref, bp::dequantize_row_q2_K, dequantize_row_q2_K, large);
    bad += compare<bp::block_q3_K, block_q3_K, 256>("q3_K", bp::quantize_row_q3_K, quantize_row_q3_K_ref, bp::dequantize_row_q3_K, dequantize_row_q3_K, large);
    bad += compare<bp::block_q4_K, block_q4_K, 256>("q4_K", bp::quantize_row_q4_K, quantize_row_q4_K_ref, bp::dequantize_row_q4_K, dequantize_row_q4_K, large);
    bad += compare<bp::block_q5_K, block_q5_K, 256>("q5_K", bp::quantize_row_q5_K, quantize_row_q5_K_ref, bp::dequantize_row_q5_K, dequantize_row_q5_K, large);
    bad += compare<bp::block_q6_K, block_q6_K, 256>("q6_K", bp::quantize_row_q6_K, quantize_row_q6_K_ref, bp::dequantize_row_q6_K, dequantize_row_q6_K, large);
    bad += compare<bp::block_q8_K, block_q8_K, 256>("q8_K", bp::quantize_row_q8_K, quantize_row_q8_K_ref, bp::dequantize_row_q8_K, dequantize_row_q8_K, large);
    bad += compare<bp::block_iq4_xs, block_iq4_xs, 256>("iq4_xs", bp::quantize_row_iq4_xs, quantize_row_iq4_xs_ref, bp::dequantize_row_iq4_xs, dequantize_row_iq4_xs, large);
    bad += compare<bp::block_tq1_0, block_tq1_0, 256>("tq1_0", bp::quantize_row_tq1_0, quantize_row_tq1_0_ref, bp::dequantize_row_tq1_0, dequantize_row_tq1_0, large);
    bad += compare<bp::block_tq2_0, block_tq2_0, 256>("tq2_0", bp::quantize_row_tq2_0, quantize_row_tq2_0_ref, bp::dequantize_row_tq2_0, dequantize_row_tq2_0, large);
    iq3xs_init_impl(256); // ggml's lattice tables, which its quantizer needs
    bad += compare<bp::block_iq3_xxs, block_iq3_xxs, 256>("iq3_xxs file", bp::quantize_row_iq3_xxs, quantize_row_iq3_xxs_ref, bp::dequantize_row_iq3_xxs, dequantize_row_iq3_xxs, large);
    iq3xs_init_impl(512);
    bad += compare<bp::block_iq3_s, block_iq3_s, 256>("iq3_s file", bp::quantize_row_iq3_s, quantize_row_iq3_s_ref, bp::dequantize_row_iq3_s, dequantize_row_iq3_s, large);
    iq2xs_init_impl(GGML_TYPE_IQ2_S);
    bad += compare<bp::block_iq2_s, block_iq2_s, 256>("iq2_s file", bp::quantize_row_iq2_s, quantize_row_iq2_s_ref, bp::dequantize_row_iq2_s, dequantize_row_iq2_s, large);
    iq2xs_init_impl(GGML_TYPE_IQ1_M);
    bad += compare<bp::block_iq1_m, block_iq1_m, 256>("iq1_m file", bp::quantize_row_iq1_m, quantize_iq1_m_rows, bp::dequantize_row_iq1_m, dequantize_row_iq1_m, large);
    bad += compare_dequantize<bp::block_iq4_xs, block_iq4_xs>("iq4_xs", bp::dequantize_row_iq4_xs, dequantize_row_iq4_xs, seed);
    bad += compare_dequantize<bp::block_iq3_xxs, block_iq3_xxs>("iq3_xxs", bp::dequantize_row_iq3_xxs, dequantize_row_iq3_xxs, seed);
    bad += compare_dequantize<bp::block_iq3_s, block_iq3_s>("iq3_s", bp::dequantize_row_iq3_s, dequantize_row_iq3_s, seed);
    bad += compare_dequantize<bp::block_iq2_xxs, block_iq2_xxs>("iq2_xxs", bp::dequantize_row_iq2_xxs, dequantize_row_iq2_xxs, seed);
    bad += compare_dequantize<bp::block_iq2_xs, block_iq2_xs>("iq2_xs", bp::dequantize_row_iq2_xs, dequantize_row_iq2_xs, seed);
    bad += compare_dequantize<bp::block_iq2_s, block_iq2_s>("iq2_s", bp::dequantize_row_iq2_s, dequantize_row_iq2_s, seed);
    bad += compare_dequantize<bp::block_iq1_s, block_iq1_s>("iq1_s", bp::dequantize_row_iq1_s, dequantize_row_iq1_s, seed);
    bad += compare_dequantize<bp::block_iq1_m, block_iq1_m>("iq1_m", bp::dequantize_row_iq1_m, dequantize_row_iq1_m, seed, false);
    bad += compare_dequantize<bp::block_tq1_0, block_tq1_0>("tq1_0", bp::dequantize_row_tq1_0, dequantize_row_tq1_0, seed, false);
    std::printf("%s\n", bad == 0 ? "every format identical to ggml's" : "DIFFERENCES");
    return bad == 0 ? 0 : 1;
}

// Compares backplane's reference quantizers and dequantizers (core/types.hpp,
// core/quants.hpp, core/kquants.hpp) with ggml's quantize_row_<type>_ref and
// dequantize_row_<type> on seeded rows: many scales, ties, all-positive, few-level,
// constant and zero blocks; and the two quantizers of model files that differ from those
// ("file": quantize_weights_row's q8_0 and iq4_nl) with what llama-quantize calls,
// quantize_row_q8_0_ref and quantize_iq4_nl.
// Built and run by scripts/check_quants_ggml against a ggml checkout; not part of the build.

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
    std::printf("%s\n", bad == 0 ? "every format identical to ggml's" : "DIFFERENCES");
    return bad == 0 ? 0 : 1;
}

// The block formats of core/quants.hpp, core/kquants.hpp and core/iquants.hpp: layouts read as ggml's
// formulas say, round trips within each format's step on seeded data of many scales,
// ties, all-zero blocks and the sign of the largest magnitude.

#include <backplane/core/convert.hpp>
#include <backplane/core/quantize_weights.hpp>
#include <backplane/core/kquants.hpp>
#include <backplane/core/quants.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <utility>
#include <vector>

using namespace backplane;

namespace {

constexpr int qk = qk_small;

/// Rows of 8 blocks: normal and uniform values of the given scale.
std::vector<float> seeded_row(std::uint32_t seed, float scale) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, scale);
    std::uniform_real_distribution<float> ud(-scale, scale);
    std::vector<float> x(8 * qk);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = i % 3 == 0 ? ud(rng) : nd(rng);
    return x;
}

const float scales[] = {2e-3f, 0.02f, 1.0f, 37.0f, 5000.0f}; // f16 scales stay normal

/// The 32 codes of a block given as nibbles (and fifth bits).
void set_codes(std::uint8_t* qs, std::uint8_t* qh, const int (&q)[qk]) {
    std::uint32_t high = 0;
    for (int j = 0; j < qk / 2; ++j) {
        qs[j] = static_cast<std::uint8_t>((q[j] & 15) | ((q[j + 16] & 15) << 4));
        high |= static_cast<std::uint32_t>(q[j] >> 4) << j;
        high |= static_cast<std::uint32_t>(q[j + 16] >> 4) << (j + 16);
    }
    if (qh != nullptr) std::memcpy(qh, &high, 4);
}

} // namespace

TEST_CASE("quants: blocks read as ggml's formulas, value j from nibble j mod 16 and fifth bit j", "[quants]") {
    int q4[qk], q5[qk];
    for (int j = 0; j < qk; ++j) {
        q4[j] = (j * 7 + 3) % 16;
        q5[j] = (j * 11 + 5) % 32;
    }
    float y[qk];
    SECTION("q4_1: q d + m") {
        block_q4_1 b{f32_to_f16(0.5f), f32_to_f16(-3.0f), {}};
        set_codes(b.qs, nullptr, q4);
        dequantize_row_q4_1(&b, y, qk);
        for (int j = 0; j < qk; ++j) CHECK(y[j] == static_cast<float>(q4[j]) * 0.5f - 3.0f);
    }
    SECTION("q5_0: (q - 16) d") {
        block_q5_0 b{f32_to_f16(0.25f), {}, {}};
        set_codes(b.qs, b.qh, q5);
        dequantize_row_q5_0(&b, y, qk);
        for (int j = 0; j < qk; ++j) CHECK(y[j] == static_cast<float>(q5[j] - 16) * 0.25f);
    }
    SECTION("q5_1: q d + m") {
        block_q5_1 b{f32_to_f16(2.0f), f32_to_f16(1.5f), {}, {}};
        set_codes(b.qs, b.qh, q5);
        dequantize_row_q5_1(&b, y, qk);
        for (int j = 0; j < qk; ++j) CHECK(y[j] == static_cast<float>(q5[j]) * 2.0f + 1.5f);
    }
    SECTION("iq4_nl: d times the table") {
        block_iq4_nl b{f32_to_f16(0.125f), {}};
        set_codes(b.qs, nullptr, q4);
        dequantize_row_iq4_nl(&b, y, qk);
        for (int j = 0; j < qk; ++j) CHECK(y[j] == 0.125f * static_cast<float>(iq4nl_values[q4[j]]));
    }
    SECTION("mxfp4: the table times 2^(e - 128), e 0 and 1 denormal") {
        for (const int e : {0, 1, 2, 120, 128, 254}) {
            block_mxfp4 b{static_cast<std::uint8_t>(e), {}};
            set_codes(b.qs, nullptr, q4);
            dequantize_row_mxfp4(&b, y, qk);
            const float d = std::ldexp(1.0f, e - 128);
            CHECK(e8m0_to_f32_half(static_cast<std::uint8_t>(e)) == d);
            for (int j = 0; j < qk; ++j) CHECK(y[j] == static_cast<float>(mxfp4_values[q4[j]]) * d);
        }
    }
}

TEST_CASE("quants: round trips within the step of each format, on seeded data of many scales", "[quants]") {
    std::uint32_t seed = 1;
    for (const float scale : scales) {
        const std::vector<float> x = seeded_row(seed++, scale);
        const auto n = static_cast<std::int64_t>(x.size());
        std::vector<float> y(x.size());
        INFO("scale " << scale);
        SECTION("q4_1 and q5_1: within half a step, plus the scale's and minimum's f16 rounding") {
            const auto check = [&](auto block, auto quantize, auto dequantize, float codes) {
                std::vector<decltype(block)> b(8);
                quantize(x.data(), b.data(), n);
                dequantize(b.data(), y.data(), n);
                for (int i = 0; i < n; ++i) {
                    const auto& bl = b[static_cast<std::size_t>(i / qk)];
                    const float d = f16_to_f32(bl.d), m = f16_to_f32(bl.m);
                    CHECK(std::fabs(x[i] - y[i]) <= 0.5f * d + codes * d / 1024.0f + std::fabs(m) / 1024.0f);
                }
            };
            check(block_q4_1{}, quantize_row_q4_1, dequantize_row_q4_1, 16.0f);
            check(block_q5_1{}, quantize_row_q5_1, dequantize_row_q5_1, 32.0f);
        }
        SECTION("q5_0: within a step (the largest magnitude's side has 16 steps, the other 15)") {
            std::vector<block_q5_0> b(8);
            quantize_row_q5_0(x.data(), b.data(), n);
            dequantize_row_q5_0(b.data(), y.data(), n);
            for (int i = 0; i < n; ++i) {
                const float d = std::fabs(f16_to_f32(b[static_cast<std::size_t>(i / qk)].d));
                CHECK(std::fabs(x[i] - y[i]) <= d * (1.0f + 17.0f / 1024.0f));
            }
        }
        SECTION("iq4_nl: a relative RMS error of a 4-bit format") {
            std::vector<block_iq4_nl> b(8);
            quantize_row_iq4_nl(x.data(), b.data(), n);
            dequantize_row_iq4_nl(b.data(), y.data(), n);
            double err = 0.0, ref = 0.0;
            for (int i = 0; i < n; ++i) {
                err += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
                ref += static_cast<double>(x[i]) * x[i];
            }
            CHECK(std::sqrt(err / ref) < 0.12);
        }
        SECTION("mxfp4: every value the nearest of the block's 16 at its scale") {
            std::vector<block_mxfp4> b(8);
            quantize_row_mxfp4(x.data(), b.data(), n);
            dequantize_row_mxfp4(b.data(), y.data(), n);
            for (int i = 0; i < n; ++i) {
                const float d = e8m0_to_f32_half(b[static_cast<std::size_t>(i / qk)].e);
                for (const std::int8_t v : mxfp4_values) CHECK(std::fabs(x[i] - y[i]) <= std::fabs(x[i] - v * d));
            }
        }
    }
}

TEST_CASE("quants: ties, all-zero blocks and the sign of the largest magnitude, as ggml's quantizers", "[quants]") {
    float x[qk] = {};
    float y[qk];
    SECTION("q5_0: the first of equal magnitudes sets the scale's sign; half a step rounds up") {
        x[0] = -16.0f; // d = 1
        x[1] = 16.0f;
        x[2] = 0.5f;
        x[3] = -0.5f;
        block_q5_0 b{};
        quantize_row_q5_0(x, &b, qk);
        CHECK(f16_to_f32(b.d) == 1.0f);
        dequantize_row_q5_0(&b, y, qk);
        CHECK(y[0] == -16.0f);
        CHECK(y[1] == 15.0f); // the other side ends a step short
        CHECK(y[2] == 1.0f);
        CHECK(y[3] == 0.0f);
        x[0] = 16.0f;
        x[1] = -16.0f;
        quantize_row_q5_0(x, &b, qk);
        CHECK(f16_to_f32(b.d) == -1.0f);
    }
    SECTION("iq4_nl: a value halfway between two entries takes the upper one") {
        x[0] = -127.0f; // first scale 1: codes are the entries nearest to x itself
        x[1] = -115.5f; // halfway between -127 and -104
        x[2] = 7.0f;    // halfway between 1 and 13
        block_iq4_nl b{};
        quantize_row_iq4_nl(x, &b, qk);
        CHECK((b.qs[1] & 15) == 1);
        CHECK((b.qs[2] & 15) == 9);
    }
    SECTION("mxfp4: a tie takes the lower code, zero is code 0") {
        x[0] = 4.0f;   // e = 127: values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives
        x[1] = 2.5f;   // between 2 (code 4) and 3 (code 5)
        x[2] = 0.25f;  // between 0 (code 0) and 0.5 (code 1)
        x[3] = -0.25f; // between 0 (codes 0 and 8) and -0.5 (code 9)
        block_mxfp4 b{};
        quantize_row_mxfp4(x, &b, qk);
        CHECK(b.e == 127);
        CHECK((b.qs[1] & 15) == 4);
        CHECK((b.qs[2] & 15) == 0);
        CHECK((b.qs[3] & 15) == 0);
        CHECK((b.qs[4] & 15) == 0);
    }
    SECTION("all-zero blocks: scale 0, every code 0, zeros back") {
        block_q4_1 b41{};
        block_q5_0 b50{};
        block_q5_1 b51{};
        block_iq4_nl bnl{};
        block_mxfp4 bmx{};
        std::memset(&b41, 0xff, sizeof b41);
        std::memset(&b50, 0xff, sizeof b50);
        std::memset(&b51, 0xff, sizeof b51);
        std::memset(&bnl, 0xff, sizeof bnl);
        std::memset(&bmx, 0xff, sizeof bmx);
        quantize_row_q4_1(x, &b41, qk);
        quantize_row_q5_0(x, &b50, qk);
        quantize_row_q5_1(x, &b51, qk);
        quantize_row_iq4_nl(x, &bnl, qk);
        quantize_row_mxfp4(x, &bmx, qk);
        CHECK(b41.d.bits == 0);
        CHECK(b50.d.bits == 0x8000); // -0: 0 / -16, as ggml stores it
        CHECK(b51.d.bits == 0);
        CHECK(bnl.d.bits == 0);
        CHECK(bmx.e == 0);
        for (int j = 0; j < qk / 2; ++j) {
            CHECK(b41.qs[j] == 0);
            CHECK(b50.qs[j] == 0); // code 16 (zero): nibble 0, fifth bit set
            CHECK(b51.qs[j] == 0);
            CHECK(bnl.qs[j] == 0);
            CHECK(bmx.qs[j] == 0);
        }
        CHECK((b50.qh[0] & b50.qh[1] & b50.qh[2] & b50.qh[3]) == 0xff);
        dequantize_row_mxfp4(&bmx, y, qk);
        for (const float v : y) CHECK(v == 0.0f);
    }
}

TEST_CASE("quants: iq4_nl's scale search fits better than the reference rounding and is deterministic", "[quants]") {
    // the weighted squared error sum x^2 (x - y)^2 of a block's dequantized values y
    const auto error = [](const float* x, const block_iq4_nl& b) {
        float y[qk];
        dequantize_row_iq4_nl(&b, y, qk);
        double e = 0;
        for (int j = 0; j < qk; ++j) e += static_cast<double>(x[j]) * x[j] * (x[j] - y[j]) * (x[j] - y[j]);
        return e;
    };
    for (const float scale : scales) {
        INFO("scale " << scale);
        const std::vector<float> x = seeded_row(7, scale);
        constexpr int blocks = 8;
        std::vector<block_iq4_nl> ref(blocks), search(blocks), again(blocks);
        quantize_row_iq4_nl(x.data(), ref.data(), blocks * qk);
        quantize_row_iq4_nl_search(x.data(), search.data(), blocks * qk);
        double e_ref = 0, e_search = 0;
        int better = 0;
        for (int b = 0; b < blocks; ++b) {
            const float* xb = x.data() + b * qk;
            e_ref += error(xb, ref[b]);
            e_search += error(xb, search[b]);
            better += error(xb, search[b]) < error(xb, ref[b]);
            // one block at a time, and again: the same bytes
            quantize_row_iq4_nl_search(xb, &again[b], qk);
        }
        CHECK(e_search < 0.97 * e_ref); // about 9 % below on such data
        CHECK(better >= blocks / 2);    // (a block now and then comes out worse)
        CHECK(std::memcmp(search.data(), again.data(), blocks * sizeof(block_iq4_nl)) == 0);
    }
    SECTION("exact multiples of the table with +113 the largest: the search finds them, the reference does not") {
        // values 1/8 * iq4nl_values[q] with q in 2..15: the reference maps 113 / 8 to -127 and
        // fits the mirrored codes; the search's first scale maps it to +127, whose codes are q
        float x[qk];
        for (int j = 0; j < qk; ++j) x[j] = 0.125f * static_cast<float>(iq4nl_values[2 + (j * 5) % 14]);
        block_iq4_nl b{}, r{};
        quantize_row_iq4_nl_search(x, &b, qk);
        quantize_row_iq4_nl(x, &r, qk);
        CHECK(f16_to_f32(b.d) == 0.125f);
        float y[qk];
        dequantize_row_iq4_nl(&b, y, qk);
        for (int j = 0; j < qk; ++j) CHECK(y[j] == x[j]);
        CHECK(error(x, r) > 0.0);
    }
    SECTION("a block of magnitudes below 1e-15: scale 0, the entry nearest 0 (index 8) everywhere, as ggml") {
        float x[qk];
        for (int j = 0; j < qk; ++j) x[j] = (j % 2 ? -1e-17f : 3e-16f);
        block_iq4_nl b{};
        quantize_row_iq4_nl_search(x, &b, qk);
        CHECK(b.d.bits == 0);
        for (const std::uint8_t byte : b.qs) CHECK(byte == 0x88);
    }
}

TEST_CASE("convert: quantize_weights_row is from_float_row but for iq4_nl's search and q8_0's ties", "[quants]") {
    const std::vector<float> x = seeded_row(11, 1.0f); // 256 values
    const auto n = static_cast<std::int64_t>(x.size());
    for (const elem_type t : all_elem_types) {
        if (!is_quantized(t) || !weights_quantizer_missing(t).empty()) continue;
        INFO(to_string(t));
        std::vector<std::byte> file(row_size(t, n)), op(row_size(t, n)), own(row_size(t, n));
        quantize_weights_row(t, x.data(), file.data(), n);
        from_float_row(t, x.data(), op.data(), n);
        if (t == elem_type::iq4_nl) {
            quantize_row_iq4_nl_search(x.data(), reinterpret_cast<block_iq4_nl*>(own.data()), n);
            CHECK(file == own);
            CHECK(file != op);
        } else if (t == elem_type::q8_0) {
            quantize_row_q8_0_ties_away(x.data(), reinterpret_cast<block_q8_0*>(own.data()), n);
            CHECK(file == own);
        } else if (t == elem_type::iq3_xxs) { // f32 does not convert into it: only files are written
            quantize_row_iq3_xxs(x.data(), reinterpret_cast<block_iq3_xxs*>(own.data()), n);
            CHECK(file == own);
        } else if (t == elem_type::iq3_s) {
            quantize_row_iq3_s(x.data(), reinterpret_cast<block_iq3_s*>(own.data()), n);
            CHECK(file == own);
        } else if (t == elem_type::iq2_s) {
            quantize_row_iq2_s(x.data(), reinterpret_cast<block_iq2_s*>(own.data()), n);
            CHECK(file == own);
        } else if (t == elem_type::iq1_m) {
            quantize_row_iq1_m(x.data(), reinterpret_cast<block_iq1_m*>(own.data()), n);
            CHECK(file == own);
        } else {
            CHECK(file == op);
        }
    }
    SECTION("q8_0: a tie rounds away from zero for files, to even for the ops") {
        float v[qk8_0] = {};
        v[0] = 127.0f; // d = 1
        v[1] = 2.5f;
        v[2] = -4.5f;
        v[3] = 3.5f;
        block_q8_0 away{}, even{};
        quantize_row_q8_0_ties_away(v, &away, qk8_0);
        quantize_row_q8_0(v, &even, qk8_0);
        CHECK(away.qs[1] == 3);
        CHECK(away.qs[2] == -5);
        CHECK(away.qs[3] == 4);
        CHECK(even.qs[1] == 2);
        CHECK(even.qs[2] == -4);
        CHECK(even.qs[3] == 4);
    }
}

// ---------------------------------------------------------------------------------------
// K-quants (core/kquants.hpp)

TEST_CASE("kquants: ggml's rounding trick rounds half to even", "[quants]") {
    using kquant_detail::nearest_int;
    CHECK(nearest_int(2.5f) == 2);
    CHECK(nearest_int(3.5f) == 4);
    CHECK(nearest_int(-2.5f) == -2);
    CHECK(nearest_int(-0.4f) == 0);
    CHECK(nearest_int(63.49f) == 63);
    CHECK(nearest_int(-4194303.0f) == -4194303);
}

TEST_CASE("kquants: q4_K, q5_K and q6_K blocks read as ggml's formulas", "[quants]") {
    float y[qk_k];
    SECTION("q4_K and q5_K: 6-bit scales and minimums, the upper four sub-blocks' high bits in the first eight bytes") {
        block_q5_K b{};
        b.d = f32_to_f16(0.5f);
        b.dmin = f32_to_f16(0.25f);
        const int sc[8] = {1, 7, 20, 63, 33, 48, 5, 62}, mn[8] = {0, 3, 63, 9, 17, 40, 2, 61};
        for (int j = 0; j < 4; ++j) {
            b.scales[j] = static_cast<std::uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
            b.scales[j + 4] = static_cast<std::uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
            b.scales[j + 8] = static_cast<std::uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
        }
        for (int l = 0; l < 32; ++l)
            for (int c = 0; c < 4; ++c) b.qs[32 * c + l] = static_cast<std::uint8_t>(((l + c) % 16) | (((l * 3 + c) % 16) << 4));
        for (int l = 0; l < 32; ++l) b.qh[l] = static_cast<std::uint8_t>(l * 37 + 11);
        dequantize_row_q5_K(&b, y, qk_k);
        for (int e = 0; e < qk_k; ++e) {
            const int j = e / 32, l = e % 32, c = j / 2;
            const int lo = j % 2 ? (l * 3 + c) % 16 : (l + c) % 16;
            const int q = lo + 16 * ((b.qh[l] >> j) & 1);
            INFO("value " << e);
            CHECK(y[e] == 0.5f * static_cast<float>(sc[j]) * static_cast<float>(q) - 0.25f * static_cast<float>(mn[j]));
        }
        block_q4_K b4{b.d, b.dmin, {}, {}};
        std::memcpy(b4.scales, b.scales, sizeof b4.scales);
        std::memcpy(b4.qs, b.qs, sizeof b4.qs);
        dequantize_row_q4_K(&b4, y, qk_k);
        for (int e = 0; e < qk_k; ++e) {
            const int j = e / 32, l = e % 32, c = j / 2;
            const int q = j % 2 ? (l * 3 + c) % 16 : (l + c) % 16;
            CHECK(y[e] == 0.5f * static_cast<float>(sc[j]) * static_cast<float>(q) - 0.25f * static_cast<float>(mn[j]));
        }
    }
    SECTION("q6_K: low nibbles in ql, two high bits per value in qh, a signed scale per 16") {
        block_q6_K b{};
        b.d = f32_to_f16(0.125f);
        for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<std::int8_t>(j * 17 % 255 - 127);
        int q6[qk_k];
        for (int e = 0; e < qk_k; ++e) q6[e] = (e * 29 + 7) % 64;
        for (int h = 0; h < 2; ++h)
            for (int l = 0; l < 32; ++l) {
                const int* q = q6 + 128 * h + l;
                b.ql[64 * h + l] = static_cast<std::uint8_t>((q[0] & 15) | ((q[64] & 15) << 4));
                b.ql[64 * h + 32 + l] = static_cast<std::uint8_t>((q[32] & 15) | ((q[96] & 15) << 4));
                b.qh[32 * h + l] = static_cast<std::uint8_t>((q[0] >> 4) | ((q[32] >> 4) << 2) | ((q[64] >> 4) << 4) | ((q[96] >> 4) << 6));
            }
        dequantize_row_q6_K(&b, y, qk_k);
        for (int e = 0; e < qk_k; ++e)
            CHECK(y[e] == 0.125f * static_cast<float>(b.scales[e / 16]) * static_cast<float>(q6[e] - 32));
    }
}

TEST_CASE("kquants: q2_K and q3_K blocks read as ggml's formulas", "[quants]") {
    float y[qk_k];
    int q2[qk_k];
    for (int e = 0; e < qk_k; ++e) q2[e] = (e * 5 + e / 64) % 4;
    std::uint8_t packed[qk_k / 4];
    for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l) {
            const int* q = q2 + 128 * h + l;
            packed[32 * h + l] = static_cast<std::uint8_t>(q[0] | (q[32] << 2) | (q[64] << 4) | (q[96] << 6));
        }
    SECTION("q2_K: a 4-bit scale and minimum per 16 values") {
        block_q2_K b{};
        b.d = f32_to_f16(0.5f);
        b.dmin = f32_to_f16(2.0f);
        for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<std::uint8_t>((j * 7) % 16 | (((j * 3 + 1) % 16) << 4));
        std::memcpy(b.qs, packed, sizeof packed);
        dequantize_row_q2_K(&b, y, qk_k);
        for (int e = 0; e < qk_k; ++e) {
            const int sc = (e / 16 * 7) % 16, m = (e / 16 * 3 + 1) % 16;
            CHECK(y[e] == 0.5f * static_cast<float>(sc) * static_cast<float>(q2[e]) - 2.0f * static_cast<float>(m));
        }
    }
    SECTION("q3_K: 6-bit signed scales in 12 bytes, the third bit of value e in bit e / 32 of hmask[e % 32]") {
        block_q3_K b{};
        b.d = f32_to_f16(0.25f);
        int sc6[16];
        for (int j = 0; j < 16; ++j) {
            sc6[j] = (j * 13 + 5) % 64;
            if (j < 8)
                b.scales[j] = static_cast<std::uint8_t>(b.scales[j] | (sc6[j] & 15));
            else
                b.scales[j - 8] = static_cast<std::uint8_t>(b.scales[j - 8] | ((sc6[j] & 15) << 4));
            b.scales[8 + j % 4] = static_cast<std::uint8_t>(b.scales[8 + j % 4] | ((sc6[j] >> 4) << (2 * (j / 4))));
        }
        std::memcpy(b.qs, packed, sizeof packed);
        for (int l = 0; l < 32; ++l) b.hmask[l] = static_cast<std::uint8_t>(l * 41 + 3);
        dequantize_row_q3_K(&b, y, qk_k);
        for (int e = 0; e < qk_k; ++e) {
            const int high = (b.hmask[e % 32] >> (e / 32)) & 1;
            CHECK(y[e] == 0.25f * static_cast<float>(sc6[e / 16] - 32) * static_cast<float>(q2[e] - (high ? 0 : 4)));
        }
    }
}

TEST_CASE("kquants: round trips on seeded data of many scales, all-zero blocks and q8_K's sums", "[quants]") {
    std::uint32_t seed = 40;
    for (const float scale : scales) {
        INFO("scale " << scale);
        const std::vector<float> x = seeded_row(seed++, scale); // 8 x 32 = one super-block
        std::vector<float> row(x);
        row.insert(row.end(), x.rbegin(), x.rend()); // two super-blocks
        const auto n = static_cast<std::int64_t>(row.size());
        std::vector<float> y(row.size());
        const auto rel_rms = [&] {
            double err = 0.0, ref = 0.0;
            for (std::size_t i = 0; i < row.size(); ++i) {
                err += (static_cast<double>(row[i]) - y[i]) * (static_cast<double>(row[i]) - y[i]);
                ref += static_cast<double>(row[i]) * row[i];
            }
            return std::sqrt(err / ref);
        };
        std::vector<block_q2_K> b2(2);
        std::vector<block_q3_K> b3(2);
        quantize_row_q2_K(row.data(), b2.data(), n);
        dequantize_row_q2_K(b2.data(), y.data(), n);
        CHECK(rel_rms() < 0.4); // 2 bits
        quantize_row_q3_K(row.data(), b3.data(), n);
        dequantize_row_q3_K(b3.data(), y.data(), n);
        CHECK(rel_rms() < 0.2); // 3 bits
        std::vector<block_q4_K> b4(2);
        std::vector<block_q5_K> b5(2);
        std::vector<block_q6_K> b6(2);
        std::vector<block_q8_K> b8(2);
        quantize_row_q4_K(row.data(), b4.data(), n);
        dequantize_row_q4_K(b4.data(), y.data(), n);
        CHECK(rel_rms() < 0.09);
        quantize_row_q5_K(row.data(), b5.data(), n);
        dequantize_row_q5_K(b5.data(), y.data(), n);
        CHECK(rel_rms() < 0.05);
        quantize_row_q6_K(row.data(), b6.data(), n);
        dequantize_row_q6_K(b6.data(), y.data(), n);
        CHECK(rel_rms() < 0.025);
        quantize_row_q8_K(row.data(), b8.data(), n);
        dequantize_row_q8_K(b8.data(), y.data(), n);
        for (std::size_t i = 0; i < row.size(); ++i) CHECK(std::fabs(row[i] - y[i]) <= 0.5f * std::fabs(b8[i / qk_k].d) * 1.0001f);
        for (const block_q8_K& b : b8)
            for (int j = 0; j < qk_k / 16; ++j) {
                int sum = 0;
                for (int i = 0; i < 16; ++i) sum += b.qs[16 * j + i];
                CHECK(b.bsums[j] == sum);
            }
    }
    SECTION("all-zero super-blocks: zero scales, zeros back") {
        const std::vector<float> zeros(qk_k, 0.0f);
        std::vector<float> y(qk_k, 1.0f);
        block_q2_K b2;
        block_q3_K b3;
        quantize_row_q2_K(zeros.data(), &b2, qk_k);
        dequantize_row_q2_K(&b2, y.data(), qk_k);
        for (const float v : y) CHECK(v == 0.0f);
        quantize_row_q3_K(zeros.data(), &b3, qk_k);
        dequantize_row_q3_K(&b3, y.data(), qk_k);
        for (const float v : y) CHECK(v == 0.0f);
        block_q4_K b4;
        block_q5_K b5;
        block_q6_K b6;
        block_q8_K b8;
        std::memset(&b8, 0x5a, sizeof b8);
        quantize_row_q4_K(zeros.data(), &b4, qk_k);
        dequantize_row_q4_K(&b4, y.data(), qk_k);
        for (const float v : y) CHECK(v == 0.0f);
        quantize_row_q5_K(zeros.data(), &b5, qk_k);
        dequantize_row_q5_K(&b5, y.data(), qk_k);
        for (const float v : y) CHECK(v == 0.0f);
        quantize_row_q6_K(zeros.data(), &b6, qk_k);
        CHECK(b6.d.bits == 0);
        dequantize_row_q6_K(&b6, y.data(), qk_k);
        for (const float v : y) CHECK(v == 0.0f);
        quantize_row_q8_K(zeros.data(), &b8, qk_k);
        CHECK(b8.d == 0.0f);
        for (const std::int16_t s : b8.bsums) CHECK(s == 0);
    }
}

TEST_CASE("convert: every quantized element type converts rows through its own block format", "[quants]") {
    // from_float_row / to_float_row (convert.hpp) give the bytes and values of the format's
    // functions, for every type the traits call quantized; dequantize_block and
    // quantize_block do the same one block at a time at any alignment
    auto direct = [](elem_type t, const float* x, std::byte* y, std::int64_t n, float* back) {
        detail::visit_blocks(t, y, [&](auto* blocks) {
            detail::quantize_row(x, blocks, n);
            detail::dequantize_row(blocks, back, n);
        });
    };
    int covered = 0;
    for (elem_type t : all_elem_types) {
        if (!is_quantized(t) || !converts_from_float(t)) continue;
        INFO(to_string(t));
        ++covered;
        const std::int64_t n = 2 * max_block_size;
        const std::vector<float> x = [&] {
            std::vector<float> v;
            for (std::uint32_t seed : {1u, 2u, 3u, 4u}) {
                const auto r = seeded_row(seed, 1.0f);
                v.insert(v.end(), r.begin(), r.end());
            }
            v.resize(static_cast<std::size_t>(n));
            return v;
        }();
        const std::size_t bytes = row_size(t, n);
        alignas(16) std::byte via_row[2 * max_type_size * 8]{};
        alignas(16) std::byte via_format[sizeof via_row]{};
        std::vector<float> back_row(static_cast<std::size_t>(n)), back_format(static_cast<std::size_t>(n));
        from_float_row(t, x.data(), via_row, n);
        to_float_row(t, via_row, back_row.data(), n);
        direct(t, x.data(), via_format, n, back_format.data());
        CHECK(std::memcmp(via_row, via_format, bytes) == 0);
        CHECK(back_row == back_format);

        // one block at a time, at an odd address
        std::vector<std::byte> odd(bytes + 1);
        std::vector<float> back_block(static_cast<std::size_t>(n));
        const std::int64_t bs = block_size(t);
        for (std::int64_t b = 0; b < n / bs; ++b)
            quantize_block(t, x.data() + b * bs, odd.data() + 1 + static_cast<std::size_t>(b) * type_size(t));
        CHECK(std::memcmp(odd.data() + 1, via_row, bytes) == 0);
        for (std::int64_t b = 0; b < n / bs; ++b)
            dequantize_block(t, odd.data() + 1 + static_cast<std::size_t>(b) * type_size(t), back_block.data() + b * bs);
        CHECK(back_block == back_format);
    }
    CHECK(covered == 16); // all but iq3_xxs ... iq1_m, which f32 does not convert into
}

// ---------------------------------------------------------------------------------------
// core/iquants.hpp: the i-quants and ternary types

namespace {

/// A row of n values: normal and uniform values of the given scale.
std::vector<float> seeded_values(std::uint32_t seed, float scale, std::size_t n) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, scale);
    std::uniform_real_distribution<float> ud(-scale, scale);
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = i % 3 == 0 ? ud(rng) : nd(rng);
    return x;
}

/// Root mean square of x - y over that of x.
double relative_rms(const std::vector<float>& x, const std::vector<float>& y) {
    double e = 0, s = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        e += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
        s += static_cast<double>(x[i]) * x[i];
    }
    return std::sqrt(e / s);
}

/// x quantized to t and read back (through convert.hpp).
std::vector<float> round_trip(elem_type t, const std::vector<float>& x) {
    const auto n = static_cast<std::int64_t>(x.size());
    std::vector<std::byte> q(row_size(t, n));
    std::vector<float> y(x.size());
    from_float_row(t, x.data(), q.data(), n);
    to_float_row(t, q.data(), y.data(), n);
    return y;
}

} // namespace

TEST_CASE("iquants: a 7-bit sign group stands for 8 signs with an even number of minus signs", "[quants]") {
    for (unsigned g = 0; g < 128; ++g) {
        const std::uint8_t s = detail::even_signs(g);
        CHECK((s & 127u) == g);
        CHECK(std::popcount(static_cast<unsigned>(s)) % 2 == 0);
    }
}

TEST_CASE("iquants: blocks read as ggml's formulas", "[quants]") {
    std::vector<float> y(qk_k);
    SECTION("iq4_xs: d times (6-bit scale - 32) times iq4_nl's table") {
        block_iq4_xs b{};
        b.d = f32_to_f16(0.5f);
        b.scales_l[0] = 0x01 | 0x00;  // sub-block 0: low bits 1, sub-block 1: 0
        b.scales_h = 2u << 0 | 1u << 2; // sub-block 0: high bits 2 (scale 33), sub-block 1: 1 (16)
        b.qs[0] = 0x0f;                // value 0: code 15, value 16: code 0
        b.qs[16] = 0x80;               // sub-block 1's value 0: code 0, value 16: code 8
        dequantize_row_iq4_xs(&b, y.data(), qk_k);
        CHECK(y[0] == 0.5f * 1 * 113);
        CHECK(y[16] == 0.5f * 1 * -127);
        CHECK(y[32] == 0.5f * -16 * -127);
        CHECK(y[48] == 0.5f * -16 * 1);
        CHECK(y[255] == 0.5f * -32 * -127); // scale 0, code 0
    }
    SECTION("tq2_0: two bits a value, code - 1, value 32 l + m in bits 2 l of byte m") {
        block_tq2_0 b{};
        b.d = f32_to_f16(3.0f);
        b.qs[5] = 0b00'10'01'00; // values 5, 37, 69, 101: codes 0, 1, 2, 0
        dequantize_row_tq2_0(&b, y.data(), qk_k);
        CHECK(y[5] == -3.0f);
        CHECK(y[37] == 0.0f);
        CHECK(y[69] == 3.0f);
        CHECK(y[101] == -3.0f);
        CHECK(y[128 + 5] == -3.0f); // byte 37: zero, so code 0
    }
    SECTION("tq1_0: five trits a byte, the first most significant, quantize and read back") {
        std::vector<float> x(qk_k, 0.0f);
        x[3] = 2.0f;         // byte 3's first trit
        x[3 + 32] = -2.0f;   // its second
        x[160 + 7] = 2.0f;   // byte 32 + 7's first trit
        x[240 + 2] = -2.0f;  // qh byte 2's first trit
        x[240 + 12] = 2.0f;  // qh byte 0's fourth trit
        block_tq1_0 b{};
        quantize_row_tq1_0(x.data(), &b, qk_k);
        CHECK(f16_to_f32(b.d) == 2.0f);
        dequantize_row_tq1_0(&b, y.data(), qk_k);
        CHECK(y == x);
        CHECK(b.qs[0] == ((121u * 256 + 242) / 243)); // all zero codes: 11111 in base 3
    }
    SECTION("iq2_xxs: grid magnitudes times d (s + 1/2) / 4, signs from the group and its parity") {
        block_iq2_xxs b{};
        b.d = f32_to_f16(1.0f);
        const std::uint32_t aux = 1u | (3u << 28); // group 0: sign bit 0 (and so bit 7), scale 3
        std::memcpy(reinterpret_cast<std::uint8_t*>(b.qs) + 4, &aux, 4);
        dequantize_row_iq2_xxs(&b, y.data(), qk_k);
        const float db = (0.5f + 3.0f) * 0.25f;
        const auto g = detail::iq2xxs_grid[0];
        CHECK(y[0] == -db * static_cast<float>(g & 0xff));
        CHECK(y[1] == db * static_cast<float>((g >> 8) & 0xff));
        CHECK(y[7] == -db * static_cast<float>((g >> 56) & 0xff));
        CHECK(y[8] == db * static_cast<float>(g & 0xff));
    }
    SECTION("iq1_s: d (2 s + 1) (grid value + the shift)") {
        block_iq1_s b{};
        b.d = f32_to_f16(0.25f);
        b.qh[0] = static_cast<std::uint16_t>(2u << 12 | 0x8000u); // scale 2, shift -1/8
        dequantize_row_iq1_s(&b, y.data(), qk_k);
        const auto v0 = static_cast<float>(static_cast<std::int8_t>(detail::iq1s_grid[0] & 0xff));
        CHECK(y[0] == 0.25f * 5.0f * (v0 - 0.125f));
        CHECK(y[32] == 0.25f * 1.0f * (v0 + 0.125f)); // sub-block 1: scale 0, shift +1/8
    }
}

TEST_CASE("iquants: round trips of iq4_xs, tq1_0 and tq2_0 on seeded data of many scales", "[quants]") {
    for (const float scale : scales) {
        INFO("scale " << scale);
        const std::vector<float> x = seeded_values(7, scale, 4 * qk_k);
        CHECK(relative_rms(x, round_trip(elem_type::iq4_xs, x)) < 0.085); // about 0.080 here
        // ternary formats keep the sign of each large value and zero the small ones
        for (const elem_type t : {elem_type::tq1_0, elem_type::tq2_0}) {
            const std::vector<float> y = round_trip(t, x);
            CHECK(relative_rms(x, y) < 1.0);
            for (std::size_t i = 0; i < x.size(); ++i) {
                const float d = std::fabs(y[i]);
                if (d != 0.0f) CHECK(std::signbit(y[i]) == std::signbit(x[i]));
            }
        }
    }
    SECTION("ternary data of one magnitude is exact, and an all-zero block stores d = 0") {
        std::vector<float> x(2 * qk_k);
        std::mt19937 rng(3);
        for (std::size_t i = 0; i < qk_k; ++i) x[i] = 0.75f * static_cast<float>(static_cast<int>(rng() % 3) - 1);
        x[0] = 0.75f;
        for (const elem_type t : {elem_type::tq1_0, elem_type::tq2_0}) CHECK(round_trip(t, x) == x);
    }
    SECTION("iq4_xs: a sub-block of zeros reads back as zeros beside large ones") {
        std::vector<float> x = seeded_values(9, 1.0f, qk_k);
        std::fill(x.begin() + 64, x.begin() + 96, 0.0f);
        const std::vector<float> y = round_trip(elem_type::iq4_xs, x);
        for (std::size_t i = 64; i < 96; ++i) CHECK(std::fabs(y[i]) < 0.05f);
    }
}

namespace {

/// A lattice type's file quantizer as tested: how far its round trip may be off (relative
/// RMS), and how many signs it may lose per value (iq3_xxs stores 7 of 8 signs, iq1_m none:
/// its values are levels -1, 0, 1 shifted by +-1/8).
struct file_quantizer {
    elem_type type;
    double max_error;
    std::size_t values_per_lost_sign; // 0: every sign kept
};
const file_quantizer file_quantizers[] = {
    {elem_type::iq3_xxs, 0.25, 8}, // about 0.22 here: 3.06 bits a value on a grid
    {elem_type::iq3_s, 0.21, 0},   // about 0.18: 3.44 bits
    {elem_type::iq2_s, 0.32, 0},   // about 0.28: 2.56 bits
    {elem_type::iq1_m, 0.65, 1},   // about 0.60: 1.75 bits
};

/// x written as a model file stores t (quantize_weights_row), and read back.
std::pair<std::vector<std::byte>, std::vector<float>> file_round_trip(elem_type t, const std::vector<float>& x) {
    const auto n = static_cast<std::int64_t>(x.size());
    std::vector<std::byte> q(row_size(t, n));
    std::vector<float> y(x.size());
    quantize_weights_row(t, x.data(), q.data(), n);
    to_float_row(t, q.data(), y.data(), n);
    return {q, y};
}

/// A lattice's tables: every entry is its own key, every other key a search can form lists
/// neighbours (entries of the lattice).
template <class Lattice> void check_lattice(const Lattice& lat, int entries) {
    int on_grid = 0, listed = 0;
    for (int key = 0; key < Lattice::keys; ++key) {
        if (lat.map[key] >= 0) {
            ++on_grid;
            CHECK(Lattice::key_of(lat.codes[static_cast<std::size_t>(lat.map[key])].data()) == key);
        } else if (lat.reachable(key)) {
            ++listed;
            const std::uint16_t* list = lat.neighbours_of(key);
            CHECK(list[0] > 0);
            for (int j = 1; j <= list[0]; ++j) CHECK(list[j] < entries);
        }
    }
    CHECK(on_grid == entries);
    CHECK(listed > 0);
}

} // namespace

TEST_CASE("iquants: the grid searches of the lattice types, for model files", "[quants]") {
    for (const file_quantizer& fq : file_quantizers) {
        INFO(to_string(fq.type));
        CHECK(weights_quantizer_missing(fq.type).empty());
        for (const float scale : scales) {
            INFO("scale " << scale);
            const std::vector<float> x = seeded_values(13, scale, 4 * qk_k);
            const auto [q, y] = file_round_trip(fq.type, x);
            CHECK(relative_rms(x, y) < fq.max_error);
            CHECK(file_round_trip(fq.type, x).first == q); // deterministic
            std::size_t flipped = 0;
            for (std::size_t i = 0; i < x.size(); ++i) flipped += y[i] != 0.0f && std::signbit(y[i]) != std::signbit(x[i]);
            CHECK(flipped <= (fq.values_per_lost_sign == 0 ? 0 : x.size() / fq.values_per_lost_sign));
        }
        const auto [q, y] = file_round_trip(fq.type, std::vector<float>(qk_k, 0.0f));
        for (const std::byte b : q) CHECK(b == std::byte{0}); // a super-block of zeros stores zeros
    }
    SECTION("the lattice tables: built once") {
        CHECK(&detail::iq3xxs_lattice() == &detail::iq3xxs_lattice());
        check_lattice(detail::iq3xxs_lattice(), 256);
        check_lattice(detail::iq3s_lattice(), 512);
        check_lattice(detail::iq2s_lattice(), 1024);
        check_lattice(detail::iq1_lattice(), 2048);
    }
    SECTION("iq3_s: after a sub-block of zeros, the grid indices' low bytes and the signs move up one "
            "sub-block, as ggml writes them") {
        std::vector<float> x = seeded_values(17, 1.0f, qk_k);
        std::fill(x.begin(), x.begin() + 32, 0.0f);
        block_iq3_s b{};
        quantize_row_iq3_s(x.data(), &b, qk_k);
        CHECK((b.scales[0] & 15) == 0);
        CHECK(b.qh[0] == 0);
        for (int k = 56; k < 64; ++k) CHECK(b.qs[k] == 0); // the eighth sub-block's place, unused
        for (int k = 28; k < 32; ++k) CHECK(b.signs[k] == 0);
        std::vector<float> shifted(x.begin() + 32, x.end());
        shifted.resize(qk_k, 0.0f); // the same sub-blocks first: the same low bytes and signs
        block_iq3_s c{};
        quantize_row_iq3_s(shifted.data(), &c, qk_k);
        CHECK(std::memcmp(b.qs, c.qs, sizeof b.qs) == 0);
        CHECK(std::memcmp(b.signs, c.signs, sizeof b.signs) == 0);
    }
}

TEST_CASE("iquants: iq1_m's search: a sub-block below 1e-7 stores scale code 0 and grid entry 0, "
          "beside large ones",
          "[quants]") {
    std::vector<float> x = seeded_values(23, 1.0f, qk_k);
    std::fill(x.begin() + 16, x.begin() + 32, 1e-9f); // sub-block 1
    block_iq1_m b{};
    quantize_row_iq1_m(x.data(), &b, qk_k);
    CHECK(b.qs[2] == 0);
    CHECK(b.qs[3] == 0);
    CHECK(b.qh[1] == 0);
    std::uint16_t sc[4];
    std::memcpy(sc, b.scales, sizeof sc);
    CHECK(((sc[0] >> 3) & 7) == 0);
    CHECK((sc[0] & 7) != 0); // sub-block 0's is not
    const auto [q, y] = file_round_trip(elem_type::iq1_m, x);
    for (std::size_t i = 16; i < 32; ++i) CHECK(std::fabs(y[i]) < 0.5f); // d (1 + 1/8) at most
}

TEST_CASE("iquants: the file quantizers give the same bytes from several threads at once", "[quants]") {
    const std::vector<float> x = seeded_values(19, 1.0f, 2 * qk_k);
    for (const file_quantizer& fq : file_quantizers) {
        INFO(to_string(fq.type));
        const std::vector<std::byte> serial = file_round_trip(fq.type, x).first;
        std::vector<std::vector<std::byte>> out(4);
        std::vector<std::thread> threads;
        for (std::vector<std::byte>& o : out) threads.emplace_back([&] { o = file_round_trip(fq.type, x).first; });
        for (std::thread& t : threads) t.join();
        for (const std::vector<std::byte>& o : out) CHECK(o == serial);
    }
}

TEST_CASE("iquants: the lattice types f32 does not convert into, and those ggml writes only with an "
          "importance matrix",
          "[quants]") {
    const std::vector<float> x = seeded_values(5, 1.0f, qk_k);
    for (const elem_type t : {elem_type::iq3_xxs, elem_type::iq3_s, elem_type::iq2_xxs, elem_type::iq2_xs,
                              elem_type::iq2_s, elem_type::iq1_s, elem_type::iq1_m}) {
        INFO(to_string(t));
        CHECK_FALSE(converts_from_float(t));
        std::vector<std::byte> q(row_size(t, qk_k));
        if (!weights_quantizer_missing(t).empty()) CHECK_THROWS_AS(quantize_weights_row(t, x.data(), q.data(), qk_k), error);
    }
    for (const elem_type t : {elem_type::iq2_xxs, elem_type::iq2_xs, elem_type::iq1_s})
        CHECK_THROWS_WITH(quantize_weights_row(t, x.data(), nullptr, qk_k), Catch::Contains("importance matrix"));
    for (const elem_type t : {elem_type::iq4_xs, elem_type::tq1_0, elem_type::tq2_0}) CHECK(converts_from_float(t));
}

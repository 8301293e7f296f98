// The block formats of core/quants.hpp: layouts read as ggml's formulas say, round trips
// within each format's step on seeded data of many scales, ties, all-zero blocks and the
// sign of the largest magnitude.

#include <backplane/core/quants.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
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

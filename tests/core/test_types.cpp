// Element types: f16 / bf16 conversions (exhaustive where the domain allows), type traits,
// and the q8_0 / q4_0 block formats.
//
// Oracles are independent of the code under test:
//  * GCC's _Float16 (soft-float conversions in libgcc on x86-64 without F16C) for f16;
//  * values computed from the IEEE definition with std::ldexp in double;
//  * for bf16, nearest-ties-to-even decided by comparing distances in double;
//  * for the block formats, layouts and values written by hand from their definitions.

#include <backplane/core/convert.hpp>
#include <backplane/core/types.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

using namespace backplane;

namespace {

std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }
float float_of(std::uint32_t u) { return std::bit_cast<float>(u); }

/// Value of an f16 bit pattern from the IEEE 754 binary16 definition (finite patterns).
double f16_value_by_definition(std::uint16_t h) {
    const int sign = (h & 0x8000) ? -1 : 1;
    const int exp = (h >> 10) & 0x1f;
    const int mant = h & 0x3ff;
    if (exp == 0) return sign * std::ldexp(static_cast<double>(mant), -24);  // subnormal: m * 2^-24
    return sign * std::ldexp(1.0 + mant / 1024.0, exp - 15);                 // normal
}

/// Collects the first few mismatches of a long loop, so that one failed CHECK reports
/// useful examples instead of 65536 lines.
struct mismatches {
    std::size_t count = 0;
    std::string first;
    void add(const std::string& what) {
        if (count++ < 8) first += what + "\n";
    }
};

std::string hex(std::uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%x", v);
    return buf;
}

#if defined(__FLT16_MANT_DIG__)
constexpr bool have_float16 = true;
float oracle_f16_to_f32(std::uint16_t bits) {
    _Float16 h;
    std::memcpy(&h, &bits, sizeof h);
    return static_cast<float>(h);
}
std::uint16_t oracle_f32_to_f16(float f) {
    const _Float16 h = static_cast<_Float16>(f); // one rounding, float -> binary16 (libgcc __truncsfhf2)
    std::uint16_t bits;
    std::memcpy(&bits, &h, sizeof bits);
    return bits;
}
#else
constexpr bool have_float16 = false;
float oracle_f16_to_f32(std::uint16_t) { return 0.0f; }
std::uint16_t oracle_f32_to_f16(float) { return 0; }
#endif

bool f16_is_nan(std::uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

/// Compares f32_to_f16 with the _Float16 oracle (NaN: both NaN with the same sign).
void compare_with_oracle(float f, mismatches& bad) {
    const std::uint16_t got = f32_to_f16(f).bits;
    const std::uint16_t want = oracle_f32_to_f16(f);
    const bool ok = std::isnan(f) ? (f16_is_nan(got) && f16_is_nan(want) && (got & 0x8000) == (want & 0x8000))
                                  : got == want;
    if (!ok) bad.add("f32 " + hex(bits_of(f)) + ": got " + hex(got) + ", _Float16 gives " + hex(want));
}

/// bf16 by hand: the two bf16 neighbours of |f| are the truncation `lo` and the next
/// pattern `lo + 1` (2^128 stands for the pattern after the largest finite one, which
/// is infinity); pick the nearer, the even one on a tie.
std::uint16_t reference_bf16(float f) {
    const std::uint32_t x = bits_of(f);
    const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    const std::uint32_t ax = x & 0x7fffffffu;
    const auto lo = static_cast<std::uint16_t>(ax >> 16);
    if ((ax & 0xffffu) == 0) return static_cast<std::uint16_t>(sign | lo);
    const double v = std::fabs(static_cast<double>(f));
    const double vlo = static_cast<double>(float_of(static_cast<std::uint32_t>(lo) << 16));
    const double vhi = lo + 1 == 0x7f80 ? std::ldexp(1.0, 128)
                                        : static_cast<double>(float_of(static_cast<std::uint32_t>(lo + 1) << 16));
    const double dlo = v - vlo; // exact: neighbouring floats, differences fit a double
    const double dhi = vhi - v;
    std::uint16_t r = lo;
    if (dhi < dlo || (dhi == dlo && (lo & 1u))) r = static_cast<std::uint16_t>(lo + 1);
    return static_cast<std::uint16_t>(sign | r);
}

} // namespace

// ---------------------------------------------------------------------------------------
// constexpr-ness: expected bit patterns derived by hand from the IEEE formats
// (1.0 = exponent bias, zero mantissa: f16 0x3c00, bf16 0x3f80; -2.5 = -1.25 * 2^1:
// f16 sign 1, exponent 16, mantissa 0x100 -> 0xc100; 2^-24 is the smallest f16 subnormal).
static_assert(f16_to_f32(f16_t{0x3c00}) == 1.0f);
static_assert(f16_to_f32(f16_t{0xc100}) == -2.5f);
static_assert(f16_to_f32(f16_t{0x0001}) == 0x1p-24f);
static_assert(f16_to_f32(f16_t{0x7bff}) == 65504.0f);
static_assert(f32_to_f16(1.0f) == f16_t{0x3c00});
static_assert(f32_to_f16(-2.5f) == f16_t{0xc100});
static_assert(f32_to_f16(0x1p-24f) == f16_t{0x0001});
static_assert(f32_to_f16(65520.0f) == f16_t{0x7c00}); // the tie above 65504 rounds to even: infinity
static_assert(bf16_to_f32(bf16_t{0x3f80}) == 1.0f);
static_assert(bf16_to_f32(bf16_t{0x4049}) == 3.140625f); // 1.5703125 * 2
static_assert(f32_to_bf16(1.0f) == bf16_t{0x3f80});
static_assert(f32_to_bf16(3.14159265f) == bf16_t{0x4049});

TEST_CASE("f16 -> f32: all 65536 bit patterns", "[types][f16]") {
    mismatches vs_definition, vs_oracle;
    for (std::uint32_t i = 0; i < 0x10000; ++i) {
        const auto h = static_cast<std::uint16_t>(i);
        const float got = f16_to_f32(f16_t{h});
        if ((h & 0x7c00) == 0x7c00) { // inf and nan
            const bool is_inf = (h & 0x3ff) == 0;
            const bool ok = is_inf ? std::isinf(got) && std::signbit(got) == bool(h & 0x8000)
                                   : std::isnan(got) && std::signbit(got) == bool(h & 0x8000);
            if (!ok) vs_definition.add(hex(h) + " -> " + hex(bits_of(got)));
        } else {
            const double want = f16_value_by_definition(h);
            // exact, and -0 keeps its sign
            if (static_cast<double>(got) != want || std::signbit(got) != bool(h & 0x8000))
                vs_definition.add(hex(h) + " -> " + hex(bits_of(got)));
        }
        if (have_float16) {
            const float want = oracle_f16_to_f32(h);
            const bool ok = std::isnan(want) ? std::isnan(got) && std::signbit(got) == std::signbit(want)
                                             : bits_of(got) == bits_of(want);
            if (!ok) vs_oracle.add(hex(h) + " -> " + hex(bits_of(got)) + ", _Float16 gives " + hex(bits_of(want)));
        }
    }
    INFO(vs_definition.first);
    CHECK(vs_definition.count == 0);
    INFO(vs_oracle.first);
    CHECK(vs_oracle.count == 0);
}

TEST_CASE("f32 -> f16: every f16 value converts back to itself", "[types][f16]") {
    mismatches bad;
    for (std::uint32_t i = 0; i < 0x10000; ++i) {
        const auto h = static_cast<std::uint16_t>(i);
        if (f16_is_nan(h)) continue;
        const float f = f16_to_f32(f16_t{h});
        if (f32_to_f16(f).bits != h) bad.add(hex(h) + " -> " + hex(f32_to_f16(f).bits));
        if (have_float16) compare_with_oracle(f, bad);
    }
    INFO(bad.first);
    CHECK(bad.count == 0);
}

TEST_CASE("f32 -> f16: midpoints between consecutive f16 values round to even", "[types][f16]") {
    // For every pair of neighbours (b, b + 1) of non-negative finite f16 patterns
    // (b + 1 = 0x7c00 stands for 2^16, the value past the largest finite one, reached by
    // overflow), the exact midpoint goes to the even pattern; one f32 ulp below goes to b
    // and one above to b + 1. The midpoint needs 12 significant bits: exact in f32.
    mismatches bad;
    for (std::uint16_t b = 0; b < 0x7c00; ++b) {
        const double lo = f16_value_by_definition(b);
        const double hi = b + 1 == 0x7c00 ? 65536.0 : f16_value_by_definition(static_cast<std::uint16_t>(b + 1));
        const auto mid = static_cast<float>((lo + hi) / 2);
        REQUIRE(static_cast<double>(mid) == (lo + hi) / 2);
        const std::uint16_t even = (b & 1u) ? static_cast<std::uint16_t>(b + 1) : b;
        const float below = std::nextafter(mid, 0.0f);
        const float above = std::nextafter(mid, std::numeric_limits<float>::infinity());
        for (const float sign : {1.0f, -1.0f}) {
            const std::uint16_t s = sign < 0 ? 0x8000 : 0;
            const auto check = [&](float f, std::uint16_t want) {
                const std::uint16_t got = f32_to_f16(f).bits;
                if (got != (s | want)) bad.add("f32 " + hex(bits_of(f)) + ": got " + hex(got) + ", want " + hex(s | want));
                if (have_float16) compare_with_oracle(f, bad);
            };
            check(sign * mid, even);
            check(sign * below, b);
            check(sign * above, static_cast<std::uint16_t>(b + 1));
        }
    }
    INFO(bad.first);
    CHECK(bad.count == 0);
}

TEST_CASE("f32 -> f16: zeros, subnormals, overflow, infinities, nan", "[types][f16]") {
    // +-0 keep their sign
    CHECK(f32_to_f16(0.0f).bits == 0x0000);
    CHECK(f32_to_f16(-0.0f).bits == 0x8000);

    // Below the smallest subnormal 2^-24: 2^-25 is the midpoint to 0 and ties to even (0);
    // anything above it rounds up to 2^-24; f32 subnormals flush to a signed 0.
    CHECK(f32_to_f16(0x1p-25f).bits == 0x0000);
    CHECK(f32_to_f16(-0x1p-25f).bits == 0x8000);
    CHECK(f32_to_f16(std::nextafter(0x1p-25f, 1.0f)).bits == 0x0001);
    CHECK(f32_to_f16(0x1p-26f).bits == 0x0000);
    CHECK(f32_to_f16(std::numeric_limits<float>::denorm_min()).bits == 0x0000);
    CHECK(f32_to_f16(-std::numeric_limits<float>::denorm_min()).bits == 0x8000);
    // subnormal f16 values m * 2^-24, the largest subnormal, and the carry into the
    // smallest normal (0x3ff.8 * 2^-24 ties to the even 0x400)
    CHECK(f32_to_f16(3 * 0x1p-24f).bits == 0x0003);
    CHECK(f32_to_f16(1023 * 0x1p-24f).bits == 0x03ff);
    CHECK(f32_to_f16(1023.5f * 0x1p-24f).bits == 0x0400);
    CHECK(f32_to_f16(0x1p-14f).bits == 0x0400);
    // 2.5 * 2^-24 ties between 2 and 3: even is 2; 3.5 ties to 4
    CHECK(f32_to_f16(2.5f * 0x1p-24f).bits == 0x0002);
    CHECK(f32_to_f16(3.5f * 0x1p-24f).bits == 0x0004);

    // Overflow: 65504 is the largest finite f16; 65520 (the midpoint to 2^16) and above go
    // to infinity, just below stays finite.
    CHECK(f32_to_f16(65504.0f).bits == 0x7bff);
    CHECK(f32_to_f16(std::nextafter(65520.0f, 0.0f)).bits == 0x7bff);
    CHECK(f32_to_f16(65520.0f).bits == 0x7c00);
    CHECK(f32_to_f16(-65520.0f).bits == 0xfc00);
    CHECK(f32_to_f16(1e10f).bits == 0x7c00);
    CHECK(f32_to_f16(std::numeric_limits<float>::max()).bits == 0x7c00);
    CHECK(f32_to_f16(std::numeric_limits<float>::infinity()).bits == 0x7c00);
    CHECK(f32_to_f16(-std::numeric_limits<float>::infinity()).bits == 0xfc00);

    // nan stays nan (non-zero mantissa), with its sign, whatever its payload: a payload
    // only in the low 13 bits must not truncate to infinity.
    for (const std::uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7f801fffu, 0x7fffffffu, 0xffc00000u, 0xff800001u}) {
        const std::uint16_t h = f32_to_f16(float_of(nan)).bits;
        INFO("f32 " << hex(nan) << " -> " << hex(h));
        CHECK(f16_is_nan(h));
        CHECK((h & 0x8000u) == ((nan >> 16) & 0x8000u));
        CHECK(std::isnan(f16_to_f32(f16_t{h})));
    }

    if (have_float16) {
        mismatches bad;
        for (const float f : {0.0f, -0.0f, 0x1p-25f, 0x1p-26f, 65504.0f, 65520.0f, 1e10f, -1e-10f,
                              std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()})
            compare_with_oracle(f, bad);
        INFO(bad.first);
        CHECK(bad.count == 0);
    }
}

TEST_CASE("f32 -> f16: random f32 values against _Float16", "[types][f16]") {
    if (!have_float16) {
        WARN("this compiler has no _Float16: the random comparison is skipped");
        return;
    }
    std::mt19937 rng(20240611);
    mismatches bad;
    // any bit pattern (mostly far outside f16's range), then values inside f16's exponent
    // range (f32 exponents 101..143) where the rounding decisions are made
    for (int i = 0; i < 1'000'000; ++i) compare_with_oracle(float_of(static_cast<std::uint32_t>(rng())), bad);
    std::uniform_int_distribution<std::uint32_t> exp(101, 143), mant(0, 0x7fffff), sign(0, 1);
    for (int i = 0; i < 1'000'000; ++i)
        compare_with_oracle(float_of((sign(rng) << 31) | (exp(rng) << 23) | mant(rng)), bad);
    INFO(bad.first);
    CHECK(bad.count == 0);
}

TEST_CASE("bf16: all 65536 patterns round-trip through f32", "[types][bf16]") {
    mismatches bad;
    for (std::uint32_t i = 0; i < 0x10000; ++i) {
        const auto h = static_cast<std::uint16_t>(i);
        const float f = bf16_to_f32(bf16_t{h});
        // bf16 is the top half of an f32, by definition
        if (bits_of(f) != (i << 16)) bad.add(hex(h) + " -> f32 " + hex(bits_of(f)));
        const std::uint16_t back = f32_to_bf16(f).bits;
        const bool is_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
        const bool ok = is_nan ? ((back & 0x7f80) == 0x7f80 && (back & 0x7f) != 0 && (back & 0x8000) == (h & 0x8000))
                               : back == h;
        if (!ok) bad.add(hex(h) + " -> back " + hex(back));
    }
    INFO(bad.first);
    CHECK(bad.count == 0);
}

TEST_CASE("f32 -> bf16: nearest, ties to even, against a computation by hand", "[types][bf16]") {
    mismatches bad;
    const auto check = [&](float f) {
        if (std::isnan(f)) return;
        const std::uint16_t got = f32_to_bf16(f).bits;
        const std::uint16_t want = reference_bf16(f);
        if (got != want) bad.add("f32 " + hex(bits_of(f)) + ": got " + hex(got) + ", want " + hex(want));
    };
    // every exact tie (low half 0x8000) and its two f32 neighbours, both signs
    for (std::uint32_t hi = 0; hi < 0x10000; ++hi) {
        const std::uint32_t tie = (hi << 16) | 0x8000u;
        check(float_of(tie));
        check(float_of(tie - 1));
        check(float_of(tie + 1));
    }
    std::mt19937 rng(7);
    for (int i = 0; i < 1'000'000; ++i) check(float_of(static_cast<std::uint32_t>(rng())));
    INFO(bad.first);
    CHECK(bad.count == 0);

    // hand-picked: 1 + 2^-8 is the tie between 1 (even) and 1 + 2^-7: goes to 1;
    // 1 + 3 * 2^-8 ties between 1 + 2^-7 (odd) and 1 + 2^-6: goes up.
    CHECK(f32_to_bf16(1.0f + 0x1p-8f).bits == 0x3f80);
    CHECK(f32_to_bf16(1.0f + 3 * 0x1p-8f).bits == 0x3f82);
    // the tie above the largest finite bf16 (0x7f7f, odd) overflows to infinity
    CHECK(f32_to_bf16(float_of(0x7f7f8000u)).bits == 0x7f80);
    CHECK(f32_to_bf16(float_of(0x7f7f7fffu)).bits == 0x7f7f);
    CHECK(f32_to_bf16(-0.0f).bits == 0x8000);
    CHECK(f32_to_bf16(-std::numeric_limits<float>::infinity()).bits == 0xff80);
    // nan stays nan even when its payload is only in the low half
    const std::uint16_t n = f32_to_bf16(float_of(0x7f800001u)).bits;
    CHECK((n & 0x7f80) == 0x7f80);
    CHECK((n & 0x7f) != 0);
}

// ---------------------------------------------------------------------------------------
// traits

TEST_CASE("type traits", "[types][traits]") {
    STATIC_REQUIRE(block_size(elem_type::f32) == 1);
    STATIC_REQUIRE(block_size(elem_type::q8_0) == 32);
    STATIC_REQUIRE(block_size(elem_type::q4_0) == 32);
    STATIC_REQUIRE(type_size(elem_type::q8_0) == 34); // 32 int8 + f16 scale
    STATIC_REQUIRE(type_size(elem_type::q4_0) == 18); // 16 bytes of nibbles + f16 scale
    STATIC_REQUIRE(type_size(elem_type::f32) == 4);
    STATIC_REQUIRE(type_size(elem_type::f16) == 2);
    STATIC_REQUIRE(type_size(elem_type::bf16) == 2);
    STATIC_REQUIRE(type_size(elem_type::i32) == 4);
    STATIC_REQUIRE(type_size(elem_type::i64) == 8);
    STATIC_REQUIRE(sizeof(block_q8_0) == 34);
    STATIC_REQUIRE(sizeof(block_q4_0) == 18);
    STATIC_REQUIRE(offsetof(block_q8_0, qs) == 2);
    STATIC_REQUIRE(offsetof(block_q4_0, qs) == 2);

    // row sizes count blocks: 64 q8_0 values are 2 blocks of 34 bytes
    STATIC_REQUIRE(row_size(elem_type::q8_0, 64) == 68);
    STATIC_REQUIRE(row_size(elem_type::q4_0, 96) == 54);
    STATIC_REQUIRE(row_size(elem_type::f32, 7) == 28);
    STATIC_REQUIRE(row_size(elem_type::bf16, 5) == 10);
    STATIC_REQUIRE(row_size(elem_type::f16, 0) == 0);

    CHECK(is_quantized(elem_type::q8_0));
    CHECK(is_quantized(elem_type::q4_0));
    CHECK_FALSE(is_quantized(elem_type::f16));
    CHECK_FALSE(is_quantized(elem_type::i32));
    CHECK(traits(elem_type::bf16).is_float);
    CHECK_FALSE(traits(elem_type::i32).is_float);
    CHECK_FALSE(traits(elem_type::i64).is_float);
    CHECK_FALSE(is_quantized(elem_type::i64));

    const std::pair<elem_type, std::string_view> names[] = {
        {elem_type::f32, "f32"},   {elem_type::f16, "f16"},   {elem_type::bf16, "bf16"},
        {elem_type::q8_0, "q8_0"}, {elem_type::q4_0, "q4_0"}, {elem_type::i32, "i32"},
        {elem_type::i64, "i64"},   {elem_type::q4_1, "q4_1"}, {elem_type::q5_0, "q5_0"},
        {elem_type::q5_1, "q5_1"}, {elem_type::q2_K, "q2_K"}, {elem_type::q3_K, "q3_K"},
        {elem_type::q4_K, "q4_K"}, {elem_type::q5_K, "q5_K"}, {elem_type::q6_K, "q6_K"},
        {elem_type::q8_K, "q8_K"}, {elem_type::iq4_nl, "iq4_nl"}, {elem_type::mxfp4, "mxfp4"},
        {elem_type::iq4_xs, "iq4_xs"}, {elem_type::iq3_xxs, "iq3_xxs"}, {elem_type::iq3_s, "iq3_s"},
        {elem_type::iq2_xxs, "iq2_xxs"}, {elem_type::iq2_xs, "iq2_xs"}, {elem_type::iq2_s, "iq2_s"},
        {elem_type::iq1_s, "iq1_s"}, {elem_type::iq1_m, "iq1_m"}, {elem_type::tq1_0, "tq1_0"},
        {elem_type::tq2_0, "tq2_0"}};
    STATIC_REQUIRE(std::size(names) == elem_type_count);
    for (auto [t, name] : names) {
        CHECK(to_string(t) == name);
        CHECK(parse_elem_type(name) == t);
    }
    STATIC_REQUIRE(parse_elem_type("q4_0") == elem_type::q4_0);
    CHECK_FALSE(parse_elem_type("F32").has_value());
    CHECK_FALSE(parse_elem_type("").has_value());
    CHECK_FALSE(parse_elem_type("q4_k").has_value()); // names are ggml's, case and all
    CHECK_FALSE(parse_elem_type("q4_K_M").has_value()); // a file type, not an element type
    CHECK_FALSE(parse_elem_type("f32 ").has_value());
}

// ---------------------------------------------------------------------------------------
// q8_0 and q4_0

namespace {
/// Uniform floats in [-scale, scale], the same on every platform (std's distributions
/// are not specified bit-exactly).
std::vector<float> random_values(std::mt19937& rng, std::size_t n, float scale) {
    std::vector<float> v(n);
    for (auto& x : v) x = scale * (static_cast<float>(rng() >> 8) * 0x1p-24f * 2.0f - 1.0f);
    return v;
}
} // namespace

TEST_CASE("q8_0: byte layout of a hand-made block", "[types][q8_0]") {
    // value = d * qs[i], d an f16 at byte 0 (little-endian), then 32 signed bytes
    std::byte raw[34]{};
    raw[0] = std::byte{0x00}; // d = 0.5 = f16 0x3800
    raw[1] = std::byte{0x38};
    for (int i = 0; i < 32; ++i) raw[2 + i] = static_cast<std::byte>(static_cast<std::int8_t>(i * 8 - 128));
    block_q8_0 b;
    std::memcpy(&b, raw, sizeof b);
    CHECK(b.d.bits == 0x3800);
    float y[32];
    dequantize_row_q8_0(&b, y, 32);
    for (int i = 0; i < 32; ++i) {
        INFO("i = " << i);
        CHECK(y[i] == 0.5f * static_cast<float>(i * 8 - 128));
    }
}

TEST_CASE("q4_0: byte layout of a hand-made block", "[types][q4_0]") {
    // byte j = value j (low nibble) | value j + 16 (high nibble); value = d * (q - 8)
    std::byte raw[18]{};
    raw[0] = std::byte{0x00}; // d = -2.0 = f16 0xc000
    raw[1] = std::byte{0xc0};
    for (int j = 0; j < 16; ++j) raw[2 + j] = static_cast<std::byte>(j | ((15 - j) << 4));
    block_q4_0 b;
    std::memcpy(&b, raw, sizeof b);
    float y[32];
    dequantize_row_q4_0(&b, y, 32);
    for (int j = 0; j < 16; ++j) {
        INFO("j = " << j);
        CHECK(y[j] == -2.0f * static_cast<float>(j - 8));
        CHECK(y[j + 16] == -2.0f * static_cast<float>((15 - j) - 8));
    }
}

TEST_CASE("q8_0: quantize exact data by hand", "[types][q8_0]") {
    // integers in [-127, 127] with 127 the largest magnitude: d = 127 / 127 = 1 exactly
    // (f16 0x3c00) and qs = x; halved data gives d = 0.5 (0x3800) and the same qs.
    float x[32];
    for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i * 7 - 110); // -110 .. 107
    x[9] = -127.0f;
    for (const float scale : {1.0f, 0.5f}) {
        float xs[32];
        for (int i = 0; i < 32; ++i) xs[i] = x[i] * scale;
        block_q8_0 b;
        quantize_row_q8_0(xs, &b, 32);
        CHECK(b.d.bits == (scale == 1.0f ? 0x3c00 : 0x3800));
        for (int i = 0; i < 32; ++i) CHECK(b.qs[i] == static_cast<std::int8_t>(x[i]));
        float y[32];
        dequantize_row_q8_0(&b, y, 32);
        for (int i = 0; i < 32; ++i) CHECK(y[i] == xs[i]);
    }
}

TEST_CASE("q4_0: quantize exact data by hand", "[types][q4_0]") {
    // integers in [-8, 7] with -8 the value of largest magnitude: d = -8 / -8 = 1 and
    // q = x + 8, so byte j = (x[j] + 8) | (x[j + 16] + 8) << 4.
    float x[32];
    for (int i = 0; i < 32; ++i) x[i] = static_cast<float>((i * 5) % 15 - 7); // -7 .. 7
    x[20] = -8.0f;
    block_q4_0 b;
    quantize_row_q4_0(x, &b, 32);
    CHECK(b.d.bits == 0x3c00);
    for (int j = 0; j < 16; ++j) {
        INFO("j = " << j);
        const int lo = static_cast<int>(x[j]) + 8, hi = static_cast<int>(x[j + 16]) + 8;
        CHECK(b.qs[j] == (lo | (hi << 4)));
    }
    float y[32];
    dequantize_row_q4_0(&b, y, 32);
    for (int i = 0; i < 32; ++i) CHECK(y[i] == x[i]);
}

TEST_CASE("q8_0 and q4_0: all-zero blocks", "[types][q8_0][q4_0]") {
    const float zeros[64] = {};
    block_q8_0 b8[2];
    quantize_row_q8_0(zeros, b8, 64);
    block_q4_0 b4[2];
    quantize_row_q4_0(zeros, b4, 64);
    for (int k = 0; k < 2; ++k) {
        CHECK(b8[k].d.bits == 0);
        // d = max / -8 = -0 for q4_0 (ggml stores the same 0x8000): a zero either way
        CHECK((b4[k].d.bits & 0x7fff) == 0);
        for (auto q : b8[k].qs) CHECK(q == 0);
        for (auto q : b4[k].qs) CHECK(q == 0x88); // both nibbles 8: value (8 - 8) * d = 0
    }
    float y[64];
    dequantize_row_q8_0(b8, y, 64);
    for (float v : y) CHECK(v == 0.0f); // not nan: no 0 * inf
    dequantize_row_q4_0(b4, y, 64);
    for (float v : y) CHECK(v == 0.0f);
}

TEST_CASE("q8_0 and q4_0: a block with a single large value", "[types][q8_0][q4_0]") {
    float x[32];
    for (int i = 0; i < 32; ++i) x[i] = 0.01f * static_cast<float>(i % 5);
    SECTION("q8_0: the large value maps to +-127, the small ones to 0") {
        for (const float big : {1000.0f, -1000.0f}) {
            x[7] = big;
            block_q8_0 b;
            quantize_row_q8_0(x, &b, 32);
            CHECK(b.qs[7] == (big > 0 ? 127 : -127));
            for (int i = 0; i < 32; ++i)
                if (i != 7) CHECK(b.qs[i] == 0);
            float y[32];
            dequantize_row_q8_0(&b, y, 32);
            // d = 1000 / 127 rounded to f16: y[7] within 127 * (f16 rounding of d)
            CHECK(std::fabs(y[7] - big) <= 127.0f * (1000.0f / 127.0f) * 0x1p-11f);
        }
    }
    SECTION("q4_0: the value of largest magnitude keeps its sign exactly") {
        // d = vmax / -8; the large value maps to nibble 0: (0 - 8) * d = vmax.
        // 1000 / 8 = 125 is exact in f16, so the value comes back exactly.
        for (const float big : {1000.0f, -1000.0f}) {
            x[7] = big;
            block_q4_0 b;
            quantize_row_q4_0(x, &b, 32);
            CHECK(f16_to_f32(b.d) == big / -8.0f);
            CHECK((b.qs[7] & 0x0f) == 0);
            float y[32];
            dequantize_row_q4_0(&b, y, 32);
            CHECK(y[7] == big);
            for (int i = 0; i < 32; ++i)
                if (i != 7) CHECK(y[i] == 0.0f); // |x| <= 0.04 < d / 2 = 62.5
        }
    }
}

TEST_CASE("q8_0 and q4_0: quantization error on random data", "[types][q8_0][q4_0]") {
    std::mt19937 rng(12345);
    constexpr std::int64_t n = 32 * 256;
    std::vector<float> x;
    for (int blk = 0; blk < n / 32; ++blk) {
        // a different scale per block, from 1e-3 to 1e3
        const float scale = std::pow(10.0f, static_cast<float>(blk % 7) - 3.0f);
        auto v = random_values(rng, 32, scale);
        x.insert(x.end(), v.begin(), v.end());
    }
    std::vector<float> y(static_cast<std::size_t>(n));

    SECTION("q8_0: |x - y| <= d / 2 per value") {
        std::vector<block_q8_0> q(static_cast<std::size_t>(n / 32));
        quantize_row_q8_0(x.data(), q.data(), n);
        dequantize_row_q8_0(q.data(), y.data(), n);
        mismatches bad;
        for (std::size_t blk = 0; blk < q.size(); ++blk) {
            float amax = 0;
            for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[blk * 32 + j]));
            const float d = amax / 127.0f;          // the scale by definition
            const float d16 = f16_to_f32(q[blk].d); // as stored
            CHECK(q[blk].d == f32_to_f16(d));
            // rounding to the nearest step gives d / 2; storing d as f16 moves each value
            // by at most |q| * |d - d16| <= 127 |d - d16|; plus float rounding
            const float bound = d / 2 + 127.0f * std::fabs(d - d16) + 1e-6f * amax;
            for (int j = 0; j < 32; ++j) {
                const std::size_t i = blk * 32 + static_cast<std::size_t>(j);
                if (!(std::fabs(x[i] - y[i]) <= bound))
                    bad.add("value " + std::to_string(i) + ": " + std::to_string(x[i]) + " -> " + std::to_string(y[i]));
            }
        }
        INFO(bad.first);
        CHECK(bad.count == 0);
    }
    SECTION("q4_0: |x - y| <= |d| per value; the max keeps its sign") {
        std::vector<block_q4_0> q(static_cast<std::size_t>(n / 32));
        quantize_row_q4_0(x.data(), q.data(), n);
        dequantize_row_q4_0(q.data(), y.data(), n);
        mismatches bad;
        std::size_t within_half = 0;
        for (std::size_t blk = 0; blk < q.size(); ++blk) {
            float vmax = 0;
            std::size_t imax = 0;
            for (std::size_t j = 0; j < 32; ++j)
                if (std::fabs(x[blk * 32 + j]) > std::fabs(vmax)) {
                    vmax = x[blk * 32 + j];
                    imax = blk * 32 + j;
                }
            const float d = vmax / -8.0f;
            const float d16 = f16_to_f32(q[blk].d);
            CHECK(q[blk].d == f32_to_f16(d));
            // steps of |d| on [-8d, 7d]: d / 2 inside, d at the clamped end (+8d -> 7d);
            // f16 storage of d moves a value by at most 8 |d - d16|
            const float bound = std::fabs(d) + 8.0f * std::fabs(d - d16) + 1e-6f * std::fabs(vmax);
            for (std::size_t j = 0; j < 32; ++j) {
                const std::size_t i = blk * 32 + j;
                const float err = std::fabs(x[i] - y[i]);
                if (!(err <= bound)) bad.add("value " + std::to_string(i) + ": " + std::to_string(x[i]) + " -> " +
                                             std::to_string(y[i]));
                if (err <= std::fabs(d) / 2 + 8.0f * std::fabs(d - d16) + 1e-6f * std::fabs(vmax)) ++within_half;
            }
            // the value of largest magnitude is -8 * d16: same sign, error only from f16 rounding
            if (!(std::signbit(y[imax]) == std::signbit(vmax) && std::fabs(y[imax] - vmax) <= 8.0f * std::fabs(d - d16)))
                bad.add("max of block " + std::to_string(blk) + ": " + std::to_string(vmax) + " -> " +
                        std::to_string(y[imax]));
        }
        INFO(bad.first);
        CHECK(bad.count == 0);
        // only values near +8d are clamped; nearly all are within d / 2
        CHECK(within_half > x.size() * 9 / 10);
    }
}

TEST_CASE("row conversions dispatch on the type", "[types]") {
    std::mt19937 rng(99);
    const auto x = random_values(rng, 64, 3.0f);
    std::vector<std::byte> buf(64 * 4);
    std::vector<float> y(64);

    from_float_row(elem_type::f32, x.data(), buf.data(), 64);
    to_float_row(elem_type::f32, buf.data(), y.data(), 64);
    CHECK(y == x);

    from_float_row(elem_type::f16, x.data(), buf.data(), 64);
    to_float_row(elem_type::f16, buf.data(), y.data(), 64);
    for (std::size_t i = 0; i < 64; ++i) CHECK(y[i] == f16_to_f32(f32_to_f16(x[i])));

    from_float_row(elem_type::bf16, x.data(), buf.data(), 64);
    to_float_row(elem_type::bf16, buf.data(), y.data(), 64);
    for (std::size_t i = 0; i < 64; ++i) CHECK(y[i] == bf16_to_f32(f32_to_bf16(x[i])));

    block_q8_0 q8[2];
    quantize_row_q8_0(x.data(), q8, 64);
    from_float_row(elem_type::q8_0, x.data(), buf.data(), 64);
    CHECK(std::memcmp(buf.data(), q8, sizeof q8) == 0);

    block_q4_0 q4[2];
    quantize_row_q4_0(x.data(), q4, 64);
    from_float_row(elem_type::q4_0, x.data(), buf.data(), 64);
    CHECK(std::memcmp(buf.data(), q4, sizeof q4) == 0);
    to_float_row(elem_type::q4_0, buf.data(), y.data(), 64);
    std::vector<float> z(64);
    dequantize_row_q4_0(q4, z.data(), 64);
    CHECK(y == z);

    // i32 truncates toward zero
    const float xi[4] = {2.7f, -2.7f, 0.0f, 100.0f};
    std::int32_t yi[4];
    from_float_row(elem_type::i32, xi, yi, 4);
    CHECK(yi[0] == 2);
    CHECK(yi[1] == -2);
    CHECK(yi[2] == 0);
    CHECK(yi[3] == 100);
    float back[4];
    to_float_row(elem_type::i32, yi, back, 4);
    CHECK(back[1] == -2.0f);

    // i64 too
    std::int64_t yl[4];
    from_float_row(elem_type::i64, xi, yl, 4);
    CHECK(yl[0] == 2);
    CHECK(yl[1] == -2);
    CHECK(yl[3] == 100);
    to_float_row(elem_type::i64, yl, back, 4);
    CHECK(back[3] == 100.0f);
}

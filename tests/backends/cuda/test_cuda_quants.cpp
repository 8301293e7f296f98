// The CUDA kernels' dequantization and quantization (backends/cuda/kernels/quants.hpp),
// compiled for the host, against core's (core/convert.hpp): every value of seeded random
// blocks of every type it reads (one at a time, and 32 at a time as the mat-vec reads
// them) must be the same float, bit for bit, and every block it
// writes the same bytes. The kernels run the same expressions with each operation rounded
// on its own, so this checks their arithmetic without a GPU.

#include <backplane/backends/cuda/kernels/quants.hpp>
#include <backplane/core/convert.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

namespace {

using backplane::elem_type;

/// Byte offsets of a block's f16 scales (they are made finite), and of q8_K's f32 scale.
struct scale_fields {
    std::array<int, 2> f16{-1, -1};
    int f32 = -1;
};

scale_fields scales_of(elem_type t) {
    switch (t) {
    case elem_type::q4_1:
    case elem_type::q5_1:
    case elem_type::q4_K:
    case elem_type::q5_K: return {{0, 2}};
    case elem_type::q5_0:
    case elem_type::iq4_nl:
    case elem_type::iq4_xs:
    case elem_type::iq2_xxs:
    case elem_type::iq2_xs:
    case elem_type::iq2_s:
    case elem_type::iq3_xxs:
    case elem_type::iq3_s:
    case elem_type::iq1_s: return {{0, -1}};
    case elem_type::tq1_0: return {{52, -1}};
    case elem_type::tq2_0: return {{64, -1}};
    case elem_type::q2_K: return {{80, 82}};
    case elem_type::q3_K: return {{108, -1}};
    case elem_type::q6_K: return {{208, -1}};
    case elem_type::q8_K: return {{-1, -1}, 0};
    default: return {};
    }
}

/// A random block: random bytes, with finite scales.
void random_block(elem_type t, std::mt19937& rng, std::byte* blk) {
    const auto n = static_cast<int>(backplane::type_size(t));
    for (int i = 0; i < n; ++i) blk[i] = static_cast<std::byte>(rng() & 0xffu);
    const scale_fields s = scales_of(t);
    for (int at : s.f16) {
        if (at < 0) continue;
        auto h = static_cast<std::uint16_t>(rng() & 0xffffu);
        if (((h >> 10) & 0x1fu) == 0x1fu) h = static_cast<std::uint16_t>(h & ~0x4000u); // inf / nan -> finite
        std::memcpy(blk + at, &h, sizeof h);
    }
    if (t == elem_type::iq1_m) // its f16 scale's exponent top bit: bit 14 of its last u16
        blk[55] &= std::byte{0xbf};
    if (s.f32 >= 0) {
        auto u = static_cast<std::uint32_t>(rng());
        if (((u >> 23) & 0xffu) == 0xffu) u &= ~0x40000000u;
        std::memcpy(blk + s.f32, &u, sizeof u);
    }
}

} // namespace

TEST_CASE("CUDA dequantization equals core's bit for bit", "[cuda][quants]") {
    constexpr elem_type types[] = {elem_type::q4_1, elem_type::q5_0, elem_type::q5_1, elem_type::iq4_nl,
                                   elem_type::mxfp4, elem_type::q2_K, elem_type::q3_K, elem_type::q4_K,
                                   elem_type::q5_K, elem_type::q6_K, elem_type::q8_K,  elem_type::iq4_xs,
                                   elem_type::tq1_0, elem_type::tq2_0, elem_type::iq2_xxs, elem_type::iq2_xs,
                                   elem_type::iq2_s, elem_type::iq3_xxs, elem_type::iq3_s, elem_type::iq1_s,
                                   elem_type::iq1_m};
    for (const elem_type t : types) {
        SECTION(std::string(to_string(t))) {
            namespace cq = backplane::cuda::quant;
            using backplane::max_block_size, backplane::max_type_size, backplane::to_string;
            REQUIRE(cq::extended(t));
            REQUIRE(cq::block_values(t) == backplane::block_size(t));
            REQUIRE(cq::block_bytes(t) == static_cast<int>(backplane::type_size(t)));
            std::mt19937 rng(0x5eed0000u + static_cast<unsigned>(t));
            constexpr int blocks = 4;
            const int bv = cq::block_values(t), bb = cq::block_bytes(t);
            int mismatches = 0;
            for (int rep = 0; rep < 500; ++rep) {
                // a row of a few blocks, at an odd address: the kernels read any alignment
                std::array<std::byte, 1 + blocks * max_type_size> buf{};
                std::byte* row = buf.data() + 1;
                for (int b = 0; b < blocks; ++b) random_block(t, rng, row + b * bb);
                std::array<float, blocks * max_block_size> ref{};
                for (int b = 0; b < blocks; ++b) backplane::dequantize_block(t, row + b * bb, ref.data() + b * bv);
                const auto* bytes = reinterpret_cast<const unsigned char*>(row);
                const auto check = [&](const char* by, int i, float got) {
                    if (std::bit_cast<std::uint32_t>(got) != std::bit_cast<std::uint32_t>(ref[static_cast<std::size_t>(i)]) &&
                        mismatches++ < 5)
                        UNSCOPED_INFO(to_string(t) << " value " << i << " by " << by << ": " << got
                                                   << " != " << ref[static_cast<std::size_t>(i)]);
                };
                for (int i = 0; i < blocks * bv; ++i) check("row_value", i, cq::row_value(t, bytes, i));
                for (int i0 = 0; i0 < blocks * bv; i0 += 32) // the mat-vec's reader: 32 values at a time
                    cq::visit(
                        t,
                        [&](auto tag) {
                            float x[32];
                            cq::values32<decltype(tag)::value>(bytes + i0 / bv * bb, i0 % bv, x);
                            for (int jj = 0; jj < 32; ++jj) check("values32", i0 + jj, x[jj]);
                            return 0;
                        },
                        0);
            }
            CHECK(mismatches == 0);
        }
    }
}

TEST_CASE("CUDA dequantization leaves q8_0 and q4_0 to the older kernels", "[cuda][quants]") {
    namespace cq = backplane::cuda::quant;
    CHECK_FALSE(cq::extended(elem_type::q8_0));
    CHECK_FALSE(cq::extended(elem_type::q4_0));
    CHECK_FALSE(cq::extended(elem_type::f16));
    CHECK_FALSE(cq::quantizable(elem_type::q8_K));
    for (const elem_type t : {elem_type::iq4_xs, elem_type::tq1_0, elem_type::tq2_0, elem_type::iq3_xxs,
                              elem_type::iq3_s, elem_type::iq2_xxs, elem_type::iq2_xs, elem_type::iq2_s,
                              elem_type::iq1_s, elem_type::iq1_m}) {
        CHECK(cq::extended(t));
        CHECK(cq::read_only(t));
        CHECK_FALSE(cq::quantizable(t));
    }
    CHECK(cq::quantizable(elem_type::q4_K));
    CHECK(cq::quantizable(elem_type::mxfp4));
}

namespace {

/// 32 values of one of several kinds: normal at a random scale, with repeats, integers,
/// all equal, zeros with signs, tiny (f16 subnormal scales) or huge (f16 overflow).
void random_values(std::mt19937& rng, int kind, float* x) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> small_int(-20, 20);
    const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 21) - 10);
    for (int j = 0; j < 32; ++j) {
        switch (kind) {
        case 0: x[j] = normal(rng) * scale; break;
        case 1: x[j] = j % 3 == 0 ? -scale : normal(rng) * scale; break;
        case 2: x[j] = static_cast<float>(small_int(rng)); break;
        case 3: x[j] = scale; break;
        case 4: x[j] = (rng() & 1u) ? 0.0f : -0.0f; break;
        case 5: x[j] = normal(rng) * 1e-6f; break;
        case 6: x[j] = normal(rng) * 1e5f; break;
        default: x[j] = (j == 7 ? 1.0f : 0.0f) * scale; break;
        }
    }
}

/// A block of bv values (32 or 256): chunks of 32 of one kind, or (every third block) of
/// mixed kinds; every fifth block with one outlier a thousand times its largest value.
void random_block_values(std::mt19937& rng, int rep, int bv, float* x) {
    for (int c = 0; c < bv / 32; ++c) random_values(rng, rep % 3 == 2 ? (rep + c) % 8 : rep % 8, x + 32 * c);
    if (rep % 5 == 4) x[rng() % static_cast<unsigned>(bv)] *= 1000.0f;
}

/// quant::quantize<T> chosen at run time.
void quantize_with_kernels(elem_type t, const float* x, unsigned char* out) {
    namespace cq = backplane::cuda::quant;
    cq::visit(
        t,
        [&](auto tag) {
            constexpr elem_type T = decltype(tag)::value;
            if constexpr (cq::quantizable(T)) cq::quantize<T>(x, out);
            return 0;
        },
        0);
}

} // namespace

TEST_CASE("CUDA quantization equals core's byte for byte", "[cuda][quants]") {
    constexpr elem_type types[] = {elem_type::q4_1, elem_type::q5_0, elem_type::q5_1, elem_type::iq4_nl, elem_type::mxfp4,
                                   elem_type::q2_K, elem_type::q3_K, elem_type::q4_K, elem_type::q5_K, elem_type::q6_K};
    namespace cq = backplane::cuda::quant;
    for (const elem_type t : types) {
        SECTION(std::string(backplane::to_string(t))) {
            REQUIRE(cq::quantizable(t));
            const int bv = cq::block_values(t);
            REQUIRE(bv == static_cast<int>(backplane::block_size(t)));
            std::mt19937 rng(0x9a17000u + static_cast<unsigned>(t));
            const auto bytes = backplane::type_size(t);
            int mismatches = 0;
            const int reps = bv == 32 ? 4000 : 600;
            for (int rep = 0; rep < reps; ++rep) {
                float x[backplane::max_block_size];
                random_block_values(rng, rep, bv, x);
                std::array<std::byte, 1 + backplane::max_type_size> got{}, ref{};
                backplane::quantize_block(t, x, ref.data() + 1);
                quantize_with_kernels(t, x, reinterpret_cast<unsigned char*>(got.data() + 1)); // any alignment
                if (std::memcmp(got.data(), ref.data(), bytes + 1) != 0 && mismatches++ < 5)
                    UNSCOPED_INFO(backplane::to_string(t) << " block " << rep << " (kind " << rep % 8 << ") differs");
            }
            CHECK(mismatches == 0);
        }
    }
}

TEST_CASE("CUDA mxfp4's exponent is core's floor(log2) at every power-of-two boundary", "[cuda][quants]") {
    // log2 of a value just below 2^(k + 1) rounds up to k + 1 for some k: every exponent
    // with the 200 significands nearest 2, and the zero, subnormal and infinite cases
    namespace cq = backplane::cuda::quant;
    int mismatches = 0;
    for (std::uint32_t field = 0; field < 255; ++field)
        for (std::uint32_t j = 1; j <= 200; ++j) {
            float x[32] = {};
            x[3] = -std::bit_cast<float>((field << 23) | (0x800000u - j));
            backplane::block_mxfp4 ref;
            backplane::quantize_row_mxfp4(x, &ref, 32);
            if (cq::detail::mxfp4_exponent(x) != ref.e && mismatches++ < 5)
                UNSCOPED_INFO("exponent field " << field << ", " << j << " ulps below the next power of two");
        }
    CHECK(mismatches == 0);
}

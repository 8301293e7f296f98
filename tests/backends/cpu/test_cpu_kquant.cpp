// The K-quant mul_mat fast path (backends/cpu/fast/kquant.hpp) on its own, called through
// fast::kquant_mul_mat by a small local driver that runs nth = 1, 2 and 3 real threads
// sharing one work buffer and a std::barrier, at every instruction-set level this machine
// has. Checks:
//
//  * accuracy: NMSE against a double-precision product of the dequantized weights (core's
//    dequantizers) and the ORIGINAL b, below ggml's 5e-4, over many shapes: K from one
//    super-block to 10, M odd sizes from 1 past the 32-row panels, N from 1 past the
//    register tiles (1, 2, 4 columns) and the panel kernel's 7-column tiles, broadcast
//    over dims 2 and 3, b as a view (padded rows, strided elements, permuted dims), f16 /
//    bf16 b;
//  * the integer part: the same, against the sum over super-blocks of the double dot of
//    the dequantized weights with b quantized to q8_K and dequantized (what the kernels
//    compute, up to f32 rounding), within 1e-5 of sum |a * b|;
//  * exactness: power-of-two super-block scales, raw random codes and scales (every
//    bit pattern) and b of small integers that q8_K holds exactly: the product is an exact
//    integer sum that f32 represents, and every level must produce it bit for bit;
//  * the AVX-512 q8_K quantizer of b: core's quantize_row_q8_K bit for bit, ties, repeated
//    maxima, subnormals, infinities and NaNs included;
//  * the contract: kquant_applies, kquant_work_size, statuses, routing by fast::mul_mat.

#include "quant_test_support.hpp"

#include <backplane/backends/cpu/fast/kquant.hpp>
#include <backplane/backends/cpu/fast/mul_mat.hpp>
#include <backplane/backends/cpu/fast/mul_mat_id.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/convert.hpp>
#include <backplane/core/kquants.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace backplane;
namespace bc = backplane::cpu;

// A named namespace (not an anonymous one) around everything, test cases included: the
// tests build as one unity translation unit, where test_cpu_quant.cpp's helpers of the
// same names live in the anonymous namespace.
namespace kquant_test {

using namespace quant_test_support;

const elem_type ktypes[] = {elem_type::q2_K, elem_type::q3_K, elem_type::q4_K, elem_type::q5_K, elem_type::q6_K};

/// Raw random super-blocks (every code and scale bit pattern) with d = dmin = 2^-e.
void fill_a_raw(problem& p, std::mt19937& rng, std::uint16_t scale_bits) {
    std::size_t d_at = 0, dmin_at = 0; // offsets of d and dmin (0: none) in the block
    switch (p.ta) {
    case elem_type::q2_K: d_at = 80, dmin_at = 82; break;
    case elem_type::q3_K: d_at = 108; break;
    case elem_type::q4_K:
    case elem_type::q5_K: d_at = 0, dmin_at = 2; break;
    default: d_at = 208; break;
    }
    const bool has_dmin = p.ta == elem_type::q2_K || p.ta == elem_type::q4_K || p.ta == elem_type::q5_K;
    for (i64 i3 = 0; i3 < p.A3; ++i3)
        for (i64 i2 = 0; i2 < p.A2; ++i2)
            for (i64 m = 0; m < p.M; ++m)
                for (i64 kb = 0; kb < p.K / qk_k; ++kb) {
                    std::byte* blk = p.a_row(m, i2, i3) + static_cast<std::size_t>(kb) * type_size(p.ta);
                    for (std::size_t j = 0; j < type_size(p.ta); ++j) blk[j] = static_cast<std::byte>(rng() & 0xff);
                    std::memcpy(blk + d_at, &scale_bits, 2);
                    if (has_dmin) std::memcpy(blk + dmin_at, &scale_bits, 2);
                }
}

/// Integers in [-2, 2] with one +-127 per super-block: q8_K holds them exactly (d = +-1).
void fill_b_integers(problem& p, std::mt19937& rng) {
    for (i64 i3 = 0; i3 < p.B3; ++i3)
        for (i64 i2 = 0; i2 < p.B2; ++i2)
            for (i64 n = 0; n < p.N; ++n)
                for (i64 k = 0; k < p.K; ++k) {
                    float v = static_cast<float>(static_cast<int>(rng() % 5) - 2);
                    if (k % qk_k == 17) v = rng() % 2 ? 127.0f : -127.0f;
                    store_b(p, k, n, i2, i3, v);
                }
}

/// Runs kquant_mul_mat on nth threads (every thread must return ok); dst is poisoned first.
void run(problem& p, int nth, bc::isa level) {
    run_threads(
        p, nth, level, [](const tensor& d, int n) { return bc::fast::kquant_work_size(d, n); },
        [](const bc::compute_params& cp, tensor& d) { return bc::fast::kquant_mul_mat(cp, d); });
}

/// b quantized as the kernels quantize it (core's quantize_row_q8_K) and dequantized.
void b_as_q8_K(const float* b, float* out, i64 K) {
    std::vector<block_q8_K> q(static_cast<std::size_t>(K / qk_k));
    quantize_row_q8_K(b, q.data(), K);
    dequantize_row_q8_K(q.data(), out, K);
}

/// Shapes around the kernels' edges: register tiles of 4 rows x 1, 2, 4 columns; 32-row
/// panels, 7-column tiles, 2-super-block K chunks of the panel kernel; column chunks.
const std::vector<mm_shape>& shapes() {
    static const std::vector<mm_shape> s = {
        {256, 1, 1},   {512, 3, 1},    {768, 5, 1},    {2560, 7, 1},  {1024, 33, 1}, {256, 9, 2},
        {512, 31, 3},  {1280, 13, 4},  {256, 32, 5},   {768, 17, 6},  {512, 1, 7},   {1024, 35, 8},
        {256, 40, 9},  {2304, 11, 13}, {512, 65, 33},  {768, 19, 64}, {256, 3, 100}, {1536, 37, 15},
        {256, 5, 2, 2, 1, 2, 1},       {512, 33, 8, 1, 1, 3, 2},      {768, 6, 1, 2, 3, 4, 3},
        {256, 37, 9, 1, 2, 2, 2},
    };
    return s;
}

TEST_CASE("cpu kquant: accuracy and the integer part, every type, level and thread count", "[cpu][kquant]") {
    std::mt19937 rng(5101);
    const blayout bls[] = {blayout::contiguous, blayout::padded_rows, blayout::strided_elems, blayout::permuted};
    const elem_type btypes[] = {elem_type::f32, elem_type::f32, elem_type::f16, elem_type::bf16};
    for (elem_type ta : ktypes) {
        const auto& ss = shapes();
        for (std::size_t si = 0; si < ss.size(); ++si) {
            const blayout bl = bls[si % 4];
            const elem_type tb = btypes[(si / 4 + si) % 4];
            problem p = make_problem(ta, tb, ss[si], bl);
            fill_a_random(p, rng);
            fill_b_random(p, rng);
            REQUIRE(bc::fast::kquant_applies(p.dst));
            const reference exact = reference_product(p, b_as_is);
            const reference q8 = reference_product(p, b_as_q8_K);
            for (bc::isa level : levels())
                for (int nth : {1, 2, 3}) {
                    INFO(p.describe() << ", b layout " << static_cast<int>(bl) << ", level "
                                      << bc::to_string(level) << ", nth " << nth);
                    run(p, nth, level);
                    const std::vector<double> got = outputs(p);
                    CHECK(std::none_of(got.begin(), got.end(), [](double v) { return std::isnan(v); }));
                    CHECK(nmse(exact, got) < 5e-4);
                    CHECK(worst_relative(q8, got) < 1e-5);
                }
        }
    }
}

TEST_CASE("cpu kquant: integer super-block products are exact at every level", "[cpu][kquant]") {
    std::mt19937 rng(5102);
    // d = dmin = 1 (f16 0x3c00) or 2^-3 (0x3000), b integers: every partial sum is an
    // integer times a power of two below 2^24 (K <= 1024)
    const std::vector<std::pair<mm_shape, std::uint16_t>> cases = {
        {{256, 1, 1}, 0x3c00},  {{1024, 5, 1}, 0x3000}, {{512, 9, 2}, 0x3c00},          {{768, 33, 3}, 0x3c00},
        {{256, 32, 7}, 0x3000}, {{512, 40, 15}, 0x3c00}, {{256, 3, 9, 2, 1, 2, 1}, 0x3c00}, {{256, 70, 8}, 0x3000},
    };
    for (elem_type ta : ktypes)
        for (const auto& [shape, bits] : cases) {
            problem p = make_problem(ta, elem_type::f32, shape, blayout::contiguous);
            fill_a_raw(p, rng, bits);
            fill_b_integers(p, rng);
            const reference ref = reference_product(p, b_as_is);
            for (bc::isa level : levels())
                for (int nth : {1, 2}) {
                    INFO(p.describe() << ", level " << bc::to_string(level) << ", nth " << nth);
                    run(p, nth, level);
                    const std::vector<double> got = outputs(p);
                    i64 mismatches = 0;
                    for (std::size_t i = 0; i < got.size(); ++i)
                        if (got[i] != ref.value[i]) ++mismatches;
                    CHECK(mismatches == 0);
                }
        }
}

TEST_CASE("cpu kquant: applies, work size, statuses and routing", "[cpu][kquant]") {
    problem p = make_problem(elem_type::q4_K, elem_type::f32, {512, 3, 2}, blayout::contiguous);
    CHECK(bc::fast::kquant_applies(p.dst));
    CHECK(bc::fast::mul_mat_applies(p.dst));
    CHECK_FALSE(bc::fast::quant_applies(p.dst));
    const std::size_t w1 = bc::fast::kquant_work_size(p.dst, 1);
    CHECK(w1 >= static_cast<std::size_t>(2 * 2 * bc::fast::kquant::rec_bytes));
    CHECK(bc::fast::kquant_work_size(p.dst, 3) >= w1);
    CHECK(bc::fast::mul_mat_work_size(p.dst, 1) == w1);

    SECTION("not for other weights, misfit K, non-contiguous weight rows, strided dst rows, other ops") {
        for (elem_type t : {elem_type::q8_0, elem_type::q4_0, elem_type::q8_K, elem_type::f32}) {
            tensor a = p.a;
            a.type = t;
            tensor d = p.dst;
            d.src[0] = &a;
            CHECK_FALSE(bc::fast::kquant_applies(d));
            CHECK(bc::fast::kquant_work_size(d, 2) == 0);
        }
        problem k = make_problem(elem_type::q6_K, elem_type::f32, {512, 3, 2}, blayout::contiguous);
        k.a.ne[0] = k.b.ne[0] = 384; // not whole super-blocks
        CHECK_FALSE(bc::fast::kquant_applies(k.dst));
        tensor a2 = p.a;
        a2.nb[0] = 2 * type_size(a2.type);
        tensor d = p.dst;
        d.src[0] = &a2;
        CHECK_FALSE(bc::fast::kquant_applies(d));
        tensor d2 = p.dst;
        d2.nb[0] = 2 * sizeof(float);
        CHECK_FALSE(bc::fast::kquant_applies(d2));
        tensor d3 = p.dst;
        d3.op = op_kind::add;
        CHECK_FALSE(bc::fast::kquant_applies(d3));
    }
    SECTION("a work buffer too small, none, or several threads without a barrier: refused") {
        std::vector<std::byte> small(64);
        bc::compute_params cp;
        cp.wdata = small.data();
        cp.wsize = small.size();
        cp.level = bc::detected_isa();
        CHECK(bc::fast::kquant_mul_mat(cp, p.dst) == errc::invalid_argument);
        cp.wdata = nullptr;
        cp.wsize = w1;
        CHECK(bc::fast::kquant_mul_mat(cp, p.dst) == errc::invalid_argument);
        aligned_bytes work(bc::fast::kquant_work_size(p.dst, 2), 0);
        cp.wdata = work.base;
        cp.wsize = bc::fast::kquant_work_size(p.dst, 2);
        cp.nth = 2;
        CHECK(bc::fast::kquant_mul_mat(cp, p.dst) == errc::invalid_argument);
        tensor d = p.dst;
        d.op = op_kind::add;
        cp.nth = 1;
        CHECK(bc::fast::kquant_mul_mat(cp, d) == errc::not_supported);
    }
    SECTION("mul_mat_id takes K-quant experts on its fast path (test_cpu_moe.cpp checks the results)") {
        tensor as = p.a; // 2 experts of [512, 3]
        as.ne = {512, 3, 2, 1};
        tensor ids, b = p.b, dst;
        ids.type = elem_type::i32;
        ids.ne = {1, 2, 1, 1};
        ids.nb = contiguous_strides(ids.type, ids.ne);
        b.ne = {512, 1, 2, 1};
        b.nb = contiguous_strides(b.type, b.ne);
        dst.type = elem_type::f32;
        dst.op = op_kind::mul_mat_id;
        dst.ne = {3, 1, 2, 1};
        dst.nb = contiguous_strides(dst.type, dst.ne);
        dst.src[0] = &as;
        dst.src[1] = &b;
        dst.src[2] = &ids;
        CHECK(bc::fast::mul_mat_id_applies(dst));
        CHECK(bc::fast::mul_mat_id_work_size(dst, 2) > 0);
    }
}

TEST_CASE("cpu kquant: the vector q8_K quantizer of b is core's, bit for bit", "[cpu][kquant]") {
#if BACKPLANE_HAS_X86_KERNELS
    if (bc::detected_isa() != bc::isa::avx512) {
        WARN("no AVX-512 on this CPU: the vector q8_K quantizer is not run");
        return;
    }
    std::mt19937 rng(17);
    const float specials[] = {0.0f, -0.0f, 1e-42f, -1e-40f, 3e-38f, std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
    for (int t = 0; t < 3000; ++t) {
        alignas(64) float x[qk_k];
        const int mode = t % 5;
        for (float& v : x) {
            switch (mode) {
            case 0: v = std::uniform_real_distribution<float>(-3.0f, 3.0f)(rng); break;
            case 1: v = static_cast<float>(static_cast<int>(rng() % 255) - 127); break; // exact codes
            case 2: v = static_cast<float>(static_cast<int>(rng() % 9) - 4) * 0.5f; break; // ties, repeated maxima
            case 3: v = std::ldexp(static_cast<float>(static_cast<int>(rng() % 2001) - 1000), static_cast<int>(rng() % 60) - 40); break;
            default: v = rng() % 4 == 0 ? specials[rng() % 8] : 0.0f; break;
            }
        }
        if (mode == 2) { // +m before -m, and the reverse: the first one sets the sign
            x[rng() % 128] = t % 2 ? 2.5f : -2.5f;
            x[128 + rng() % 128] = t % 2 ? -2.5f : 2.5f;
        }
        block_q8_K want, got;
        std::memset(&want, 0x5a, sizeof want);
        std::memset(&got, 0xa5, sizeof got);
        quantize_row_q8_K(x, &want, qk_k);
        bc::fast::kquant::quantize_q8_K_avx512(x, got);
        INFO("mode " << mode << ", trial " << t);
        REQUIRE(std::memcmp(&want, &got, sizeof want) == 0);
    }
#else
    WARN("no x86 kernels in this build: the vector q8_K quantizer is not compiled");
#endif
}

} // namespace kquant_test

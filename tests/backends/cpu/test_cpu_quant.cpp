// The quantized mul_mat fast path (backends/cpu/fast/quant.hpp) on its own, called through
// fast::quant_mul_mat by a small local driver that runs nth = 1, 2 and 3 real threads
// sharing one work buffer and a std::barrier, at every instruction-set level this machine
// has, for every weight type it takes (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4).
// Checks:
//
//  * accuracy: NMSE against an independent double-precision product of the dequantized
//    weights (core's dequantizers) and the ORIGINAL b, below ggml's 5e-4, no NaN, over
//    many shapes: M and N from 1 up past the kernels' tiles (4-row gemv tiles, 32-row
//    panels, 7-column tiles, 16-block K chunks), K from one block to thousands, odd
//    sizes, broadcast over dims 2 and 3, b as a view (padded rows, strided elements,
//    permuted dims, misaligned start), f16 / bf16 b, padded dst;
//  * the integer part: the same product with b quantized by quantize_activation_block and
//    dequantized (what the kernels compute, up to f32 rounding): within 1e-6 of
//    sum |a * b| (the kernels that run their vector lanes along K add a block's lanes
//    after scaling them);
//  * exactness: weights whose scales (and minima) are powers of two, with every code bit
//    pattern, and b values that are integers q8_0 holds exactly, so that the result is an
//    exact sum that f32 represents: every level must produce it bit for bit, which proves
//    that the kernels' integer block products (the vpdpbusd offsets, the sign trick, the
//    fifth bits, the tables, the minimum terms) are exact, q8_0 weights of -128 included;
//  * the quantizer of each level against quantize_activation_block (ggml's x86 q8_0 of
//    activations: 127 / amax), bit for bit, and that against core's quantize_row_q8_0
//    (the weights' 1 / d) up to one code in a few values; and the
//    contract: quant_applies, quant_work_size, statuses; the backend takes the fast path
//    for every type, as mul_mat and as mul_mat_id experts, and matches its reference
//    kernel.

#include "../../support/ref_oracle.hpp"
#include "quant_test_support.hpp"

#include <backplane/backends/cpu.hpp>
#include <backplane/backends/cpu/fast/mul_mat.hpp>
#include <backplane/backends/cpu/fast/quant.hpp>
#include <backplane/backends/cpu/fast/quant_types.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/conformance/inputs.hpp>
#include <backplane/conformance/thresholds.hpp>
#include <backplane/core/convert.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace backplane;
namespace bc = backplane::cpu;
namespace fq = backplane::cpu::fast::quant;

namespace {

using namespace quant_test_support;

/// The weight types of fast/quant.hpp.
const elem_type qtypes[] = {elem_type::q8_0,  elem_type::q4_0,   elem_type::q4_1, elem_type::q5_0,
                            elem_type::q5_1, elem_type::iq4_nl, elem_type::mxfp4};

std::string level_name(bc::isa l) { return std::string(bc::to_string(l)); }

/// Raw blocks with every code bit pattern: random bytes, then the scale set to the f16
/// scale_bits (mxfp4: the E8M0 exponent of the same power of two), the minimum (q4_1,
/// q5_1) to the same value; every third block's first code byte 0x80 (q8_0: -128).
void fill_a_codes(problem& p, std::mt19937& rng, std::uint16_t scale_bits) {
    const fq::weight_format f = fq::format_of(p.ta);
    // 2^(e - 128) = f16 value of scale_bits (a power of two: exponent bits only)
    const auto e8m0 = static_cast<std::uint8_t>(((scale_bits >> 10) & 0x1f) - 15 + 128);
    for (i64 i3 = 0; i3 < p.A3; ++i3)
        for (i64 i2 = 0; i2 < p.A2; ++i2)
            for (i64 m = 0; m < p.M; ++m)
                for (i64 kb = 0; kb < p.K / 32; ++kb) {
                    std::byte* blk = p.a_row(m, i2, i3) + static_cast<std::size_t>(kb) * type_size(p.ta);
                    for (std::size_t j = 0; j < type_size(p.ta); ++j) blk[j] = static_cast<std::byte>(rng() & 0xff);
                    if (f.e8m0)
                        blk[0] = static_cast<std::byte>(e8m0);
                    else
                        std::memcpy(blk, &scale_bits, 2);
                    if (f.has_min()) std::memcpy(blk + f.min, &scale_bits, 2);
                    if (kb % 3 == 0) blk[f.qs] = static_cast<std::byte>(0x80);
                }
}

/// Integers in [-127, 127] times a power of two with every block reaching +-127, so that
/// q8_0 holds them exactly.
void fill_b_integers(problem& p, std::mt19937& rng, float scale) {
    for (i64 i3 = 0; i3 < p.B3; ++i3)
        for (i64 i2 = 0; i2 < p.B2; ++i2)
            for (i64 n = 0; n < p.N; ++n)
                for (i64 k = 0; k < p.K; ++k) {
                    int q = static_cast<int>(rng() % 255) - 127;
                    if (k % 32 == static_cast<i64>(rng() % 32) || k % 32 == 31) q = rng() % 2 ? 127 : -127;
                    store_b(p, k, n, i2, i3, static_cast<float>(q) * scale);
                }
}

/// Runs quant_mul_mat on nth threads (every thread must return ok); dst is poisoned first.
void run(problem& p, int nth, bc::isa level) {
    run_threads(
        p, nth, level, [](const tensor& d, int n) { return bc::fast::quant_work_size(d, n); },
        [](const bc::compute_params& cp, tensor& d) { return bc::fast::quant_mul_mat(cp, d); });
}

/// dst's padding (between columns) still holds the poison: nothing outside dst written.
bool padding_untouched(const problem& p) {
    if (p.dst_pad == 0) return true;
    const auto* base = static_cast<const std::byte*>(p.dst.data);
    for (i64 col = 0; col < p.N * p.B2 * p.B3; ++col)
        for (std::size_t i = 0; i < p.dst_pad * sizeof(float); ++i)
            if (base[static_cast<std::size_t>(col) * p.dst.nb[1] + static_cast<std::size_t>(p.M) * sizeof(float) + i] !=
                std::byte{0xff})
                return false;
    return true;
}

/// b quantized as the kernels quantize it (quantize_activation_block) and dequantized.
void b_as_q8_0(const float* b, float* out, i64 K) {
    std::vector<block_q8_0> q(static_cast<std::size_t>(K / 32));
    for (std::size_t kb = 0; kb < q.size(); ++kb) fq::quantize_activation_block(b + kb * 32, q[kb]);
    dequantize_row_q8_0(q.data(), out, K);
}

// The shapes: around every tile edge of every level (gemv: 4 rows, steps of 2 and 4
// blocks, groups of 16 blocks for the scales; packed: 32-row panels, 7-column tiles,
// 16-block K chunks, column chunks; AVX2: 2 x 4; portable: 64 columns), with broadcast
// over dims 2 and 3.
const std::vector<mm_shape>& shapes() {
    static const std::vector<mm_shape> s = {
        {32, 1, 1},          {32, 3, 1},         {64, 5, 1},         {96, 4, 1},          {544, 7, 1},
        {1056, 9, 1},        {1696, 33, 1},      {4096, 6, 1},       {32, 1, 2},          {64, 2, 3},
        {128, 31, 2},        {160, 32, 4},       {96, 33, 5},        {512, 17, 6},        {64, 1, 7},
        {256, 32, 7},        {32, 65, 8},        {96, 40, 13},       {576, 35, 14},       {64, 63, 15},
        {32, 64, 21},        {128, 47, 29},      {224, 100, 9},      {64, 96, 64},        {2048, 20, 3},
        {32, 3, 2, 2, 1, 2, 1}, {64, 33, 8, 1, 1, 3, 2}, {96, 5, 1, 2, 3, 4, 3}, {160, 37, 9, 1, 2, 2, 2},
        {544, 12, 1, 1, 1, 1, 3}, {288, 70, 15, 3, 1, 3, 1}, {32, 2, 11, 1, 1, 5, 1},
        {256, 1, 100},       {4096, 33, 210}, // one row; b larger than a column chunk (1 MiB)
    };
    return s;
}

} // namespace

/// Blocks for the quantizer tests: magnitudes from 1e-4 to 1e4, a zero block, ties, a tiny
/// block, a block below tiny_amax.
std::vector<float> quantizer_inputs(i64 nblk) {
    std::mt19937 rng(4101);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(nblk * 32));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = u(rng) * std::pow(10.0f, static_cast<float>(i / 32 % 9) - 4.0f);
    std::fill_n(x.begin() + 32, 32, 0.0f);                 // a zero block: d = 0
    for (int j = 0; j < 32; ++j) x[64 + static_cast<std::size_t>(j)] = static_cast<float>(j) - 15.5f; // ties
    x[96] = 1e-30f;                                         // a tiny block
    std::fill_n(x.begin() + 128, 32, 1e-38f);               // below tiny_amax: codes 0
    return x;
}

TEST_CASE("cpu quant: the activation quantizer is core's q8_0 but for the inverse scale 127 / amax",
          "[cpu][quant]") {
    // 127 / amax and 1 / (amax / 127) differ in the last bit for some amax; where they do, a
    // value near a rounding boundary may take the neighbouring code, never further
    const i64 nblk = 4096;
    std::vector<float> x = quantizer_inputs(nblk);
    std::mt19937 rng(4103);
    std::normal_distribution<float> g;
    for (std::size_t i = 160; i < x.size(); ++i) x[i] = g(rng);
    int moved = 0;
    for (i64 kb = 0; kb < nblk; ++kb) {
        block_q8_0 ref, act;
        quantize_row_q8_0(x.data() + kb * 32, &ref, 32);
        fq::quantize_activation_block(x.data() + kb * 32, act);
        INFO("block " << kb);
        CHECK(act.d.bits == ref.d.bits);
        for (int j = 0; j < 32; ++j) {
            if (kb == 4) CHECK(act.qs[j] == 0); // below tiny_amax
            else CHECK(std::abs(act.qs[j] - ref.qs[j]) <= 1);
            moved += act.qs[j] != ref.qs[j];
        }
    }
    CHECK(moved < 32 * nblk / 1000); // rare: the two scales agree for most amax
}

TEST_CASE("cpu quant: the quantizer of every level matches quantize_activation_block bit for bit", "[cpu][quant]") {
    const i64 nblk = 37;
    const std::vector<float> x = quantizer_inputs(nblk);
    std::vector<block_q8_0> ref(static_cast<std::size_t>(nblk));
    for (i64 kb = 0; kb < nblk; ++kb) fq::quantize_activation_block(x.data() + kb * 32, ref[static_cast<std::size_t>(kb)]);

    for (bc::isa level : levels())
        for (int nr : {1, 7})
            for (std::int32_t c : {8, 0}) { // an offset type's corr, a minimum type's d * sum
            INFO("level " << level_name(level) << ", tile width " << nr << ", c " << c);
            fq::plan pl;
            pl.nblk = nblk;
            pl.N = 9;
            std::vector<std::byte> qb(static_cast<std::size_t>(pl.N * pl.col_bytes()));
            const i64 n = 8; // in the last, narrower tile when nr = 7
            const fq::column_ref col = pl.column(qb.data(), 0, n, nr);
            fq::quantize_row(level, x.data(), nblk, col, c);
            for (i64 kb = 0; kb < nblk; ++kb) {
                const auto& r = ref[static_cast<std::size_t>(kb)];
                std::int8_t qs[32];
                std::memcpy(qs, col.qs + kb * col.step, 32);
                float d, s;
                std::int32_t corr;
                std::memcpy(&d, col.d + kb * col.dstep, 4);
                std::memcpy(&corr, col.corr + kb * col.dstep, 4);
                std::memcpy(&s, col.corr + kb * col.dstep, 4);
                std::int32_t sum = 0;
                for (int j = 0; j < 32; ++j) sum += r.qs[j];
                INFO("block " << kb);
                CHECK(std::memcmp(qs, r.qs, 32) == 0);
                CHECK(d == f16_to_f32(r.d));
                if (c != 0)
                    CHECK(corr == -c * sum);
                else
                    CHECK(s == f16_to_f32(r.d) * static_cast<float>(sum));
            }
        }
}

TEST_CASE("cpu quant: accuracy against the double-precision product, every level and thread count",
          "[cpu][quant]") {
    std::mt19937 rng(4102);
    const blayout bls[] = {blayout::contiguous, blayout::padded_rows, blayout::strided_elems, blayout::permuted,
                           blayout::misaligned};
    const elem_type btypes[] = {elem_type::f32, elem_type::f32, elem_type::f32, elem_type::f16, elem_type::bf16};
    for (elem_type ta : qtypes) {
        const auto& ss = shapes();
        for (std::size_t si = 0; si < ss.size(); ++si) {
            const blayout bl = bls[si % 5];
            const elem_type tb = btypes[(si / 5 + si) % 5];
            problem p = make_problem(ta, tb, ss[si], bl, si % 3 == 1, si % 4 == 3 ? 1 : 0, si % 2 == 1);
            fill_a_random(p, rng);
            fill_b_random(p, rng);
            REQUIRE(bc::fast::quant_applies(p.dst));
            const reference ref = reference_product(p, b_as_is);
            const reference iref = reference_product(p, b_as_q8_0);
            for (bc::isa level : levels())
                for (int nth : {1, 2, 3}) {
                    INFO(p.describe() << ", b " << to_string(bl) << ", level " << level_name(level) << ", nth "
                                      << nth);
                    run(p, nth, level);
                    const std::vector<double> got = outputs(p);
                    CHECK(std::none_of(got.begin(), got.end(), [](double v) { return std::isnan(v); }));
                    CHECK(nmse(ref, got) < 5e-4);
                    CHECK(padding_untouched(p));
                    CHECK(worst_relative(iref, got) < 1e-6); // the same quantized b, in double
                }
        }
    }
}

TEST_CASE("cpu quant: integer block products are exact at every level", "[cpu][quant]") {
    std::mt19937 rng(4103);
    // weight scale 2^-3 (f16 0x3000) or 1 (0x3c00), b = integers * 2^-5 or * 1: every
    // product and partial sum is an integer times a power of two below 2^24 (K <= 1024)
    struct exact_case {
        mm_shape s;
        std::uint16_t abits;
        float bscale;
    };
    const std::vector<exact_case> cases = {
        {{32, 1, 1}, 0x3c00, 1.0f},          {{1024, 5, 1}, 0x3c00, 1.0f},   {{96, 33, 1}, 0x3000, 0.03125f},
        {{544, 9, 2}, 0x3c00, 1.0f},         {{256, 32, 7}, 0x3000, 1.0f},   {{1024, 40, 15}, 0x3c00, 1.0f},
        {{160, 3, 9, 2, 1, 2, 1}, 0x3c00, 0.03125f}, {{64, 70, 8}, 0x3c00, 1.0f},
    };
    for (elem_type ta : qtypes)
        for (const exact_case& c : cases) {
            problem p = make_problem(ta, elem_type::f32, c.s, blayout::contiguous, false, 0, false);
            fill_a_codes(p, rng, c.abits);
            fill_b_integers(p, rng, c.bscale);
            const reference iref = reference_product(p, b_as_is);
            for (bc::isa level : levels())
                for (int nth : {1, 2}) {
                    INFO(p.describe() << ", level " << level_name(level) << ", nth " << nth);
                    run(p, nth, level);
                    const std::vector<double> got = outputs(p);
                    i64 mismatches = 0;
                    for (std::size_t i = 0; i < got.size(); ++i)
                        if (got[i] != iref.value[i]) ++mismatches;
                    CHECK(mismatches == 0);
                }
        }
}

TEST_CASE("cpu quant: quant_applies, work size and statuses", "[cpu][quant]") {
    problem p = make_problem(elem_type::q4_0, elem_type::f32, {64, 3, 2}, blayout::contiguous, false, 0, false);
    CHECK(bc::fast::quant_applies(p.dst));
    const std::size_t w1 = bc::fast::quant_work_size(p.dst, 1);
    CHECK(w1 >= static_cast<std::size_t>(2 * 2 * 40)); // 2 columns of 2 blocks
    CHECK(bc::fast::quant_work_size(p.dst, 3) >= w1);

    SECTION("every weight type of quant/weights.hpp, through fast::mul_mat; not the K-quants") {
        for (elem_type t : qtypes) {
            problem q = make_problem(t, elem_type::f32, {64, 3, 2}, blayout::contiguous);
            INFO(to_string(t));
            CHECK(bc::fast::quant_applies(q.dst));
            CHECK(bc::fast::mul_mat_applies(q.dst));
            CHECK(bc::fast::mul_mat_work_size(q.dst, 2) == bc::fast::quant_work_size(q.dst, 2));
        }
        for (elem_type t : {elem_type::q4_K, elem_type::q8_K, elem_type::f16}) {
            problem q = make_problem(t, elem_type::f32, {256, 3, 2}, blayout::contiguous);
            CHECK_FALSE(bc::fast::quant_applies(q.dst));
        }
    }
    SECTION("b of any float type and layout") {
        for (elem_type tb : {elem_type::f16, elem_type::bf16}) {
            problem q = make_problem(elem_type::q8_0, tb, {64, 3, 2}, blayout::strided_elems, false, 0, false);
            CHECK(bc::fast::quant_applies(q.dst));
        }
    }
    SECTION("not for float weights, non-contiguous weight rows, dst with strided rows or another op") {
        tensor a = p.a;
        a.type = elem_type::f32;
        a.nb = contiguous_strides(a.type, a.ne);
        tensor d = p.dst;
        d.src[0] = &a;
        CHECK_FALSE(bc::fast::quant_applies(d));
        CHECK(bc::fast::quant_work_size(d, 2) == 0);

        tensor a2 = p.a;
        a2.nb[0] = 2 * type_size(a2.type); // blocks not adjacent
        d.src[0] = &a2;
        CHECK_FALSE(bc::fast::quant_applies(d));

        tensor d2 = p.dst;
        d2.nb[0] = 2 * sizeof(float);
        CHECK_FALSE(bc::fast::quant_applies(d2));

        tensor d3 = p.dst;
        d3.op = op_kind::add;
        CHECK_FALSE(bc::fast::quant_applies(d3));

        tensor bi = p.b;
        bi.type = elem_type::i32;
        tensor d4 = p.dst;
        d4.src[1] = &bi;
        CHECK_FALSE(bc::fast::quant_applies(d4));
    }
    SECTION("a work buffer too small is refused by every thread before the barrier") {
        std::vector<std::byte> small(64);
        bc::compute_params cp;
        cp.wdata = small.data();
        cp.wsize = small.size();
        cp.level = bc::detected_isa();
        CHECK(bc::fast::quant_mul_mat(cp, p.dst) == errc::invalid_argument);
        cp.wdata = nullptr;
        cp.wsize = w1;
        CHECK(bc::fast::quant_mul_mat(cp, p.dst) == errc::invalid_argument);
        aligned_bytes work(bc::fast::quant_work_size(p.dst, 2), 0);
        cp.wdata = work.base;
        cp.wsize = bc::fast::quant_work_size(p.dst, 2);
        cp.nth = 2; // two threads and no barrier
        CHECK(bc::fast::quant_mul_mat(cp, p.dst) == errc::invalid_argument);
    }
    SECTION("a level above the hardware runs at the hardware's") {
        std::mt19937 rng(4104);
        fill_a_random(p, rng);
        fill_b_random(p, rng);
        run(p, 2, bc::isa::avx512);
        CHECK(nmse(reference_product(p, b_as_is), outputs(p)) < 5e-4);
    }
}

TEST_CASE("cpu quant: the backend runs every weight type on the fast path, as mul_mat and as mul_mat_id experts, "
          "and matches its reference kernel",
          "[cpu][quant][mul_mat_id]") {
    // caps the instruction set, and splits every node over all threads, for one scope
    struct level_scope {
        explicit level_scope(bc::isa level) {
            bc::set_isa_override(level);
            bc::set_min_work_per_thread(1);
        }
        ~level_scope() {
            bc::clear_isa_override();
            bc::reset_min_work_per_thread();
        }
        level_scope(const level_scope&) = delete;
        level_scope& operator=(const level_scope&) = delete;
    };
    std::mt19937 rng(4105);
    context ctx;
    const auto compute = [](tensor* out, const cpu_backend_params& params) {
        graph g(out);
        REQUIRE(cpu_backend(params).compute(g).ok());
        return tensor_get_all<float>(*out).value();
    };
    for (elem_type ta : qtypes) {
        // mul_mat: a mat-vec and a GEMM; mul_mat_id: 6 experts, 2 used per token, 1 and 9 tokens
        tensor* a = conformance::random_leaf(ctx, ta, {160, 37, 1, 1}, rng);
        tensor* experts = conformance::random_leaf(ctx, ta, {96, 21, 6, 1}, rng);
        std::vector<tensor*> nodes;
        for (const i64 n : {1, 11}) {
            nodes.push_back(mul_mat(ctx, a, conformance::random_leaf(ctx, elem_type::f32, {160, n, 1, 1}, rng)));
            tensor* ids = ctx.new_tensor_2d(elem_type::i32, 2, n);
            for (i64 t = 0; t < n; ++t)
                for (i64 s = 0; s < 2; ++s)
                    conformance::set_element(*ids, s, t, 0, 0, static_cast<double>((t + 4 * s) % 6));
            nodes.push_back(
                mul_mat_id(ctx, experts, conformance::random_leaf(ctx, elem_type::f32, {96, 2, n, 1}, rng), ids));
        }
        for (tensor* out : nodes) {
            INFO(to_string(ta) << " " << to_string(out->op) << ", N " << out->ne[1] * out->ne[2]);
            REQUIRE(cpu::choose_kernel(*out, false) ==
                    (out->op == op_kind::mul_mat ? cpu::kernel_kind::fast_mul_mat : cpu::kernel_kind::fast_mul_mat_id));
            const std::vector<float> want = compute(out, {.n_threads = 1, .reference = true});
            for (bc::isa level : levels())
                for (const int n_threads : {1, 3}) {
                    INFO("level " << level_name(level) << ", " << n_threads << " threads");
                    const level_scope scope(level);
                    const std::vector<float> got = compute(out, {.n_threads = n_threads});
                    CHECK(backplane::test::nmse_of(want, got) <= conformance::threshold_for(*out).max_nmse);
                }
        }
    }
}

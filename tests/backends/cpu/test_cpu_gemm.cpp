// The fast float mul_mat (backends/cpu/fast/gemm.hpp) called directly, with a local
// driver that runs nth = 1, 2, 3 real threads sharing one work buffer and a
// std::barrier, at every instruction-set level this CPU has, against an independent
// double-precision loop. Shapes cover both paths (mat-vec for N <= 8, packed GEMM),
// sizes of 1, odd sizes, sizes around the micro-tiles (48 x 8, 24 x 4, 16 x 4) and the
// blocks (kc = 1024, mc = 192, the column block that shrinks as K grows), broadcasting
// over dims 2 and 3, every pair of f32 / f16 / bf16 operands, and views (padded rows,
// permuted dims, an element-sized offset). Seeds are fixed.
//
// The reference reads the very values stored (f16 and bf16 widen to f32 exactly), so
// every type pair is held to the f32 bound, NMSE 1e-7 (ggml's 5e-4 for 16-bit types
// would hide a lost K tail). Destinations are filled with NaN, so an element that is
// read before it is written, or never written, fails; bytes between a padded
// destination's rows must come back untouched.

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/gemm.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

// Its own namespace, test cases included: its names (layout, float_types) differ from
// the CPU test harness's, and the test programs compile as one translation unit.
namespace gemm_test {

using namespace backplane;
using i64 = std::int64_t;
using extents = std::array<i64, 4>;

constexpr elem_type f32 = elem_type::f32;
constexpr elem_type f16 = elem_type::f16;
constexpr elem_type bf16 = elem_type::bf16;
constexpr elem_type float_types[] = {f32, f16, bf16};

/// How an operand's memory is laid out (all but contiguous are views of a larger block).
enum class layout {
    contiguous,
    padded,   ///< rows and matrices with gaps between them
    permuted, ///< dims 1 and 2 stored swapped (nb[1] > nb[2])
    offset,   ///< contiguous, one element into the block (2-byte aligned for 16-bit types)
};
constexpr layout all_layouts[] = {layout::contiguous, layout::padded, layout::permuted, layout::offset};

const char* name(layout l) {
    switch (l) {
    case layout::contiguous: return "contiguous";
    case layout::padded: return "padded";
    case layout::permuted: return "permuted";
    case layout::offset: return "offset";
    }
    return "?";
}

/// A tensor and the memory it views.
struct owned {
    std::vector<std::byte> mem;
    tensor t;
};

float read_value(elem_type type, const std::byte* p) {
    if (type == f32) {
        float v;
        std::memcpy(&v, p, sizeof v);
        return v;
    }
    std::uint16_t bits;
    std::memcpy(&bits, p, sizeof bits);
    return type == f16 ? f16_to_f32(f16_t{bits}) : bf16_to_f32(bf16_t{bits});
}

void write_value(elem_type type, std::byte* p, float v) {
    if (type == f32) {
        std::memcpy(p, &v, sizeof v);
        return;
    }
    const std::uint16_t bits = type == f16 ? f32_to_f16(v).bits : f32_to_bf16(v).bits;
    std::memcpy(p, &bits, sizeof bits);
}

std::byte* element(tensor& t, i64 i0, i64 i1, i64 i2, i64 i3) {
    return static_cast<std::byte*>(t.data) + static_cast<std::size_t>(i0) * t.nb[0] +
           static_cast<std::size_t>(i1) * t.nb[1] + static_cast<std::size_t>(i2) * t.nb[2] +
           static_cast<std::size_t>(i3) * t.nb[3];
}

/// A tensor of type t and extents ne laid out as l; every byte of its memory random.
owned make_tensor(elem_type type, extents ne, layout l, std::mt19937& rng) {
    owned o;
    tensor& t = o.t;
    t.type = type;
    t.ne = ne;
    const std::size_t es = type_size(type);
    std::size_t bytes = 0;
    std::size_t offs = 0;
    switch (l) {
    case layout::contiguous:
    case layout::offset:
        t.nb = contiguous_strides(type, ne);
        bytes = t.nb[3] * static_cast<std::size_t>(ne[3]) + es;
        offs = l == layout::offset ? es : 0;
        break;
    case layout::padded: // a window of a [ne0 + 3, ne1 + 1, ne2 + 1, ne3] block
        t.nb[0] = es;
        t.nb[1] = es * static_cast<std::size_t>(ne[0] + 3);
        t.nb[2] = t.nb[1] * static_cast<std::size_t>(ne[1] + 1);
        t.nb[3] = t.nb[2] * static_cast<std::size_t>(ne[2] + 1);
        bytes = t.nb[3] * static_cast<std::size_t>(ne[3]);
        offs = t.nb[1] + es;
        bytes += offs;
        break;
    case layout::permuted: // stored as [ne0, ne2, ne1, ne3]
        t.nb[0] = es;
        t.nb[2] = es * static_cast<std::size_t>(ne[0]);
        t.nb[1] = t.nb[2] * static_cast<std::size_t>(ne[2]);
        t.nb[3] = t.nb[1] * static_cast<std::size_t>(ne[1]);
        bytes = t.nb[3] * static_cast<std::size_t>(ne[3]);
        break;
    }
    o.mem.resize(bytes + 64);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (std::size_t i = 0; i + es <= o.mem.size(); i += es) write_value(type, o.mem.data() + i, u(rng));
    t.data = o.mem.data() + offs;
    return o;
}

/// dst for a [K, M, A2, A3] x b [K, N, B2, B3]: f32, contiguous or with padded rows;
/// elements NaN, gaps a sentinel pattern.
owned make_dst(i64 M, i64 N, i64 B2, i64 B3, bool padded) {
    owned o;
    tensor& t = o.t;
    t.type = f32;
    t.ne = {M, N, B2, B3};
    t.nb = contiguous_strides(f32, t.ne);
    if (padded) {
        t.nb[1] = sizeof(float) * static_cast<std::size_t>(M + 5);
        t.nb[2] = t.nb[1] * static_cast<std::size_t>(N + 1);
        t.nb[3] = t.nb[2] * static_cast<std::size_t>(B2);
    }
    o.mem.assign(t.nb[3] * static_cast<std::size_t>(B3) + 64, std::byte{0x5a});
    t.data = o.mem.data();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (i64 i3 = 0; i3 < B3; ++i3)
        for (i64 i2 = 0; i2 < B2; ++i2)
            for (i64 i1 = 0; i1 < N; ++i1)
                for (i64 i0 = 0; i0 < M; ++i0) std::memcpy(element(t, i0, i1, i2, i3), &nan, sizeof nan);
    return o;
}

/// Runs fast::gemm on nth real threads sharing a work buffer and a std::barrier.
errc run_gemm(tensor& dst, int nth, cpu::isa level) {
    const std::size_t ws = cpu::fast::gemm_work_size(dst, nth);
    std::vector<std::byte> work(ws + 64);
    // the contract promises 64-byte alignment; use it exactly
    void* wp = work.data();
    std::size_t space = work.size();
    wp = std::align(64, ws == 0 ? 1 : ws, wp, space);
    std::barrier<> bar(nth);
    std::vector<errc> status(static_cast<std::size_t>(nth), errc::ok);
    auto job = [&](int ith) {
        cpu::compute_params p;
        p.ith = ith;
        p.nth = nth;
        p.wdata = ws > 0 ? wp : nullptr;
        p.wsize = ws;
        p.level = level;
        p.barrier_fn = [](void* ctx) noexcept { static_cast<std::barrier<>*>(ctx)->arrive_and_wait(); };
        p.barrier_ctx = &bar;
        status[static_cast<std::size_t>(ith)] = cpu::fast::gemm(p, dst);
    };
    std::vector<std::thread> threads;
    for (int i = 1; i < nth; ++i) threads.emplace_back(job, i);
    job(0);
    for (auto& th : threads) th.join();
    for (errc s : status)
        if (s != errc::ok) return s;
    return errc::ok;
}

/// dst[m, n, i2, i3] = sum_k a[k, m, i2 / r2, i3 / r3] * b[k, n, i2, i3], in double.
std::vector<double> reference(tensor& a, tensor& b) {
    const i64 K = a.ne[0], M = a.ne[1], N = b.ne[1], B2 = b.ne[2], B3 = b.ne[3];
    const i64 r2 = B2 / a.ne[2], r3 = B3 / a.ne[3];
    std::vector<double> out(static_cast<std::size_t>(M * N * B2 * B3));
    std::vector<double> bcol(static_cast<std::size_t>(K));
    for (i64 i3 = 0; i3 < B3; ++i3)
        for (i64 i2 = 0; i2 < B2; ++i2)
            for (i64 n = 0; n < N; ++n) {
                for (i64 k = 0; k < K; ++k)
                    bcol[static_cast<std::size_t>(k)] = read_value(b.type, element(b, k, n, i2, i3));
                for (i64 m = 0; m < M; ++m) {
                    double s = 0.0;
                    for (i64 k = 0; k < K; ++k)
                        s += static_cast<double>(read_value(a.type, element(a, k, m, i2 / r2, i3 / r3))) *
                             bcol[static_cast<std::size_t>(k)];
                    out[static_cast<std::size_t>(((i3 * B2 + i2) * N + n) * M + m)] = s;
                }
            }
    return out;
}

/// NMSE of dst against ref (and whether every element is finite).
struct error_stats {
    double nmse = 0.0;
    bool finite = true;
};
error_stats compare(tensor& dst, const std::vector<double>& ref) {
    const i64 M = dst.ne[0], N = dst.ne[1], B2 = dst.ne[2], B3 = dst.ne[3];
    double num = 0.0, den = 0.0;
    bool finite = true;
    for (i64 i3 = 0; i3 < B3; ++i3)
        for (i64 i2 = 0; i2 < B2; ++i2)
            for (i64 n = 0; n < N; ++n)
                for (i64 m = 0; m < M; ++m) {
                    const double v = read_value(f32, element(dst, m, n, i2, i3));
                    const double r = ref[static_cast<std::size_t>(((i3 * B2 + i2) * N + n) * M + m)];
                    finite = finite && std::isfinite(v);
                    num += (v - r) * (v - r);
                    den += r * r;
                }
    return {den > 0.0 ? num / den : num, finite};
}

/// True when every byte of dst's memory that is not one of its elements is the sentinel.
bool gaps_untouched(const owned& d) {
    const tensor& t = d.t;
    std::vector<bool> is_elem(d.mem.size(), false);
    for (i64 i3 = 0; i3 < t.ne[3]; ++i3)
        for (i64 i2 = 0; i2 < t.ne[2]; ++i2)
            for (i64 i1 = 0; i1 < t.ne[1]; ++i1)
                for (i64 i0 = 0; i0 < t.ne[0]; ++i0) {
                    const std::size_t o = static_cast<std::size_t>(i0) * t.nb[0] +
                                          static_cast<std::size_t>(i1) * t.nb[1] +
                                          static_cast<std::size_t>(i2) * t.nb[2] +
                                          static_cast<std::size_t>(i3) * t.nb[3];
                    for (std::size_t b = 0; b < sizeof(float); ++b) is_elem[o + b] = true;
                }
    for (std::size_t i = 0; i < d.mem.size(); ++i)
        if (!is_elem[i] && d.mem[i] != std::byte{0x5a}) return false;
    return true;
}

std::vector<cpu::isa> levels() {
    std::vector<cpu::isa> out;
    for (int l = 0; l <= static_cast<int>(cpu::detected_isa()); ++l) out.push_back(static_cast<cpu::isa>(l));
    return out;
}

struct mm_shape {
    i64 M, N, K;
    i64 A2 = 1, A3 = 1, B2 = 1, B3 = 1;
};

std::string describe(const mm_shape& s, elem_type ta, elem_type tb, layout la, layout lb, bool dpad) {
    std::ostringstream o;
    o << "M=" << s.M << " N=" << s.N << " K=" << s.K << " a=[" << s.A2 << ',' << s.A3 << "] b=[" << s.B2 << ','
      << s.B3 << "] " << to_string(ta) << '(' << name(la) << ") x " << to_string(tb) << '(' << name(lb) << ')'
      << (dpad ? " dst(padded)" : "");
    return o.str();
}

/// One case at every level and nth = 1, 2, 3.
void check_case(const mm_shape& s, elem_type ta, elem_type tb, layout la, layout lb, bool dpad, std::mt19937& rng) {
    owned a = make_tensor(ta, {s.K, s.M, s.A2, s.A3}, la, rng);
    owned b = make_tensor(tb, {s.K, s.N, s.B2, s.B3}, lb, rng);
    const std::vector<double> ref = reference(a.t, b.t);
    INFO(describe(s, ta, tb, la, lb, dpad));
    for (cpu::isa level : levels()) {
        for (int nth = 1; nth <= 3; ++nth) {
            INFO("level " << to_string(level) << ", nth " << nth);
            owned d = make_dst(s.M, s.N, s.B2, s.B3, dpad);
            d.t.op = op_kind::mul_mat;
            d.t.src[0] = &a.t;
            d.t.src[1] = &b.t;
            REQUIRE(cpu::fast::gemm_applies(d.t));
            REQUIRE(run_gemm(d.t, nth, level) == errc::ok);
            const error_stats e = compare(d.t, ref);
            CHECK(e.finite);
            CHECK(e.nmse <= 1e-7);
            CHECK(gaps_untouched(d));
        }
    }
}

/// Shapes of the packed GEMM path (N > 8): every remainder of N over the micro-tile
/// widths (8 and 4), M around the micro-tile heights (48, 24, 16) and the row block (192),
/// K around the K block (1024).
const std::vector<mm_shape>& gemm_shapes() {
    static const std::vector<mm_shape> s = {
        {1, 9, 1},      {2, 10, 3},     {5, 11, 3},     {1, 12, 40},    {16, 16, 16},  {15, 14, 17},
        {17, 9, 15},    {23, 13, 9},    {24, 12, 24},   {25, 15, 7},    {47, 9, 31},   {48, 16, 64},
        {49, 17, 65},   {95, 23, 130},  {96, 24, 100},  {97, 25, 1},    {3, 100, 7},   {200, 13, 2},
        {64, 33, 1023}, {33, 16, 1024}, {40, 11, 1025}, {20, 10, 2100}, {191, 9, 9},   {193, 14, 5},
        {390, 9, 12},   {130, 70, 33},  {8, 300, 20},   {61, 41, 257},
        // broadcast over dims 2 and 3 (a shared by consecutive matrices of b), which also
        // covers both thread splits: whole matrices per thread and one matrix at a time
        {20, 10, 30, 2, 1, 4, 1},       {9, 11, 5, 1, 2, 3, 4},         {33, 10, 19, 3, 1, 3, 2},
        {50, 9, 40, 1, 1, 5, 1},        {17, 12, 3, 2, 2, 2, 2},        {6, 14, 66, 1, 1, 1, 3},
    };
    return s;
}

/// Shapes of the mat-vec path (N <= 8): one and two groups of four columns.
const std::vector<mm_shape>& matvec_shapes() {
    static const std::vector<mm_shape> s = {
        {1, 1, 1},      {7, 1, 5},      {33, 2, 17},    {64, 3, 128},   {5, 4, 300},
        {100, 1, 1000}, {13, 3, 4099},  {1, 5, 1},      {29, 5, 40},    {50, 6, 9},
        {17, 7, 100},   {64, 8, 33},    {3, 8, 1030},   {3, 2, 1, 1, 1, 2, 3},
        {30, 1, 20, 2, 1, 4, 1},        {9, 4, 33, 1, 3, 1, 3},         {11, 6, 21, 2, 1, 2, 2},
    };
    return s;
}

TEST_CASE("cpu gemm: packed GEMM path matches a double reference at every level", "[cpu][gemm]") {
    std::mt19937 rng(4242);
    std::size_t i = 0;
    for (const mm_shape& s : gemm_shapes()) {
        const bool small = s.M * s.N * s.K * s.B2 * s.B3 <= 40000;
        for (elem_type ta : float_types)
            for (elem_type tb : float_types) {
                ++i;
                // every type pair for small shapes, one pair in three (rotating) for the rest
                if (!small && i % 3 != 0 && !(ta == f32 && tb == f32)) continue;
                check_case(s, ta, tb, all_layouts[i % 4], all_layouts[(i / 4) % 4], i % 5 == 0, rng);
            }
    }
}

TEST_CASE("cpu gemm: mat-vec path (N <= 8) matches a double reference at every level", "[cpu][gemm]") {
    std::mt19937 rng(777);
    std::size_t i = 0;
    for (const mm_shape& s : matvec_shapes())
        for (elem_type ta : float_types)
            for (elem_type tb : float_types) {
                ++i;
                check_case(s, ta, tb, all_layouts[i % 4], all_layouts[(i / 3) % 4], i % 4 == 0, rng);
            }
}

TEST_CASE("cpu gemm: large K, several column blocks and a long mat-vec row", "[cpu][gemm]") {
    std::mt19937 rng(99);
    // K = 40000 caps the packed column block at 48 columns: N = 100 takes three blocks
    check_case({6, 100, 40000}, f32, f32, layout::contiguous, layout::padded, false, rng);
    check_case({5, 21, 20000, 1, 1, 3, 1}, f16, bf16, layout::offset, layout::contiguous, true, rng);
    check_case({37, 3, 100003}, bf16, f32, layout::padded, layout::offset, false, rng);
    check_case({9, 1, 65537}, f16, f16, layout::contiguous, layout::contiguous, true, rng);
}

TEST_CASE("cpu gemm: applies only to layouts it handles, work size, short buffers", "[cpu][gemm]") {
    std::mt19937 rng(5);
    owned a = make_tensor(f32, {8, 6, 1, 1}, layout::contiguous, rng);
    owned b = make_tensor(f16, {8, 7, 1, 1}, layout::padded, rng);
    owned d = make_dst(6, 7, 1, 1, false);
    d.t.op = op_kind::mul_mat;
    d.t.src[0] = &a.t;
    d.t.src[1] = &b.t;
    CHECK(cpu::fast::gemm_applies(d.t));

    SECTION("strided elements of b are left to the reference kernel") {
        b.t.nb[0] *= 2;
        b.t.ne[0] = 4;
        a.t.ne[0] = 4;
        CHECK_FALSE(cpu::fast::gemm_applies(d.t));
        CHECK(cpu::fast::gemm_work_size(d.t, 2) == 0);
    }
    SECTION("quantized weights are not gemm's") {
        a.t.type = elem_type::q8_0;
        CHECK_FALSE(cpu::fast::gemm_applies(d.t));
    }
    SECTION("K == 1: dim 0's stride does not matter") {
        a.t.ne[0] = 1;
        b.t.ne[0] = 1;
        b.t.nb[0] = 12345;
        CHECK(cpu::fast::gemm_applies(d.t));
        const std::vector<double> ref = reference(a.t, b.t);
        for (cpu::isa level : levels()) {
            owned out = make_dst(6, 7, 1, 1, false);
            out.t.op = op_kind::mul_mat;
            out.t.src[0] = &a.t;
            out.t.src[1] = &b.t;
            REQUIRE(run_gemm(out.t, 2, level) == errc::ok);
            CHECK(compare(out.t, ref).nmse <= 1e-7);
        }
    }
    SECTION("K == 0 gives zeros") {
        a.t.ne[0] = 0;
        b.t.ne[0] = 0;
        for (cpu::isa level : levels()) {
            owned out = make_dst(6, 7, 1, 1, true);
            out.t.op = op_kind::mul_mat;
            out.t.src[0] = &a.t;
            out.t.src[1] = &b.t;
            REQUIRE(run_gemm(out.t, 3, level) == errc::ok);
            for (i64 n = 0; n < 7; ++n)
                for (i64 m = 0; m < 6; ++m) CHECK(read_value(f32, element(out.t, m, n, 0, 0)) == 0.0f);
            CHECK(gaps_untouched(out));
        }
    }
    SECTION("the work size depends on the node and nth only, and a short buffer is refused") {
        const std::size_t w1 = cpu::fast::gemm_work_size(d.t, 1);
        const std::size_t w3 = cpu::fast::gemm_work_size(d.t, 3);
        CHECK(w1 > 0);
        CHECK(w3 >= w1);
        cpu::compute_params p;
        p.wsize = w1 - 1;
        std::vector<std::byte> work(w1);
        p.wdata = work.data();
        CHECK(cpu::fast::gemm(p, d.t) == errc::invalid_argument);
    }
}

} // namespace gemm_test

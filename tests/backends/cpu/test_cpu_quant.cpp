// The quantized mul_mat fast path (backends/cpu/fast/quant.hpp) on its own, called through
// fast::quant_mul_mat by a small local driver that runs nth = 1, 2 and 3 real threads
// sharing one work buffer and a std::barrier, at every instruction-set level this machine
// has. Three kinds of checks:
//
//  * accuracy: NMSE against an independent double-precision product of the dequantized
//    weights (core's dequantize_row_*) and the ORIGINAL b, below ggml's 5e-4, no NaN, over
//    many shapes: M and N from 1 up past the kernels' tiles (4-row gemv tiles, 32-row
//    panels, 7-column tiles, 16-block K chunks), K from one block to thousands, odd
//    sizes, broadcast over dims 2 and 3, b as a view (padded rows, strided elements,
//    permuted dims, misaligned start), f16 / bf16 b, padded dst;
//  * exactness: weights and activations whose scales are powers of two and whose b
//    values are integers that q8_0 holds exactly, so that the result is an exact integer
//    sum (scaled by a power of two) that f32 represents: every level must produce it bit
//    for bit, which proves that the kernels' integer block products (the vpdpbusd sign
//    tricks, the q4_0 offset, the corrections) are exact, including q8_0 weights of -128;
//    and random data against a scalar integer implementation on the same quantized b
//    (core's quantize_row_q8_0): f32 results within 1e-6 of sum |da * db * qa * qb| (the
//    kernels that run their vector lanes along K add a block's lanes after scaling them);
//  * the quantizer of each level against core's quantize_row_q8_0, bit for bit, and the
//    contract: quant_applies, quant_work_size, statuses.

#include <backplane/backends/cpu/fast/quant.hpp>
#include <backplane/backends/cpu/isa.hpp>
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

using i64 = std::int64_t;

std::vector<bc::isa> levels() {
    std::vector<bc::isa> v;
    for (int l = 0; l <= static_cast<int>(bc::detected_isa()); ++l) v.push_back(static_cast<bc::isa>(l));
    return v;
}

std::string level_name(bc::isa l) { return std::string(bc::to_string(l)); }

/// Zeroed memory with a 64-byte aligned start plus `offset` bytes.
struct aligned_bytes {
    std::vector<std::byte> mem;
    std::byte* base = nullptr;
    aligned_bytes(std::size_t bytes, std::size_t offset) : mem(bytes + offset + 128) {
        const auto p = reinterpret_cast<std::uintptr_t>(mem.data());
        base = mem.data() + ((64 - p % 64) % 64) + offset;
    }
};

/// How b is laid out in memory.
enum class blayout { contiguous, padded_rows, strided_elems, permuted, misaligned };
const char* to_string(blayout l) {
    switch (l) {
    case blayout::contiguous: return "contiguous";
    case blayout::padded_rows: return "padded_rows";
    case blayout::strided_elems: return "strided_elems";
    case blayout::permuted: return "permuted";
    case blayout::misaligned: return "misaligned";
    }
    return "?";
}

/// One mul_mat node with its memory: a [K, M, A2, A3] quantized, b [K, N, B2, B3], dst f32.
struct problem {
    elem_type ta = elem_type::q8_0, tb = elem_type::f32;
    i64 K = 0, M = 0, N = 0, A2 = 1, A3 = 1, B2 = 1, B3 = 1;
    std::unique_ptr<aligned_bytes> amem, bmem, dmem;
    tensor a, b, dst;
    std::vector<float> bval; ///< b's values (as stored: f16 / bf16 rounded), [B3][B2][N][K]
    std::size_t dst_pad = 0; ///< floats of padding after each dst column (checked untouched)

    [[nodiscard]] std::string describe() const {
        std::ostringstream s;
        s << to_string(ta) << " x " << to_string(tb) << " K=" << K << " M=" << M << " N=" << N << " a=[" << A2
          << "," << A3 << "] b=[" << B2 << "," << B3 << "]";
        return s.str();
    }
    [[nodiscard]] float& bv(i64 k, i64 n, i64 i2, i64 i3) {
        return bval[static_cast<std::size_t>(((i3 * B2 + i2) * N + n) * K + k)];
    }
    [[nodiscard]] const float* bcol(i64 n, i64 i2, i64 i3) const {
        return &bval[static_cast<std::size_t>(((i3 * B2 + i2) * N + n) * K)];
    }
    [[nodiscard]] const std::byte* arow(i64 m, i64 i2, i64 i3) const {
        return static_cast<const std::byte*>(a.data) + static_cast<std::size_t>(m) * a.nb[1] +
               static_cast<std::size_t>(i2 / (B2 / A2)) * a.nb[2] + static_cast<std::size_t>(i3 / (B3 / A3)) * a.nb[3];
    }
    [[nodiscard]] float out(i64 m, i64 n, i64 i2, i64 i3) const {
        float v;
        std::memcpy(&v,
                    static_cast<const std::byte*>(dst.data) + static_cast<std::size_t>(m) * dst.nb[0] +
                        static_cast<std::size_t>(n) * dst.nb[1] + static_cast<std::size_t>(i2) * dst.nb[2] +
                        static_cast<std::size_t>(i3) * dst.nb[3],
                    sizeof v);
        return v;
    }
};

/// Stores b value v at element (k, n, i2, i3) of tensor b in its type.
void store_b(tensor& b, i64 k, i64 n, i64 i2, i64 i3, float v) {
    std::byte* p = static_cast<std::byte*>(b.data) + static_cast<std::size_t>(k) * b.nb[0] +
                   static_cast<std::size_t>(n) * b.nb[1] + static_cast<std::size_t>(i2) * b.nb[2] +
                   static_cast<std::size_t>(i3) * b.nb[3];
    if (b.type == elem_type::f32) {
        std::memcpy(p, &v, sizeof v);
    } else if (b.type == elem_type::f16) {
        const f16_t h = f32_to_f16(v);
        std::memcpy(p, &h, sizeof h);
    } else {
        const bf16_t h = f32_to_bf16(v);
        std::memcpy(p, &h, sizeof h);
    }
}
float rounded(elem_type t, float v) {
    if (t == elem_type::f16) return f16_to_f32(f32_to_f16(v));
    if (t == elem_type::bf16) return bf16_to_f32(f32_to_bf16(v));
    return v;
}

struct mm_shape {
    i64 K, M, N, A2 = 1, A3 = 1, B2 = 1, B3 = 1;
};

/// Builds the tensors (values filled later). a's rows are padded when a_pad, its data
/// start misaligned by a_off bytes; b is laid out as bl; dst columns padded when d_pad.
problem make_problem(elem_type ta, elem_type tb, const mm_shape& s, blayout bl, bool a_pad, std::size_t a_off,
                     bool d_pad) {
    problem p;
    p.ta = ta;
    p.tb = tb;
    p.K = s.K;
    p.M = s.M;
    p.N = s.N;
    p.A2 = s.A2;
    p.A3 = s.A3;
    p.B2 = s.B2;
    p.B3 = s.B3;

    // a: rows of whole blocks, optionally one spare block of padding per row
    const std::size_t arow = row_size(ta, s.K) + (a_pad ? type_size(ta) : 0);
    p.a.type = ta;
    p.a.ne = {s.K, s.M, s.A2, s.A3};
    p.a.nb = {type_size(ta), arow, arow * static_cast<std::size_t>(s.M),
              arow * static_cast<std::size_t>(s.M * s.A2)};
    p.amem = std::make_unique<aligned_bytes>(arow * static_cast<std::size_t>(s.M * s.A2 * s.A3), a_off);
    p.a.data = p.amem->base;

    // b
    const std::size_t es = type_size(tb);
    p.b.type = tb;
    p.b.ne = {s.K, s.N, s.B2, s.B3};
    const auto K = static_cast<std::size_t>(s.K), N = static_cast<std::size_t>(s.N),
               B2 = static_cast<std::size_t>(s.B2), B3 = static_cast<std::size_t>(s.B3);
    std::size_t bytes = 0, off = 0;
    switch (bl) {
    case blayout::contiguous:
    case blayout::misaligned:
        p.b.nb = {es, es * K, es * K * N, es * K * N * B2};
        bytes = es * K * N * B2 * B3;
        off = bl == blayout::misaligned ? 2 : 0;
        break;
    case blayout::padded_rows: // a window of a [K + 5, N + 1, B2 + 1, B3] tensor
        p.b.nb = {es, es * (K + 5), es * (K + 5) * (N + 1), es * (K + 5) * (N + 1) * (B2 + 1)};
        bytes = p.b.nb[3] * B3;
        off = es * 3;
        break;
    case blayout::strided_elems: // every other element
        p.b.nb = {2 * es, 2 * es * K, 2 * es * K * N, 2 * es * K * N * B2};
        bytes = 2 * es * K * N * B2 * B3;
        break;
    case blayout::permuted: // stored as [K, B2, N, B3]: dims 1 and 2 swapped
        p.b.nb = {es, es * K * B2, es * K, es * K * N * B2};
        bytes = es * K * N * B2 * B3;
        break;
    }
    p.bmem = std::make_unique<aligned_bytes>(bytes, off);
    p.b.data = p.bmem->base;
    p.bval.assign(K * N * B2 * B3, 0.0f);

    // dst, optionally with padded columns (nb[1] > M floats), poisoned with NaN
    p.dst_pad = d_pad ? 3 : 0;
    const std::size_t col = (static_cast<std::size_t>(s.M) + p.dst_pad) * sizeof(float);
    p.dst.type = elem_type::f32;
    p.dst.ne = {s.M, s.N, s.B2, s.B3};
    p.dst.nb = {sizeof(float), col, col * N, col * N * B2};
    p.dmem = std::make_unique<aligned_bytes>(col * N * B2 * B3, 0);
    p.dst.data = p.dmem->base;
    p.dst.op = op_kind::mul_mat;
    p.dst.src[0] = &p.a;
    p.dst.src[1] = &p.b;
    return p;
}

/// Random weights: uniform [-1, 1] through core's quantizer (a realistic block), or raw
/// blocks with the given f16 scale bits and random codes (the full range, -128 included).
void fill_a_random(problem& p, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> row(static_cast<std::size_t>(p.K));
    for (i64 i3 = 0; i3 < p.A3; ++i3)
        for (i64 i2 = 0; i2 < p.A2; ++i2)
            for (i64 m = 0; m < p.M; ++m) {
                for (float& x : row) x = u(rng);
                std::byte* r = static_cast<std::byte*>(p.a.data) + static_cast<std::size_t>(m) * p.a.nb[1] +
                               static_cast<std::size_t>(i2) * p.a.nb[2] + static_cast<std::size_t>(i3) * p.a.nb[3];
                // through an aligned temporary: the row itself may be misaligned
                std::vector<std::byte> tmp(row_size(p.ta, p.K));
                from_float_row(p.ta, row.data(), tmp.data(), p.K);
                std::memcpy(r, tmp.data(), tmp.size());
            }
}
void fill_a_codes(problem& p, std::mt19937& rng, std::uint16_t scale_bits) {
    for (i64 i3 = 0; i3 < p.A3; ++i3)
        for (i64 i2 = 0; i2 < p.A2; ++i2)
            for (i64 m = 0; m < p.M; ++m) {
                std::byte* r = static_cast<std::byte*>(p.a.data) + static_cast<std::size_t>(m) * p.a.nb[1] +
                               static_cast<std::size_t>(i2) * p.a.nb[2] + static_cast<std::size_t>(i3) * p.a.nb[3];
                for (i64 kb = 0; kb < p.K / 32; ++kb) {
                    std::byte* blk = r + static_cast<std::size_t>(kb) * type_size(p.ta);
                    std::memcpy(blk, &scale_bits, 2);
                    for (std::size_t j = 2; j < type_size(p.ta); ++j) blk[j] = static_cast<std::byte>(rng() & 0xff);
                    if (kb % 3 == 0) blk[2] = static_cast<std::byte>(0x80); // q8_0: -128; q4_0: codes 0 and 8
                }
            }
}

/// Random b: uniform [-1, 1] (stored in b's type), or integers in [-127, 127] times a
/// power of two with every block reaching +-127, so that q8_0 holds them exactly.
void fill_b_random(problem& p, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (i64 i3 = 0; i3 < p.B3; ++i3)
        for (i64 i2 = 0; i2 < p.B2; ++i2)
            for (i64 n = 0; n < p.N; ++n)
                for (i64 k = 0; k < p.K; ++k) {
                    const float v = rounded(p.tb, u(rng));
                    p.bv(k, n, i2, i3) = v;
                    store_b(p.b, k, n, i2, i3, v);
                }
}
void fill_b_integers(problem& p, std::mt19937& rng, float scale) {
    for (i64 i3 = 0; i3 < p.B3; ++i3)
        for (i64 i2 = 0; i2 < p.B2; ++i2)
            for (i64 n = 0; n < p.N; ++n)
                for (i64 k = 0; k < p.K; ++k) {
                    int q = static_cast<int>(rng() % 255) - 127;
                    if (k % 32 == static_cast<i64>(rng() % 32) || k % 32 == 31) q = rng() % 2 ? 127 : -127;
                    const float v = static_cast<float>(q) * scale;
                    p.bv(k, n, i2, i3) = v;
                    store_b(p.b, k, n, i2, i3, v);
                }
}

/// Runs quant_mul_mat on nth threads (every thread must return ok); dst is poisoned first.
void run(problem& p, int nth, bc::isa level) {
    std::memset(p.dmem->mem.data(), 0xff, p.dmem->mem.size()); // NaN everywhere, padding included
    const std::size_t ws = bc::fast::quant_work_size(p.dst, nth);
    REQUIRE(ws > 0);
    aligned_bytes work(ws, 0);
    std::barrier<> sync(nth);
    std::vector<errc> status(static_cast<std::size_t>(nth), errc::failed);
    const auto body = [&](int ith) {
        bc::compute_params cp;
        cp.ith = ith;
        cp.nth = nth;
        cp.wdata = work.base;
        cp.wsize = ws;
        cp.level = level;
        cp.barrier_fn = [](void* ctx) noexcept { static_cast<std::barrier<>*>(ctx)->arrive_and_wait(); };
        cp.barrier_ctx = &sync;
        status[static_cast<std::size_t>(ith)] = bc::fast::quant_mul_mat(cp, p.dst);
    };
    std::vector<std::thread> threads;
    for (int t = 1; t < nth; ++t) threads.emplace_back(body, t);
    body(0);
    for (auto& t : threads) t.join();
    for (errc e : status) REQUIRE(e == errc::ok);
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

/// The exact product of the dequantized weights and the original b, in double.
std::vector<double> reference_product(const problem& p) {
    std::vector<double> ref(static_cast<std::size_t>(p.M * p.N * p.B2 * p.B3));
    std::vector<float> arow(static_cast<std::size_t>(p.K));
    std::vector<std::byte> tmp(row_size(p.ta, p.K));
    for (i64 i3 = 0; i3 < p.B3; ++i3)
        for (i64 i2 = 0; i2 < p.B2; ++i2)
            for (i64 m = 0; m < p.M; ++m) {
                std::memcpy(tmp.data(), p.arow(m, i2, i3), tmp.size());
                if (p.ta == elem_type::q8_0)
                    dequantize_row_q8_0(reinterpret_cast<const block_q8_0*>(tmp.data()), arow.data(), p.K);
                else
                    dequantize_row_q4_0(reinterpret_cast<const block_q4_0*>(tmp.data()), arow.data(), p.K);
                for (i64 n = 0; n < p.N; ++n) {
                    double s = 0.0;
                    const float* bcol = p.bcol(n, i2, i3);
                    for (i64 k = 0; k < p.K; ++k) s += static_cast<double>(arow[static_cast<std::size_t>(k)]) * bcol[k];
                    ref[static_cast<std::size_t>(((i3 * p.B2 + i2) * p.N + n) * p.M + m)] = s;
                }
            }
    return ref;
}

/// A plain scalar integer implementation on the same quantized b (core's reference
/// quantizer): per block the exact integer sum, times the two scales. Returns, per
/// output, the value (in double) and sum |da * db * qa * qb| over all products, the
/// magnitude that bounds the rounding error of any summation order.
struct int_reference {
    std::vector<double> value, magnitude;
};
int_reference integer_product(const problem& p) {
    int_reference r;
    const auto count = static_cast<std::size_t>(p.M * p.N * p.B2 * p.B3);
    r.value.resize(count);
    r.magnitude.resize(count);
    const i64 nblk = p.K / 32;
    std::vector<block_q8_0> bq(static_cast<std::size_t>(nblk));
    for (i64 i3 = 0; i3 < p.B3; ++i3)
        for (i64 i2 = 0; i2 < p.B2; ++i2)
            for (i64 n = 0; n < p.N; ++n) {
                quantize_row_q8_0(p.bcol(n, i2, i3), bq.data(), p.K);
                for (i64 m = 0; m < p.M; ++m) {
                    const std::byte* row = p.arow(m, i2, i3);
                    double v = 0.0, mag = 0.0;
                    for (i64 kb = 0; kb < nblk; ++kb) {
                        const std::byte* blk = row + static_cast<std::size_t>(kb) * type_size(p.ta);
                        f16_t d;
                        std::memcpy(&d, blk, 2);
                        std::int64_t isum = 0, iabs = 0;
                        for (int j = 0; j < 32; ++j) {
                            int q;
                            if (p.ta == elem_type::q8_0) {
                                q = static_cast<std::int8_t>(blk[2 + j]);
                            } else {
                                const auto byte = static_cast<unsigned>(blk[2 + (j % 16)]);
                                q = static_cast<int>(j < 16 ? byte & 0x0f : byte >> 4) - 8;
                            }
                            const std::int64_t prod = static_cast<std::int64_t>(q) * bq[static_cast<std::size_t>(kb)].qs[j];
                            isum += prod;
                            iabs += prod < 0 ? -prod : prod;
                        }
                        const double scale = static_cast<double>(f16_to_f32(d)) *
                                             static_cast<double>(f16_to_f32(bq[static_cast<std::size_t>(kb)].d));
                        v += scale * static_cast<double>(isum);
                        mag += std::fabs(scale) * static_cast<double>(iabs);
                    }
                    const auto idx = static_cast<std::size_t>(((i3 * p.B2 + i2) * p.N + n) * p.M + m);
                    r.value[idx] = v;
                    r.magnitude[idx] = mag;
                }
            }
    return r;
}

/// Every output of dst in the reference's order.
std::vector<double> outputs(const problem& p) {
    std::vector<double> v;
    v.reserve(static_cast<std::size_t>(p.M * p.N * p.B2 * p.B3));
    for (i64 i3 = 0; i3 < p.B3; ++i3)
        for (i64 i2 = 0; i2 < p.B2; ++i2)
            for (i64 n = 0; n < p.N; ++n)
                for (i64 m = 0; m < p.M; ++m) v.push_back(p.out(m, n, i2, i3));
    return v;
}

double nmse(const std::vector<double>& ref, const std::vector<double>& got) {
    double num = 0.0, den = 0.0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const double e = got[i] - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
    }
    return den > 0.0 ? num / den : num;
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

TEST_CASE("cpu quant: the quantizer of every level matches core's quantize_row_q8_0 bit for bit", "[cpu][quant]") {
    std::mt19937 rng(4101);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const i64 nblk = 37;
    std::vector<float> x(static_cast<std::size_t>(nblk * 32));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = u(rng) * std::pow(10.0f, static_cast<float>(i / 32 % 9) - 4.0f);
    std::fill_n(x.begin() + 32, 32, 0.0f);                 // a zero block: d = 0
    for (int j = 0; j < 32; ++j) x[64 + static_cast<std::size_t>(j)] = static_cast<float>(j) - 15.5f; // ties
    x[96] = 1e-30f;                                         // a tiny block
    std::vector<block_q8_0> ref(static_cast<std::size_t>(nblk));
    quantize_row_q8_0(x.data(), ref.data(), nblk * 32);

    for (bc::isa level : levels())
        for (int nr : {1, 7}) {
            INFO("level " << level_name(level) << ", tile width " << nr);
            fq::plan pl;
            pl.nblk = nblk;
            pl.N = 9;
            std::vector<std::byte> qb(static_cast<std::size_t>(pl.N * pl.col_bytes()));
            const i64 n = 8; // in the last, narrower tile when nr = 7
            const fq::column_ref col = pl.column(qb.data(), 0, n, nr);
            fq::quantize_row(level, x.data(), nblk, col, 8);
            for (i64 kb = 0; kb < nblk; ++kb) {
                const auto& r = ref[static_cast<std::size_t>(kb)];
                std::int8_t qs[32];
                std::memcpy(qs, col.qs + kb * col.step, 32);
                float d;
                std::int32_t corr;
                std::memcpy(&d, col.d + kb * col.dstep, 4);
                std::memcpy(&corr, col.corr + kb * col.dstep, 4);
                std::int32_t sum = 0;
                for (int j = 0; j < 32; ++j) sum += r.qs[j];
                INFO("block " << kb);
                CHECK(std::memcmp(qs, r.qs, 32) == 0);
                CHECK(d == f16_to_f32(r.d));
                CHECK(corr == -8 * sum);
            }
        }
}

TEST_CASE("cpu quant: accuracy against the double-precision product, every level and thread count",
          "[cpu][quant]") {
    std::mt19937 rng(4102);
    const blayout bls[] = {blayout::contiguous, blayout::padded_rows, blayout::strided_elems, blayout::permuted,
                           blayout::misaligned};
    const elem_type btypes[] = {elem_type::f32, elem_type::f32, elem_type::f32, elem_type::f16, elem_type::bf16};
    for (elem_type ta : {elem_type::q8_0, elem_type::q4_0}) {
        const auto& ss = shapes();
        for (std::size_t si = 0; si < ss.size(); ++si) {
            const blayout bl = bls[si % 5];
            const elem_type tb = btypes[(si / 5 + si) % 5];
            problem p = make_problem(ta, tb, ss[si], bl, si % 3 == 1, si % 4 == 3 ? 1 : 0, si % 2 == 1);
            fill_a_random(p, rng);
            fill_b_random(p, rng);
            REQUIRE(bc::fast::quant_applies(p.dst));
            const std::vector<double> ref = reference_product(p);
            const int_reference iref = integer_product(p);
            for (bc::isa level : levels())
                for (int nth : {1, 2, 3}) {
                    INFO(p.describe() << ", b " << to_string(bl) << ", level " << level_name(level) << ", nth "
                                      << nth);
                    run(p, nth, level);
                    const std::vector<double> got = outputs(p);
                    CHECK(std::none_of(got.begin(), got.end(), [](double v) { return std::isnan(v); }));
                    CHECK(nmse(ref, got) < 5e-4);
                    CHECK(padding_untouched(p));
                    // the same quantized b through plain integer sums
                    double worst = 0.0;
                    for (std::size_t i = 0; i < got.size(); ++i)
                        worst = std::max(worst, std::fabs(got[i] - iref.value[i]) / (iref.magnitude[i] + 1e-30));
                    CHECK(worst < 1e-6);
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
    for (elem_type ta : {elem_type::q8_0, elem_type::q4_0})
        for (const exact_case& c : cases) {
            problem p = make_problem(ta, elem_type::f32, c.s, blayout::contiguous, false, 0, false);
            fill_a_codes(p, rng, c.abits);
            fill_b_integers(p, rng, c.bscale);
            const int_reference iref = integer_product(p);
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
        CHECK(nmse(reference_product(p), outputs(p)) < 5e-4);
    }
}

#pragma once
// What the tests of the quantized mul_mat fast paths (test_cpu_quant.cpp: fast/quant.hpp,
// test_cpu_kquant.cpp: fast/kquant.hpp) share: the instruction-set levels of this machine,
// one mul_mat node with its memory (quantized weights, b in any float type and layout,
// dst optionally with padded columns), seeded random fills, a driver that runs a fast
// kernel on nth real threads sharing one work buffer and a std::barrier, and the
// double-precision reference product of the dequantized weights.

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/convert.hpp>
#include <backplane/core/error.hpp>
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

namespace quant_test_support {

using namespace backplane;
namespace bc = backplane::cpu;
using i64 = std::int64_t;

/// Every instruction-set level this machine has.
inline std::vector<bc::isa> levels() {
    std::vector<bc::isa> v;
    for (int l = 0; l <= static_cast<int>(bc::detected_isa()); ++l) v.push_back(static_cast<bc::isa>(l));
    return v;
}

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
inline const char* to_string(blayout l) {
    switch (l) {
    case blayout::contiguous: return "contiguous";
    case blayout::padded_rows: return "padded_rows";
    case blayout::strided_elems: return "strided_elems";
    case blayout::permuted: return "permuted";
    case blayout::misaligned: return "misaligned";
    }
    return "?";
}

struct mm_shape {
    i64 K, M, N, A2 = 1, A3 = 1, B2 = 1, B3 = 1;
};

/// One mul_mat node with its memory: a [K, M, A2, A3] quantized, b [K, N, B2, B3], dst f32.
struct problem : mm_shape {
    elem_type ta{}, tb{};
    std::unique_ptr<aligned_bytes> amem, bmem, dmem;
    tensor a, b, dst;
    std::vector<float> bval; ///< b's values (as stored: f16 / bf16 rounded), [B3][B2][N][K]
    std::size_t dst_pad = 0; ///< floats of padding after each dst column (checked untouched)

    [[nodiscard]] std::string describe() const {
        std::ostringstream s;
        s << backplane::to_string(ta) << " x " << backplane::to_string(tb) << " K=" << K << " M=" << M << " N=" << N
          << " a=[" << A2 << "," << A3 << "] b=[" << B2 << "," << B3 << "]";
        return s.str();
    }
    [[nodiscard]] float& bv(i64 k, i64 n, i64 i2, i64 i3) {
        return bval[static_cast<std::size_t>(((i3 * B2 + i2) * N + n) * K + k)];
    }
    [[nodiscard]] const float* bcol(i64 n, i64 i2, i64 i3) const {
        return &bval[static_cast<std::size_t>(((i3 * B2 + i2) * N + n) * K)];
    }
    /// Row m of weight matrix (i2, i3) of a.
    [[nodiscard]] std::byte* a_row(i64 m, i64 i2, i64 i3) const {
        return static_cast<std::byte*>(a.data) + static_cast<std::size_t>(m) * a.nb[1] +
               static_cast<std::size_t>(i2) * a.nb[2] + static_cast<std::size_t>(i3) * a.nb[3];
    }
    /// The weight row that meets matrix (i2, i3) of b (broadcast over dims 2 and 3).
    [[nodiscard]] const std::byte* arow(i64 m, i64 i2, i64 i3) const {
        return a_row(m, i2 / (B2 / A2), i3 / (B3 / A3));
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

/// Builds the tensors (values filled later). a's rows are padded by one block when a_pad,
/// its data start misaligned by a_off bytes; b is laid out as bl; dst columns padded
/// (and poisoned) when d_pad.
inline problem make_problem(elem_type ta, elem_type tb, const mm_shape& s, blayout bl, bool a_pad = false,
                            std::size_t a_off = 0, bool d_pad = false) {
    problem p;
    static_cast<mm_shape&>(p) = s;
    p.ta = ta;
    p.tb = tb;

    const std::size_t arow = row_size(ta, s.K) + (a_pad ? type_size(ta) : 0);
    p.a.type = ta;
    p.a.ne = {s.K, s.M, s.A2, s.A3};
    p.a.nb = {type_size(ta), arow, arow * static_cast<std::size_t>(s.M), arow * static_cast<std::size_t>(s.M * s.A2)};
    p.amem = std::make_unique<aligned_bytes>(arow * static_cast<std::size_t>(s.M * s.A2 * s.A3), a_off);
    p.a.data = p.amem->base;

    const std::size_t es = type_size(tb);
    p.b.type = tb;
    p.b.ne = {s.K, s.N, s.B2, s.B3};
    const auto K = static_cast<std::size_t>(s.K), N = static_cast<std::size_t>(s.N),
               B2 = static_cast<std::size_t>(s.B2), B3 = static_cast<std::size_t>(s.B3);
    std::size_t bytes = es * K * N * B2 * B3, off = 0;
    switch (bl) {
    case blayout::contiguous:
    case blayout::misaligned:
        p.b.nb = {es, es * K, es * K * N, es * K * N * B2};
        off = bl == blayout::misaligned ? 2 : 0;
        break;
    case blayout::padded_rows: // a window of a [K + 5, N + 1, B2 + 1, B3] tensor
        p.b.nb = {es, es * (K + 5), es * (K + 5) * (N + 1), es * (K + 5) * (N + 1) * (B2 + 1)};
        bytes = p.b.nb[3] * B3;
        off = es * 3;
        break;
    case blayout::strided_elems: // every other element
        p.b.nb = {2 * es, 2 * es * K, 2 * es * K * N, 2 * es * K * N * B2};
        bytes *= 2;
        break;
    case blayout::permuted: // stored as [K, B2, N, B3]: dims 1 and 2 swapped
        p.b.nb = {es, es * K * B2, es * K, es * K * N * B2};
        break;
    }
    p.bmem = std::make_unique<aligned_bytes>(bytes, off);
    p.b.data = p.bmem->base;
    p.bval.assign(K * N * B2 * B3, 0.0f);

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

/// Stores v at element (k, n, i2, i3) of b in b's type, and records the stored value.
inline void store_b(problem& p, i64 k, i64 n, i64 i2, i64 i3, float v) {
    std::byte* e = static_cast<std::byte*>(p.b.data) + static_cast<std::size_t>(k) * p.b.nb[0] +
                   static_cast<std::size_t>(n) * p.b.nb[1] + static_cast<std::size_t>(i2) * p.b.nb[2] +
                   static_cast<std::size_t>(i3) * p.b.nb[3];
    if (p.tb == elem_type::f32) {
        std::memcpy(e, &v, sizeof v);
    } else if (p.tb == elem_type::f16) {
        const f16_t h = f32_to_f16(v);
        std::memcpy(e, &h, sizeof h);
        v = f16_to_f32(h);
    } else {
        const bf16_t h = f32_to_bf16(v);
        std::memcpy(e, &h, sizeof h);
        v = bf16_to_f32(h);
    }
    p.bv(k, n, i2, i3) = v;
}

/// Every weight row through core's quantizer from uniform [-1, 1] (through an aligned
/// temporary: the rows may be misaligned).
inline void fill_a_random(problem& p, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> row(static_cast<std::size_t>(p.K));
    std::vector<std::byte> tmp(row_size(p.ta, p.K));
    for (i64 i3 = 0; i3 < p.A3; ++i3)
        for (i64 i2 = 0; i2 < p.A2; ++i2)
            for (i64 m = 0; m < p.M; ++m) {
                for (float& x : row) x = u(rng);
                from_float_row(p.ta, row.data(), tmp.data(), p.K);
                std::memcpy(p.a_row(m, i2, i3), tmp.data(), tmp.size());
            }
}

/// b uniform in [-1, 1] (as b's type stores it).
inline void fill_b_random(problem& p, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (i64 i3 = 0; i3 < p.B3; ++i3)
        for (i64 i2 = 0; i2 < p.B2; ++i2)
            for (i64 n = 0; n < p.N; ++n)
                for (i64 k = 0; k < p.K; ++k) store_b(p, k, n, i2, i3, u(rng));
}

/// Runs a fast kernel on nth threads sharing one work buffer of work_size(dst, nth) bytes
/// and a barrier (every thread must return ok); dst is poisoned with NaN first, padding
/// included.
template <class WorkSize, class Kernel>
void run_threads(problem& p, int nth, bc::isa level, WorkSize&& work_size, Kernel&& kernel) {
    std::memset(p.dmem->mem.data(), 0xff, p.dmem->mem.size());
    const std::size_t ws = work_size(p.dst, nth);
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
        status[static_cast<std::size_t>(ith)] = kernel(cp, p.dst);
    };
    std::vector<std::thread> threads;
    for (int t = 1; t < nth; ++t) threads.emplace_back(body, t);
    body(0);
    for (auto& t : threads) t.join();
    for (errc e : status) REQUIRE(e == errc::ok);
}

/// Every output of dst, in the order [B3][B2][N][M].
inline std::vector<double> outputs(const problem& p) {
    std::vector<double> v;
    v.reserve(static_cast<std::size_t>(p.M * p.N * p.B2 * p.B3));
    for (i64 i3 = 0; i3 < p.B3; ++i3)
        for (i64 i2 = 0; i2 < p.B2; ++i2)
            for (i64 n = 0; n < p.N; ++n)
                for (i64 m = 0; m < p.M; ++m) v.push_back(p.out(m, n, i2, i3));
    return v;
}

/// Per output (in outputs()' order): the product of the dequantized weights (core's
/// dequantizers) with b's columns as b_round_trip(column, out, K) leaves them (the
/// original values, or quantized and dequantized as the kernels quantize them), in double,
/// and sum |a * b|, which bounds the rounding error of any summation order.
struct reference {
    std::vector<double> value, magnitude;
};
template <class RoundTrip> reference reference_product(const problem& p, RoundTrip&& b_round_trip) {
    reference r;
    const auto count = static_cast<std::size_t>(p.M * p.N * p.B2 * p.B3);
    r.value.resize(count);
    r.magnitude.resize(count);
    const auto K = static_cast<std::size_t>(p.K);
    std::vector<float> arow(K), bcol(K);
    std::vector<std::byte> tmp(row_size(p.ta, p.K));
    for (i64 i3 = 0; i3 < p.B3; ++i3)
        for (i64 i2 = 0; i2 < p.B2; ++i2)
            for (i64 n = 0; n < p.N; ++n) {
                b_round_trip(p.bcol(n, i2, i3), bcol.data(), p.K);
                for (i64 m = 0; m < p.M; ++m) {
                    std::memcpy(tmp.data(), p.arow(m, i2, i3), tmp.size()); // the row may be misaligned
                    to_float_row(p.ta, tmp.data(), arow.data(), p.K);
                    double v = 0.0, mag = 0.0;
                    for (std::size_t k = 0; k < K; ++k) {
                        v += static_cast<double>(arow[k]) * bcol[k];
                        mag += std::fabs(static_cast<double>(arow[k]) * bcol[k]);
                    }
                    const auto idx = static_cast<std::size_t>(((i3 * p.B2 + i2) * p.N + n) * p.M + m);
                    r.value[idx] = v;
                    r.magnitude[idx] = mag;
                }
            }
    return r;
}

/// b as it is (for reference_product).
inline void b_as_is(const float* b, float* out, i64 K) {
    std::memcpy(out, b, static_cast<std::size_t>(K) * sizeof(float));
}

/// Normalised mean squared error; the denominator is at least 1e-3 of sum magnitude^2, so
/// that a few outputs that happen to cancel to near 0 do not make it meaningless.
inline double nmse(const reference& ref, const std::vector<double>& got) {
    double num = 0.0, den = 0.0, mag = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        num += (got[i] - ref.value[i]) * (got[i] - ref.value[i]);
        den += ref.value[i] * ref.value[i];
        mag += ref.magnitude[i] * ref.magnitude[i];
    }
    den = std::max(den, 1e-3 * mag);
    return den > 0.0 ? num / den : num;
}

/// The largest |got - want| / (sum |a * b| + tiny) over the outputs.
inline double worst_relative(const reference& want, const std::vector<double>& got) {
    double worst = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, std::fabs(got[i] - want.value[i]) / (want.magnitude[i] + 1e-30));
    return worst;
}

} // namespace quant_test_support

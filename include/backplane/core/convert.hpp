#pragma once
// Row conversions between f32 and every element type: the one place that maps a run-time
// elem_type to its quantizer and dequantizer (the reference ones of types.hpp, quants.hpp,
// kquants.hpp and iquants.hpp). n is the number of values; for a quantized type it must be a multiple
// of the type's block size, and the row must be aligned for its block (callers validate
// and copy unaligned blocks; these functions do not check on the hot path).

#include <backplane/core/error.hpp>
#include <backplane/core/iquants.hpp>
#include <backplane/core/iquants_search.hpp>
#include <backplane/core/kquants.hpp>
#include <backplane/core/quants.hpp>
#include <backplane/core/types.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace backplane {

static_assert(type_size(elem_type::q4_1) == sizeof(block_q4_1) && type_size(elem_type::q5_0) == sizeof(block_q5_0) &&
                  type_size(elem_type::q5_1) == sizeof(block_q5_1) &&
                  type_size(elem_type::iq4_nl) == sizeof(block_iq4_nl) &&
                  type_size(elem_type::mxfp4) == sizeof(block_mxfp4),
              "the type table follows quants.hpp's blocks");
static_assert(type_size(elem_type::q2_K) == sizeof(block_q2_K) && type_size(elem_type::q3_K) == sizeof(block_q3_K) &&
                  type_size(elem_type::q4_K) == sizeof(block_q4_K) && type_size(elem_type::q5_K) == sizeof(block_q5_K) &&
                  type_size(elem_type::q6_K) == sizeof(block_q6_K) && type_size(elem_type::q8_K) == sizeof(block_q8_K),
              "the type table follows kquants.hpp's blocks");
static_assert(type_size(elem_type::iq4_xs) == sizeof(block_iq4_xs) && type_size(elem_type::iq3_xxs) == sizeof(block_iq3_xxs) &&
                  type_size(elem_type::iq3_s) == sizeof(block_iq3_s) && type_size(elem_type::iq2_xxs) == sizeof(block_iq2_xxs) &&
                  type_size(elem_type::iq2_xs) == sizeof(block_iq2_xs) && type_size(elem_type::iq2_s) == sizeof(block_iq2_s) &&
                  type_size(elem_type::iq1_s) == sizeof(block_iq1_s) && type_size(elem_type::iq1_m) == sizeof(block_iq1_m) &&
                  type_size(elem_type::tq1_0) == sizeof(block_tq1_0) && type_size(elem_type::tq2_0) == sizeof(block_tq2_0),
              "the type table follows iquants.hpp's blocks");
static_assert(block_size(elem_type::q4_K) == qk_k && block_size(elem_type::q4_1) == qk_small && max_type_size == sizeof(block_q8_K));

namespace detail {
/// Calls f(block pointer) with x viewed as blocks of quantized type t's block struct.
template <class Ptr, class F> void visit_blocks(elem_type t, Ptr x, F&& f) noexcept {
    constexpr bool c = std::is_const_v<std::remove_pointer_t<Ptr>>;
    using raw = std::conditional_t<c, const void*, void*>;
    auto as = [&]<class B>() { f(static_cast<std::conditional_t<c, const B*, B*>>(static_cast<raw>(x))); };
    switch (t) {
    case elem_type::q8_0: as.template operator()<block_q8_0>(); break;
    case elem_type::q4_0: as.template operator()<block_q4_0>(); break;
    case elem_type::q4_1: as.template operator()<block_q4_1>(); break;
    case elem_type::q5_0: as.template operator()<block_q5_0>(); break;
    case elem_type::q5_1: as.template operator()<block_q5_1>(); break;
    case elem_type::q2_K: as.template operator()<block_q2_K>(); break;
    case elem_type::q3_K: as.template operator()<block_q3_K>(); break;
    case elem_type::q4_K: as.template operator()<block_q4_K>(); break;
    case elem_type::q5_K: as.template operator()<block_q5_K>(); break;
    case elem_type::q6_K: as.template operator()<block_q6_K>(); break;
    case elem_type::q8_K: as.template operator()<block_q8_K>(); break;
    case elem_type::iq4_nl: as.template operator()<block_iq4_nl>(); break;
    case elem_type::mxfp4: as.template operator()<block_mxfp4>(); break;
    case elem_type::iq4_xs: as.template operator()<block_iq4_xs>(); break;
    case elem_type::iq3_xxs: as.template operator()<block_iq3_xxs>(); break;
    case elem_type::iq3_s: as.template operator()<block_iq3_s>(); break;
    case elem_type::iq2_xxs: as.template operator()<block_iq2_xxs>(); break;
    case elem_type::iq2_xs: as.template operator()<block_iq2_xs>(); break;
    case elem_type::iq2_s: as.template operator()<block_iq2_s>(); break;
    case elem_type::iq1_s: as.template operator()<block_iq1_s>(); break;
    case elem_type::iq1_m: as.template operator()<block_iq1_m>(); break;
    case elem_type::tq1_0: as.template operator()<block_tq1_0>(); break;
    case elem_type::tq2_0: as.template operator()<block_tq2_0>(); break;
    default: break;
    }
}

inline void quantize_row(const float* x, block_q8_0* y, std::int64_t n) noexcept { quantize_row_q8_0(x, y, n); }
inline void quantize_row(const float* x, block_q4_0* y, std::int64_t n) noexcept { quantize_row_q4_0(x, y, n); }
inline void quantize_row(const float* x, block_q4_1* y, std::int64_t n) noexcept { quantize_row_q4_1(x, y, n); }
inline void quantize_row(const float* x, block_q5_0* y, std::int64_t n) noexcept { quantize_row_q5_0(x, y, n); }
inline void quantize_row(const float* x, block_q5_1* y, std::int64_t n) noexcept { quantize_row_q5_1(x, y, n); }
inline void quantize_row(const float* x, block_q2_K* y, std::int64_t n) noexcept { quantize_row_q2_K(x, y, n); }
inline void quantize_row(const float* x, block_q3_K* y, std::int64_t n) noexcept { quantize_row_q3_K(x, y, n); }
inline void quantize_row(const float* x, block_q4_K* y, std::int64_t n) noexcept { quantize_row_q4_K(x, y, n); }
inline void quantize_row(const float* x, block_q5_K* y, std::int64_t n) noexcept { quantize_row_q5_K(x, y, n); }
inline void quantize_row(const float* x, block_q6_K* y, std::int64_t n) noexcept { quantize_row_q6_K(x, y, n); }
inline void quantize_row(const float* x, block_q8_K* y, std::int64_t n) noexcept { quantize_row_q8_K(x, y, n); }
inline void quantize_row(const float* x, block_iq4_nl* y, std::int64_t n) noexcept { quantize_row_iq4_nl(x, y, n); }
inline void quantize_row(const float* x, block_mxfp4* y, std::int64_t n) noexcept { quantize_row_mxfp4(x, y, n); }
inline void quantize_row(const float* x, block_iq4_xs* y, std::int64_t n) noexcept { quantize_row_iq4_xs(x, y, n); }
inline void quantize_row(const float* x, block_tq1_0* y, std::int64_t n) noexcept { quantize_row_tq1_0(x, y, n); }
inline void quantize_row(const float* x, block_tq2_0* y, std::int64_t n) noexcept { quantize_row_tq2_0(x, y, n); }
/// The types f32 rows do not convert into (converts_from_float false): the op rules never
/// let a node write them, so this is never reached; it writes zero blocks, not garbage.
template <class Block> void quantize_row(const float*, Block* y, std::int64_t n) noexcept {
    std::memset(static_cast<void*>(y), 0, sizeof(Block) * static_cast<std::size_t>(n / qk_k));
}

inline void dequantize_row(const block_q8_0* x, float* y, std::int64_t n) noexcept { dequantize_row_q8_0(x, y, n); }
inline void dequantize_row(const block_q4_0* x, float* y, std::int64_t n) noexcept { dequantize_row_q4_0(x, y, n); }
inline void dequantize_row(const block_q4_1* x, float* y, std::int64_t n) noexcept { dequantize_row_q4_1(x, y, n); }
inline void dequantize_row(const block_q5_0* x, float* y, std::int64_t n) noexcept { dequantize_row_q5_0(x, y, n); }
inline void dequantize_row(const block_q5_1* x, float* y, std::int64_t n) noexcept { dequantize_row_q5_1(x, y, n); }
inline void dequantize_row(const block_q2_K* x, float* y, std::int64_t n) noexcept { dequantize_row_q2_K(x, y, n); }
inline void dequantize_row(const block_q3_K* x, float* y, std::int64_t n) noexcept { dequantize_row_q3_K(x, y, n); }
inline void dequantize_row(const block_q4_K* x, float* y, std::int64_t n) noexcept { dequantize_row_q4_K(x, y, n); }
inline void dequantize_row(const block_q5_K* x, float* y, std::int64_t n) noexcept { dequantize_row_q5_K(x, y, n); }
inline void dequantize_row(const block_q6_K* x, float* y, std::int64_t n) noexcept { dequantize_row_q6_K(x, y, n); }
inline void dequantize_row(const block_q8_K* x, float* y, std::int64_t n) noexcept { dequantize_row_q8_K(x, y, n); }
inline void dequantize_row(const block_iq4_nl* x, float* y, std::int64_t n) noexcept { dequantize_row_iq4_nl(x, y, n); }
inline void dequantize_row(const block_mxfp4* x, float* y, std::int64_t n) noexcept { dequantize_row_mxfp4(x, y, n); }
inline void dequantize_row(const block_iq4_xs* x, float* y, std::int64_t n) noexcept { dequantize_row_iq4_xs(x, y, n); }
inline void dequantize_row(const block_iq3_xxs* x, float* y, std::int64_t n) noexcept { dequantize_row_iq3_xxs(x, y, n); }
inline void dequantize_row(const block_iq3_s* x, float* y, std::int64_t n) noexcept { dequantize_row_iq3_s(x, y, n); }
inline void dequantize_row(const block_iq2_xxs* x, float* y, std::int64_t n) noexcept { dequantize_row_iq2_xxs(x, y, n); }
inline void dequantize_row(const block_iq2_xs* x, float* y, std::int64_t n) noexcept { dequantize_row_iq2_xs(x, y, n); }
inline void dequantize_row(const block_iq2_s* x, float* y, std::int64_t n) noexcept { dequantize_row_iq2_s(x, y, n); }
inline void dequantize_row(const block_iq1_s* x, float* y, std::int64_t n) noexcept { dequantize_row_iq1_s(x, y, n); }
inline void dequantize_row(const block_iq1_m* x, float* y, std::int64_t n) noexcept { dequantize_row_iq1_m(x, y, n); }
inline void dequantize_row(const block_tq1_0* x, float* y, std::int64_t n) noexcept { dequantize_row_tq1_0(x, y, n); }
inline void dequantize_row(const block_tq2_0* x, float* y, std::int64_t n) noexcept { dequantize_row_tq2_0(x, y, n); }
} // namespace detail

/// Converts a row of n f32 values to type t (floats rounded to nearest even, quantized
/// types by core's reference quantizers, i32 and i64 by truncation); t must convert from
/// float (converts_from_float: a type that does not gets zero blocks).
inline void from_float_row(elem_type t, const float* x, void* y, std::int64_t n) noexcept {
    switch (t) {
    case elem_type::f32: std::memcpy(y, x, static_cast<std::size_t>(n) * sizeof(float)); break;
    case elem_type::f16:
        for (std::int64_t i = 0; i < n; ++i) static_cast<f16_t*>(y)[i] = f32_to_f16(x[i]);
        break;
    case elem_type::bf16:
        for (std::int64_t i = 0; i < n; ++i) static_cast<bf16_t*>(y)[i] = f32_to_bf16(x[i]);
        break;
    case elem_type::i32:
        for (std::int64_t i = 0; i < n; ++i) static_cast<std::int32_t*>(y)[i] = static_cast<std::int32_t>(x[i]);
        break;
    case elem_type::i64: // by bytes: the row need not be aligned to 8
        for (std::int64_t i = 0; i < n; ++i) {
            const auto v = static_cast<std::int64_t>(x[i]);
            std::memcpy(static_cast<std::byte*>(y) + i * 8, &v, 8);
        }
        break;
    default: detail::visit_blocks(t, y, [&](auto* blocks) { detail::quantize_row(x, blocks, n); }); break;
    }
}

/// Why quantize_weights_row cannot write type t: empty when it can. ggml quantizes
/// iq2_xxs, iq2_xs and iq1_s only with an importance matrix (ggml_quantize_requires_imatrix).
constexpr std::string_view weights_quantizer_missing(elem_type t) noexcept {
    switch (t) {
    case elem_type::iq2_xxs:
    case elem_type::iq2_xs:
    case elem_type::iq1_s: return "ggml quantizes it only with an importance matrix";
    case elem_type::iq3_xxs: // grid searches for files (iquants_search.hpp)
    case elem_type::iq3_s:
    case elem_type::iq2_s:
    case elem_type::iq1_m: return {};
    default: return converts_from_float(t) ? std::string_view{} : "f32 does not convert into it";
    }
}

/// Converts a row of n f32 values to type t as a model file stores weights: the bytes
/// llama-quantize writes without an importance matrix (ggml's quantize_<type>). They are
/// from_float_row's but for these: iq4_nl searches its scale (quantize_row_iq4_nl_search),
/// q8_0 rounds a tie away from zero (quantize_row_q8_0_ties_away), and the lattice types
/// f32 does not convert into search their grids (iquants_search.hpp: quantize_row_iq3_xxs,
/// quantize_row_iq3_s, quantize_row_iq2_s, quantize_row_iq1_m). For writing files only: cpy and set_rows
/// convert with from_float_row, as ggml's CPU does. Throws backplane::error for a type it
/// cannot write (weights_quantizer_missing).
inline void quantize_weights_row(elem_type t, const float* x, void* y, std::int64_t n) {
    if (const std::string_view why = weights_quantizer_missing(t); !why.empty())
        throw error("cannot quantize weights to " + std::string(to_string(t)) + ": " + std::string(why));
    switch (t) {
    case elem_type::q8_0: quantize_row_q8_0_ties_away(x, static_cast<block_q8_0*>(y), n); break;
    case elem_type::iq4_nl: quantize_row_iq4_nl_search(x, static_cast<block_iq4_nl*>(y), n); break;
    case elem_type::iq3_xxs: quantize_row_iq3_xxs(x, static_cast<block_iq3_xxs*>(y), n); break;
    case elem_type::iq3_s: quantize_row_iq3_s(x, static_cast<block_iq3_s*>(y), n); break;
    case elem_type::iq2_s: quantize_row_iq2_s(x, static_cast<block_iq2_s*>(y), n); break;
    case elem_type::iq1_m: quantize_row_iq1_m(x, static_cast<block_iq1_m*>(y), n); break;
    default: from_float_row(t, x, y, n); break;
    }
}

/// Converts a row of n values of type t to f32.
inline void to_float_row(elem_type t, const void* x, float* y, std::int64_t n) noexcept {
    switch (t) {
    case elem_type::f32: std::memcpy(y, x, static_cast<std::size_t>(n) * sizeof(float)); break;
    case elem_type::f16:
        for (std::int64_t i = 0; i < n; ++i) y[i] = f16_to_f32(static_cast<const f16_t*>(x)[i]);
        break;
    case elem_type::bf16:
        for (std::int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(static_cast<const bf16_t*>(x)[i]);
        break;
    case elem_type::i32:
        for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<const std::int32_t*>(x)[i]);
        break;
    case elem_type::i64: // by bytes: the row need not be aligned to 8
        for (std::int64_t i = 0; i < n; ++i) {
            std::int64_t v;
            std::memcpy(&v, static_cast<const std::byte*>(x) + i * 8, 8);
            y[i] = static_cast<float>(v);
        }
        break;
    default: detail::visit_blocks(t, x, [&](const auto* blocks) { detail::dequantize_row(blocks, y, n); }); break;
    }
}

/// One block of quantized type t at p (any alignment) as block_size(t) f32 values.
inline void dequantize_block(elem_type t, const std::byte* p, float* out) noexcept {
    alignas(16) std::byte b[max_type_size];
    std::memcpy(b, p, type_size(t));
    to_float_row(t, b, out, block_size(t));
}
/// block_size(t) f32 values quantized into one block of type t at p (any alignment).
inline void quantize_block(elem_type t, const float* in, std::byte* p) noexcept {
    alignas(16) std::byte b[max_type_size];
    from_float_row(t, in, b, block_size(t));
    std::memcpy(p, b, type_size(t));
}

} // namespace backplane

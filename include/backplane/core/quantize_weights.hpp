#pragma once
// Rows of f32 converted as model files store weights (quantize_weights_row): the bytes
// llama-quantize writes without an importance matrix. Apart from convert.hpp, since only
// file writers need it: the grid search of iq3_xxs (iquants_search.hpp) stays out of the
// parse path of <backplane/backplane.hpp>.

#include <backplane/core/convert.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/iquants_search.hpp>
#include <backplane/core/types.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace backplane {

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

} // namespace backplane

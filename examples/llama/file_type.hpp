#pragma once
// The element type of each tensor of a written model: every matrix of one type (--wtype),
// or the per-tensor mix of one of llama.cpp's file types (--type), chosen by the rules
// llama.cpp's quantizer applies without an importance matrix:
//
//   file type  matrices  output (tied: token_embd)  more bits                 8 experts
//   q4_K_M     q4_K      q6_K                       attn_v, ffn_down: q6_K    attn_v, attn_k q8_0; attn_output q5_K
//   q5_K_M     q5_K      q6_K                       attn_v, ffn_down: q6_K    attn_v, attn_k q8_0
//   q6_K       q6_K      q6_K                                                 attn_v, attn_k q8_0
//   q8_0       q8_0      q8_0                                                 attn_v, attn_k q8_0
//   q4_0       q4_0      q6_K                                                 attn_v, attn_k q8_0
//   mxfp4      q8_0      q8_0                       (the experts: mxfp4)
//   iq4_xs     iq4_xs    q6_K                       ffn_down of layers i < n / 8: q5_K; attn_v q5_K with 4 or more
//                                                   query heads per key head; 8 experts: as q4_K_M
//   iq3_xxs    iq3_xxs   q5_K                       token_embd (untied) iq3_s; attn_q, attn_k iq2_s; attn_v q4_K
//                                                   with 4 or more query heads per key head, else iq3_s;
//                                                   attn_output iq3_s; ffn_down q4_K in layers i < n / 8, else
//                                                   q3_K; 8 experts: as q4_K_M
//
// "More bits" goes to layers i of n with i < n / 8, i >= 7n / 8 or (i - n / 8) % 3 == 2.
// The output takes q8_0 where its rows are not whole blocks of the file's base type. A
// K-quant whose rows are not a multiple of 256 falls back to a type of blocks of 32:
// q4_K to q5_0, q5_K to q5_1, q6_K to q8_0, q2_K and q3_K to q4_0; an i-quant of 256
// (iq4_xs, iq3_xxs, iq3_s, iq2_s) to iq4_nl. Vectors and the MoE router stay f32.
//
// llama.cpp's quantizer writes iq3_xxs files only with an importance matrix (it refuses
// iq3_xxs and iq2_s tensors without one), and then picks iq3_xxs for attn_v; its
// no-matrix rules above are what it would pick, and every type of them has a quantizer
// without a matrix in ggml, whose bytes backplane's are (core/quantize_weights.hpp). The
// iq2_xs file type is not written: ggml quantizes iq2_xs only with an importance matrix
// (ggml_quantize_requires_imatrix), and backplane has none to give it.

#include "weights.hpp"

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace llama {

/// A file type: a name and how its matrices are typed.
struct file_type {
    enum class mix { pure, k_mix, mxfp4_moe };
    std::string_view name;
    elem_type base = elem_type::q8_0;
    mix kind = mix::pure;
    bool more_bits = false; ///< attn_v and ffn_down of some layers in q6_K (the _M mixes)
};

/// llama.cpp's file types this example writes (besides every element type, pure).
inline constexpr std::array<file_type, 8> file_types{{
    {"q4_K_M", elem_type::q4_K, file_type::mix::k_mix, true},
    {"q5_K_M", elem_type::q5_K, file_type::mix::k_mix, true},
    {"q6_K", elem_type::q6_K, file_type::mix::k_mix, false},
    {"q8_0", elem_type::q8_0, file_type::mix::k_mix, false},
    {"q4_0", elem_type::q4_0, file_type::mix::k_mix, false},
    {"mxfp4", elem_type::mxfp4, file_type::mix::mxfp4_moe, false},
    {"iq4_xs", elem_type::iq4_xs, file_type::mix::k_mix, false},
    {"iq3_xxs", elem_type::iq3_xxs, file_type::mix::k_mix, false},
}};

/// The file type named s ("q4_K_M", ...).
inline std::optional<file_type> parse_file_type(std::string_view s) {
    for (const file_type& f : file_types)
        if (f.name == s)
            return f;
    return std::nullopt;
}

/// The file types' names, separated by ", ".
inline std::string file_type_names() {
    std::string names;
    for (const file_type& f : file_types)
        names += (names.empty() ? "" : ", ") + std::string(f.name);
    return names;
}

/// Every matrix of type t (--wtype).
constexpr file_type pure_type(elem_type t) noexcept { return {to_string(t), t, file_type::mix::pure, false}; }

namespace file_type_detail {

/// llama.cpp's layers that get more bits in the _M mixes.
constexpr bool more_bits(int i, int n) noexcept { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/// A type of blocks of 32 for a type of 256 whose rows (ne0 values) are not whole
/// super-blocks; f16 where those do not fit either.
constexpr elem_type fallback(elem_type t, std::int64_t ne0) noexcept {
    if (ne0 % block_size(t) == 0)
        return t;
    elem_type small = t;
    switch (t) {
    case elem_type::q4_K: small = elem_type::q5_0; break;
    case elem_type::q5_K: small = elem_type::q5_1; break;
    case elem_type::q6_K: small = elem_type::q8_0; break;
    case elem_type::q2_K:
    case elem_type::q3_K: small = elem_type::q4_0; break;
    case elem_type::iq4_xs:
    case elem_type::iq3_xxs:
    case elem_type::iq3_s:
    case elem_type::iq2_s: small = elem_type::iq4_nl; break;
    default: return t;
    }
    return ne0 % block_size(small) == 0 ? small : elem_type::f16;
}

inline bool named(const expected_tensor& e, std::string_view part) {
    return e.name.find(part) != std::string::npos;
}

/// The type of matrix e in a k_mix file (before the fallback).
inline elem_type k_mix_type(const file_type& f, const expected_tensor& e, const hparams& hp, bool output) {
    const bool iq3 = f.base == elem_type::iq3_xxs, iq4 = f.base == elem_type::iq4_xs;
    if (output) {
        if (e.ne[0] % block_size(f.base) != 0)
            return elem_type::q8_0;
        return f.base == elem_type::q8_0 ? elem_type::q8_0 : iq3 ? elem_type::q5_K : elem_type::q6_K;
    }
    if (e.kind == tensor_kind::embedding)
        return iq3 ? elem_type::iq3_s : f.base;
    const bool eight_experts = hp.tr().experts && hp.n_expert == 8;
    const bool gqa4 = hp.n_head_kv > 0 && hp.n_head / hp.n_head_kv >= 4;
    if (named(e, "attn_v.weight")) {
        if (eight_experts)
            return elem_type::q8_0;
        if (iq3)
            return gqa4 ? elem_type::q4_K : elem_type::iq3_s;
        if (iq4 && gqa4)
            return elem_type::q5_K;
        return f.more_bits && more_bits(e.layer, hp.n_layer) ? elem_type::q6_K : f.base;
    }
    if (named(e, "attn_k.weight"))
        return eight_experts ? elem_type::q8_0 : iq3 ? elem_type::iq2_s : f.base;
    if (named(e, "attn_q.weight"))
        return iq3 ? elem_type::iq2_s : f.base;
    if (named(e, "ffn_down")) {
        const bool first = e.layer < hp.n_layer / 8;
        if (iq3)
            return first ? elem_type::q4_K : elem_type::q3_K;
        if (iq4 && first)
            return elem_type::q5_K;
        return f.more_bits && more_bits(e.layer, hp.n_layer) ? elem_type::q6_K : f.base;
    }
    if (named(e, "attn_output.weight")) {
        if (eight_experts && (f.base == elem_type::q4_K || iq3 || iq4))
            return elem_type::q5_K;
        return iq3 && !eight_experts ? elem_type::iq3_s : f.base;
    }
    return f.base;
}

} // namespace file_type_detail

/// The type of tensor e of a model of hp written as file type f (`tied`: no output.weight,
/// so token_embd is typed as the output).
inline elem_type tensor_type(const file_type& f, const expected_tensor& e, const hparams& hp, bool tied) {
    using namespace file_type_detail;
    if (e.vector() || e.kind == tensor_kind::router)
        return elem_type::f32;
    if (f.kind == file_type::mix::pure)
        return f.base;
    const bool output = e.name == "output.weight" || (tied && e.kind == tensor_kind::embedding);
    if (f.kind == file_type::mix::mxfp4_moe)
        return !output && e.kind == tensor_kind::experts ? elem_type::mxfp4 : elem_type::q8_0;
    return fallback(k_mix_type(f, e, hp, output), e.ne[0]);
}

} // namespace llama

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
//
// "More bits" goes to layers i of n with i < n / 8, i >= 7n / 8 or (i - n / 8) % 3 == 2.
// The output takes q8_0 where its rows are not whole blocks of the file's base type. A
// K-quant whose rows are not a multiple of 256 falls back to a type of blocks of 32:
// q4_K to q5_0, q5_K to q5_1, q6_K to q8_0, q2_K and q3_K to q4_0. Vectors and the MoE
// router stay f32.

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
inline constexpr std::array<file_type, 6> file_types{{
    {"q4_K_M", elem_type::q4_K, file_type::mix::k_mix, true},
    {"q5_K_M", elem_type::q5_K, file_type::mix::k_mix, true},
    {"q6_K", elem_type::q6_K, file_type::mix::k_mix, false},
    {"q8_0", elem_type::q8_0, file_type::mix::k_mix, false},
    {"q4_0", elem_type::q4_0, file_type::mix::k_mix, false},
    {"mxfp4", elem_type::mxfp4, file_type::mix::mxfp4_moe, false},
}};

/// The file type named s ("q4_K_M", ...).
inline std::optional<file_type> parse_file_type(std::string_view s) {
    for (const file_type& f : file_types)
        if (f.name == s)
            return f;
    return std::nullopt;
}

/// Every matrix of type t (--wtype).
constexpr file_type pure_type(elem_type t) noexcept { return {to_string(t), t, file_type::mix::pure, false}; }

namespace file_type_detail {

/// llama.cpp's layers that get more bits in the _M mixes.
constexpr bool more_bits(int i, int n) noexcept { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/// A type of blocks of 32 for a K-quant whose rows (ne0 values) are not whole super-blocks.
constexpr elem_type fallback(elem_type t, std::int64_t ne0) noexcept {
    if (ne0 % block_size(t) == 0)
        return t;
    switch (t) {
    case elem_type::q4_K: return elem_type::q5_0;
    case elem_type::q5_K: return elem_type::q5_1;
    case elem_type::q6_K: return elem_type::q8_0;
    case elem_type::q2_K:
    case elem_type::q3_K: return elem_type::q4_0;
    default: return t;
    }
}

inline bool named(const expected_tensor& e, std::string_view part) {
    return e.name.find(part) != std::string::npos;
}

/// The type of matrix e in a k_mix file (before the fallback).
inline elem_type k_mix_type(const file_type& f, const expected_tensor& e, const hparams& hp, bool output) {
    if (output) {
        if (e.ne[0] % block_size(f.base) != 0)
            return elem_type::q8_0;
        return f.base == elem_type::q8_0 ? elem_type::q8_0 : elem_type::q6_K;
    }
    if (e.kind == tensor_kind::embedding)
        return f.base;
    const bool eight_experts = hp.tr().experts && hp.n_expert == 8;
    if (named(e, "attn_v.weight") || named(e, "attn_k.weight")) {
        if (eight_experts)
            return elem_type::q8_0;
        const bool v = named(e, "attn_v.weight");
        return v && f.more_bits && more_bits(e.layer, hp.n_layer) ? elem_type::q6_K : f.base;
    }
    if (named(e, "ffn_down"))
        return f.more_bits && more_bits(e.layer, hp.n_layer) ? elem_type::q6_K : f.base;
    if (named(e, "attn_output.weight") && eight_experts && f.base == elem_type::q4_K)
        return elem_type::q5_K;
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

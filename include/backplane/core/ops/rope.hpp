#pragma once
// Rotary position embedding: ggml's rope, rope_ext and rope_multi.

#include <backplane/core/ops/node.hpp>
#include <backplane/core/rope_functions.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <string>

namespace backplane {

/// ggml_rope_ext: rotates pairs of values of each row of a [head_dim, n_head, n_tokens,
/// ne3] (f32 or f16; the result has a's type and shape), pos an i32 vector of n_tokens
/// positions (the same for every i3), freq_factors null or an f32 vector of at least
/// n_dims / 2 values. Pair slot k (0 <= k < n_dims / 2) of a row of token t is rotated by
///
///   theta_extrap = pos[t] * freq_base^(-2k / n_dims) / freq_factors[k]   (1 without them)
///   theta_interp = freq_scale * theta_extrap
///   ext_factor == 0: theta = theta_interp, mscale = attn_factor
///   otherwise (YaRN): mix = ramp(k) * ext_factor, theta = theta_interp (1 - mix) +
///                     theta_extrap mix, mscale = attn_factor (1 + 0.1 log(1 / freq_scale))
///
/// where ramp(k) = 1 - clamp((k - low) / max(0.001, high - low), 0, 1) and [low, high] are
/// ggml_rope_yarn_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow). The
/// pair (x0, x1) becomes (x0 c - x1 s, x0 s + x1 c) with c = cos(theta) mscale, s =
/// sin(theta) mscale. rope_mode::normal pairs (x[2k], x[2k+1]), rope_mode::neox (x[k],
/// x[k + n_dims/2]); values past n_dims are copied unchanged. For the M-RoPE modes use
/// rope_multi.
///
/// Difference from ggml's CPU backend: the angle, its sine and cosine are computed in
/// double from pow(freq_base, -2k / n_dims), where ggml multiplies an f32 angle by an f32
/// freq_base^(-2 / n_dims) once per slot (core/rope_functions.hpp).
///
/// op_params slots (rope_fn::slot): 0 n_dims, 1 mode, 2 freq_base (f32), 3 freq_scale,
/// 4 n_ctx_orig (i32), 5 ext_factor, 6 attn_factor, 7 beta_fast, 8 beta_slow, 9..12
/// sections (i32, the M-RoPE modes; zero otherwise). ggml's n_past, n_ctx and n_offs are
/// not kept (they are 0 in every ggml builder but rope_set_offset).
inline tensor* rope_ext(context& ctx, tensor* a, tensor* pos, tensor* freq_factors, int n_dims, rope_mode mode,
                        int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                        float beta_fast, float beta_slow);

/// ggml_rope_multi: rope_ext with M-RoPE's four position streams. pos has 4 * n_tokens
/// values: t = pos[i2], h = pos[i2 + n_tokens], w = pos[i2 + 2 n_tokens], e = pos[i2 + 3
/// n_tokens]; sections (non-negative, one of the first three positive, adding up to at
/// most a.ne0) give each pair slot k its stream: with S their sum and sector = k mod S,
///   rope_mode::mrope: sector < s0: t, < s0+s1: h, < s0+s1+s2: w, else e; pairs as neox.
///   rope_mode::imrope (interleaved): sector % 3 == 1 and sector < 3 s1: h, else % 3 == 2
///     and < 3 s2: w, else % 3 == 0 and < 3 s0: t, else e; pairs as neox.
///   rope_mode::vision: streams as mrope, each section restarting its exponent (theta =
///     p * freq_base^(-2 (sector - section start) / n_dims)); pairs (x[k], x[k + n_dims])
///     for k < n_dims, n_dims = a.ne0 / 2, so every value is rotated.
/// The exponent of the frequency is k itself (not reset per section) except in vision
/// mode; freq_factors (at least n_pairs values: n_dims in vision mode) and YaRN apply
/// per slot k as in rope_ext.
inline tensor* rope_multi(context& ctx, tensor* a, tensor* pos, tensor* freq_factors, int n_dims,
                          const std::array<int, 4>& sections, rope_mode mode, int n_ctx_orig, float freq_base,
                          float freq_scale, float ext_factor, float attn_factor, float beta_fast, float beta_slow) {
    detail::require_tensor("rope", "a", a);
    detail::require_tensor("rope", "pos", pos);
    namespace slot = rope_fn::slot;
    tensor node = detail::proposed(op_kind::rope, a->type, a->ne, {a, pos, freq_factors});
    node.set_param(slot::n_dims, n_dims);
    node.set_param(slot::mode, static_cast<std::int32_t>(mode));
    node.set_param(slot::freq_base, freq_base);
    node.set_param(slot::freq_scale, freq_scale);
    node.set_param(slot::n_ctx_orig, n_ctx_orig);
    node.set_param(slot::ext_factor, ext_factor);
    node.set_param(slot::attn_factor, attn_factor);
    node.set_param(slot::beta_fast, beta_fast);
    node.set_param(slot::beta_slow, beta_slow);
    for (std::size_t i = 0; i < 4; ++i) node.set_param(slot::sections + i, static_cast<std::int32_t>(sections[i]));
    return detail::make_node(ctx, node, {{"a", a}, {"pos", pos}, {"freq_factors", freq_factors}});
}

inline tensor* rope_ext(context& ctx, tensor* a, tensor* pos, tensor* freq_factors, int n_dims, rope_mode mode,
                        int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                        float beta_fast, float beta_slow) {
    return rope_multi(ctx, a, pos, freq_factors, n_dims, {0, 0, 0, 0}, mode, n_ctx_orig, freq_base, freq_scale,
                      ext_factor, attn_factor, beta_fast, beta_slow);
}

/// Rotates pairs of the first n_dims values of each row of a [head_dim, n_head, n_tokens,
/// ne3] by pos[t] * freq_scale * freq_base^(-2i / n_dims) radians, pos an i32 vector of
/// n_tokens positions: rope_ext without frequency factors or YaRN (ext_factor 0,
/// attn_factor 1).
inline tensor* rope(context& ctx, tensor* a, tensor* pos, int n_dims, rope_mode mode = rope_mode::normal,
                    float freq_base = 10000.0f, float freq_scale = 1.0f) {
    return rope_ext(ctx, a, pos, nullptr, n_dims, mode, 0, freq_base, freq_scale, 0.0f, 1.0f, 0.0f, 0.0f);
}

} // namespace backplane

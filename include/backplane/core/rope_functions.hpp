#pragma once
// The formulas of rope (ggml_rope_ext, ggml_rope_multi), written once for the C++ kernels: the CPU reference kernels and the CUDA kernels call
// these functions (each is callable on the host and, under nvcc, on the device). Vulkan's
// shaders write the same formulas in GLSL (rope.comp).
//
// rope, per pair slot k of a row of token t (ggml's semantics, docs in core/ops/rope.hpp):
//   theta_extrap = p * freq_base^(-2 e / n_dims) / ff[k]     p: the position of k's stream,
//                                                          e: k, or k's offset in its
//                                                          section (vision)
//   theta_interp = freq_scale * theta_extrap
//   ext_factor == 0: theta = theta_interp, mscale = attn_factor
//   otherwise:       mix = ramp(k) * ext_factor, theta = theta_interp (1 - mix) + theta_extrap mix,
//                    mscale = attn_factor (1 + 0.1 log(1 / freq_scale))
//   the pair (x0, x1) becomes (x0 c - x1 s, x0 s + x1 c), c = cos(theta) mscale, s = sin(theta) mscale.
//
// Where this differs from ggml's CPU backend: ggml multiplies an f32 theta by an f32
// freq_base^(-2 / n_dims) once per slot (theta *= theta_scale) and takes f32 sines and
// cosines; here the angle, its sine and cosine are computed in double from
// pow(freq_base, -2 e / n_dims) (positions reach tens of thousands of radians, where ggml's
// f32 angle is already off by ~1e-3), then rounded to f32. YaRN's correction dims are
// ggml's, computed in f32 as ggml does (floor and ceil make them discontinuous).

#include <backplane/core/detail/host_device.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace backplane::rope_fn {

/// The op_params slots of a rope node (core/ops/rope.hpp).
namespace slot {
inline constexpr std::size_t n_dims = 0, mode = 1, freq_base = 2, freq_scale = 3, n_ctx_orig = 4, ext_factor = 5,
                             attn_factor = 6, beta_fast = 7, beta_slow = 8,
                             sections = 9; ///< sections[4]: slots 9 .. 12
} // namespace slot
inline constexpr int n_params = 13;

/// ggml's mode values (rope_mode).
inline constexpr int mode_normal = 0, mode_neox = 2, mode_mrope = 8, mode_vision = 24, mode_imrope = 40;

/// A rope node's parameters as the kernels read them.
struct params {
    int n_dims = 0;
    int mode = 0;
    double freq_base = 10000.0;
    double freq_scale = 1.0;
    double ext_factor = 0.0;
    double attn_factor = 1.0;
    float corr_low = 0.0f, corr_high = 0.0f; ///< YaRN's correction dims (yarn_corr_dims)
    int sections[4] = {0, 0, 0, 0};
};

/// YaRN's correction dims (ggml_rope_yarn_corr_dims), in f32 as ggml computes them.
inline void yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float& low,
                           float& high) noexcept {
    const float pi = 3.14159265358979323846f;
    const auto corr = [&](float r) {
        return static_cast<float>(n_dims) * std::log(static_cast<float>(n_ctx_orig) / (r * 2.0f * pi)) /
               (2.0f * std::log(freq_base));
    };
    const float start = std::floor(corr(beta_fast));
    const float end = std::ceil(corr(beta_slow));
    const auto last = static_cast<float>(n_dims - 1);
    low = 0.0f > start ? 0.0f : start; // ggml's MAX(0, start) and MIN(n_dims - 1, end)
    high = last < end ? last : end;
}

/// The parameters of rope node t, a tensor (on the host). A template so that this header
/// needs no tensor.hpp, which includes op_traits.hpp, which includes this header.
template <class Node> params params_of(const Node& t) noexcept {
    params c;
    c.n_dims = t.template param<std::int32_t>(slot::n_dims);
    c.mode = t.template param<std::int32_t>(slot::mode);
    c.freq_base = t.template param<float>(slot::freq_base);
    c.freq_scale = t.template param<float>(slot::freq_scale);
    c.ext_factor = t.template param<float>(slot::ext_factor);
    c.attn_factor = t.template param<float>(slot::attn_factor);
    for (std::size_t i = 0; i < 4; ++i) c.sections[i] = t.template param<std::int32_t>(slot::sections + i);
    yarn_corr_dims(c.n_dims, t.template param<std::int32_t>(slot::n_ctx_orig), t.template param<float>(slot::freq_base),
                   t.template param<float>(slot::beta_fast), t.template param<float>(slot::beta_slow), c.corr_low, c.corr_high);
    return c;
}

/// M-RoPE's modes (mrope, vision, imrope) have bit 3: four position streams.
BACKPLANE_HOST_DEVICE constexpr bool is_multi(int mode) { return (mode & 8) != 0; }

/// The pairs rotated in each row: n_dims / 2, or n_dims (= ne0 / 2) in vision mode.
BACKPLANE_HOST_DEVICE inline int n_pairs(const params& c) { return c.mode == mode_vision ? c.n_dims : c.n_dims / 2; }

/// The elements past the rotated ones start here (values there are copied unchanged).
BACKPLANE_HOST_DEVICE inline int rotated_end(const params& c) { return 2 * n_pairs(c); }

/// The elements (j0, j1) of pair slot k: normal (2k, 2k + 1); neox, mrope and imrope
/// (k, k + n_dims / 2); vision (k, k + n_dims).
BACKPLANE_HOST_DEVICE inline void pair_of(const params& c, int k, int& j0, int& j1) {
    if (c.mode == mode_normal) {
        j0 = 2 * k;
        j1 = 2 * k + 1;
    } else {
        j0 = k;
        j1 = k + (c.mode == mode_vision ? c.n_dims : c.n_dims / 2);
    }
}

/// The position stream (0 t, 1 h, 2 w, 3 e) of pair slot k, and in `exponent` the power
/// of freq_base^(-2 / n_dims) of its frequency: k, except in vision mode, where each
/// section restarts its stream (ggml_mrope_cache_init's indep_sects: stream x is reset
/// where the sector reaches x's first slot, the first of the sections that start there).
BACKPLANE_HOST_DEVICE inline int stream_of(const params& c, int k, int& exponent) {
    exponent = k;
    if (!is_multi(c.mode)) return 0;
    const int* s = c.sections;
    const int total = s[0] + s[1] + s[2] + s[3];
    const int sector = k % total;
    if (c.mode == mode_imrope) {
        if (sector % 3 == 1 && sector < 3 * s[1]) return 1;
        if (sector % 3 == 2 && sector < 3 * s[2]) return 2;
        if (sector % 3 == 0 && sector < 3 * s[0]) return 0;
        return 3;
    }
    const int start[4] = {0, s[0], s[0] + s[1], s[0] + s[1] + s[2]};
    int stream = 3;
    while (stream > 0 && sector < start[stream]) --stream;
    if (c.mode != mode_vision) return stream;
    // the stream restarts where its section starts, unless an earlier stream restarts at
    // the same sector or the sector is never reached
    const int r = start[stream];
    bool resets = r < total;
    for (int x = 0; x < stream; ++x) resets = resets && start[x] != r;
    if (resets) exponent = sector - r; // (the stream's sections start at or before the sector)
    return stream;
}

/// YaRN's ramp at slot k: 1 below the correction range, 0 above it.
BACKPLANE_HOST_DEVICE inline double yarn_ramp(const params& c, int k) {
    const double span = c.corr_high - c.corr_low;
    const double y = (static_cast<double>(k) - c.corr_low) / (span > 0.001 ? span : 0.001);
    return 1.0 - (y < 0.0 ? 0.0 : (y > 1.0 ? 1.0 : y));
}

/// cos(theta) * mscale and sin(theta) * mscale of pair slot k at position p, ff its
/// frequency factor (1 without), exponent from stream_of (see the file comment).
BACKPLANE_HOST_DEVICE inline void cos_sin(const params& c, double p, int k, int exponent, double ff, double& cs,
                                          double& sn) {
    const double theta_extrap =
        p * pow(c.freq_base, -2.0 * static_cast<double>(exponent) / static_cast<double>(c.n_dims)) / ff;
    const double theta_interp = c.freq_scale * theta_extrap;
    double theta = theta_interp;
    double mscale = c.attn_factor;
    if (c.ext_factor != 0.0) {
        const double mix = yarn_ramp(c, k) * c.ext_factor;
        theta = theta_interp * (1.0 - mix) + theta_extrap * mix;
        mscale *= 1.0 + 0.1 * log(1.0 / c.freq_scale);
    }
    cs = cos(theta) * mscale;
    sn = sin(theta) * mscale;
}

} // namespace backplane::rope_fn

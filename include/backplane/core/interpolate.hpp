#pragma once
// The formulas of upscale (ggml_upscale, ggml_upscale_ext, ggml_interpolate), written
// once for the C++ kernels: the CPU reference kernel and the CUDA kernel call these
// functions (each callable on the host and, under nvcc, on the device). Vulkan's
// interpolate.comp writes the same formulas in GLSL. Semantics at the builder
// (core/ops/image.hpp).
//
// Every coordinate is computed in f32 as ggml computes it, so a result element reads the
// same source elements as ggml's; the source is read through `at(i0, i1)`, a callable
// giving element (i0, i1) of the source plane, its indices always in range.

#include <backplane/core/detail/host_device.hpp>

#include <cstdint>

namespace backplane {

/// How upscale computes (ggml's ggml_scale_mode: the low byte of its op param).
enum class scale_mode : std::int32_t { nearest = 0, bilinear = 1, bicubic = 2 };
inline constexpr std::int32_t scale_mode_count = 3;

/// Flags over the mode (ggml's ggml_scale_flag).
inline constexpr std::uint32_t scale_align_corners = 1u << 8;
inline constexpr std::uint32_t scale_antialias = 1u << 9; ///< bilinear only

/// How an upscale node maps result coordinates to its source's (interpolation_of,
/// core/image_params.hpp).
struct interpolation {
    scale_mode mode = scale_mode::nearest;
    bool antialias = false;
    float sf[4] = {1.0f, 1.0f, 1.0f, 1.0f}; ///< per dimension: result extent / source extent, in f32
    float offset = 0.5f;                    ///< the pixel offset: 0.5, or 0 with aligned corners
};

} // namespace backplane

namespace backplane::interp {

/// ggml's bicubic convolution coefficient (PyTorch's).
inline constexpr float cubic_a = -0.75f;

BACKPLANE_HOST_DEVICE constexpr std::int64_t clamp_index(std::int64_t i, std::int64_t n) noexcept {
    return i < 0 ? 0 : i >= n ? n - 1 : i;
}

BACKPLANE_HOST_DEVICE constexpr float clamp01(float x) noexcept { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }

/// The f32 floor of x as an integer (x well inside the int64 range).
BACKPLANE_HOST_DEVICE constexpr std::int64_t floor_index(float x) noexcept {
    const auto t = static_cast<std::int64_t>(x);
    return static_cast<float>(t) > x ? t - 1 : t;
}

/// The source index that nearest takes for result index i along a dimension scaled by
/// sf: i / sf in f32, truncated (clamped to the source, which ggml's f32 quotient never
/// leaves).
BACKPLANE_HOST_DEVICE constexpr std::int64_t nearest(std::int64_t i, float sf, std::int64_t n) noexcept {
    return clamp_index(static_cast<std::int64_t>(static_cast<float>(i) / sf), n);
}

/// The source coordinate of result index i: (i + offset) / sf - offset, in f32.
BACKPLANE_HOST_DEVICE constexpr float coordinate(std::int64_t i, float sf, float offset) noexcept {
    return (static_cast<float>(i) + offset) / sf - offset;
}

/// Bilinear: the four neighbours of source point (x, y), clamped to the n0 x n1 plane,
/// weighted by the point's clamped distances, in ggml's order of operations.
template <class At>
BACKPLANE_HOST_DEVICE float bilinear(const At& at, float x, float y, std::int64_t n0, std::int64_t n1) noexcept {
    const std::int64_t x0 = clamp_index(floor_index(x), n0), x1 = clamp_index(floor_index(x) + 1, n0);
    const std::int64_t y0 = clamp_index(floor_index(y), n1), y1 = clamp_index(floor_index(y) + 1, n1);
    const float dx = clamp01(x - static_cast<float>(x0)), dy = clamp01(y - static_cast<float>(y0));
    return at(x0, y0) * (1 - dx) * (1 - dy) + at(x1, y0) * dx * (1 - dy) + at(x0, y1) * (1 - dx) * dy +
           at(x1, y1) * dx * dy;
}

/// The cubic convolution weight of a neighbour at distance x in [0, 1] ...
BACKPLANE_HOST_DEVICE constexpr float cubic_near(float x) noexcept {
    return ((cubic_a + 2) * x - (cubic_a + 3)) * x * x + 1;
}
/// ... and in [1, 2].
BACKPLANE_HOST_DEVICE constexpr float cubic_far(float x) noexcept {
    return ((cubic_a * x - 5 * cubic_a) * x + 8 * cubic_a) * x - 4 * cubic_a;
}
/// Four samples at -1, 0, 1, 2 interpolated at t in [0, 1).
BACKPLANE_HOST_DEVICE constexpr float cubic(float p0, float p1, float p2, float p3, float t) noexcept {
    return p0 * cubic_far(t + 1) + p1 * cubic_near(t) + p2 * cubic_near(1 - t) + p3 * cubic_far(2 - t);
}

/// Bicubic: the 4 x 4 neighbours of source point (x, y), clamped to the n0 x n1 plane,
/// interpolated along dimension 0, then the four results along dimension 1.
template <class At>
BACKPLANE_HOST_DEVICE float bicubic(const At& at, float x, float y, std::int64_t n0, std::int64_t n1) noexcept {
    const std::int64_t fx = floor_index(x), fy = floor_index(y);
    const float dx = x - static_cast<float>(fx), dy = y - static_cast<float>(fy);
    float rows[4];
    for (int r = 0; r < 4; ++r) {
        const std::int64_t sy = clamp_index(fy - 1 + r, n1);
        rows[r] = cubic(at(clamp_index(fx - 1, n0), sy), at(clamp_index(fx, n0), sy), at(clamp_index(fx + 1, n0), sy),
                        at(clamp_index(fx + 2, n0), sy), dx);
    }
    return cubic(rows[0], rows[1], rows[2], rows[3], dy);
}

/// The triangle filter of antialiased bilinear.
BACKPLANE_HOST_DEVICE constexpr float triangle(float x) noexcept {
    const float w = 1.0f - (x < 0.0f ? -x : x);
    return w > 0.0f ? w : 0.0f;
}

/// The antialiasing support of a dimension scaled by sf: at least one source cell, 1 / sf
/// when shrinking.
BACKPLANE_HOST_DEVICE constexpr float support(float sf) noexcept { return 1.0f / sf > 1.0f ? 1.0f / sf : 1.0f; }

/// Antialiased bilinear (PyTorch's antialias=True): the source cells within the support
/// of point (x, y) (x = (i + offset) / sf, without the trailing offset), weighted by
/// triangle filters, normalised by the weights' sum.
template <class At>
BACKPLANE_HOST_DEVICE float antialiased(const At& at, float x, float y, float sf0, float sf1, float offset,
                                        std::int64_t n0, std::int64_t n1) noexcept {
    const float s0 = support(sf0), s1 = support(sf1);
    const float inv0 = 1.0f / s0, inv1 = 1.0f / s1;
    const std::int64_t xa = static_cast<std::int64_t>(x - s0 + offset), xb = static_cast<std::int64_t>(x + s0 + offset);
    const std::int64_t ya = static_cast<std::int64_t>(y - s1 + offset), yb = static_cast<std::int64_t>(y + s1 + offset);
    float sum = 0.0f, total = 0.0f;
    for (std::int64_t sy = ya > 0 ? ya : 0; sy < (yb < n1 ? yb : n1); ++sy) {
        const float wy = triangle((static_cast<float>(sy) - y + offset) * inv1);
        for (std::int64_t sx = xa > 0 ? xa : 0; sx < (xb < n0 ? xb : n0); ++sx) {
            const float w = triangle((static_cast<float>(sx) - x + offset) * inv0) * wy;
            if (w <= 0.0f) continue;
            sum += at(sx, sy) * w;
            total += w;
        }
    }
    return total > 0.0f ? sum / total : sum;
}

/// Element (i0, i1) of a result plane computed from its source plane (n0 x n1 cells,
/// read through `at`) as m says.
template <class At>
BACKPLANE_HOST_DEVICE float sample(const interpolation& m, const At& at, std::int64_t i0, std::int64_t i1, std::int64_t n0,
                                   std::int64_t n1) noexcept {
    if (m.mode == scale_mode::nearest) return at(nearest(i0, m.sf[0], n0), nearest(i1, m.sf[1], n1));
    if (m.antialias) {
        const float x = (static_cast<float>(i0) + m.offset) / m.sf[0], y = (static_cast<float>(i1) + m.offset) / m.sf[1];
        return antialiased(at, x, y, m.sf[0], m.sf[1], m.offset, n0, n1);
    }
    const float x = coordinate(i0, m.sf[0], m.offset), y = coordinate(i1, m.sf[1], m.offset);
    return m.mode == scale_mode::bilinear ? bilinear(at, x, y, n0, n1) : bicubic(at, x, y, n0, n1);
}

} // namespace backplane::interp

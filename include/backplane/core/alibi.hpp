#pragma once
// ALiBi's per-head slopes (soft_max's max_bias), written once for the C++ kernels: the CPU
// reference and fast kernels and the CUDA kernels call alibi::slope (on the host and,
// under nvcc, on the device); Vulkan's soft_max.comp takes m0, m1 and n_head_log2 from
// the host (terms_of) and raises them as this does.

#include <backplane/core/detail/host_device.hpp>

#include <cmath>

namespace backplane::alibi {

/// What every head's slope is raised from: m0 for the first n_head_log2 heads (the
/// largest power of two not above n_head), m1 for the others.
struct terms {
    float m0, m1;
    unsigned n_head_log2;
};
BACKPLANE_HOST_DEVICE inline terms terms_of(float max_bias, int n_head) {
    unsigned n_head_log2 = 1;
    while (n_head_log2 * 2 <= static_cast<unsigned>(n_head)) n_head_log2 *= 2;
    return {powf(2.0f, -max_bias / static_cast<float>(n_head_log2)),
            powf(2.0f, -(max_bias / 2.0f) / static_cast<float>(n_head_log2)), n_head_log2};
}

/// ALiBi's slope of head h of n_head (ggml's soft_max and flash_attn_ext, in f32 as ggml):
/// 1 without a bias (max_bias <= 0).
BACKPLANE_HOST_DEVICE inline float slope(float max_bias, int n_head, int h) {
    if (!(max_bias > 0.0f)) return 1.0f;
    const terms t = terms_of(max_bias, n_head);
    const auto uh = static_cast<unsigned>(h);
    return uh < t.n_head_log2 ? powf(t.m0, static_cast<float>(uh + 1))
                              : powf(t.m1, static_cast<float>(2 * (uh - t.n_head_log2) + 1));
}

} // namespace backplane::alibi

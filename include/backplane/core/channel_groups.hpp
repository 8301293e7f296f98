#pragma once
// group_norm's groups of channels (dimension 2 of its source), as ggml cuts them: the
// one place every backend reads them from.

#include <cstdint>

namespace backplane {

/// n_groups groups of ceil(n_channels / n_groups) channels each, the last non-empty one
/// possibly shorter; groups past the channels (when n_groups does not divide them evenly
/// enough) hold nothing and are not counted.
struct channel_groups {
    std::int64_t size = 0;  ///< channels per group
    std::int64_t count = 0; ///< groups that hold at least one channel
    std::int64_t n_channels = 0;

    /// The first channel of group g and one past its last.
    [[nodiscard]] constexpr std::int64_t first(std::int64_t g) const noexcept { return g * size; }
    [[nodiscard]] constexpr std::int64_t end(std::int64_t g) const noexcept {
        return first(g) + size < n_channels ? first(g) + size : n_channels;
    }
};

/// The groups of n_channels channels cut into n_groups (at least 1).
constexpr channel_groups channel_groups_of(std::int64_t n_channels, std::int64_t n_groups) noexcept {
    channel_groups g;
    g.n_channels = n_channels;
    g.size = n_groups > 0 ? (n_channels + n_groups - 1) / n_groups : 0;
    g.count = g.size > 0 ? (n_channels + g.size - 1) / g.size : 0;
    return g;
}
static_assert(channel_groups_of(10, 4).size == 3 && channel_groups_of(10, 4).count == 4 && channel_groups_of(10, 4).end(3) == 10);
static_assert(channel_groups_of(9, 4).size == 3 && channel_groups_of(9, 4).count == 3, "a fourth group would be empty");
static_assert(channel_groups_of(3, 8).size == 1 && channel_groups_of(3, 8).count == 3);

} // namespace backplane

#pragma once
// Split states: how one tensor of a meta device is spread over the devices under it.
//
//   split along axis k   each device holds a slice of dimension k (its "local extent");
//                        the other dimensions whole
//   mirrored             every device holds the whole tensor, the same values
//   partial              every device holds the whole shape; the tensor is the sum of
//                        the devices' copies (what a matrix product split along its
//                        reduction dimension leaves behind)
//
// Segments. An axis split may cut dimension k into consecutive segments that are split
// separately: a fused QKV weight [n_embd, 3 n_embd] split along axis 1 in 3 segments
// gives every device a third of the Q, the K and the V rows, so that each device's
// slice is itself a (smaller) fused QKV matrix. sizes[s * n + d] is the extent of
// segment s on device d; a device's local tensor holds its pieces of segment 0, then
// segment 1, and so on.

#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace backplane::meta {

/// The most devices one meta device spans (a limit of the state's encoding, not of memory:
/// raise it freely).
inline constexpr int max_devices = 64;

enum class split_kind : std::uint8_t { axis, mirrored, partial };

/// How a tensor is spread over the n devices of a meta device (see the file comment).
class split_state {
public:
    /// Mirrored (the default state).
    split_state() = default;

    [[nodiscard]] static split_state mirrored() { return {}; }
    [[nodiscard]] static split_state partial() {
        split_state s;
        s.kind_ = split_kind::partial;
        return s;
    }

    /// Dimension `axis` of extent `extent` cut in `n_segments` equal segments, each spread
    /// over `n_devices` devices in multiples of `granule` (a head's size, a quantization
    /// block), as evenly as the granule allows: the first devices get one granule more.
    /// `weights` (one per device, positive) share each segment in proportion instead
    /// (for devices of different speed). Throws backplane::error when the extent is not a
    /// multiple of n_segments * granule or a device would get nothing.
    [[nodiscard]] static split_state even(int axis, std::int64_t extent, int n_devices, std::int64_t granule = 1,
                                          int n_segments = 1, std::span<const double> weights = {}) {
        check_axis(axis);
        if (n_devices < 1 || n_devices > max_devices)
            throw error("split_state: " + std::to_string(n_devices) + " devices (1 to " +
                        std::to_string(max_devices) + ")");
        if (granule < 1 || n_segments < 1 || extent < 1 || extent % (granule * n_segments) != 0)
            throw error("split_state: extent " + std::to_string(extent) + " is not a multiple of " +
                        std::to_string(n_segments) + " segments of granule " + std::to_string(granule));
        if (!weights.empty() && weights.size() != static_cast<std::size_t>(n_devices))
            throw error("split_state: " + std::to_string(weights.size()) + " weights for " +
                        std::to_string(n_devices) + " devices");
        const std::int64_t units = extent / n_segments / granule; // granules per segment
        if (units < n_devices)
            throw error("split_state: " + std::to_string(units) + " granules of " + std::to_string(granule) +
                        " per segment cannot feed " + std::to_string(n_devices) + " devices");
        std::vector<std::int64_t> per(static_cast<std::size_t>(n_devices), units / n_devices);
        if (weights.empty()) {
            for (std::int64_t d = 0; d < units % n_devices; ++d) ++per[static_cast<std::size_t>(d)];
        } else {
            double sum = 0;
            for (double w : weights) {
                if (!(w > 0)) throw error("split_state: weights must be positive");
                sum += w;
            }
            std::int64_t given = 0;
            for (std::size_t d = 0; d < per.size(); ++d) {
                per[d] = std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(units) * weights[d] / sum));
                given += per[d];
            }
            // hand out or take back the rounding difference, largest shares first
            for (std::size_t d = 0; given != units; d = (d + 1) % per.size()) {
                if (given < units) {
                    ++per[d];
                    ++given;
                } else if (per[d] > 1) {
                    --per[d];
                    --given;
                }
            }
        }
        std::vector<std::int64_t> sizes;
        sizes.reserve(static_cast<std::size_t>(n_segments * n_devices));
        for (int s = 0; s < n_segments; ++s)
            for (auto p : per) sizes.push_back(p * granule);
        return split(axis, n_devices, std::move(sizes));
    }

    /// Dimension `axis` split with explicit sizes: sizes[s * n_devices + d] is the extent
    /// of segment s on device d (one segment: one size per device). Throws
    /// backplane::error for an empty or ragged list, or a size below 1.
    [[nodiscard]] static split_state split(int axis, int n_devices, std::vector<std::int64_t> sizes) {
        check_axis(axis);
        if (n_devices < 1 || n_devices > max_devices)
            throw error("split_state: " + std::to_string(n_devices) + " devices (1 to " +
                        std::to_string(max_devices) + ")");
        if (sizes.empty() || sizes.size() % static_cast<std::size_t>(n_devices) != 0)
            throw error("split_state: " + std::to_string(sizes.size()) + " sizes are not whole segments of " +
                        std::to_string(n_devices) + " devices");
        for (auto v : sizes)
            if (v < 1) throw error("split_state: every device must hold at least 1 index of every segment");
        split_state s;
        s.kind_ = split_kind::axis;
        s.axis_ = axis;
        s.n_ = n_devices;
        s.sizes_ = std::move(sizes);
        return s;
    }

    [[nodiscard]] split_kind kind() const noexcept { return kind_; }
    [[nodiscard]] bool is_split() const noexcept { return kind_ == split_kind::axis; }
    [[nodiscard]] bool is_mirrored() const noexcept { return kind_ == split_kind::mirrored; }
    [[nodiscard]] bool is_partial() const noexcept { return kind_ == split_kind::partial; }
    /// The split dimension (-1 unless split).
    [[nodiscard]] int axis() const noexcept { return axis_; }
    [[nodiscard]] int n_devices() const noexcept { return n_; }
    [[nodiscard]] int n_segments() const noexcept {
        return n_ == 0 ? 0 : static_cast<int>(sizes_.size() / static_cast<std::size_t>(n_));
    }
    [[nodiscard]] const std::vector<std::int64_t>& sizes() const noexcept { return sizes_; }

    /// Extent of segment s on device d.
    [[nodiscard]] std::int64_t size(int s, int d) const noexcept { return sizes_[index(s, d)]; }
    /// Extent of segment s over all devices.
    [[nodiscard]] std::int64_t segment_extent(int s) const noexcept {
        std::int64_t e = 0;
        for (int d = 0; d < n_; ++d) e += size(s, d);
        return e;
    }
    /// Global index where segment s starts.
    [[nodiscard]] std::int64_t segment_start(int s) const noexcept {
        std::int64_t e = 0;
        for (int i = 0; i < s; ++i) e += segment_extent(i);
        return e;
    }
    /// Global index of device d's first index of segment s.
    [[nodiscard]] std::int64_t start(int s, int d) const noexcept {
        std::int64_t e = segment_start(s);
        for (int i = 0; i < d; ++i) e += size(s, i);
        return e;
    }
    /// Where device d's piece of segment s starts in d's local tensor.
    [[nodiscard]] std::int64_t local_start(int s, int d) const noexcept {
        std::int64_t e = 0;
        for (int i = 0; i < s; ++i) e += size(i, d);
        return e;
    }
    /// Extent of the split dimension on device d.
    [[nodiscard]] std::int64_t local_extent(int d) const noexcept { return local_start(n_segments(), d); }
    /// Extent of the split dimension over all devices.
    [[nodiscard]] std::int64_t extent() const noexcept {
        return std::accumulate(sizes_.begin(), sizes_.end(), std::int64_t{0});
    }

    /// The same split along another dimension with every size multiplied by num / den;
    /// nothing when this is no axis split or den does not divide a size.
    [[nodiscard]] std::optional<split_state> rescaled(int axis, std::int64_t num, std::int64_t den) const {
        if (!is_split() || num <= 0 || den <= 0) return std::nullopt;
        split_state s = *this;
        s.axis_ = axis;
        for (auto& v : s.sizes_) {
            if ((v * num) % den != 0) return std::nullopt;
            v = v * num / den;
        }
        return s;
    }
    /// Segments [first, last) only (the state of a view that selects them).
    [[nodiscard]] split_state segments(int first, int last, int axis) const {
        split_state s = *this;
        s.axis_ = axis;
        s.sizes_.assign(sizes_.begin() + static_cast<std::ptrdiff_t>(index(first, 0)),
                        sizes_.begin() + static_cast<std::ptrdiff_t>(index(last, 0)));
        return s;
    }

    /// The shape of device d's piece of a tensor of shape `ne` in this state.
    [[nodiscard]] std::array<std::int64_t, max_dims> local_shape(const std::array<std::int64_t, max_dims>& ne,
                                                                 int d) const noexcept {
        auto l = ne;
        if (is_split()) l[static_cast<std::size_t>(axis_)] = local_extent(d);
        return l;
    }

    /// "mirrored", "partial", "axis1 {256, 256}", "axis0 {3 x {64, 64}}".
    [[nodiscard]] std::string to_string() const {
        switch (kind_) {
        case split_kind::mirrored: return "mirrored";
        case split_kind::partial: return "partial";
        case split_kind::axis: break;
        }
        std::string s = "axis" + std::to_string(axis_) + " {";
        const int ns = n_segments();
        if (ns > 1) s += std::to_string(ns) + " x {";
        bool uniform = true;
        for (int seg = 1; seg < ns && uniform; ++seg)
            for (int d = 0; d < n_; ++d) uniform = uniform && size(seg, d) == size(0, d);
        for (int seg = 0; seg < (uniform ? 1 : ns); ++seg) {
            if (seg) s += "}, {";
            for (int d = 0; d < n_; ++d) {
                if (d) s += ", ";
                s += std::to_string(size(seg, d));
            }
        }
        s += ns > 1 ? "}}" : "}";
        return s;
    }

    /// Checks this state against a tensor of type `type` and extents `ne` on a meta device
    /// of n devices: the device count, the extent, whole quantization blocks along dim 0.
    /// The message names what is wrong.
    [[nodiscard]] status check(elem_type type, const std::array<std::int64_t, max_dims>& ne, int n) const {
        if (!is_split()) return {};
        if (n_ != n)
            return {errc::invalid_argument, "a split over " + std::to_string(n_) + " devices on a meta device of " +
                                                std::to_string(n)};
        if (extent() != ne[static_cast<std::size_t>(axis_)])
            return {errc::invalid_argument, "the sizes of " + to_string() + " add up to " + std::to_string(extent()) +
                                                ", not the extent " +
                                                std::to_string(ne[static_cast<std::size_t>(axis_)]) + " of dimension " +
                                                std::to_string(axis_)};
        if (axis_ == 0 && block_size(type) > 1)
            for (auto v : sizes_)
                if (v % block_size(type) != 0)
                    return {errc::invalid_argument, to_string() + " cuts " + std::string(backplane::to_string(type)) +
                                                        " blocks of " + std::to_string(block_size(type)) + " values"};
        return {};
    }

    friend bool operator==(const split_state&, const split_state&) = default;

private:
    static void check_axis(int axis) {
        if (axis < 0 || axis >= max_dims) throw error("split_state: axis " + std::to_string(axis) + " (0 to 3)");
    }
    [[nodiscard]] std::size_t index(int s, int d) const noexcept {
        return static_cast<std::size_t>(s) * static_cast<std::size_t>(n_) + static_cast<std::size_t>(d);
    }

    split_kind kind_ = split_kind::mirrored;
    int axis_ = -1;
    int n_ = 0;
    std::vector<std::int64_t> sizes_;
};

/// How to write a partial tensor from one full value (see meta_set_partial).
enum class partial_write : std::uint8_t {
    first_device, ///< the value on device 0, zeros on the others (any type)
    divide,       ///< value / n on every device (f32 only; exact for powers of two)
};

} // namespace backplane::meta

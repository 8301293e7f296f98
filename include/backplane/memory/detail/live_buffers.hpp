#pragma once
// Which buffers exist now, by serial (docs/lifetime.md).
//
// Every buffer takes a serial when it is made: a number never given twice in the process.
// A tensor records the serial of the buffer it was placed in, so the question "does my
// buffer still exist?" is answered here, without touching the buffer: its memory may be
// freed, or reused by another buffer at the same address.
//
// Serials only grow, so the set is a sorted vector: adding is a push_back, a question a
// binary search, removing an erase among the few buffers alive. One mutex: buffers are
// made and destroyed from any thread.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <span>
#include <vector>

namespace backplane::detail {

class live_buffers {
public:
    /// A new serial, now alive; 0 (never a serial) when host memory ran out.
    [[nodiscard]] std::uint64_t add() noexcept {
        const std::lock_guard lock(mutex_);
        try {
            serials_.push_back(last_ + 1);
        } catch (const std::bad_alloc&) {
            return 0;
        }
        return ++last_;
    }
    /// The buffer with this serial is gone.
    void remove(std::uint64_t serial) noexcept {
        const std::lock_guard lock(mutex_);
        const auto it = std::lower_bound(serials_.begin(), serials_.end(), serial);
        if (it != serials_.end() && *it == serial) serials_.erase(it);
    }
    /// True while the buffer with this serial exists (never for 0).
    [[nodiscard]] bool contains(std::uint64_t serial) const noexcept {
        const std::lock_guard lock(mutex_);
        return std::binary_search(serials_.begin(), serials_.end(), serial);
    }
    /// The index of the first serial of `serials` whose buffer is gone, or serials.size().
    /// One lock for all of them.
    [[nodiscard]] std::size_t first_dead(std::span<const std::uint64_t> serials) const noexcept {
        const std::lock_guard lock(mutex_);
        for (std::size_t i = 0; i < serials.size(); ++i)
            if (!std::binary_search(serials_.begin(), serials_.end(), serials[i])) return i;
        return serials.size();
    }

private:
    mutable std::mutex mutex_;
    std::uint64_t last_ = 0;
    std::vector<std::uint64_t> serials_; // sorted: serials are handed out in increasing order
};

/// The set this module's buffers register in. A program's own, made on first use and
/// never destroyed (buffers held by static objects may be destroyed after any other
/// static). In a backend plugin, the loader points it at the program's set before the
/// plugin makes anything (runtime/plugin.hpp), so that the program sees the plugin's
/// buffers alive: each module has its own copy of this function's statics.
inline live_buffers*& live_buffer_set() noexcept {
    alignas(live_buffers) static unsigned char storage[sizeof(live_buffers)];
    static live_buffers* set = new (storage) live_buffers();
    return set;
}

} // namespace backplane::detail

#pragma once
// The address planner behind the graph allocator: it hands out offsets in a set of
// chunks (one real buffer each, later) without touching any memory.
//
// Each chunk is a region [0, max_chunk) with a "top": everything at or above top is free
// and unlimited up to max_chunk, everything below is either in use or in a hole. Holes
// are kept sorted by address and merged with their neighbours on release, and a hole
// never touches top (it is absorbed instead), so fragmentation shows up only as holes.
// The chunk's peak (highest top ever) is what its real buffer must hold.
//
// Choosing a place for a block, in order:
//  1. the smallest hole that fits, over all chunks: reuses memory without growing
//     anything, and best fit keeps large holes for large tensors;
//  2. the top of an existing chunk, preferring one where the block ends below the peak
//     already reached (no growth; the tightest such fit), else the one that grows least,
//     so that memory is not spread over chunks needlessly;
//  3. a new chunk, when the block fits in no chunk without exceeding max_chunk.
// Unlike ggml there is no cap on holes or chunks: vectors grow, and they keep their
// capacity across reset() so that re-planning a graph allocates nothing.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <vector>

namespace backplane::detail {

class dynamic_allocator {
public:
    struct address {
        std::uint32_t chunk = 0;
        std::size_t offset = 0;
    };

    /// Forgets every block; chunks may hold at most `max_chunk` bytes.
    void reset(std::size_t max_chunk) noexcept {
        max_chunk_ = max_chunk;
        for (std::size_t i = 0; i < n_chunks_; ++i) {
            chunks_[i].holes.clear();
            chunks_[i].top = 0;
            chunks_[i].peak = 0;
        }
        n_chunks_ = 0;
    }

    [[nodiscard]] std::size_t max_chunk() const noexcept { return max_chunk_; }
    [[nodiscard]] std::size_t n_chunks() const noexcept { return n_chunks_; }
    /// Bytes chunk i's buffer must hold for every block placed so far.
    [[nodiscard]] std::size_t peak(std::size_t i) const noexcept { return chunks_[i].peak; }

    /// Places a block of `size` bytes (0 < size <= max_chunk(), already aligned).
    address allocate(std::size_t size) {
        // 1. best fit among holes
        std::size_t best_chunk = npos, best_hole = 0, best_size = std::numeric_limits<std::size_t>::max();
        for (std::size_t c = 0; c < n_chunks_ && best_size != size; ++c) {
            const auto& holes = chunks_[c].holes;
            for (std::size_t h = 0; h < holes.size(); ++h) {
                if (holes[h].size >= size && holes[h].size < best_size) {
                    best_chunk = c;
                    best_hole = h;
                    best_size = holes[h].size;
                    if (best_size == size) break; // cannot do better than exact
                }
            }
        }
        if (best_chunk != npos) {
            auto& holes = chunks_[best_chunk].holes;
            hole& h = holes[best_hole];
            const address a{static_cast<std::uint32_t>(best_chunk), h.offset};
            if (h.size == size) {
                holes.erase(holes.begin() + static_cast<std::ptrdiff_t>(best_hole));
            } else {
                h.offset += size;
                h.size -= size;
            }
            return a;
        }

        // 2. the top of a chunk: no growth first (tightest), else the least growth
        std::size_t pick = npos, pick_growth = 0, pick_slack = 0;
        for (std::size_t c = 0; c < n_chunks_; ++c) {
            const chunk& ch = chunks_[c];
            if (max_chunk_ - ch.top < size) continue;
            const std::size_t end = ch.top + size;
            const std::size_t growth = end > ch.peak ? end - ch.peak : 0;
            const std::size_t slack = ch.peak > end ? ch.peak - end : 0;
            if (pick == npos || growth < pick_growth || (growth == pick_growth && slack < pick_slack)) {
                pick = c;
                pick_growth = growth;
                pick_slack = slack;
            }
        }
        if (pick != npos) return take_top(pick, size);

        // 3. a new chunk
        if (n_chunks_ == chunks_.size()) chunks_.emplace_back();
        return take_top(n_chunks_++, size);
    }

    /// Returns a block placed by allocate() (or the tail of one: any aligned sub-range
    /// that ends where the block ended).
    void release(address a, std::size_t size) {
        chunk& ch = chunks_[a.chunk];
        auto& holes = ch.holes;
        if (a.offset + size == ch.top) {
            ch.top = a.offset;
            if (!holes.empty() && holes.back().offset + holes.back().size == ch.top) {
                ch.top = holes.back().offset;
                holes.pop_back();
            }
            return;
        }
        auto next = std::lower_bound(holes.begin(), holes.end(), a.offset,
                                     [](const hole& h, std::size_t off) { return h.offset < off; });
        const bool join_next = next != holes.end() && a.offset + size == next->offset;
        const bool join_prev = next != holes.begin() && std::prev(next)->offset + std::prev(next)->size == a.offset;
        if (join_prev && join_next) {
            std::prev(next)->size += size + next->size;
            holes.erase(next);
        } else if (join_prev) {
            std::prev(next)->size += size;
        } else if (join_next) {
            next->offset = a.offset;
            next->size += size;
        } else {
            holes.insert(next, hole{a.offset, size});
        }
    }

private:
    static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();

    struct hole {
        std::size_t offset;
        std::size_t size;
    };
    struct chunk {
        std::vector<hole> holes; // sorted by offset, none adjacent to another or to top
        std::size_t top = 0;
        std::size_t peak = 0;
    };

    address take_top(std::size_t c, std::size_t size) noexcept {
        chunk& ch = chunks_[c];
        const address a{static_cast<std::uint32_t>(c), ch.top};
        ch.top += size;
        ch.peak = std::max(ch.peak, ch.top);
        return a;
    }

    std::vector<chunk> chunks_; // chunks_[n_chunks_..] are spares kept for their capacity
    std::size_t n_chunks_ = 0;
    std::size_t max_chunk_ = std::numeric_limits<std::size_t>::max();
};

} // namespace backplane::detail

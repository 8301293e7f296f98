#pragma once
// A map from tensor addresses to small integer ids.
//
// Graphs number their tensors with it as they are built, and the graph allocator numbers the tensors of each graph it sees (a "slot" per tensor) and
// then works on plain vectors indexed by slot. Building that numbering is on the hot path
// (the scheduler allocates a ~1000-node graph every step), so this is an open-addressing
// table with linear probing instead of std::unordered_map: one flat array, no node
// allocations, and clear() in O(1) by bumping a generation stamp instead of touching
// every entry. The array only grows, so after the first few graphs no call allocates.

#include <backplane/core/tensor.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace backplane::detail {

class tensor_map {
public:
    static constexpr std::uint32_t npos = 0xffffffffu;

    /// Forgets every entry and makes room for at least `n` entries without rehashing.
    void clear(std::size_t n) {
        if (++generation_ == 0) { // stamps wrapped after 2^32 clears: wipe them for real
            for (auto& e : entries_) e.generation = 0;
            generation_ = 1;
        }
        size_ = 0;
        const std::size_t want = capacity_for(n);
        if (want > entries_.size()) {
            entries_.assign(want, entry{});
            mask_ = want - 1;
        }
    }

    /// The id of `t`, or npos.
    [[nodiscard]] std::uint32_t find(const tensor* t) const noexcept {
        if (entries_.empty()) return npos;
        for (std::size_t i = home(t);; i = (i + 1) & mask_) {
            const entry& e = entries_[i];
            if (e.generation != generation_) return npos;
            if (e.key == t) return e.id;
        }
    }

    /// Inserts t -> id unless t is present; returns the id t has afterwards.
    std::uint32_t insert(const tensor* t, std::uint32_t id) {
        entry& e = slot(t, id);
        return e.id;
    }

    /// Sets t's id (inserting t when absent).
    void assign(const tensor* t, std::uint32_t id) { slot(t, id).id = id; }

    [[nodiscard]] bool contains(const tensor* t) const noexcept { return find(t) != npos; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }

private:
    struct entry {
        const tensor* key = nullptr;
        std::uint32_t id = 0;
        std::uint32_t generation = 0; // live only when equal to the map's generation
    };

    static std::size_t capacity_for(std::size_t n) noexcept {
        return std::bit_ceil(std::max<std::size_t>(16, n * 2)); // load factor <= 1/2
    }

    // t's entry, made with `id` when t is absent
    entry& slot(const tensor* t, std::uint32_t id) {
        if ((size_ + 1) * 2 > entries_.size()) grow();
        for (std::size_t i = home(t);; i = (i + 1) & mask_) {
            entry& e = entries_[i];
            if (e.generation != generation_) {
                e = entry{t, id, generation_};
                ++size_;
                return e;
            }
            if (e.key == t) return e;
        }
    }

    std::size_t home(const tensor* t) const noexcept {
        // Fibonacci hashing: tensors sit a few hundred bytes apart in their context, so the
        // low address bits carry little information; the multiply spreads the rest.
        const auto a = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(t));
        return static_cast<std::size_t>((a * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
    }

    void grow() {
        std::vector<entry> old;
        old.swap(entries_);
        const std::uint32_t old_generation = generation_;
        entries_.assign(capacity_for(old.size() + 1), entry{});
        mask_ = entries_.size() - 1;
        generation_ = 1;
        size_ = 0;
        for (const entry& e : old)
            if (e.generation == old_generation) insert(e.key, e.id);
    }

    std::vector<entry> entries_;
    std::size_t mask_ = 0;
    std::size_t size_ = 0;
    std::uint32_t generation_ = 0;
};

} // namespace backplane::detail

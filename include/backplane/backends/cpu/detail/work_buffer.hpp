#pragma once
// The scratch memory that the threads of a node share (compute_params::wdata): one
// aligned block that only grows, so that a backend or a plan computing the same graphs
// again allocates nothing.

#include <backplane/core/error.hpp>

#include <cstddef>
#include <memory>
#include <new>
#include <string>
#include <utility>

namespace backplane::cpu::detail {

class work_buffer {
public:
    /// Alignment of the block: a cache line, and enough for any vector load.
    static constexpr std::size_t alignment = 64;

    work_buffer() = default;
    // A moved-from buffer is empty (size 0), not a size without a block.
    work_buffer(work_buffer&& o) noexcept : block_(std::move(o.block_)), size_(std::exchange(o.size_, 0)) {}
    work_buffer& operator=(work_buffer&& o) noexcept {
        block_ = std::move(o.block_);
        size_ = std::exchange(o.size_, 0);
        return *this;
    }

    /// Makes the block at least n bytes (its contents are not kept when it grows).
    /// Out of memory is a status, and the old block stays.
    [[nodiscard]] status reserve(std::size_t n) noexcept {
        if (n <= size_) return {};
        auto* p = static_cast<std::byte*>(::operator new(n, std::align_val_t{alignment}, std::nothrow));
        if (p == nullptr)
            return {errc::alloc_failed, "cpu: cannot allocate a work buffer of " + std::to_string(n) + " bytes"};
        block_.reset(p);
        size_ = n;
        return {};
    }
    [[nodiscard]] std::byte* data() const noexcept { return block_.get(); }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }

private:
    struct release {
        void operator()(std::byte* p) const noexcept { ::operator delete(p, std::align_val_t{alignment}); }
    };
    std::unique_ptr<std::byte, release> block_;
    std::size_t size_ = 0;
};

} // namespace backplane::cpu::detail

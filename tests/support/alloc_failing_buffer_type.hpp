#pragma once
// A host buffer type for allocator tests: configurable alignment, max_size and padding,
// counts its allocations and the buffers alive, and can fail a chosen allocation.
//
//     backplane::test::failing_buffer_type bt({.alignment = 256, .max_size = 4096});
//     bt.fail_at(2);                 // the 2nd allocation from now fails (alloc_failed)
//     ...run an allocator...
//     CHECK(bt.live_buffers() == 0); // nothing leaked
//
// live_buffers() proves "nothing leaks" in every build; the asan preset's LeakSanitizer
// proves it again for the memory itself.

#include <backplane/core/concepts.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <string_view>
#include <utility>

namespace backplane::test {

class failing_buffer_type {
public:
    struct options {
        std::size_t alignment = 64;                                         ///< a power of two
        std::size_t max_size = std::numeric_limits<std::size_t>::max() / 2; ///< largest buffer
        std::size_t extra_bytes = 0; ///< alloc_size = nbytes + extra_bytes (device-style padding)
        std::string_view name = "failing";
    };

    /// Host memory that reports its death to its buffer type.
    class buffer_t {
    public:
        buffer_t(buffer_t&& o) noexcept
            : owner_(std::exchange(o.owner_, nullptr)), mem_(std::exchange(o.mem_, nullptr)),
              size_(std::exchange(o.size_, 0)) {}
        buffer_t& operator=(buffer_t&&) = delete;
        buffer_t(const buffer_t&) = delete;
        buffer_t& operator=(const buffer_t&) = delete;
        ~buffer_t() {
            if (owner_ == nullptr) return; // moved from
            ::operator delete[](mem_, std::align_val_t{owner_->opts_.alignment});
            --owner_->live_buffers_;
            owner_->live_bytes_ -= size_;
        }

        [[nodiscard]] void* base() const noexcept { return mem_; }
        [[nodiscard]] std::size_t size() const noexcept { return size_; }

        status set_tensor(tensor& t, const void* src, std::size_t offset, std::size_t size) {
            std::memcpy(static_cast<std::byte*>(t.data) + offset, src, size);
            return {};
        }
        status get_tensor(const tensor& t, void* dst, std::size_t offset, std::size_t size) {
            std::memcpy(dst, static_cast<const std::byte*>(t.data) + offset, size);
            return {};
        }
        status memset_tensor(tensor& t, std::uint8_t value, std::size_t offset, std::size_t size) {
            std::memset(static_cast<std::byte*>(t.data) + offset, value, size);
            return {};
        }
        status clear(std::uint8_t value) {
            if (size_ != 0) std::memset(mem_, value, size_);
            return {};
        }
        /// Counts the tensors placed, so tests can see that allocators call it.
        status init_tensor(tensor&) {
            ++owner_->init_calls_;
            return {};
        }

    private:
        friend class failing_buffer_type;
        buffer_t(const failing_buffer_type* owner, void* mem, std::size_t size) noexcept
            : owner_(owner), mem_(mem), size_(size) {}

        const failing_buffer_type* owner_;
        void* mem_;
        std::size_t size_;
    };

    failing_buffer_type() : failing_buffer_type(options{}) {}
    explicit failing_buffer_type(options o) : opts_(o) {}
    failing_buffer_type(const failing_buffer_type&) = delete; // identity is the address
    failing_buffer_type& operator=(const failing_buffer_type&) = delete;

    [[nodiscard]] std::string_view name() const noexcept { return opts_.name; }
    [[nodiscard]] std::size_t alignment() const noexcept { return opts_.alignment; }
    [[nodiscard]] std::size_t max_size() const noexcept { return opts_.max_size; }
    [[nodiscard]] std::size_t alloc_size(const tensor& t) const noexcept { return t.nbytes() + opts_.extra_bytes; }
    [[nodiscard]] bool is_host() const noexcept { return true; }

    [[nodiscard]] result<buffer_t> allocate(std::size_t size) const {
        ++attempts_;
        if (fail_at_ != 0 && attempts_ - armed_at_ == fail_at_)
            return status(errc::alloc_failed,
                          "failing buffer type: allocation " + std::to_string(fail_at_) + " fails on purpose", 7);
        if (size > opts_.max_size)
            return status(errc::alloc_failed,
                          "failing buffer type: " + std::to_string(size) + " bytes exceed max_size");
        void* p = ::operator new[](size == 0 ? 1 : size, std::align_val_t{opts_.alignment}, std::nothrow);
        if (p == nullptr) return status(errc::alloc_failed, "failing buffer type: out of host memory");
        ++live_buffers_;
        live_bytes_ += size;
        ++successes_;
        return buffer_t(this, p, size);
    }

    /// The n-th allocation from now fails (1-based); 0 disarms.
    void fail_at(std::size_t n) const noexcept {
        fail_at_ = n;
        armed_at_ = attempts_;
    }
    /// Allocation calls so far (failed ones included).
    [[nodiscard]] std::size_t attempts() const noexcept { return attempts_; }
    /// Successful allocations so far.
    [[nodiscard]] std::size_t successes() const noexcept { return successes_; }
    [[nodiscard]] std::size_t live_buffers() const noexcept { return live_buffers_; }
    [[nodiscard]] std::size_t live_bytes() const noexcept { return live_bytes_; }
    [[nodiscard]] std::size_t init_calls() const noexcept { return init_calls_; }

private:
    options opts_;
    // mutable: buffer types are used through const references (allocate is const)
    mutable std::size_t attempts_ = 0;
    mutable std::size_t successes_ = 0;
    mutable std::size_t fail_at_ = 0;
    mutable std::size_t armed_at_ = 0;
    mutable std::size_t live_buffers_ = 0;
    mutable std::size_t live_bytes_ = 0;
    mutable std::size_t init_calls_ = 0;
};

static_assert(buffer<failing_buffer_type::buffer_t>);
static_assert(tensor_init_buffer<failing_buffer_type::buffer_t>);
static_assert(buffer_type<failing_buffer_type>);

} // namespace backplane::test

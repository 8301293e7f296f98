#pragma once
// Host memory: the buffer type of the CPU backend, and buffers that wrap user memory.
//
// Alignment is 64 bytes: one cache line, and the width of an AVX-512 register, so that
// vector kernels can use aligned loads on every tensor that starts a row.

#include <backplane/core/concepts.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <string_view>
#include <utility>

namespace backplane {

/// Alignment of tensor data in host buffers.
inline constexpr std::size_t host_alignment = 64;

/// A block of host memory, owned (allocated by a host buffer type) or borrowed (wrapping
/// a user pointer; the user keeps it alive).
class host_buffer {
public:
    /// Gives back an owned block of `bytes` bytes that did not come from the CPU buffer
    /// type (memory/host_memory.hpp: huge pages, a NUMA node, high-bandwidth memory).
    using release_fn = void (*)(void* mem, std::size_t bytes) noexcept;

    /// Borrows [ptr, ptr + size).
    static host_buffer from_ptr(void* ptr, std::size_t size) noexcept { return host_buffer(ptr, size, false); }
    /// Owns [mem, mem + size), a block of `bytes` >= size bytes that release(mem, bytes)
    /// gives back.
    static host_buffer adopt(void* mem, std::size_t size, std::size_t bytes, release_fn release) noexcept {
        host_buffer b(mem, size, true);
        b.bytes_ = bytes;
        b.release_ = release;
        return b;
    }

    host_buffer(host_buffer&& o) noexcept
        : mem_(std::exchange(o.mem_, nullptr)), size_(std::exchange(o.size_, 0)), owned_(o.owned_),
          bytes_(o.bytes_), release_(o.release_) {}
    host_buffer& operator=(host_buffer&& o) noexcept {
        if (this != &o) {
            release();
            mem_ = std::exchange(o.mem_, nullptr);
            size_ = std::exchange(o.size_, 0);
            owned_ = o.owned_;
            bytes_ = o.bytes_;
            release_ = o.release_;
        }
        return *this;
    }
    host_buffer(const host_buffer&) = delete;
    host_buffer& operator=(const host_buffer&) = delete;
    ~host_buffer() { release(); }

    [[nodiscard]] void* base() const noexcept { return mem_; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] bool owned() const noexcept { return owned_; }

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
        if (size_) std::memset(mem_, value, size_);
        return {};
    }
    /// Copies from any host-addressable tensor (src->data is a host pointer).
    bool copy_tensor(const tensor& src, tensor& dst);

private:
    friend class cpu_buffer_type;
    host_buffer(void* mem, std::size_t size, bool owned) noexcept : mem_(mem), size_(size), owned_(owned) {}
    void release() noexcept {
        if (owned_ && mem_) {
            if (release_ != nullptr)
                release_(mem_, bytes_);
            else
                ::operator delete[](mem_, std::align_val_t{host_alignment});
        }
        mem_ = nullptr;
    }

    void* mem_ = nullptr;
    std::size_t size_ = 0;
    bool owned_ = false;
    std::size_t bytes_ = 0;          ///< the block's size, for release_
    release_fn release_ = nullptr;   ///< null: the CPU buffer type's operator new[]
};

/// The CPU (host) buffer type: aligned host memory, allocation failure reported as a status.
class cpu_buffer_type {
public:
    using buffer_t = host_buffer;
    static constexpr bool host_memory = true;

    /// The process-wide instance (buffer types are identified by address).
    static const cpu_buffer_type& instance() noexcept {
        static const cpu_buffer_type bt;
        return bt;
    }

    [[nodiscard]] std::string_view name() const noexcept { return "CPU"; }
    /// cpu_device's name (the BLAS device computes in this memory too, but it is the CPU's).
    [[nodiscard]] std::string_view device_name() const noexcept { return "CPU"; }
    [[nodiscard]] std::size_t alignment() const noexcept { return host_alignment; }
    [[nodiscard]] std::size_t max_size() const noexcept { return std::numeric_limits<std::size_t>::max() / 2; }
    [[nodiscard]] std::size_t alloc_size(const tensor& t) const noexcept { return t.nbytes(); }
    [[nodiscard]] bool is_host() const noexcept { return true; }

    [[nodiscard]] result<host_buffer> allocate(std::size_t size) const {
        // a zero-size buffer still gets a distinct, aligned address
        const std::size_t bytes = (std::max<std::size_t>(size, 1) + host_alignment - 1) & ~(host_alignment - 1);
        if (bytes < size) return status(errc::alloc_failed, "host buffer: size " + std::to_string(size) + " overflows");
        void* p = ::operator new[](bytes, std::align_val_t{host_alignment}, std::nothrow);
        if (p == nullptr)
            return status(errc::alloc_failed, "host buffer: out of host memory allocating " + std::to_string(size) +
                                                  " bytes");
        return host_buffer(p, size, true);
    }
};

inline bool host_buffer::copy_tensor(const tensor& src, tensor& dst) {
    // the source must be host memory: context data (no buffer) or a host buffer
    if (src.data == nullptr || (src.buffer != nullptr && !src.buffer->is_host())) return false;
    if (!src.is_contiguous() || !dst.is_contiguous() || src.nbytes() != dst.nbytes()) return false;
    std::memcpy(dst.data, src.data, src.nbytes());
    return true;
}

static_assert(buffer<host_buffer>);
static_assert(copy_buffer<host_buffer>);
static_assert(buffer_type<cpu_buffer_type>);
static_assert(host_buffer_type<cpu_buffer_type>);
static_assert(device_buffer_type<cpu_buffer_type>);

} // namespace backplane

#pragma once
// Memory of the CUDA backend, host code only (any translation unit may include it):
//
//   cuda_buffer_type       device memory of one device (cudaMalloc), one object per device:
//                          cuda_buffer_type::of(index)
//   cuda_host_buffer_type  pinned host memory (cudaMallocHost): host memory the CPU reads
//                          and writes in place and every device transfers from at full speed
//   cuda_registered_buffer user memory pinned in place (cudaHostRegister): what a device's
//                          buffer_from_host_ptr returns
//
// Every CUDA failure is a status naming the device, the size and the runtime's error
// (out of memory is errc::alloc_failed; no driver is errc::not_supported); nothing
// aborts. Freeing a buffer (device or pinned host memory, or unpinning user memory)
// first waits for the work queued on every device (cuda::detail::wait_for_devices), so
// memory freed while a compute or a transfer using it is still queued is never freed
// under the device. Device buffers copy device-side from other CUDA device buffers (the same
// device, or a peer through cudaMemcpyPeer, which the runtime stages through the host when
// the two devices cannot reach each other) and from host memory.

#include <backplane/backends/cuda/runtime.hpp>
#include <backplane/core/concepts.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace backplane {

class cuda_buffer_type;

/// Device memory of one CUDA device.
class cuda_buffer {
public:
    cuda_buffer(cuda_buffer&& o) noexcept
        : bt_(o.bt_), device_(o.device_), ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    cuda_buffer& operator=(cuda_buffer&& o) noexcept {
        if (this != &o) {
            release();
            bt_ = o.bt_;
            device_ = o.device_;
            ptr_ = std::exchange(o.ptr_, nullptr);
            size_ = std::exchange(o.size_, 0);
        }
        return *this;
    }
    cuda_buffer(const cuda_buffer&) = delete;
    cuda_buffer& operator=(const cuda_buffer&) = delete;
    ~cuda_buffer() { release(); }

    /// The device address (unified addressing: unique in the process).
    [[nodiscard]] void* base() const noexcept { return ptr_; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] int device() const noexcept { return device_; }
    [[nodiscard]] const cuda_buffer_type& buffer_type() const noexcept { return *bt_; }

    status set_tensor(tensor& t, const void* src, std::size_t offset, std::size_t size) {
        if (auto s = select("writing tensor '" + t.name + "'"); !s) return s;
        return cuda::detail::check("writing tensor '" + t.name + "'",
                                   cudaMemcpy(static_cast<std::byte*>(t.data) + offset, src, size, cudaMemcpyHostToDevice));
    }
    status get_tensor(const tensor& t, void* dst, std::size_t offset, std::size_t size) {
        if (auto s = select("reading tensor '" + t.name + "'"); !s) return s;
        return cuda::detail::check("reading tensor '" + t.name + "'",
                                   cudaMemcpy(dst, static_cast<const std::byte*>(t.data) + offset, size, cudaMemcpyDeviceToHost));
    }
    status memset_tensor(tensor& t, std::uint8_t value, std::size_t offset, std::size_t size) {
        if (auto s = select("filling tensor '" + t.name + "'"); !s) return s;
        return cuda::detail::check("filling tensor '" + t.name + "'",
                                   cudaMemset(static_cast<std::byte*>(t.data) + offset, value, size));
    }
    status clear(std::uint8_t value) {
        if (size_ == 0) return {};
        if (auto s = select("clearing a buffer"); !s) return s;
        return cuda::detail::check("clearing a buffer", cudaMemset(ptr_, value, size_));
    }
    /// Copies a whole contiguous tensor into dst (in this buffer) from another CUDA device
    /// buffer (device-side; between devices through cudaMemcpyPeer) or from host memory;
    /// false for anything else (the generic layer then stages through the host).
    inline bool copy_tensor(const tensor& src, tensor& dst);

private:
    friend class cuda_buffer_type;
    cuda_buffer(const cuda_buffer_type* bt, int device, void* ptr, std::size_t size) noexcept
        : bt_(bt), device_(device), ptr_(ptr), size_(size) {}

    status select(const std::string& what) const {
        return cuda::detail::check(what + " on device " + std::to_string(device_), cudaSetDevice(device_));
    }
    void release() noexcept {
        if (ptr_ == nullptr) return;
        cuda::detail::wait_for_devices(); // queued work of any device may still use it (file comment)
        int current = -1;
        const bool restore = cudaGetDevice(&current) == cudaSuccess && current != device_;
        (void)cudaSetDevice(device_);
        (void)cudaFree(ptr_); // an error here (a lost device) cannot be reported; the memory is gone with it
        if (restore) (void)cudaSetDevice(current);
        ptr_ = nullptr;
    }

    const cuda_buffer_type* bt_;
    int device_;
    void* ptr_;
    std::size_t size_;
};

/// Device memory of one CUDA device: one object per device, cuda_buffer_type::of(index).
class cuda_buffer_type {
public:
    using buffer_t = cuda_buffer;
    /// What cudaMalloc guarantees, and what the kernels' vector loads need.
    static constexpr std::size_t default_alignment = 256;

    /// The buffer type of device `index`; errc::not_supported without a driver,
    /// errc::invalid_argument for a device that does not exist.
    [[nodiscard]] static result<const cuda_buffer_type*> of(int index) {
        if (const cuda_buffer_type* t = registry().find(index)) return t; // the driver is asked once per device
        auto devs = cuda::physical_devices();
        if (!devs) return devs.error();
        if (index < 0 || static_cast<std::size_t>(index) >= devs->size())
            return status(errc::invalid_argument, "cuda: no device " + std::to_string(index) + " (the driver reports " +
                                                      std::to_string(devs->size()) + ")");
        return of((*devs)[static_cast<std::size_t>(index)]);
    }

    /// The buffer type of the device the driver described as p (no driver call).
    [[nodiscard]] static const cuda_buffer_type* of(const cuda::physical_device_info& p) {
        return registry().get(p.index, p.total_memory);
    }

    [[nodiscard]] std::string_view name() const noexcept { return name_; }
    [[nodiscard]] std::size_t alignment() const noexcept { return default_alignment; }
    [[nodiscard]] std::size_t max_size() const noexcept { return max_size_; }
    [[nodiscard]] std::size_t alloc_size(const tensor& t) const noexcept { return t.nbytes(); }
    [[nodiscard]] bool is_host() const noexcept { return false; }
    [[nodiscard]] int device() const noexcept { return device_; }
    /// cuda_device's name ("CUDA<index>", which is this type's name too).
    [[nodiscard]] std::string_view device_name() const noexcept { return name_; }

    /// A buffer of `size` bytes (at least one) of the device's memory.
    [[nodiscard]] result<cuda_buffer> allocate(std::size_t size) const {
        const std::string what = "allocating " + std::to_string(size) + " bytes on device " + std::to_string(device_);
        if (auto s = cuda::detail::check(what, cudaSetDevice(device_)); !s) return s;
        void* p = nullptr;
        if (const cudaError_t e = cudaMalloc(&p, size == 0 ? 1 : size); e != cudaSuccess) {
            (void)cudaGetLastError(); // out of memory is not sticky
            return cuda::detail::fail(what, e);
        }
        return cuda_buffer(this, device_, p, size);
    }

    /// Use of(index). (Public for the container that holds the process-wide objects.)
    cuda_buffer_type(int device, std::size_t max_size)
        : device_(device), max_size_(max_size), name_("CUDA" + std::to_string(device)) {}

private:
    /// The process-wide objects, one per device (stable addresses: buffer types are
    /// identified by them).
    struct table {
        std::mutex m;
        std::deque<cuda_buffer_type> types;
        const cuda_buffer_type* find(int index) {
            std::lock_guard lk(m);
            for (const auto& t : types)
                if (t.device_ == index) return &t;
            return nullptr;
        }
        const cuda_buffer_type* get(int index, std::size_t total_memory) {
            std::lock_guard lk(m);
            for (const auto& t : types)
                if (t.device_ == index) return &t;
            return &types.emplace_back(index, total_memory);
        }
    };
    static table& registry() {
        static table t;
        return t;
    }

    int device_;
    std::size_t max_size_;
    std::string name_;
};

inline bool cuda_buffer::copy_tensor(const tensor& src, tensor& dst) {
    if (src.data == nullptr || !src.is_contiguous() || !dst.is_contiguous() || src.nbytes() != dst.nbytes()) return false;
    const std::size_t n = src.nbytes();
    if (!select("copying a tensor")) return false;
    if (src.buffer == nullptr || src.buffer->is_host()) // host memory: an upload
        return cudaMemcpy(dst.data, src.data, n, cudaMemcpyHostToDevice) == cudaSuccess;
    buffer_handle* sb = src.buffer;
    cuda_buffer* from = sb->get_if<cuda_buffer>();
    if (from == nullptr) return false;
    if (from->device_ == device_) return cudaMemcpy(dst.data, src.data, n, cudaMemcpyDeviceToDevice) == cudaSuccess;
    return cudaMemcpyPeer(dst.data, device_, src.data, from->device_, n) == cudaSuccess;
}

// ---------------------------------------------------------------------------------------
// pinned host memory

/// Pinned host memory (cudaMallocHost), or user memory pinned in place
/// (cudaHostRegister): host memory the CPU uses directly.
class cuda_host_buffer {
public:
    cuda_host_buffer(cuda_host_buffer&& o) noexcept
        : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)), registered_(o.registered_) {}
    cuda_host_buffer& operator=(cuda_host_buffer&& o) noexcept {
        if (this != &o) {
            release();
            ptr_ = std::exchange(o.ptr_, nullptr);
            size_ = std::exchange(o.size_, 0);
            registered_ = o.registered_;
        }
        return *this;
    }
    cuda_host_buffer(const cuda_host_buffer&) = delete;
    cuda_host_buffer& operator=(const cuda_host_buffer&) = delete;
    ~cuda_host_buffer() { release(); }

    /// Pins [ptr, ptr + size) of user memory in place (the user keeps it alive; it is
    /// unpinned when the buffer goes).
    [[nodiscard]] static result<cuda_host_buffer> register_memory(void* ptr, std::size_t size) {
        if (ptr == nullptr || size == 0)
            return status(errc::invalid_argument, "cuda: buffer_from_host_ptr: null pointer or zero size");
        if (const cudaError_t e = cudaHostRegister(ptr, size, cudaHostRegisterDefault); e != cudaSuccess) {
            (void)cudaGetLastError();
            return cuda::detail::fail("pinning " + std::to_string(size) + " bytes of host memory", e);
        }
        return cuda_host_buffer(ptr, size, true);
    }

    [[nodiscard]] void* base() const noexcept { return ptr_; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] bool registered() const noexcept { return registered_; }

    // host memory: the CPU's own accessors, on a borrowed view of it
    status set_tensor(tensor& t, const void* src, std::size_t offset, std::size_t size) {
        return view().set_tensor(t, src, offset, size);
    }
    status get_tensor(const tensor& t, void* dst, std::size_t offset, std::size_t size) {
        return view().get_tensor(t, dst, offset, size);
    }
    status memset_tensor(tensor& t, std::uint8_t value, std::size_t offset, std::size_t size) {
        return view().memset_tensor(t, value, offset, size);
    }
    status clear(std::uint8_t value) { return view().clear(value); }

private:
    friend class cuda_host_buffer_type;
    cuda_host_buffer(void* p, std::size_t size, bool registered) noexcept : ptr_(p), size_(size), registered_(registered) {}
    [[nodiscard]] host_buffer view() const noexcept { return host_buffer::from_ptr(ptr_, size_); }
    void release() noexcept {
        if (ptr_ == nullptr) return;
        cuda::detail::wait_for_devices(); // any device may still transfer from or to it (file comment)
        if (registered_)
            (void)cudaHostUnregister(ptr_);
        else
            (void)cudaFreeHost(ptr_);
        ptr_ = nullptr;
    }

    void* ptr_;
    std::size_t size_;
    bool registered_;
};

/// Pinned host memory for fast transfers to and from every CUDA device (one process-wide
/// object: cuda_host_buffer_type::instance()).
class cuda_host_buffer_type {
public:
    using buffer_t = cuda_host_buffer;
    static constexpr bool host_memory = true;

    [[nodiscard]] static const cuda_host_buffer_type& instance() noexcept {
        static const cuda_host_buffer_type bt;
        return bt;
    }

    [[nodiscard]] std::string_view name() const noexcept { return "CUDA_Host"; }
    /// Every CUDA device transfers from it; it is named after device 0, as ggml's is.
    [[nodiscard]] std::string_view device_name() const noexcept { return "CUDA0"; }
    [[nodiscard]] std::size_t alignment() const noexcept { return host_alignment; }
    [[nodiscard]] std::size_t max_size() const noexcept { return std::numeric_limits<std::size_t>::max() / 2; }
    [[nodiscard]] std::size_t alloc_size(const tensor& t) const noexcept { return t.nbytes(); }
    [[nodiscard]] bool is_host() const noexcept { return true; }

    [[nodiscard]] result<cuda_host_buffer> allocate(std::size_t size) const {
        void* p = nullptr;
        if (const cudaError_t e = cudaMallocHost(&p, size == 0 ? 1 : size); e != cudaSuccess) {
            (void)cudaGetLastError();
            return cuda::detail::fail("allocating " + std::to_string(size) + " bytes of pinned host memory", e);
        }
        return cuda_host_buffer(p, size, false);
    }
};

static_assert(buffer<cuda_buffer>);
static_assert(copy_buffer<cuda_buffer>);
static_assert(buffer_type<cuda_buffer_type>);
static_assert(buffer<cuda_host_buffer>);
static_assert(host_buffer_type<cuda_host_buffer_type>);
static_assert(device_buffer_type<cuda_buffer_type>);
static_assert(device_buffer_type<cuda_host_buffer_type>);

} // namespace backplane

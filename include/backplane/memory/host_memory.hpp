#pragma once
// Host memory of particular kinds, as buffer types the CPU backend computes in (its
// supports_buffer_type takes every host buffer type):
//
//   hugepage_buffer_type::instance()  "CPU_HUGEPAGE": 2 MiB pages, so that streaming a
//       model's weights walks 512 times fewer TLB entries. Reserved huge pages
//       (mmap MAP_HUGETLB, vm.nr_hugepages) when there are enough, else transparent
//       huge pages asked for with madvise(MADV_HUGEPAGE) on a 2 MiB-aligned mapping.
//   numa_buffer_type::node(n)         "CPU_NUMA<n>": memory bound to NUMA node n
//       (libnuma's numa_alloc_onnode), so that the threads of that node read it locally.
//   hbm_buffer_type::instance()       "CPU_HBM": high-bandwidth memory (the MCDRAM of a
//       Xeon Phi, the HBM of a Xeon Max) through memkind's hbwmalloc, as ggml's CPU_HBM.
//
//   auto bufs = alloc_tensors(ctx, hugepage_buffer_type::instance());  // or a status
//
// Each allocation that cannot be made as asked is a status, never a silent fallback to
// ordinary memory: errc::not_supported when the machine or the system lacks the kind
// (transparent huge pages disabled and none reserved, no libnuma or no NUMA support, no
// libmemkind or no high-bandwidth memory), errc::invalid_argument for a node that does
// not exist, errc::alloc_failed when the kind exists but is exhausted. libnuma
// (libnuma1) and libmemkind (libmemkind0) are loaded at run time when first used, so a
// program links neither and runs without them.
//
// Not part of <backplane/backplane.hpp>: include this header where these buffer types
// are used.

#include <backplane/core/concepts.hpp>
#include <backplane/core/error.hpp>
#include <backplane/memory/host_buffer.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>

#if defined(__linux__)
#include <dlfcn.h>
#include <sys/mman.h>
#endif

namespace backplane {

namespace detail {

/// What the special host buffer types share: host memory of the CPU device, 64-byte
/// aligned, one byte per byte of tensor.
struct special_host_memory {
    static constexpr bool host_memory = true;
    [[nodiscard]] std::string_view device_name() const noexcept { return "CPU"; }
    [[nodiscard]] std::size_t alignment() const noexcept { return host_alignment; }
    [[nodiscard]] std::size_t max_size() const noexcept { return std::numeric_limits<std::size_t>::max() / 4; }
    [[nodiscard]] std::size_t alloc_size(const tensor& t) const noexcept { return t.nbytes(); }
    [[nodiscard]] bool is_host() const noexcept { return true; }
};

/// size rounded up to a multiple of unit (a power of two), at least one unit; 0 when
/// that overflows.
[[nodiscard]] inline std::size_t round_up_bytes(std::size_t size, std::size_t unit) noexcept {
    const std::size_t s = size == 0 ? 1 : size;
    return s > std::numeric_limits<std::size_t>::max() - unit ? 0 : (s + unit - 1) & ~(unit - 1);
}

/// A library loaded at run time (dlopen), or why not.
struct loaded_library {
    void* handle = nullptr;
    std::string error;
    explicit loaded_library(std::initializer_list<const char*> names) {
#if defined(__linux__)
        for (const char* n : names)
            if ((handle = ::dlopen(n, RTLD_NOW | RTLD_LOCAL)) != nullptr) return;
        const char* e = ::dlerror();
        error = e != nullptr ? e : "not found";
#else
        (void)names;
        error = "loading libraries at run time is not supported on this system";
#endif
    }
    template <class F> [[nodiscard]] F symbol(const char* name) const noexcept {
#if defined(__linux__)
        return handle != nullptr ? reinterpret_cast<F>(::dlsym(handle, name)) : nullptr;
#else
        (void)name;
        return nullptr;
#endif
    }
    // never dlclose'd: buffers may outlive any owner of the handle
};

/// The first line of a small system file ("" when it cannot be read).
inline std::string read_first_line(const char* path) {
    std::ifstream f(path);
    std::string line;
    std::getline(f, line);
    return line;
}

} // namespace detail

// -- huge pages ----------------------------------------------------------------------------

/// "CPU_HUGEPAGE": host memory in 2 MiB pages (see the header comment).
class hugepage_buffer_type : public detail::special_host_memory {
public:
    using buffer_t = host_buffer;
    static constexpr std::size_t page_bytes = std::size_t{2} << 20;

    static const hugepage_buffer_type& instance() noexcept {
        static const hugepage_buffer_type bt;
        return bt;
    }
    [[nodiscard]] std::string_view name() const noexcept { return "CPU_HUGEPAGE"; }

    /// Whether transparent huge pages can be asked for (the kernel's setting is not
    /// "never"), from /sys/kernel/mm/transparent_hugepage/enabled.
    [[nodiscard]] static bool transparent_available() {
        const std::string s = detail::read_first_line("/sys/kernel/mm/transparent_hugepage/enabled");
        return !s.empty() && s.find("[never]") == std::string::npos;
    }

    [[nodiscard]] result<host_buffer> allocate(std::size_t size) const {
#if defined(__linux__)
        const std::size_t bytes = detail::round_up_bytes(size, page_bytes);
        if (bytes == 0 || bytes > max_size())
            return status(errc::alloc_failed, "CPU_HUGEPAGE: size " + std::to_string(size) + " is too large");
        // reserved huge pages first: they need no luck with fragmentation
        void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
        if (p != MAP_FAILED) return host_buffer::adopt(p, size, bytes, &unmap);
        return transparent(size, bytes);
#else
        (void)size;
        return status(errc::not_supported, "CPU_HUGEPAGE: huge pages are only supported on Linux");
#endif
    }

private:
#if defined(__linux__)
    static void unmap(void* p, std::size_t bytes) noexcept { ::munmap(p, bytes); }

    /// A 2 MiB-aligned anonymous mapping with MADV_HUGEPAGE: the page faults then place
    /// huge pages where the kernel has them.
    [[nodiscard]] static result<host_buffer> transparent(std::size_t size, std::size_t bytes) {
        if (!transparent_available())
            return status(errc::not_supported,
                          "CPU_HUGEPAGE: no huge pages: none reserved for " + std::to_string(bytes) +
                              " bytes (vm.nr_hugepages) and transparent huge pages are disabled "
                              "(/sys/kernel/mm/transparent_hugepage/enabled)");
        void* raw = ::mmap(nullptr, bytes + page_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED)
            return status(errc::alloc_failed, "CPU_HUGEPAGE: out of memory mapping " + std::to_string(bytes) + " bytes");
        // trim the mapping to the aligned block inside it
        const auto start = reinterpret_cast<std::uintptr_t>(raw);
        const std::uintptr_t aligned = (start + page_bytes - 1) & ~(std::uintptr_t{page_bytes} - 1);
        if (aligned > start) ::munmap(raw, aligned - start);
        const std::uintptr_t end = start + bytes + page_bytes;
        if (end > aligned + bytes) ::munmap(reinterpret_cast<void*>(aligned + bytes), end - (aligned + bytes));
        void* p = reinterpret_cast<void*>(aligned);
        if (::madvise(p, bytes, MADV_HUGEPAGE) != 0) {
            ::munmap(p, bytes);
            return status(errc::not_supported, "CPU_HUGEPAGE: the kernel refused transparent huge pages "
                                               "(madvise MADV_HUGEPAGE)");
        }
        return host_buffer::adopt(p, size, bytes, &unmap);
    }
#endif
};

// -- NUMA nodes ----------------------------------------------------------------------------

/// "CPU_NUMA<n>": host memory bound to one NUMA node, through libnuma (see the header
/// comment).
class numa_buffer_type : public detail::special_host_memory {
public:
    using buffer_t = host_buffer;
    /// Nodes numa_buffer_type::node() has an instance for.
    static constexpr int max_nodes = 64;

    /// The buffer type of node n; for n outside [0, max_nodes) an instance whose
    /// allocations are errc::invalid_argument.
    static const numa_buffer_type& node(int n) noexcept {
        static const std::array<numa_buffer_type, max_nodes + 1> all = [] {
            std::array<numa_buffer_type, max_nodes + 1> a;
            for (int i = 0; i <= max_nodes; ++i) {
                numa_buffer_type& t = a[static_cast<std::size_t>(i)];
                t.node_ = i < max_nodes ? i : -1;
                t.name_ = i < max_nodes ? "CPU_NUMA" + std::to_string(i) : "CPU_NUMA";
            }
            return a;
        }();
        return all[n >= 0 && n < max_nodes ? static_cast<std::size_t>(n) : max_nodes];
    }

    [[nodiscard]] std::string_view name() const noexcept { return name_; }
    [[nodiscard]] int node_index() const noexcept { return node_; }

    /// The highest node of this machine, or a status when libnuma is missing or the
    /// system has no NUMA support.
    [[nodiscard]] static result<int> max_node() {
        const api& f = lib();
        if (!f.error.empty()) return status(errc::not_supported, f.error);
        return f.max_node();
    }

    [[nodiscard]] result<host_buffer> allocate(std::size_t size) const {
        auto top = max_node();
        if (!top) return top.error();
        if (node_ < 0 || node_ > *top)
            return status(errc::invalid_argument, "CPU_NUMA: no NUMA node " + std::string(node_ < 0 ? ">= 64" : std::to_string(node_)) +
                                                      " (this machine has nodes 0-" + std::to_string(*top) + ")");
        const std::size_t bytes = detail::round_up_bytes(size, host_alignment);
        if (bytes == 0 || bytes > max_size())
            return status(errc::alloc_failed, "CPU_NUMA: size " + std::to_string(size) + " is too large");
        void* p = lib().alloc_onnode(bytes, node_);
        if (p == nullptr)
            return status(errc::alloc_failed, "CPU_NUMA: out of memory on node " + std::to_string(node_) +
                                                  " allocating " + std::to_string(size) + " bytes");
        return host_buffer::adopt(p, size, bytes, &release);
    }

private:
    struct api {
        int (*available)() = nullptr;
        int (*max_node)() = nullptr;
        void* (*alloc_onnode)(std::size_t, int) = nullptr;
        void (*free)(void*, std::size_t) = nullptr;
        std::string error; ///< why it cannot be used (empty: usable)
    };
    static const api& lib() {
        static const api f = [] {
            api a;
            const detail::loaded_library l({"libnuma.so.1", "libnuma.so"});
            if (!l.error.empty()) {
                a.error = "CPU_NUMA: libnuma is not installed (libnuma1): " + l.error;
                return a;
            }
            a.available = l.symbol<decltype(a.available)>("numa_available");
            a.max_node = l.symbol<decltype(a.max_node)>("numa_max_node");
            a.alloc_onnode = l.symbol<decltype(a.alloc_onnode)>("numa_alloc_onnode");
            a.free = l.symbol<decltype(a.free)>("numa_free");
            if (!a.available || !a.max_node || !a.alloc_onnode || !a.free)
                a.error = "CPU_NUMA: the libnuma found lacks numa_alloc_onnode or numa_free";
            else if (a.available() < 0)
                a.error = "CPU_NUMA: this system has no NUMA support (numa_available)";
            return a;
        }();
        return f;
    }
    static void release(void* p, std::size_t bytes) noexcept { lib().free(p, bytes); }

    int node_ = -1;
    std::string name_ = "CPU_NUMA";
};

// -- high-bandwidth memory -----------------------------------------------------------------

/// "CPU_HBM": high-bandwidth memory through memkind's hbwmalloc (see the header comment).
class hbm_buffer_type : public detail::special_host_memory {
public:
    using buffer_t = host_buffer;

    static const hbm_buffer_type& instance() noexcept {
        static const hbm_buffer_type bt;
        return bt;
    }
    [[nodiscard]] std::string_view name() const noexcept { return "CPU_HBM"; }

    /// Whether this machine has high-bandwidth memory memkind can give: ok, or why not.
    [[nodiscard]] static status available() {
        const api& f = lib();
        return f.error.empty() ? status{} : status(errc::not_supported, f.error);
    }

    [[nodiscard]] result<host_buffer> allocate(std::size_t size) const {
        if (auto s = available(); !s) return s;
        const std::size_t bytes = detail::round_up_bytes(size, host_alignment);
        if (bytes == 0 || bytes > max_size())
            return status(errc::alloc_failed, "CPU_HBM: size " + std::to_string(size) + " is too large");
        void* p = nullptr;
        if (lib().memalign(&p, host_alignment, bytes) != 0 || p == nullptr)
            return status(errc::alloc_failed, "CPU_HBM: out of high-bandwidth memory allocating " +
                                                  std::to_string(size) + " bytes");
        return host_buffer::adopt(p, size, bytes, &release);
    }

private:
    struct api {
        int (*check_available)() = nullptr;
        int (*memalign)(void**, std::size_t, std::size_t) = nullptr;
        void (*free)(void*) = nullptr;
        std::string error;
    };
    static const api& lib() {
        static const api f = [] {
            api a;
            const detail::loaded_library l({"libmemkind.so.0", "libmemkind.so"});
            if (!l.error.empty()) {
                a.error = "CPU_HBM: libmemkind is not installed (libmemkind0): " + l.error;
                return a;
            }
            a.check_available = l.symbol<decltype(a.check_available)>("hbw_check_available");
            a.memalign = l.symbol<decltype(a.memalign)>("hbw_posix_memalign");
            a.free = l.symbol<decltype(a.free)>("hbw_free");
            if (!a.check_available || !a.memalign || !a.free)
                a.error = "CPU_HBM: the libmemkind found lacks the hbwmalloc functions";
            else if (const int e = a.check_available(); e != 0)
                a.error = "CPU_HBM: this machine has no high-bandwidth memory (memkind's hbw_check_available: " +
                          std::to_string(e) + ")";
            return a;
        }();
        return f;
    }
    static void release(void* p, std::size_t) noexcept { lib().free(p); }
};

static_assert(host_buffer_type<hugepage_buffer_type>);
static_assert(host_buffer_type<numa_buffer_type>);
static_assert(host_buffer_type<hbm_buffer_type>);
static_assert(device_buffer_type<hbm_buffer_type>);

} // namespace backplane

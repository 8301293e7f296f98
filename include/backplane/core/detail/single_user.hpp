#pragma once
// single_user: detects an object used from two threads at once.
//
//   status compute(graph_view g) {
//       const auto use = user_.enter();
//       if (!use) return detail::busy_status("cpu backend", "compute");
//       ...
//   }
//
// Backends and schedulers are used by one thread at a time (docs/threading.md). A
// second thread calling in while the first is inside would corrupt their state or
// deadlock their thread pools, so every mutating entry point takes a lease first: one
// compare-and-swap on entry and one store on exit, no lock and no system call. A call
// that finds the object in use by another thread is refused (errc::busy), and the
// object is left as the first thread has it.
//
// The lease knows the thread that holds it, so an entry point may call another entry
// point of the same object (a scheduler's compute calls its alloc_graph): that lease is
// `nested`. An object that must not be re-entered (the CPU backend, from its own abort
// callback) refuses nested leases itself.
//
// Entering and leaving also order memory (acquire / release): a thread that uses the
// object after another has left it sees everything the other wrote.

#include <backplane/core/error.hpp>

#include <atomic>
#include <string>
#include <string_view>

namespace backplane::detail {

/// A token of the calling thread, unique among the threads alive: the address of a
/// thread_local object.
inline const void* this_thread_token() noexcept {
    static thread_local const char token = 0;
    return &token;
}

class single_user {
public:
    enum class entry : unsigned char {
        first,   ///< this call holds the object until its lease ends
        nested,  ///< this thread already holds it (an entry point calling another)
        refused, ///< another thread holds it
    };

    /// The right to use the object until it is destroyed (first entry) or nothing
    /// (nested, refused). Converts to true unless refused.
    class lease {
    public:
        lease(lease&& o) noexcept : owner_(o.owner_), entry_(o.entry_) { o.owner_ = nullptr; }
        lease(const lease&) = delete;
        lease& operator=(const lease&) = delete;
        lease& operator=(lease&&) = delete;
        ~lease() {
            if (owner_ != nullptr) owner_->store(nullptr, std::memory_order_release);
        }
        /// Not refused: the first entry, or a nested one (for objects that allow nesting).
        explicit operator bool() const noexcept { return entry_ != entry::refused; }
        /// The first entry: neither nested nor refused (for objects that must not be
        /// re-entered).
        [[nodiscard]] bool first() const noexcept { return entry_ == entry::first; }
        [[nodiscard]] bool nested() const noexcept { return entry_ == entry::nested; }
        [[nodiscard]] entry kind() const noexcept { return entry_; }

    private:
        friend class single_user;
        lease(std::atomic<const void*>* owner, entry e) noexcept : owner_(owner), entry_(e) {}
        std::atomic<const void*>* owner_; ///< released by the destructor (first entry only)
        entry entry_;
    };

    single_user() noexcept = default;
    /// Moving an object moves its state, not its user: the new object starts free (an
    /// object is moved only while nobody uses it).
    single_user(single_user&&) noexcept {}
    single_user& operator=(single_user&&) noexcept { return *this; }
    single_user(const single_user&) = delete;
    single_user& operator=(const single_user&) = delete;

    [[nodiscard]] lease enter() noexcept {
        const void* me = this_thread_token();
        const void* holder = nullptr;
        if (owner_.compare_exchange_strong(holder, me, std::memory_order_acquire, std::memory_order_relaxed))
            return lease(&owner_, entry::first);
        return lease(nullptr, holder == me ? entry::nested : entry::refused);
    }

    /// True while some thread holds the object (a snapshot, for diagnostics and tests).
    [[nodiscard]] bool in_use() const noexcept { return owner_.load(std::memory_order_relaxed) != nullptr; }

private:
    std::atomic<const void*> owner_{nullptr};
};

/// The status of a refused lease: "<object>: <call> called while another thread is using
/// it ...". `object` names the object ("cpu backend", "scheduler").
inline status busy_status(std::string_view object, std::string_view call) {
    return {errc::busy, std::string(object) + ": " + std::string(call) +
                            " called while another thread is using this " + std::string(object) +
                            " (it is used from two threads at once); use it from one thread at a "
                            "time, or give each thread its own (docs/threading.md)"};
}

/// The status of a nested lease that the object refuses: a callback of the object
/// calling back into it.
inline status reentered_status(std::string_view object, std::string_view call, std::string_view from) {
    return {errc::busy, std::string(object) + ": " + std::string(call) + " called from inside " +
                            std::string(from) + " of the same " + std::string(object) +
                            ", which is not re-entrant (docs/threading.md)"};
}

} // namespace backplane::detail

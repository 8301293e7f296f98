#pragma once
// Waiting primitives of the CPU thread pool: a CPU-friendly pause, a wait that spins,
// then polls between yields, then blocks (std::atomic::wait), and a spin barrier built
// from them.
//
// Why three stages: a barrier between two nodes of a graph is crossed within a
// microsecond when every thread is on a core, while waking a sleeping thread costs tens
// of microseconds; but a thread that keeps spinning while the others are descheduled
// (more threads than cores, a busy machine) steals the core they need, and workers that
// spin between computes burn a core for nothing. So a waiter spins briefly, then polls
// between yields of its time slice for a while, then sleeps until it is notified.
// Notifiers only pay for the notify system call when someone really sleeps (a counter
// of sleepers per word).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>

namespace backplane::cpu::detail {

/// Distance kept between atomics that different threads write, so that they never share
/// a cache line (false sharing): 128 bytes, because x86 cores prefetch 64-byte lines in
/// pairs and Apple cores have 128-byte lines; it costs only a little memory.
inline constexpr std::size_t cache_line = 128;

/// Tells the core that this is a spin-wait loop (x86 pause, AArch64 yield).
inline void cpu_relax() noexcept {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    __builtin_ia32_pause();
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
    asm volatile("yield" ::: "memory");
#endif
}

/// How long a waiter spins, then how long it keeps polling between yields, before it
/// blocks. Measured on a 2-core VM: a barrier between two threads that each have a core
/// is crossed in ~0.2 us, well inside the spin; when the two share a core (more threads
/// than free cores) a waiter that keeps spinning holds the core the other one needs, so
/// the spin is short and polling goes on between yields, which hand the core over.
/// Polling up to 1 ms keeps a worker awake across the short gaps between computes (host
/// work between two tokens) and across single-threaded stretches of a graph: waking a
/// blocked thread costs 20-50 us there, more than a whole small node. After 1 ms the
/// waiter sleeps, so an idle pool costs no CPU.
inline constexpr int spin_pauses = 64; ///< ~1-3 us: a pause is 10-140 cycles depending on the core
inline constexpr std::chrono::nanoseconds poll_time{1'000'000};

/// Spins, then polls between yields, while done() is false, for at most about `poll`
/// (poll_time by default); returns done()'s last answer.
template <class Done> bool spin_until(Done done, std::chrono::nanoseconds poll = poll_time) noexcept {
    for (int i = 0; i < spin_pauses; ++i) {
        if (done()) return true;
        cpu_relax();
    }
    const auto start = std::chrono::steady_clock::now();
    do {
        std::this_thread::yield();
        if (done()) return true;
    } while (std::chrono::steady_clock::now() - start < poll);
    return false;
}

/// A 32-bit word that threads wait on until it changes, with the count of threads
/// sleeping on it, so that a notifier skips the system call when nobody sleeps.
struct alignas(cache_line) wait_word {
    std::atomic<std::uint32_t> value{0};
    std::atomic<int> sleepers{0};

    /// Returns once value != old, with acquire ordering (the writes the changer made
    /// before its release are visible).
    void wait_while(std::uint32_t old) noexcept {
        if (spin_until([&] { return value.load(std::memory_order_acquire) != old; })) return;
        block_while(old);
    }

    /// wait_while without spinning or polling: sleeps at once (a paused thread pool).
    void block_while(std::uint32_t old) noexcept {
        // seq_cst on both sides (here and in notify_changed()): either the notifier sees this
        // sleeper, or this load sees the new value. Never both missed (no lost wake-up).
        sleepers.fetch_add(1, std::memory_order_seq_cst);
        while (value.load(std::memory_order_seq_cst) == old) value.wait(old, std::memory_order_seq_cst);
        sleepers.fetch_sub(1, std::memory_order_relaxed);
    }

    /// Wakes the sleepers after the value was changed (by the caller, seq_cst).
    void notify_changed() noexcept {
        if (sleepers.load(std::memory_order_seq_cst) != 0) value.notify_all();
    }

    /// value += 1 (release and seq_cst), then wakes whoever sleeps on the old value.
    void bump() noexcept {
        value.fetch_add(1, std::memory_order_seq_cst);
        notify_changed();
    }
};

/// A reusable barrier for a number of threads given at each use (all users of one
/// crossing pass the same count). Sense by generation: the last thread to arrive resets
/// the counter and bumps the generation, the others wait for the generation to change.
/// Crossing it orders every write made before it by any participant before every read
/// made after it by any participant (acquire / release through the counter and the
/// generation).
class spin_barrier {
public:
    void arrive_and_wait(int n) noexcept {
        if (n <= 1) return;
        // Read before arriving: the generation cannot move until this thread arrives,
        // and it is at least the one this thread last crossed.
        const std::uint32_t gen = gen_.value.load(std::memory_order_relaxed);
        if (count_.fetch_add(1, std::memory_order_acq_rel) == n - 1) {
            count_.store(0, std::memory_order_relaxed); // before the bump: seen by the next use
            gen_.bump();
            return;
        }
        gen_.wait_while(gen);
    }

private:
    alignas(cache_line) std::atomic<int> count_{0};
    wait_word gen_;
};

} // namespace backplane::cpu::detail

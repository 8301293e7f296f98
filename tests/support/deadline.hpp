#pragma once
// Tests of code that used to deadlock: run a body on its own thread and give it a
// deadline. A body still running at the deadline cannot be stopped or joined (its
// threads wait for each other forever) and uses the test's objects, so the process ends
// there with a message naming the test: the ctest entry fails instead of hanging.

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace backplane::test {

/// Runs body on a new thread and waits up to `limit` for it to return. At the deadline:
/// prints "<what>: still running after N s (a deadlock)" and ends the process with
/// status 1. Exceptions from body (Catch's REQUIRE included) are rethrown here.
inline void within(std::chrono::seconds limit, const std::string& what, const std::function<void()>& body) {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::exception_ptr thrown;
    std::thread t([&] {
        try {
            body();
        } catch (...) {
            thrown = std::current_exception();
        }
        const std::lock_guard<std::mutex> lock(m);
        done = true;
        cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(m);
    if (!cv.wait_for(lock, limit, [&] { return done; })) {
        std::fprintf(stderr, "%s: still running after %lld s (a deadlock); ending the test process\n", what.c_str(),
                     static_cast<long long>(limit.count()));
        std::fflush(stderr);
        std::_Exit(EXIT_FAILURE);
    }
    lock.unlock();
    t.join();
    if (thrown) std::rethrow_exception(thrown);
}

/// Waits up to `limit` for pred() to hold (polling every millisecond); returns pred().
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > end) return pred();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

} // namespace backplane::test

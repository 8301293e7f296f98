#pragma once
// backplane::mpi::environment: MPI's lifetime in a program that uses backplane::mpi.
//
//     int main(int argc, char** argv) {
//         auto env = backplane::mpi::environment::init(&argc, &argv);   // MPI_Init_thread
//         if (!env) { std::fprintf(stderr, "%s\n", env.error().describe().c_str()); return 1; }
//         auto world = backplane::mpi::communicator::world();
//         ...
//     }   // MPI_Finalize, unless a communication failed
//
// MPI is asked for MPI_THREAD_SERIALIZED: backplane makes its MPI calls under one lock
// of its own (detail::call_lock), so any thread may use a communicator, one at a time.
// A program that initialized MPI itself keeps it: init() then owns nothing.
//
// After a failed communication (a rank that died, an MPI error) MPI_Finalize would wait
// for the lost rank, so the environment does not call it: the process should report the
// error and exit (docs/distributed.md, "Failures").

#include <backplane/core/error.hpp>

#include <mpi.h>

#include <atomic>
#include <mutex>
#include <string>
#include <utility>

namespace backplane::mpi {

namespace detail {

/// Set by the first failed communication of any communicator in the process.
inline std::atomic<bool>& failed_flag() noexcept {
    static std::atomic<bool> flag{false};
    return flag;
}

/// Held around every MPI call backplane makes (MPI_THREAD_SERIALIZED).
inline std::unique_lock<std::mutex> call_lock() {
    static std::mutex m;
    return std::unique_lock<std::mutex>(m);
}

/// MPI's text for an error code.
inline std::string error_string(int code) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
    return std::string(text, static_cast<std::size_t>(len));
}

} // namespace detail

/// Whether a communication of this process has failed (then MPI is not finalized).
[[nodiscard]] inline bool communication_failed() noexcept { return detail::failed_flag().load(); }

class environment {
public:
    /// Initializes MPI (MPI_Init_thread, MPI_THREAD_SERIALIZED) unless it already is.
    /// Fails when MPI was finalized, or when it offers less than the serialized level.
    [[nodiscard]] static result<environment> init(int* argc = nullptr, char*** argv = nullptr) {
        int initialized = 0, finalized = 0;
        MPI_Initialized(&initialized);
        MPI_Finalized(&finalized);
        if (finalized) return status(errc::failed, "mpi::environment: MPI was finalized already");
        if (initialized) return environment(false);
        int provided = 0;
        if (const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided); rc != MPI_SUCCESS)
            return status(errc::failed, "mpi::environment: MPI_Init_thread failed: " + detail::error_string(rc), rc);
        environment env(true);
        if (provided < MPI_THREAD_SERIALIZED)
            return status(errc::not_supported, "mpi::environment: this MPI offers thread level " +
                                                   std::to_string(provided) + ", below MPI_THREAD_SERIALIZED");
        return env;
    }

    environment(environment&& o) noexcept : owns_(std::exchange(o.owns_, false)) {}
    environment& operator=(environment&&) = delete;
    ~environment() {
        if (owns_ && !communication_failed()) MPI_Finalize();
    }

    /// Whether this object initialized MPI (and finalizes it).
    [[nodiscard]] bool owns() const noexcept { return owns_; }

private:
    explicit environment(bool owns) noexcept : owns_(owns) {}
    bool owns_ = false;
};

} // namespace backplane::mpi

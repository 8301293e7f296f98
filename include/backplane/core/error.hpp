#pragma once
// Errors and statuses.
//
// Two channels, chosen by where a mistake can happen:
//  * building a graph (shapes, types, bad parameters) throws backplane::error, because
//    such a mistake is a bug in the caller's program and the message must name it;
//  * runtime paths (allocation, transfers, compute) return a [[nodiscard]] status or a
//    result<T>, because out-of-memory or a device failure is an expected outcome that the
//    caller handles, and a hot path must not pay for exceptions.
// Nothing in the library aborts or asserts on user input.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace backplane {

/// Library error codes. `ok` is zero so a status converts to false-on-error cheaply.
enum class errc : std::uint8_t {
    ok = 0,
    invalid_argument, ///< a shape, type or parameter the operation does not accept
    out_of_range,     ///< a read or write outside a tensor or buffer
    alloc_failed,     ///< out of memory (host or device)
    not_supported,    ///< the backend cannot do this (op, type, buffer)
    aborted,          ///< the user's abort callback stopped the computation
    device_error,     ///< the device or driver reported a failure (see native code)
    not_found,        ///< a named thing (a file, a device) does not exist
    failed,           ///< anything else
    busy,             ///< the object is in use by another thread (docs/threading.md)
    timed_out,        ///< a wait passed its deadline (a peer process that died or stopped)
};

/// Short, stable name of an error code (for logs and messages).
constexpr std::string_view to_string(errc c) noexcept {
    switch (c) {
    case errc::ok: return "ok";
    case errc::invalid_argument: return "invalid argument";
    case errc::out_of_range: return "out of range";
    case errc::alloc_failed: return "allocation failed";
    case errc::not_supported: return "not supported";
    case errc::aborted: return "aborted";
    case errc::device_error: return "device error";
    case errc::not_found: return "not found";
    case errc::failed: return "failed";
    case errc::busy: return "busy";
    case errc::timed_out: return "timed out";
    }
    return "unknown";
}

/// Outcome of a runtime operation: a library code, the backend's native code (for
/// example a VkResult or cudaError_t, 0 when not applicable) and a message.
/// A success status carries an empty message and costs no allocation.
class [[nodiscard]] status {
public:
    constexpr status() noexcept = default;
    status(errc code, std::string message, std::int32_t native = 0)
        : code_(code), native_(native), message_(std::move(message)) {}

    static status success() noexcept { return {}; }

    [[nodiscard]] constexpr bool ok() const noexcept { return code_ == errc::ok; }
    constexpr explicit operator bool() const noexcept { return ok(); }
    [[nodiscard]] constexpr errc code() const noexcept { return code_; }
    [[nodiscard]] constexpr std::int32_t native() const noexcept { return native_; }
    [[nodiscard]] const std::string& message() const noexcept { return message_; }

    /// "allocation failed: <message>" (or "ok").
    [[nodiscard]] std::string describe() const {
        std::string s{to_string(code_)};
        if (!message_.empty()) {
            s += ": ";
            s += message_;
        }
        if (native_ != 0) {
            s += " (native code ";
            s += std::to_string(native_);
            s += ')';
        }
        return s;
    }

    /// Throws backplane::error when not ok; for callers that prefer exceptions.
    inline void throw_if_failed() const;

private:
    errc code_ = errc::ok;
    std::int32_t native_ = 0;
    std::string message_;
};

/// The exception type of the library. Thrown while building graphs and by the
/// throwing conveniences (result::value, status::throw_if_failed).
class error : public std::runtime_error {
public:
    explicit error(const std::string& what, errc code = errc::invalid_argument)
        : std::runtime_error(what), code_(code) {}
    explicit error(const status& s) : std::runtime_error(s.describe()), code_(s.code()) {}
    [[nodiscard]] errc code() const noexcept { return code_; }

private:
    errc code_;
};

inline void status::throw_if_failed() const {
    if (!ok()) throw error(*this);
}

/// A value or the status that explains why there is none (an expected-like type;
/// std::expected is C++23).
template <class T>
class [[nodiscard]] result {
    static_assert(!std::is_reference_v<T>, "result<T&> is not supported; use a pointer");
    static_assert(!std::is_same_v<std::remove_cv_t<T>, status>, "result<status> makes no sense");

public:
    result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
    result(status s) : v_(std::in_place_index<1>, std::move(s)) {
        if (std::get<1>(v_).ok()) // an "ok" status without a value is a library bug; keep it visible
            (void)(std::get<1>(v_) = status(errc::failed, "result constructed from a success status"));
    }

    [[nodiscard]] bool ok() const noexcept { return v_.index() == 0; }
    explicit operator bool() const noexcept { return ok(); }

    /// The value; throws backplane::error carrying the status when there is none.
    T& value() & {
        if (!ok()) throw ::backplane::error(std::get<1>(v_));
        return std::get<0>(v_);
    }
    const T& value() const& {
        if (!ok()) throw ::backplane::error(std::get<1>(v_));
        return std::get<0>(v_);
    }
    T&& value() && {
        if (!ok()) throw ::backplane::error(std::get<1>(v_));
        return std::get<0>(std::move(v_));
    }
    T& operator*() & noexcept { return *std::get_if<0>(&v_); }
    const T& operator*() const& noexcept { return *std::get_if<0>(&v_); }
    T&& operator*() && noexcept { return std::move(*std::get_if<0>(&v_)); }
    T* operator->() noexcept { return std::get_if<0>(&v_); }
    const T* operator->() const noexcept { return std::get_if<0>(&v_); }

    /// The failure (a success status when there is a value).
    [[nodiscard]] status error() const {
        if (ok()) return status::success();
        return std::get<1>(v_);
    }
    [[nodiscard]] const status* error_if() const noexcept { return std::get_if<1>(&v_); }

private:
    std::variant<T, status> v_;
};

} // namespace backplane

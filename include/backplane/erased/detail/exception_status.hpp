#pragma once
// detail::status_of_current_exception: what the erased face returns when a backend's
// own code throws while called through it (a device's make_backend, a registry's device
// enumeration, a plugin's entry point). Runtime paths report a status; an exception must
// not cross into the caller's code, nor escape from a plugin's library.

#include <backplane/core/error.hpp>

#include <exception>
#include <new>
#include <string>
#include <string_view>

namespace backplane::detail {

/// A status for an exception that escaped a backend's code (never an abort).
inline status status_of_current_exception(std::string_view where) {
    try {
        throw;
    } catch (const ::backplane::error& e) {
        return {e.code(), std::string(where) + ": " + e.what()};
    } catch (const std::bad_alloc&) {
        return {errc::alloc_failed, std::string(where) + ": out of memory"};
    } catch (const std::exception& e) {
        return {errc::failed, std::string(where) + ": " + e.what()};
    } catch (...) {
        return {errc::failed, std::string(where) + ": unknown exception"};
    }
}

} // namespace backplane::detail

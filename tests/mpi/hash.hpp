#pragma once
// FNV-1a of a byte range: the MPI tests compare results across ranks by their hashes.

#include <cstddef>
#include <cstdint>

namespace backplane::test {

inline std::uint64_t fnv(const void* p, std::size_t n) {
    std::uint64_t h = 1469598103934665603ull;
    for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
    return h;
}

} // namespace backplane::test

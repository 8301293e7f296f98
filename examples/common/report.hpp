#pragma once
// What the example programs share in what they print: sizes, times and the normalised
// mean squared error of a result against a reference.

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <span>
#include <string>

namespace examples {

using clock_type = std::chrono::steady_clock;

inline double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// "12.3 MiB".
inline std::string mib(std::size_t bytes) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
    return b;
}

/// The normalised mean squared error of results against references, summed over rows:
/// sum (got - ref)^2 / sum ref^2 (the error itself where every reference is 0; infinite
/// where not finite).
struct nmse_sum {
    double err = 0;
    double norm = 0;

    void add(std::span<const float> got, std::span<const float> ref) noexcept {
        for (std::size_t j = 0; j < ref.size(); ++j) {
            const double d = static_cast<double>(got[j]) - ref[j];
            err += d * d;
            norm += static_cast<double>(ref[j]) * ref[j];
        }
    }
    double value() const noexcept {
        const double v = norm > 0 ? err / norm : err;
        return std::isfinite(v) ? v : INFINITY;
    }
};

} // namespace examples

// quantize_every_type_native: core's quantizers as a user's -march=native
// -ffp-contract=fast build compiles them (tests/CMakeLists.txt sets the flags).
#include "body.hpp"

std::vector<contraction::quantized>
contraction::quantize_every_type_native(const float* x, std::int64_t rows, std::int64_t n) {
    return quantize_every_type(x, rows, n);
}

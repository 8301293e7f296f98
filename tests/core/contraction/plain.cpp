// quantize_every_type_plain: core's quantizers compiled without contraction and without
// -march (tests/CMakeLists.txt sets the flags), as ggml's base library is.
#include "body.hpp"

std::vector<contraction::quantized>
contraction::quantize_every_type_plain(const float* x, std::int64_t rows, std::int64_t n) {
    return quantize_every_type(x, rows, n);
}

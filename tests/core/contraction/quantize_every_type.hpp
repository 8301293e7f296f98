#pragma once
// The declarations shared by the contraction test's translation units
// (test_contraction.cpp): two builds of the same function, each in its own module, so
// that each keeps its own copies of core's inline quantizers.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#if defined(__GNUC__) || defined(__clang__)
#define BP_CONTRACTION_EXPORT __attribute__((visibility("default")))
#else
#define BP_CONTRACTION_EXPORT
#endif

namespace contraction {

/// What one conversion path of one type made of the rows.
struct quantized {
    std::string what; ///< the type and the path, e.g. "q4_K from_float_row"
    std::vector<std::byte> bytes;
    std::int64_t rows = 0; ///< how many rows the bytes hold
};

/// Every quantized type's bytes from `rows` rows of n values (n a multiple of 256),
/// through each path that converts f32 to it: from_float_row (cpy, set_rows, the
/// conformance inputs), quantize_block one block at a time (the CPU kernels' views),
/// quantize_weights_row (model files); and the values to_float_row reads back.
/// native.cpp: compiled -O2 -march=native -ffp-contract=fast, in a shared module with
/// hidden symbols. plain.cpp: compiled -ffp-contract=off without -march.
BP_CONTRACTION_EXPORT std::vector<quantized>
quantize_every_type_native(const float* x, std::int64_t rows, std::int64_t n);
std::vector<quantized> quantize_every_type_plain(const float* x, std::int64_t rows, std::int64_t n);

} // namespace contraction

#pragma once
// The body of quantize_every_type_native and quantize_every_type_plain
// (quantize_every_type.hpp), included by native.cpp and plain.cpp only: a function of
// internal linkage, so that each of the two has its own.

#include "quantize_every_type.hpp"

#include <backplane/core/convert.hpp>
#include <backplane/core/quantize_weights.hpp>
#include <backplane/core/types.hpp>

#include <cstring>

namespace contraction {
namespace {

std::vector<quantized> quantize_every_type(const float* x, std::int64_t rows, std::int64_t n) {
    using namespace backplane;
    std::vector<quantized> out;
    const auto rows_of = [&](elem_type t, const char* path, const float* src, std::int64_t count, auto&& convert_row) {
        quantized q{std::string(to_string(t)) + " " + path,
                    std::vector<std::byte>(row_size(t, n) * static_cast<std::size_t>(count)), count};
        for (std::int64_t r = 0; r < count; ++r)
            convert_row(src + r * n, q.bytes.data() + row_size(t, n) * static_cast<std::size_t>(r));
        out.push_back(std::move(q));
    };
    const auto bytes_of = [&](elem_type t, const char* path, auto&& convert_row) { rows_of(t, path, x, rows, convert_row); };
    // The lattice i-quants' grid searches take milliseconds a row (tens under the
    // sanitizers): every eighth row, and the last twelve (zeros, one value, tiny rows).
    std::vector<float> some;
    for (std::int64_t r = 0; r < rows; ++r)
        if (r % 8 == 0 || r >= rows - 12) some.insert(some.end(), x + r * n, x + (r + 1) * n);
    const auto some_rows = static_cast<std::int64_t>(some.size()) / n;
    for (const elem_type t : all_elem_types) {
        if (is_quantized(t) && !converts_from_float(t) && weights_quantizer_missing(t).empty()) {
            rows_of(t, "quantize_weights_row", some.data(), some_rows, // a lattice i-quant: files only
                    [&](const float* in, std::byte* row) { quantize_weights_row(t, in, row, n); });
            continue;
        }
        if (!is_quantized(t) || !converts_from_float(t)) // the other lattice i-quants are only read
            continue;
        bytes_of(t, "from_float_row",
                 [&](const float* in, std::byte* row) { from_float_row(t, in, row, n); });
        // one block at a time, each at an odd address, as the CPU kernels convert views
        bytes_of(t, "quantize_block", [&](const float* in, std::byte* row) {
            std::vector<std::byte> odd(type_size(t) + 1);
            for (std::int64_t k = 0; k < n; k += block_size(t)) {
                quantize_block(t, in + k, odd.data() + 1);
                std::memcpy(row + type_size(t) * static_cast<std::size_t>(k / block_size(t)),
                            odd.data() + 1, type_size(t));
            }
        });
        bytes_of(t, "quantize_weights_row",
                 [&](const float* in, std::byte* row) { quantize_weights_row(t, in, row, n); });
        // the values read back from the first path's bytes
        const std::vector<std::byte> blocks = out[out.size() - 3].bytes;
        quantized v{std::string(to_string(t)) + " to_float_row",
                    std::vector<std::byte>(static_cast<std::size_t>(rows * n) * sizeof(float)), rows};
        for (std::int64_t r = 0; r < rows; ++r)
            to_float_row(t, blocks.data() + row_size(t, n) * static_cast<std::size_t>(r),
                         reinterpret_cast<float*>(v.bytes.data()) + r * n, n);
        out.push_back(std::move(v));
    }
    return out;
}

} // namespace
} // namespace contraction

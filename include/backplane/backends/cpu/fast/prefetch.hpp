#pragma once
// How far ahead the mat-vec kernels prefetch their weights. They read a job's rows as 4
// streams (a row after the other within each) and prefetch, as they go, the row a few
// rows further on in the same stream: enough rows that each stream runs at least
// stream_prefetch_bytes ahead of its reads. One row of a short matrix is too little for
// one core to keep enough lines in flight from DRAM; much more than this was slower.
// Measured on the 2-core Zen VM, one thread, from DRAM (cpu/mat_vec/<type>/2048 and
// /4096; ref/read_bandwidth about 41 GB/s):
//   q4_0 2048-wide rows (1152 bytes): one row ahead 33-34 GB/s, two rows 36.3-37.1;
//   q4_K 2048-wide rows (1152 bytes): one row ahead 30-31 GB/s, two rows 34.1-34.3;
//   4096-wide rows (2304 bytes in q4_0 and q4_K) at their best one row ahead; 4 and
//   8 KiB ahead were slower for both widths.

#include <algorithm>
#include <cstddef>

namespace backplane::cpu::fast {

inline constexpr std::size_t stream_prefetch_bytes = 2304;

/// Rows of row_bytes each that a stream prefetches ahead of the row it reads (at least 1).
[[nodiscard]] constexpr std::size_t stream_prefetch_rows(std::size_t row_bytes) noexcept {
    const std::size_t row = std::max<std::size_t>(row_bytes, 1);
    return std::max<std::size_t>(1, (stream_prefetch_bytes + row - 1) / row);
}

} // namespace backplane::cpu::fast

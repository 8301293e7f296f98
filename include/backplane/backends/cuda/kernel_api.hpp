#pragma once
// The seam between the CUDA backend's host code and its kernels. The backend
// (backend.hpp, compiled by any C++20 compiler) sees the kernels as one table of plain
// functions; the table is defined by <backplane/backends/cuda/kernels.cuh>, which only
// nvcc compiles. The CMake target backplane::cuda links a static library built from that
// header (src/backplane_cuda_kernels.cu); a build without CMake compiles that one file
// with nvcc and links it.
//
// Every launch is asynchronous on the stream it is given; the functions never allocate,
// synchronize or throw: what a node needs beyond its tensors (converted operands,
// partial sums) is scratch memory the backend provides, sized by scratch_bytes() before
// the launches (so a launch can be captured into a CUDA graph).

#include <backplane/core/tensor.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace backplane::cuda::detail {

/// Bumped whenever kernel_table or launch_context changes.
inline constexpr std::uint32_t kernel_api_version = 2;

/// What a node's kernels get besides the node: its tensors' data are device addresses.
struct launch_context {
    cudaStream_t stream = nullptr;
    int device = 0;       ///< the ordinal, current when the kernels run
    int cc = 0;           ///< compute capability, 10 * major + minor (90 on an H100)
    int sm_count = 0;     ///< multiprocessors
    void* cublas = nullptr;        ///< a cublasHandle_t bound to `stream`; null: own kernels only
    void* scratch = nullptr;       ///< device memory of scratch_size bytes, 256-byte aligned
    std::size_t scratch_size = 0;
    /// The stream's error word (a device address of one word; null: errors are not
    /// reported): a kernel that meets an index out of range sets error_index in it
    /// (atomicOr) and reads nothing out of bounds; the backend reports it at synchronize.
    std::uint32_t* error_word = nullptr;
};

/// The bits of launch_context::error_word.
inline constexpr std::uint32_t error_index = 1; ///< an index beyond what it indexes (get_rows, set_rows)

/// The kernels, as plain functions.
struct kernel_table {
    std::uint32_t version = 0; ///< kernel_api_version of the code that made the table
    bool with_cublas = false;  ///< built with cuBLAS (BACKPLANE_CUDA_CUBLAS)
    /// Bytes of scratch memory `node` needs under ctx (its cuBLAS handle, its device).
    std::size_t (*scratch_bytes)(const tensor& node, const launch_context& ctx) noexcept = nullptr;
    /// Queues the kernels computing `node` (not a leaf or a view; supported per
    /// supports.hpp) on ctx.stream. Returns the launch error, cudaSuccess otherwise.
    cudaError_t (*launch)(const tensor& node, const launch_context& ctx) noexcept = nullptr;
    /// A cuBLAS handle whose work goes to `stream`, with `workspace` (device memory of
    /// `workspace_size` bytes) as its workspace, so its calls can be captured into graphs.
    /// cudaErrorNotSupported without cuBLAS; another error when cuBLAS fails.
    cudaError_t (*cublas_create)(void** handle, cudaStream_t stream, void* workspace,
                                 std::size_t workspace_size) noexcept = nullptr;
    void (*cublas_destroy)(void* handle) noexcept = nullptr;
};

/// The kernels linked into this program (src/backplane_cuda_kernels.cu, or any one
/// translation unit that includes <backplane/backends/cuda/kernels.cuh> with
/// BACKPLANE_CUDA_DEFINE_KERNEL_TABLE defined).
const kernel_table& kernel_table_instance() noexcept;

} // namespace backplane::cuda::detail

// The CUDA backend's kernels, compiled once by nvcc into the static library that
// backplane::cuda links (kernel_api.hpp).
#define BACKPLANE_CUDA_DEFINE_KERNEL_TABLE
#include <backplane/backends/cuda/kernels.cuh>

#pragma once
// BACKPLANE_HOST_DEVICE marks a function that the CPU kernels and, under nvcc, the CUDA
// kernels both call (one formula for both).

#if defined(__CUDACC__)
#define BACKPLANE_HOST_DEVICE __host__ __device__
#else
#define BACKPLANE_HOST_DEVICE
#endif

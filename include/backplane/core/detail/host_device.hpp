#pragma once
// BACKPLANE_HOST_DEVICE marks a function that the CPU kernels and, under nvcc, the CUDA
// kernels both call (the formulas written once for every C++ backend).

#if defined(__CUDACC__)
#define BACKPLANE_HOST_DEVICE __host__ __device__
#else
#define BACKPLANE_HOST_DEVICE
#endif

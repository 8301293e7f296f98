#pragma once
// The CUDA backend: devices, device and pinned host memory, streams with events and
// CUDA graphs, and kernels for every core op (docs/backends/cuda.md).
//
// Host code only: any C++20 translation unit may include this header, compiled by nvcc
// or not. The kernels are CUDA sources (kernels.cuh) compiled by nvcc into the library
// that the CMake target backplane::cuda links; link that target (it also brings the CUDA
// runtime, and cuBLAS when found).
//
//   auto dev = backplane::cuda_device::open({.index = 0});  // not_supported without a GPU
//   auto be = dev->make_backend();
//   backplane::scheduler<backplane::cuda_backend, backplane::cpu_backend> sched(...);

#include <backplane/backends/cuda/backend.hpp>
#include <backplane/backends/cuda/device.hpp>
#include <backplane/backends/cuda/memory.hpp>
#include <backplane/backends/cuda/runtime.hpp>
#include <backplane/backends/cuda/supports.hpp>

#pragma once
// The BLAS backend: an "accel" host backend that runs big mul_mats (f32 activations,
// f32 / f16 / bf16 weights) through the BLAS library's cblas_sgemm, on CPU buffers.
// Optional: needs a cblas (OpenBLAS preferred) and the backplane::blas CMake target,
// which brings the library and its header; see docs/backends/blas.md.

#include <backplane/backends/blas/backend.hpp>
#include <backplane/backends/blas/device.hpp>
#include <backplane/backends/blas/supports.hpp>

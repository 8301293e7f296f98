#pragma once
// The run-time face of backplane: the registry of backends and devices, backend plugins
// loaded from shared libraries, and with them the erased layer (<backplane/erased.hpp>:
// any_device, any_backend, any_buffer_type) and the scheduler. docs/runtime.md says when
// to use it rather than the compile-time face (scheduler<B...>) and how to ship a backend
// as a plugin.
//
// Not part of <backplane/backplane.hpp>: it brings <filesystem>, <dlfcn.h> and, where
// BACKPLANE_WITH_CUDA / BACKPLANE_WITH_VULKAN / BACKPLANE_WITH_BLAS are defined (by
// linking backplane::cuda / backplane::vulkan / backplane::blas), those backends' headers.
// Its CPU backend has every fast kernel, those of the GGUF weight types too
// (<backplane/backends/cpu/weight_kernels.hpp>).

#include <backplane/erased.hpp>
#include <backplane/backends/cpu/weight_kernels.hpp>
#include <backplane/runtime/builtin.hpp>
#include <backplane/runtime/plugin.hpp>
#include <backplane/runtime/reg.hpp>
#include <backplane/runtime/registry.hpp>
#include <backplane/sched/scheduler.hpp>

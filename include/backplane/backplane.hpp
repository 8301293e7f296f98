#pragma once
// backplane/backplane.hpp: the umbrella header. Core, memory and the CPU backend.
// Nothing here needs Vulkan or CUDA: those backends have their own entry headers.

#include <backplane/backends/cpu.hpp>
#include <backplane/core.hpp>
#include <backplane/memory.hpp>

#pragma once
// The CPU backend: device, backend and kernels. Always available.

#include <backplane/backends/cpu/backend.hpp>
#include <backplane/backends/cpu/device.hpp>

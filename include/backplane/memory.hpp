#pragma once
// backplane/memory.hpp: buffers, the host buffer type, and the allocators.

#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>
#include <backplane/memory/tensor_io.hpp>

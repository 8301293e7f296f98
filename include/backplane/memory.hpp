#pragma once
// backplane/memory.hpp: buffers, the host buffer type, and the allocators.

#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>
#include <backplane/memory/alloc_tensors.hpp>
#include <backplane/memory/graph_alloc.hpp>
#include <backplane/memory/tensor_alloc.hpp>
#include <backplane/memory/tensor_io.hpp>
#include <backplane/memory/tensor_copy.hpp>

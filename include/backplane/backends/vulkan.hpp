#pragma once
// The Vulkan backend (link backplane::vulkan): devices from the Vulkan instance, their
// device-local and host-visible memory, and backends computing graphs with compute
// shaders. See docs/backends/vulkan.md.
//
//     auto dev = backplane::vulkan_device::open();        // physical device 0
//     if (!dev) { /* no Vulkan here: dev.error() says why */ }
//     auto be = dev->make_backend();

#include <backplane/backends/vulkan/backend.hpp>
#include <backplane/backends/vulkan/device.hpp>
#include <backplane/backends/vulkan/instance.hpp>

#pragma once
// The meta backend: one device made of N devices of any backends, for tensor
// parallelism (docs/meta.md).
//
//   split.hpp       split states: along an axis (with segments), mirrored, partial
//   rules.hpp       propagation rules of every core op, as data
//   view_map.hpp    states of views, from their geometry
//   memory.hpp      meta buffer type and buffers: each device holds only its slices
//   collective.hpp  all-reduce of partial sums: the interface and a generic one
//   device.hpp      meta_device
//   backend.hpp     meta_backend: plans and computes graphs on all devices
//
//   auto meta = backplane::meta_device::make(parts, {.split = split_llama}).value();
//   auto be = meta.make_backend().value();

#include <backplane/backends/meta/backend.hpp>
#include <backplane/backends/meta/collective.hpp>
#include <backplane/backends/meta/device.hpp>
#include <backplane/backends/meta/memory.hpp>
#include <backplane/backends/meta/rules.hpp>
#include <backplane/backends/meta/split.hpp>
#include <backplane/backends/meta/view_map.hpp>

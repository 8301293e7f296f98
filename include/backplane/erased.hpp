#pragma once
// The erased layer: backends, devices and buffer types of any concrete type, behind
// function tables the compiler generates from the concept models. backend_ref (a
// non-owning reference to a backend) and the owning any_device, any_backend and
// any_buffer_type. The type-erased buffer itself (buffer_handle, buffer_ptr) and
// buffer_type_ref sit one layer lower, in <backplane/memory/buffer.hpp>: a tensor points
// to its buffer's handle, and the allocators take buffer types by reference.
//
// Light: core and memory headers only, no backend's header. <backplane/runtime.hpp> (the
// registry and plugins) includes it; the meta backend uses it for its devices.

#include <backplane/erased/any.hpp>
#include <backplane/erased/backend_options.hpp>
#include <backplane/erased/backend_ref.hpp>

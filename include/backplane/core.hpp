#pragma once
// backplane/core.hpp: the light entry header. Element types, tensors, contexts, graphs,
// every op builder, statuses and errors, and the backend contracts (concepts). No backend,
// no {fmt}: a translation unit that only builds graphs pays for nothing else.

#include <backplane/core/concepts.hpp>
#include <backplane/core/context.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/ops.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

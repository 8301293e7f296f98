#pragma once
// The scheduler: one graph split across several backends (docs/scheduler.md).

#include <backplane/sched/backend_set.hpp>
#include <backplane/sched/scheduler.hpp>

#pragma once
#include <backplane/core/types.hpp>

#include <backplane/sched/scheduler.hpp>

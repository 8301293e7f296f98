#pragma once
#include <backplane/erased/any.hpp>
#include <backplane/sched/backend_set.hpp>
#include <backplane/backends/cpu/backend.hpp>

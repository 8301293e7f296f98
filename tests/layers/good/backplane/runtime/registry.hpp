#pragma once
#include <backplane/backends/meta/device.hpp>
#include <backplane/sched/backend_set.hpp>

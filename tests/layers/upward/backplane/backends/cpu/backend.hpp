#pragma once
#include <backplane/core/tensor.hpp>
#include <backplane/backends/meta/device.hpp>

#pragma once
#include <backplane/core/tensor.hpp>

#pragma once
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>

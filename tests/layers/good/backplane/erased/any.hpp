#pragma once
#include <backplane/memory/buffer.hpp>
#  include <backplane/backends/cpu/backend.hpp>

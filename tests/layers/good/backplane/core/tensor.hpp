#pragma once
#include <backplane/core/types.hpp>
// #include <backplane/runtime/registry.hpp> (commented out: not an include)

#pragma once
// The line below is upward.
#include <backplane/runtime/registry.hpp>

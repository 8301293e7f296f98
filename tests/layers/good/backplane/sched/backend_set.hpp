#pragma once
#include <backplane/erased/any.hpp>

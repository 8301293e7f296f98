#pragma once
#include "reg.hpp"

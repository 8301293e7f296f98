#pragma once
// Every graph-building op. Each builder validates shapes and types and throws
// backplane::error naming the op, the shapes and the types of a mistake.

#include <backplane/core/ops/attention.hpp>
#include <backplane/core/ops/conv.hpp>
#include <backplane/core/ops/elementwise.hpp>
#include <backplane/core/ops/glu.hpp>
#include <backplane/core/ops/image.hpp>
#include <backplane/core/ops/layout.hpp>
#include <backplane/core/ops/matmul.hpp>
#include <backplane/core/ops/misc.hpp>
#include <backplane/core/ops/norm.hpp>
#include <backplane/core/ops/recurrent.hpp>
#include <backplane/core/ops/rope.hpp>
#include <backplane/core/ops/rows.hpp>
#include <backplane/core/ops/view.hpp>

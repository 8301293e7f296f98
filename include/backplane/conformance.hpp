#pragma once
// backplane/conformance.hpp: checking a backend against the CPU reference.
//   compare_backends   one graph on two backends, node by node or at chosen nodes
//   conformance::      the op catalogue (every core op as seeded, shrinkable cases), the
//                      case runner with NMSE thresholds, guard bytes and NaN checks,
//                      shrinking, the perf timer; the engine of backplane-conformance
//                      batch: many random cases in one graph, on many targets; parity:
//                      the backends' parity cases (the engine of their parity tests)
//                      shapes, inputs, thresholds: the random shapes, operand layouts
//                      and NMSE thresholds all of them use
// Also brings graph_copy (<backplane/memory/graph_copy.hpp>, which may be included on its
// own); tensor_copy is in <backplane/memory.hpp>.

#include <backplane/conformance/batch.hpp>
#include <backplane/conformance/catalogue.hpp>
#include <backplane/conformance/compare.hpp>
#include <backplane/conformance/inputs.hpp>
#include <backplane/conformance/parity.hpp>
#include <backplane/conformance/runner.hpp>
#include <backplane/conformance/shapes.hpp>
#include <backplane/conformance/thresholds.hpp>
#include <backplane/memory/graph_copy.hpp>

#pragma once
// backplane/conformance.hpp: checking a backend against the CPU reference.
//   compare_backends   one graph on two backends, node by node or at chosen nodes
//   conformance::      the op catalogue (every core op as seeded, shrinkable cases), the
//                      case runner with NMSE thresholds, guard bytes and NaN checks,
//                      shrinking, the perf timer; the engine of backplane-conformance
// Also brings graph_copy (<backplane/memory/graph_copy.hpp>, which may be included on its
// own); tensor_copy is in <backplane/memory.hpp>.

#include <backplane/conformance/catalogue.hpp>
#include <backplane/conformance/compare.hpp>
#include <backplane/conformance/runner.hpp>
#include <backplane/memory/graph_copy.hpp>

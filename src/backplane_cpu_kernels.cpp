// The CPU backend's kernels compiled once, for a program whose translation units define
// BACKPLANE_CPU_SEPARATE_KERNELS: the static library backplane_cpu_kernels builds this file
// and carries the definition; the tests, examples, tools and benchmarks link it
// (docs/backends/cpu.md, "Kernels compiled once").
#define BACKPLANE_CPU_DEFINE_KERNELS
#include <backplane/backends/cpu.hpp>

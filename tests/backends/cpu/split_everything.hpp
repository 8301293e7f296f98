#pragma once
// Splits every node over all threads for one scope (process-wide: cpu::set_min_work_per_thread),
// so that the kernels' thread splits run on small shapes; the default comes back on every
// way out.

#include <backplane/backends/cpu.hpp>

namespace backplane::test {

struct split_everything {
    split_everything() { cpu::set_min_work_per_thread(1); }
    ~split_everything() { cpu::reset_min_work_per_thread(); }
    split_everything(const split_everything&) = delete;
    split_everything& operator=(const split_everything&) = delete;
};

} // namespace backplane::test

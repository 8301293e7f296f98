// A stand-in for a foreign driver library (built without sanitizers, like a system
// library): it leaks one block from realloc, as lavapipe's stack was seen to, and is then
// dlclose()d by its host. See keep_foreign_modules.cpp and the test lsan_foreign_module.

#include <cstdlib>

namespace {
void* volatile sink = nullptr;
} // namespace

extern "C" __attribute__((visibility("default"))) void bp_foreign_leak() {
    sink = std::realloc(nullptr, 128); // the block is lost when sink is overwritten
    sink = nullptr;
}

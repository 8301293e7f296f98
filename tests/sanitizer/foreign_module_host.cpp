// Loads the foreign module given on the command line, lets it leak, unloads it. With
// a second argument `own`, the host leaks a block of its own too, which no suppression
// of a foreign library may hide. Run by cmake/run_lsan_foreign_module.cmake.

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {
void* volatile own_sink = nullptr;
} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s <module.so> [own]\n", argv[0]);
        return 2;
    }
    void* module = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (module == nullptr) {
        std::fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
        return 2;
    }
    auto leak = reinterpret_cast<void (*)()>(dlsym(module, "bp_foreign_leak"));
    if (leak == nullptr) {
        std::fprintf(stderr, "%s has no bp_foreign_leak\n", argv[1]);
        return 2;
    }
    leak();
    dlclose(module);
    if (argc > 2 && std::strcmp(argv[2], "own") == 0) {
        own_sink = std::malloc(64);
        own_sink = nullptr;
    }
    return 0;
}

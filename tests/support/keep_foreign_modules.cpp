// Part of every test program of the AddressSanitizer build (BACKPLANE_SANITIZE names
// address): keeps foreign shared libraries mapped until the process exits.
//
// Why: LeakSanitizer reports leaks at exit. The Vulkan loader dlclose()s its drivers
// (lavapipe, with LLVM behind it, and every other ICD it probed) and layers when an
// instance is destroyed, so an allocation one of them never freed is reported from an
// address that no module covers any more: `realloc <- (<unknown module>)`. A suppression
// can name a library only while the library is mapped. This dlclose() interposes the C
// library's (the program exports it, see tests/CMakeLists.txt): it leaves foreign
// libraries mapped, so their frames keep their module names and scripts/lsan.supp can
// name exactly them; backplane's own code is never in a suppressed frame.
//
// backplane's plugins (libbackplane-*.so) are really closed: their unloading is what the
// plugin tests check. BACKPLANE_TEST_UNLOAD_MODULES=1 turns the interposer off, which
// the test `lsan_foreign_module` uses to show the failure it prevents.

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <cstring>

namespace {

using dlclose_fn = int (*)(void*);

bool unloading_asked() noexcept {
    const char* v = std::getenv("BACKPLANE_TEST_UNLOAD_MODULES");
    return v != nullptr && v[0] == '1';
}

// The file name of the module behind a dlopen() handle, or null when unknown.
const char* module_file(void* handle) noexcept {
    link_map* lm = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || lm == nullptr || lm->l_name == nullptr) return nullptr;
    const char* slash = std::strrchr(lm->l_name, '/');
    return slash != nullptr ? slash + 1 : lm->l_name;
}

bool is_own_module(void* handle) noexcept {
    const char* file = module_file(handle);
    return file == nullptr || std::strncmp(file, "libbackplane", 12) == 0;
}

} // namespace

extern "C" int dlclose(void* handle) {
    static const auto real = reinterpret_cast<dlclose_fn>(dlsym(RTLD_NEXT, "dlclose"));
    if (unloading_asked() || is_own_module(handle)) return real(handle);
    return 0; // a foreign library stays mapped until exit, as if another reference held it
}

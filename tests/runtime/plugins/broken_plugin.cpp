// Broken plugins for the registry's error paths, one per BP_BROKEN_KIND:
//   1  built for another plugin API version
//   2  built with another toolchain (ABI fingerprint)
//   3  no entry point at all
//   4  its backend entry factory throws
//   5  loads, but enumerating its devices fails
//   6  its entry names one backend and its factory makes another

#include <backplane/runtime/plugin.hpp>

#include <stdexcept>
#include <vector>

#if BP_BROKEN_KIND == 1
BACKPLANE_PLUGIN_EXPORT const backplane::plugin_entry* backplane_plugin_entry() {
    static const backplane::plugin_entry e{backplane::plugin_api_version + 998, sizeof(backplane::plugin_entry), "?",
                                           "BadVersion", nullptr, nullptr, nullptr};
    return &e;
}
#elif BP_BROKEN_KIND == 2
BACKPLANE_PLUGIN_EXPORT const backplane::plugin_entry* backplane_plugin_entry() {
    static const backplane::plugin_entry e{backplane::plugin_api_version, sizeof(backplane::plugin_entry),
                                           "backplane-plugin-abi;some other compiler 1;", "BadAbi", nullptr, nullptr,
                                           nullptr};
    return &e;
}
#elif BP_BROKEN_KIND == 3
BACKPLANE_PLUGIN_EXPORT int backplane_something_else() { return 1; }
#elif BP_BROKEN_KIND == 4
namespace {
backplane::backend_reg make_reg() { throw std::runtime_error("no hardware for the throwing backend"); }
int score() { return 5; }
} // namespace
BACKPLANE_PLUGIN("Throwing", make_reg, score)
#elif BP_BROKEN_KIND == 5
namespace {
backplane::backend_reg make_reg() {
    return {"Failing", []() -> backplane::result<std::vector<backplane::any_device>> {
                return backplane::status(backplane::errc::device_error, "failing: the driver did not answer");
            }};
}
int score() { return 5; }
} // namespace
BACKPLANE_PLUGIN("Failing", make_reg, score)
#elif BP_BROKEN_KIND == 6
namespace {
backplane::backend_reg make_reg() {
    return {"Other", []() -> backplane::result<std::vector<backplane::any_device>> { return std::vector<backplane::any_device>{}; }};
}
int score() { return 5; }
} // namespace
BACKPLANE_PLUGIN("Misnamed", make_reg, score)
#else
#error "BP_BROKEN_KIND must be 1..6"
#endif

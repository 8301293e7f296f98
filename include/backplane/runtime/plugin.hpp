#pragma once
// Backend plugins: a backend built as a shared library from these same headers.
//
// A plugin exports one C function, `backplane_plugin_entry`, returning a plugin_entry:
// the plugin API version, an ABI fingerprint (compiler, standard library, layout of the
// core types), the backend's name, a score and the factory of its backend_reg. Write it
// with the macro:
//
//   // my_plugin.cpp, built with backplane_add_plugin(my_plugin my_plugin.cpp)
//   #include <backplane/runtime/plugin.hpp>
//   static backplane::backend_reg make_reg() { return {"MyAccel", enumerate_my_devices}; }
//   static int score() noexcept { return cpu_has_what_i_need() ? 10 : 0; }
//   BACKPLANE_PLUGIN("MyAccel", make_reg, score)
//
// The registry (runtime/registry.hpp) opens the library, checks the version and the
// fingerprint before it touches anything else, asks the score (0: this machine cannot
// run it; among variants of one backend the highest score wins), hands the plugin its
// module anchor (memory/buffer.hpp), and registers the backend_reg. Every object the
// plugin's code makes (devices, backends, buffers, the entry itself) holds that anchor,
// so the library is closed when the registry has forgotten the backend AND the last such
// object is gone: unloading is safe at any time.
//
// Build plugins with hidden visibility (backplane_add_plugin does, and with GCC also
// -fno-gnu-unique so that the library can really be unmapped): each module then has its
// own copy of the library's inline state, which is what keeps the anchors apart.

#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/erased/detail/exception_status.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/runtime/reg.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace backplane {

/// The plugin interface version these headers speak. A plugin built for another version
/// is refused with errc::not_supported naming both.
inline constexpr std::uint32_t plugin_api_version = 3; // 3: backend_options::fusions, the table's set_fusions

/// What `backplane_plugin_entry()` returns. The first two members keep their place in
/// every version, so any host can read them; the rest is used only once api_version and
/// abi match.
struct plugin_entry {
    std::uint32_t api_version; ///< plugin_api_version of the plugin's headers
    std::uint32_t entry_size;  ///< sizeof(plugin_entry) in the plugin
    const char* abi;           ///< detail::abi_fingerprint() of the plugin
    const char* name;          ///< the backend's name ("Vulkan")
    /// > 0: usable on this machine, the highest among variants of one backend wins;
    /// 0: cannot run here (not loaded).
    int (*score)() noexcept;
    /// Gives the plugin its module anchor (a handle that keeps the library loaded) and the
    /// program's set of live buffers, where the plugin's buffers register
    /// (docs/lifetime.md).
    void (*attach)(const std::shared_ptr<const void>& library, detail::live_buffers* buffers) noexcept;
    /// The backend's registry entry.
    result<backend_reg> (*make_reg)() noexcept;
};

/// The name of the entry point a plugin exports.
inline constexpr const char* plugin_entry_symbol = "backplane_plugin_entry";

namespace detail {

/// What must match between a program and a plugin for C++ objects to cross between
/// them: compiler, standard library and its string ABI, and the layout of the types that
/// cross (tensor, status, graph_view, buffer_handle, std::string, std::function).
inline const std::string& abi_fingerprint() {
    static const std::string fp = [] {
        std::string s = "backplane-plugin-abi;";
#if defined(__clang__)
        s += "clang " + std::to_string(__clang_major__) + ";";
#elif defined(__GNUC__)
        s += "gcc " + std::to_string(__GNUC__) + ";";
#else
        s += "unknown compiler;";
#endif
#if defined(_LIBCPP_VERSION)
        s += "libc++ " + std::to_string(_LIBCPP_VERSION) + ";";
#elif defined(__GLIBCXX__)
        s += "libstdc++ cxx11-abi " + std::to_string(_GLIBCXX_USE_CXX11_ABI) + ";";
#endif
        s += "tensor " + std::to_string(sizeof(tensor)) + ";status " + std::to_string(sizeof(status)) +
             ";graph_view " + std::to_string(sizeof(graph_view)) + ";string " + std::to_string(sizeof(std::string)) +
             ";function " + std::to_string(sizeof(std::function<bool()>)) + ";ptr " + std::to_string(sizeof(void*));
        return s;
    }();
    return fp;
}

/// The plugin side of the entry: the anchor and the program's live buffer set go where
/// this module's code finds them.
inline void plugin_attach(const std::shared_ptr<const void>& library, live_buffers* buffers) noexcept {
    module_anchor() = library;
    if (buffers != nullptr) live_buffer_set() = buffers;
}

} // namespace detail
} // namespace backplane

#if defined(_WIN32)
#define BACKPLANE_PLUGIN_EXPORT extern "C" __declspec(dllexport)
#else
#define BACKPLANE_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))
#endif

/// Defines the plugin entry point. `name`: the backend's name, a string literal (the
/// name of the backend_reg it makes); `make_reg`: a function returning
/// backplane::backend_reg (or a result of one); `score`: a function returning int (see
/// plugin_entry::score). Both functions
/// are called only after the host checked the version and the ABI; exceptions they throw
/// become a status.
#define BACKPLANE_PLUGIN(name, make_reg, score)                                                                       \
    BACKPLANE_PLUGIN_EXPORT const ::backplane::plugin_entry* backplane_plugin_entry() {                           \
        static const ::backplane::plugin_entry entry{                                                             \
            ::backplane::plugin_api_version,                                                                      \
            sizeof(::backplane::plugin_entry),                                                                    \
            ::backplane::detail::abi_fingerprint().c_str(),                                                       \
            name,                                                                                                 \
            +[]() noexcept -> int {                                                                               \
                try {                                                                                             \
                    return static_cast<int>(score());                                                             \
                } catch (...) {                                                                                   \
                    return 0;                                                                                     \
                }                                                                                                 \
            },                                                                                                    \
            &::backplane::detail::plugin_attach,                                                                  \
            +[]() noexcept -> ::backplane::result<::backplane::backend_reg> {                                     \
                try {                                                                                             \
                    return ::backplane::result<::backplane::backend_reg>(make_reg());                             \
                } catch (...) {                                                                                   \
                    return ::backplane::detail::status_of_current_exception("plugin: making the backend entry");  \
                }                                                                                                 \
            },                                                                                                    \
        };                                                                                                        \
        return &entry;                                                                                            \
    }

#pragma once
// The registry: the backends a program can use, chosen at run time.
//
//   auto& reg = backplane::registry::global();     // compiled-in backends, registered now
//   for (const auto& d : reg.devices()) fmt::print("{}: {}\n", d.name(), d.description());
//   auto b = reg.init_best();                      // a GPU, else an integrated GPU, else the CPU
//   auto v = reg.init_by_name("vulkan0");          // names are case-insensitive
//   auto r = reg.load_all();                       // plugins: libbackplane-*.so
//
// Entries (backend_reg) are listed in order: the compiled-in ones (CUDA, Vulkan, BLAS, CPU:
// GPUs before the host, as a "first device" search expects), with what is added or loaded
// later inserted before the compiled-in CPU, so that the host stays last. BACKPLANE_DISABLE_BACKENDS (a comma-separated list of names,
// case-insensitive) keeps compiled-in backends and plugins out of the registry: a program
// that links Vulkan but must not touch the driver sets BACKPLANE_DISABLE_BACKENDS=vulkan.
//
// Plugins (runtime/plugin.hpp): load(path) loads one; load_all() looks for files named
// libbackplane-<anything>.so in the given directory, in each directory of
// BACKPLANE_BACKEND_DIR (colon-separated) and in the directory of the executable, and
// among the files that name one backend loads only the one with the highest score.
// unload(name) forgets a backend; its library is closed once nothing made by it is left
// (devices, backends, buffers hold it), so unloading never invalidates a live object.
//
// Every failure is a status naming the file or the name and what was wrong; nothing
// throws, aborts or leaks. All members are thread-safe.

#include <backplane/core/concepts.hpp>
#include <backplane/core/error.hpp>
#include <backplane/erased/any.hpp>
#include <backplane/runtime/builtin.hpp>
#include <backplane/runtime/plugin.hpp>
#include <backplane/runtime/reg.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <dlfcn.h>

namespace backplane {

/// A plugin the registry loaded.
struct plugin_info {
    std::string name;           ///< its backend's name
    std::filesystem::path path; ///< the library file
    int score = 0;
};

/// What load_all did with one file.
struct plugin_attempt {
    std::filesystem::path path;
    std::string name; ///< the backend it names (empty when the file could not be read)
    int score = 0;
    bool loaded = false;
    status why; ///< why not loaded (success when loaded)
};

/// What load_all did.
struct load_report {
    std::vector<std::filesystem::path> searched; ///< the directories, in order
    std::vector<plugin_attempt> attempts;        ///< every candidate file, in order
    [[nodiscard]] std::size_t loaded() const noexcept {
        return static_cast<std::size_t>(std::count_if(attempts.begin(), attempts.end(), [](const auto& a) { return a.loaded; }));
    }
    /// One line per file: "loaded" or why not.
    [[nodiscard]] std::string describe() const {
        std::string s;
        for (const auto& a : attempts) {
            s += a.path.string() + ": ";
            if (a.loaded)
                s += "loaded " + a.name + " (score " + std::to_string(a.score) + ")";
            else
                s += "not loaded: " + a.why.message();
            s += '\n';
        }
        return s;
    }
};

/// How a registry starts.
struct registry_options {
    /// Register the compiled-in backends (runtime/builtin.hpp).
    bool builtins = true;
};

namespace detail {

inline bool iequal(std::string_view a, std::string_view b) noexcept {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

inline std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

/// Whether BACKPLANE_DISABLE_BACKENDS names `name`.
inline bool disabled_by_env(std::string_view name) {
    const char* env = std::getenv("BACKPLANE_DISABLE_BACKENDS");
    if (env == nullptr) return false;
    std::string_view list(env);
    while (!list.empty()) {
        const auto comma = list.find(',');
        std::string_view item = list.substr(0, comma);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
        if (!item.empty() && iequal(item, name)) return true;
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return false;
}

/// A plugin library opened and checked, not registered yet. Closing is the last owner's.
struct opened_plugin {
    std::shared_ptr<const void> library;
    const plugin_entry* entry = nullptr;
    std::string name;
    int score = 0;
    std::filesystem::path path;
};

inline result<opened_plugin> open_plugin(const std::filesystem::path& path) {
    const std::string where = "plugin '" + path.string() + "'";
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return status(errc::not_found, where + ": no such file");
    if (std::filesystem::is_directory(path, ec))
        return status(errc::invalid_argument, where + ": is a directory (load_all takes directories)");
    (void)::dlerror();
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* e = ::dlerror();
        return status(errc::invalid_argument,
                      where + ": cannot be loaded as a shared library (" + (e ? e : "unknown reason") + ")");
    }
    std::shared_ptr<const void> library;
    try {
        library = std::shared_ptr<const void>(handle, [](const void* h) { ::dlclose(const_cast<void*>(h)); });
    } catch (...) {
        ::dlclose(handle);
        return status(errc::alloc_failed, where + ": out of memory");
    }
    (void)::dlerror();
    void* sym = ::dlsym(handle, plugin_entry_symbol);
    if (sym == nullptr)
        return status(errc::not_found, where + ": has no entry point '" + plugin_entry_symbol +
                                           "' (not a backplane plugin: see BACKPLANE_PLUGIN)");
    using entry_fn = const plugin_entry* (*)();
    const plugin_entry* entry = reinterpret_cast<entry_fn>(sym)();
    if (entry == nullptr) return status(errc::failed, where + ": its entry point returned nothing");
    if (entry->api_version != plugin_api_version)
        return status(errc::not_supported, where + ": built for plugin API version " +
                                               std::to_string(entry->api_version) + ", this program speaks version " +
                                               std::to_string(plugin_api_version) + " (rebuild the plugin)");
    if (entry->entry_size != sizeof(plugin_entry) || entry->abi == nullptr ||
        std::strcmp(entry->abi, abi_fingerprint().c_str()) != 0)
        return status(errc::not_supported, where + ": built with another compiler, standard library or layout (plugin: '" +
                                               std::string(entry->abi ? entry->abi : "?") + "', this program: '" +
                                               abi_fingerprint() + "'); rebuild it with the same toolchain");
    if (entry->name == nullptr || *entry->name == '\0' || entry->score == nullptr || entry->attach == nullptr ||
        entry->make_reg == nullptr)
        return status(errc::invalid_argument, where + ": its entry is incomplete (no name or functions)");
    opened_plugin out;
    out.library = std::move(library);
    out.entry = entry;
    out.name = entry->name;
    out.path = path; // the score is asked later, once the name is known to be wanted
    return out;
}

/// Asks an opened plugin its score (its code decides whether this machine can run it).
inline void ask_score(opened_plugin& p) { p.score = p.entry->score(); }

/// The directory of the running executable (empty when it cannot be found).
inline std::filesystem::path executable_dir() {
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return {};
    return exe.parent_path();
}

inline bool is_plugin_file_name(const std::filesystem::path& p) {
    const std::string f = p.filename().string();
    constexpr std::string_view prefix = "libbackplane-", suffix = ".so";
    return f.size() > prefix.size() + suffix.size() && f.compare(0, prefix.size(), prefix) == 0 &&
           f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace detail

/// The registry (see the file comment).
class registry {
public:
    registry() : registry(registry_options{}) {}
    explicit registry(const registry_options& options) {
        if (options.builtins)
            for (auto& r : detail::builtin_regs())
                if (!detail::disabled_by_env(r.name())) entries_.push_back({std::move(r), "built in", 0});
    }
    registry(const registry&) = delete;
    registry& operator=(const registry&) = delete;

    /// The process-wide registry, made (with the compiled-in backends) on first use.
    static registry& global() {
        static registry r;
        return r;
    }

    // -- enumeration -----------------------------------------------------------------------

    /// Every backend entry, in registration order.
    [[nodiscard]] std::vector<backend_reg> regs() const {
        std::lock_guard lk(m_);
        std::vector<backend_reg> out;
        for (const auto& e : entries_) out.push_back(e.reg);
        return out;
    }
    /// The entry named `name` (case-insensitive); errc::not_found listing the names.
    [[nodiscard]] result<backend_reg> reg(std::string_view name) const {
        std::lock_guard lk(m_);
        for (const auto& e : entries_)
            if (detail::iequal(e.reg.name(), name)) return e.reg;
        return status(errc::not_found, "registry: no backend named '" + std::string(name) + "' (registered: " +
                                           names_locked() + ")");
    }
    /// Where an entry came from: "built in", "added", or the plugin's path; empty when
    /// there is no such entry.
    [[nodiscard]] std::string origin(std::string_view name) const {
        std::lock_guard lk(m_);
        for (const auto& e : entries_)
            if (detail::iequal(e.reg.name(), name)) return e.origin;
        return {};
    }
    /// The plugins loaded now.
    [[nodiscard]] std::vector<plugin_info> plugins() const {
        std::lock_guard lk(m_);
        std::vector<plugin_info> out;
        for (const auto& e : entries_)
            if (e.score > 0) out.push_back({e.reg.name(), e.origin, e.score});
        return out;
    }

    /// Every device of every entry, in registration order.
    [[nodiscard]] std::vector<any_device> devices() const {
        std::vector<any_device> out;
        for (const auto& r : regs())
            for (auto& d : r.devices()) out.push_back(std::move(d));
        return out;
    }
    /// The devices of kind `k`.
    [[nodiscard]] std::vector<any_device> devices(device_kind k) const {
        std::vector<any_device> out;
        for (auto& d : devices())
            if (d.kind() == k) out.push_back(std::move(d));
        return out;
    }
    /// The device named `name` (case-insensitive: "vulkan0", "CPU"), else the first
    /// device of the entry named `name` ("Vulkan"); errc::not_found listing the devices.
    [[nodiscard]] result<any_device> device(std::string_view name) const {
        const auto all = devices();
        for (const auto& d : all)
            if (detail::iequal(d.name(), name)) return d;
        for (const auto& r : regs())
            if (detail::iequal(r.name(), name)) {
                auto ds = r.devices();
                if (!ds.empty()) return ds.front();
                const status why = r.enumeration_status();
                return status(errc::not_found, "registry: backend '" + r.name() + "' has no devices" +
                                                   (why ? std::string() : " (" + why.message() + ")"));
            }
        std::string names;
        for (const auto& d : all) names += (names.empty() ? "" : ", ") + std::string(d.name());
        return status(errc::not_found, "registry: no device named '" + std::string(name) + "' (devices: " +
                                           (names.empty() ? "none" : names) + ")");
    }
    /// The first device of kind `k` (for device_kind::cpu the "CPU" entry's device first,
    /// as in best_device()); errc::not_found.
    [[nodiscard]] result<any_device> device(device_kind k) const {
        if (k == device_kind::cpu)
            for (const auto& r : regs())
                if (detail::iequal(r.name(), "CPU"))
                    for (auto& d : r.devices())
                        if (d.kind() == k) return d;
        for (auto& d : devices())
            if (d.kind() == k) return d;
        return status(errc::not_found, "registry: no device of kind " + std::string(to_string(k)));
    }
    /// The device init_best would use: a GPU, else an integrated GPU, else a CPU (the
    /// "CPU" entry's device before other CPU-kind devices, such as a software Vulkan
    /// driver); the first of its kind in registration order. Accelerators that only
    /// complement a host (BLAS) are never chosen alone.
    [[nodiscard]] result<any_device> best_device() const {
        for (device_kind k : {device_kind::gpu, device_kind::igpu, device_kind::cpu})
            if (auto d = device(k)) return d;
        return status(errc::not_found, "registry: no GPU, integrated GPU or CPU device");
    }

    // -- backends --------------------------------------------------------------------------

    /// A backend on the device named `name` (see device(name)).
    [[nodiscard]] result<any_backend> init_by_name(std::string_view name, const backend_options& options = {}) const {
        auto d = device(name);
        if (!d) return d.error();
        return d->make_backend(options);
    }
    /// A backend on the first device of kind `k`.
    [[nodiscard]] result<any_backend> init_by_type(device_kind k, const backend_options& options = {}) const {
        auto d = device(k);
        if (!d) return d.error();
        return d->make_backend(options);
    }
    /// A backend on best_device().
    [[nodiscard]] result<any_backend> init_best(const backend_options& options = {}) const {
        auto d = best_device();
        if (!d) return d.error();
        return d->make_backend(options);
    }

    // -- registration ----------------------------------------------------------------------

    /// Registers an entry; errc::invalid_argument when one of that name exists.
    status add(backend_reg r) {
        std::lock_guard lk(m_);
        if (auto s = check_free_locked(r.name()); !s) return s;
        insert_locked({std::move(r), "added", 0});
        return {};
    }
    /// Registers a device made at run time, in the entry named `reg_name` (made when
    /// there is none).
    status add_device(std::string_view reg_name, any_device d) {
        std::lock_guard lk(m_);
        for (auto& e : entries_)
            if (detail::iequal(e.reg.name(), reg_name)) {
                e.reg.add_device(std::move(d));
                return {};
            }
        backend_reg r(std::string(reg_name), {});
        r.add_device(std::move(d));
        insert_locked({std::move(r), "added", 0});
        return {};
    }

    // -- plugins ---------------------------------------------------------------------------

    /// Loads the plugin at `path` and registers its backend. Errors: errc::not_found (no
    /// file, no entry point), errc::invalid_argument (not a shared library, a directory,
    /// a backend of that name already registered), errc::not_supported (another plugin
    /// API version or toolchain; score 0: it cannot run on this machine), or what the
    /// plugin's own code reported.
    result<plugin_info> load(const std::filesystem::path& path) {
        auto p = detail::open_plugin(path);
        if (!p) return p.error();
        std::lock_guard lk(m_);
        if (auto s = check_free_locked(p->name); !s) return s;
        detail::ask_score(*p);
        if (auto s = register_locked(*p); !s) return s;
        return plugin_info{p->name, p->path, p->score};
    }

    /// Forgets the backend named `name` (a plugin's or any other); errc::not_found when
    /// there is none. A plugin's library is closed once the last object it made is gone.
    status unload(std::string_view name) {
        std::optional<entry> gone; // released after the lock
        std::lock_guard lk(m_);
        for (auto it = entries_.begin(); it != entries_.end(); ++it)
            if (detail::iequal(it->reg.name(), name)) {
                gone.emplace(std::move(*it));
                entries_.erase(it);
                return {};
            }
        return {errc::not_found, "registry: no backend named '" + std::string(name) + "' to unload (registered: " +
                                     names_locked() + ")"};
    }

    /// The directories load_all(dir) searches, in order: `dir` when given, each directory
    /// of BACKPLANE_BACKEND_DIR, the directory of the executable (duplicates removed).
    [[nodiscard]] static std::vector<std::filesystem::path> plugin_search_path(
        const std::optional<std::filesystem::path>& dir = std::nullopt) {
        std::vector<std::filesystem::path> out;
        auto add = [&](std::filesystem::path p) {
            if (p.empty()) return;
            std::error_code ec;
            auto canon = std::filesystem::weakly_canonical(p, ec);
            if (!ec) p = canon;
            if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(std::move(p));
        };
        if (dir) add(*dir);
        if (const char* env = std::getenv("BACKPLANE_BACKEND_DIR")) {
            std::string_view list(env);
            while (!list.empty()) {
                const auto colon = list.find(':');
                add(std::filesystem::path(std::string(list.substr(0, colon))));
                if (colon == std::string_view::npos) break;
                list.remove_prefix(colon + 1);
            }
        }
        add(detail::executable_dir());
        return out;
    }

    /// Loads the plugins found in plugin_search_path(dir): files named
    /// libbackplane-<anything>.so; of several naming one backend, only the highest score
    /// (> 0) is loaded; backends already registered or disabled by
    /// BACKPLANE_DISABLE_BACKENDS are skipped. Errors: errc::not_found when `dir` is given
    /// and is not a directory, or when no directory holds a plugin file; otherwise the
    /// report says what happened to each file.
    result<load_report> load_all(const std::optional<std::filesystem::path>& dir = std::nullopt) {
        std::error_code ec;
        if (dir && !std::filesystem::is_directory(*dir, ec))
            return status(errc::not_found, "registry: load_all: '" + dir->string() + "' is not a directory");
        load_report report;
        report.searched = plugin_search_path(dir);
        std::vector<std::filesystem::path> files;
        for (const auto& d : report.searched) {
            std::vector<std::filesystem::path> here;
            for (std::filesystem::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec))
                if (detail::is_plugin_file_name(it->path()) && !it->is_directory(ec)) here.push_back(it->path());
            std::sort(here.begin(), here.end());
            files.insert(files.end(), here.begin(), here.end());
        }
        if (files.empty()) {
            std::string dirs;
            for (const auto& d : report.searched) dirs += (dirs.empty() ? "" : ", ") + d.string();
            return status(errc::not_found, "registry: load_all: no backend plugins (libbackplane-*.so) in " +
                                               (dirs.empty() ? std::string("no directory") : dirs));
        }

        std::vector<std::optional<detail::opened_plugin>> opened;
        for (const auto& f : files) {
            plugin_attempt a{f, {}, 0, false, {}};
            auto p = detail::open_plugin(f);
            if (!p) {
                a.why = p.error();
                opened.emplace_back();
            } else if (detail::disabled_by_env(p->name)) { // never asked: its code stays idle
                a.name = p->name;
                a.why = {errc::not_supported, "'" + a.name + "' is disabled by BACKPLANE_DISABLE_BACKENDS"};
                opened.emplace_back();
            } else if (auto taken = check_free(p->name); !taken) {
                a.name = p->name;
                a.why = taken;
                opened.emplace_back();
            } else {
                detail::ask_score(*p);
                a.name = p->name;
                a.score = p->score;
                opened.emplace_back(std::move(*p));
            }
            report.attempts.push_back(std::move(a));
        }
        // the best variant of each backend
        std::map<std::string, std::size_t> best;
        for (std::size_t i = 0; i < opened.size(); ++i) {
            if (!opened[i] || opened[i]->score <= 0) continue;
            auto [it, fresh] = best.emplace(detail::lower(opened[i]->name), i);
            if (!fresh && opened[i]->score > opened[it->second]->score) it->second = i;
        }
        std::lock_guard lk(m_);
        for (std::size_t i = 0; i < opened.size(); ++i) {
            if (!opened[i]) continue;
            plugin_attempt& a = report.attempts[i];
            if (opened[i]->score <= 0) {
                a.why = {errc::not_supported, "'" + a.name + "' reports it cannot run on this machine (score " +
                                                  std::to_string(a.score) + ")"};
                continue;
            }
            const std::size_t w = best[detail::lower(opened[i]->name)];
            if (w != i) {
                a.why = {errc::not_supported, "'" + a.name + "': the variant " + opened[w]->path.filename().string() +
                                                  " scores higher (" + std::to_string(opened[w]->score) + " > " +
                                                  std::to_string(a.score) + ")"};
                continue;
            }
            if (auto s = register_locked(*opened[i]); !s) {
                a.why = s;
                continue;
            }
            a.loaded = true;
        }
        return report;
    }

private:
    struct entry {
        backend_reg reg;
        std::string origin; // "built in", "added", or the plugin's path
        int score = 0;      // a plugin's score (> 0), else 0
    };

    [[nodiscard]] std::string names_locked() const {
        std::string s;
        for (const auto& e : entries_) s += (s.empty() ? "" : ", ") + e.reg.name();
        return s.empty() ? "none" : s;
    }
    [[nodiscard]] status check_free(std::string_view name) const {
        std::lock_guard lk(m_);
        return check_free_locked(name);
    }
    [[nodiscard]] status check_free_locked(std::string_view name) const {
        for (const auto& e : entries_)
            if (detail::iequal(e.reg.name(), name))
                return {errc::invalid_argument, "registry: a backend named '" + std::string(name) +
                                                    "' is already registered (" + e.origin + "); unload it first"};
        return {};
    }
    status register_locked(const detail::opened_plugin& p) {
        const std::string where = "plugin '" + p.path.string() + "'";
        if (p.score <= 0)
            return {errc::not_supported, where + " ('" + p.name + "'): reports it cannot run on this machine (score " +
                                             std::to_string(p.score) + ")"};
        if (auto s = check_free_locked(p.name); !s) return s;
        p.entry->attach(p.library, detail::live_buffer_set());
        auto r = p.entry->make_reg();
        if (!r) return {r.error().code(), where + ": " + r.error().message()};
        if (!detail::iequal(r->name(), p.name))
            return {errc::invalid_argument, where + ": its entry says '" + p.name + "' but its backend is named '" +
                                                r->name() + "'"};
        insert_locked({std::move(*r), p.path.string(), p.score});
        return {};
    }

    /// New entries go before the compiled-in CPU, so that the host stays last.
    void insert_locked(entry e) {
        auto at = std::find_if(entries_.begin(), entries_.end(),
                               [](const entry& x) { return x.origin == "built in" && x.reg.name() == "CPU"; });
        entries_.insert(at, std::move(e));
    }

    mutable std::mutex m_;
    std::vector<entry> entries_;
};

} // namespace backplane

#pragma once
// backend_reg: one backend's entry in the registry ("CPU", "BLAS", "Vulkan", a plugin's):
// its name, its features and its devices, enumerated the first time someone asks (so a
// program that never looks at Vulkan never creates a Vulkan instance).
//
//   backplane::backend_reg reg("MyAccel", [] () -> backplane::result<std::vector<backplane::any_device>> {
//       return std::vector{backplane::any_device::make(my_device{})};
//   });

#include <backplane/core/concepts.hpp>
#include <backplane/core/error.hpp>
#include <backplane/erased/any.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane {

/// A backend's registry entry (see the file comment). A shared handle: copies refer to
/// the same entry. Thread-safe.
class backend_reg {
public:
    using enumerate_fn = std::function<result<std::vector<any_device>>()>;
    using features_fn = std::function<std::vector<feature>(const std::vector<any_device>& devices)>;

    /// `enumerate` lists the devices (called once, on first use; an error status there
    /// means "no devices", kept as enumeration_status()); `features` lists what the
    /// backend offers, given its devices (called each time they are asked for; empty:
    /// none).
    backend_reg(std::string name, enumerate_fn enumerate, features_fn features = {})
        : s_(std::make_shared<state>(std::move(name), std::move(enumerate), std::move(features))) {}

    [[nodiscard]] const std::string& name() const noexcept { return st().name; }
    /// Its features; empty when it lists none. Enumerates the devices first (features
    /// often describe them: the function is given them).
    [[nodiscard]] std::vector<feature> features() const {
        if (!st().features) return {};
        const std::vector<any_device> devs = devices();
        try {
            return st().features(devs);
        } catch (...) {
            return {};
        }
    }
    /// Its devices (enumerated on the first call).
    [[nodiscard]] std::vector<any_device> devices() const {
        enumerate();
        std::lock_guard lk(st().m);
        return st().devices;
    }
    /// Why there are no devices, when enumerating failed (a machine without Vulkan...);
    /// success otherwise.
    [[nodiscard]] status enumeration_status() const {
        enumerate();
        std::lock_guard lk(st().m);
        return st().enum_status;
    }
    /// Adds a device made at run time (after the enumerated ones).
    void add_device(any_device d) {
        enumerate();
        std::lock_guard lk(st().m);
        st().devices.push_back(std::move(d));
    }

    /// The same entry (copies compare equal).
    friend bool operator==(const backend_reg& a, const backend_reg& b) noexcept { return a.s_.value() == b.s_.value(); }

private:
    struct state {
        state(std::string n, enumerate_fn e, features_fn f)
            : name(std::move(n)), enumerate(std::move(e)), features(std::move(f)) {}
        std::string name;
        enumerate_fn enumerate;
        features_fn features;
        std::mutex m;
        bool enumerated = false;
        std::vector<any_device> devices;
        status enum_status;
    };

    void enumerate() const {
        std::lock_guard lk(st().m);
        if (st().enumerated) return;
        st().enumerated = true;
        if (!st().enumerate) return;
        try {
            auto r = st().enumerate();
            if (!r) {
                st().enum_status = r.error();
                return;
            }
            for (auto& d : *r) st().devices.push_back(std::move(d));
        } catch (...) {
            st().enum_status = detail::status_of_current_exception(st().name + ": enumerating devices");
        }
    }

    [[nodiscard]] state& st() const noexcept { return *s_.value(); }

    detail::anchored<std::shared_ptr<state>> s_;
};

} // namespace backplane

#pragma once
// detail::anchored<T>: the state of an erased wrapper together with the module anchor
// (detail::module_anchor(), memory/buffer.hpp) of the code that made it, released in
// the one order that is safe when that code lives in a backend plugin: the state first,
// then the anchor, so the library is never unmapped under a running destructor.

#include <backplane/memory/buffer.hpp> // module_anchor

#include <memory>
#include <utility>

namespace backplane::detail {

/// A value made by some module's code (a device, a backend, a registry entry), with the
/// module anchor that keeps that code loaded. Destruction releases the value before the
/// anchor, and so does assignment: the old contents are swapped into the parameter, which
/// is destroyed in that order. Every wrapper of the run-time face holds its state in one.
template <class T>
class anchored {
public:
    explicit anchored(T value, std::shared_ptr<const void> anchor = module_anchor().lock())
        : anchor_(std::move(anchor)), value_(std::move(value)) {}
    anchored(const anchored&) = default;
    anchored(anchored&&) noexcept = default;
    anchored& operator=(anchored o) noexcept {
        using std::swap;
        swap(value_, o.value_);
        swap(anchor_, o.anchor_);
        return *this;
    }
    ~anchored() = default;

    [[nodiscard]] T& value() noexcept { return value_; }
    [[nodiscard]] const T& value() const noexcept { return value_; }
    [[nodiscard]] const std::shared_ptr<const void>& anchor() const noexcept { return anchor_; }

private:
    std::shared_ptr<const void> anchor_; // declared first: released after the value
    T value_;
};

} // namespace backplane::detail

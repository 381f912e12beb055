// CustomOp: an operation with a native implementation that a platform or an
// out-of-tree plugin may override by name. The implementation is chosen once,
// when the op is constructed: an out-of-tree override first, then the active
// platform's, then the native one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace troupe {

namespace custom_op_registry {
using AnyFn = void (*)();
/// Register `fn` for op `name` on platforms whose device_type is `device_type`.
void register_platform_impl(std::string_view name, std::string_view device_type, AnyFn fn);
/// Register an out-of-tree override of `name`; it wins over platform implementations.
void register_oot(std::string_view name, AnyFn fn);
/// The device_type the engine activated ("" before activation).
void set_active_device_type(std::string_view device_type);
std::string active_device_type();
/// The override for `name` ("oot" or "platform"), or nullptr for none.
AnyFn find(std::string_view name, std::string* chosen_from);
/// Names of ops with any registered override.
std::vector<std::string> names();
}  // namespace custom_op_registry

/// `Fn` is a plain function-pointer type, e.g. `void (*)(const float*, float*, long)`.
template <class Fn>
class CustomOp {
 public:
  CustomOp(std::string name, Fn native) : name_(std::move(name)), fn_(native), chosen_("native") {
    std::string from;
    if (auto f = custom_op_registry::find(name_, &from)) {
      fn_ = reinterpret_cast<Fn>(f);
      chosen_ = from;
    }
  }
  const std::string& name() const { return name_; }
  /// "native", "platform" or "oot": which implementation this op runs.
  const std::string& chosen() const { return chosen_; }
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const { return fn_(std::forward<Args>(args)...); }

 private:
  std::string name_;
  Fn fn_;
  std::string chosen_;
};

template <class Fn>
void register_custom_op_for_platform(std::string_view name, std::string_view device_type, Fn fn) {
  custom_op_registry::register_platform_impl(name, device_type, reinterpret_cast<custom_op_registry::AnyFn>(fn));
}
template <class Fn>
void register_custom_op_oot(std::string_view name, Fn fn) {
  custom_op_registry::register_oot(name, reinterpret_cast<custom_op_registry::AnyFn>(fn));
}

}  // namespace troupe

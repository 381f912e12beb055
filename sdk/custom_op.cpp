#include "troupe/custom_op.hpp"

#include <map>
#include <mutex>

namespace troupe::custom_op_registry {
namespace {
struct Entry {
  AnyFn oot = nullptr;
  std::map<std::string, AnyFn, std::less<>> per_platform;
};
struct Registry {
  std::mutex mu;
  std::map<std::string, Entry, std::less<>> ops;
  std::string active_device_type;
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

void register_platform_impl(std::string_view name, std::string_view device_type, AnyFn fn) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.ops[std::string(name)].per_platform[std::string(device_type)] = fn;
}

void register_oot(std::string_view name, AnyFn fn) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.ops[std::string(name)].oot = fn;
}

void set_active_device_type(std::string_view device_type) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.active_device_type = std::string(device_type);
}

std::string active_device_type() {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  return r.active_device_type;
}

AnyFn find(std::string_view name, std::string* chosen_from) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.ops.find(name);
  if (it == r.ops.end()) return nullptr;
  if (it->second.oot) {
    if (chosen_from) *chosen_from = "oot";
    return it->second.oot;
  }
  auto p = it->second.per_platform.find(r.active_device_type);
  if (p != it->second.per_platform.end()) {
    if (chosen_from) *chosen_from = "platform";
    return p->second;
  }
  return nullptr;
}

std::vector<std::string> names() {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<std::string> out;
  for (const auto& [n, e] : r.ops) out.push_back(n);
  return out;
}

}  // namespace troupe::custom_op_registry

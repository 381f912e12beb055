// A process-wide table of factories by name, shared by the SDK's registries
// (scheduler policies, logits processors): registering the same factory again
// is a no-op, another one under a taken name replaces it with a warning.
// Internal to sdk/.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/log.hpp"

namespace troupe::detail {

template <class Factory>
class NamedFactories {
 public:
  /// `kind` names an entry in the warning ("Scheduler policy").
  explicit NamedFactories(const char* kind, std::map<std::string, Factory, std::less<>> initial = {})
      : kind_(kind), factories_(std::move(initial)) {}

  void add(std::string_view name, Factory factory) {
    std::lock_guard lock(mu_);
    auto it = factories_.find(name);
    if (it == factories_.end()) {
      factories_.emplace(std::string(name), factory);
      return;
    }
    if (it->second == factory) return;  // the same registration again: idempotent
    TROUPE_LOG_WARNING("{} {} is already registered, and will be overwritten by the new one.", kind_, name);
    it->second = factory;
  }
  std::vector<std::string> names() const {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& entry : factories_) out.push_back(entry.first);
    return out;
  }
  /// The factory registered as `name`, or nullptr.
  Factory find(std::string_view name) const {
    std::lock_guard lock(mu_);
    auto it = factories_.find(name);
    return it == factories_.end() ? nullptr : it->second;
  }
  /// "a, b, c" (or "" when empty).
  std::string joined_names() const {
    std::string list;
    for (const auto& n : names()) list += (list.empty() ? "" : ", ") + n;
    return list;
  }

 private:
  const char* kind_;
  mutable std::mutex mu_;
  std::map<std::string, Factory, std::less<>> factories_;
};

}  // namespace troupe::detail

#include "troupe/model_registry.hpp"

#include <map>
#include <mutex>

#include "troupe/log.hpp"

namespace troupe::model_registry {
namespace {
struct Registry {
  std::mutex mu;
  std::map<std::string, ModelFactory, std::less<>> factories;
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

void register_model(std::string_view architecture, ModelFactory factory) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.factories.find(architecture);
  if (it != r.factories.end()) {
    if (it->second == factory) return;  // the same registration again: idempotent
    TROUPE_LOG_WARNING("Model architecture {} is already registered, and will be overwritten by the new model.",
                       architecture);
    it->second = factory;
    return;
  }
  r.factories.emplace(std::string(architecture), factory);
}

std::vector<std::string> supported_architectures() {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<std::string> out;
  for (const auto& [name, f] : r.factories) out.push_back(name);
  return out;
}

bool is_registered(std::string_view architecture) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  return r.factories.find(architecture) != r.factories.end();
}

Result<std::unique_ptr<Model>> create(std::string_view architecture, const ModelSource& source,
                                      const ModelContext& context) {
  ModelFactory factory = nullptr;
  {
    auto& r = registry();
    std::lock_guard lock(r.mu);
    auto it = r.factories.find(architecture);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    std::string list;
    for (const auto& a : supported_architectures()) list += (list.empty() ? "" : ", ") + a;
    return not_found("model architecture '" + std::string(architecture) +
                     "' is not supported; registered architectures: " + (list.empty() ? "(none)" : list));
  }
  return factory(source, context);
}

}  // namespace troupe::model_registry

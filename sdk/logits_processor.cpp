#include "troupe/logits_processor.hpp"

#include <map>
#include <mutex>

#include "troupe/log.hpp"

namespace troupe {

Status LogitsProcessor::validate_request(const LogitsRequest&) const { return {}; }

namespace logits_processor_registry {
namespace {
struct Registry {
  std::mutex mu;
  std::map<std::string, LogitsProcessorFactory, std::less<>> factories;
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

void register_processor(std::string_view name, LogitsProcessorFactory factory) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.factories.find(name);
  if (it != r.factories.end()) {
    if (it->second == factory) return;  // the same registration again: idempotent
    TROUPE_LOG_WARNING("Logits processor {} is already registered, and will be overwritten by the new one.", name);
    it->second = factory;
    return;
  }
  r.factories.emplace(std::string(name), factory);
}

std::vector<std::string> registered_processors() {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<std::string> out;
  for (const auto& [name, f] : r.factories) out.push_back(name);
  return out;
}

bool is_registered(std::string_view name) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  return r.factories.find(name) != r.factories.end();
}

Result<std::unique_ptr<LogitsProcessor>> create(std::string_view name, const LogitsProcessorContext& context) {
  LogitsProcessorFactory factory = nullptr;
  {
    auto& r = registry();
    std::lock_guard lock(r.mu);
    auto it = r.factories.find(name);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    std::string list;
    for (const auto& n : registered_processors()) list += (list.empty() ? "" : ", ") + n;
    return not_found("logits processor '" + std::string(name) + "' (--logits-processors) is not registered; registered: " +
                     (list.empty() ? "(none)" : list) + " (general plugins register them; is it loaded? see `troupe plugins`)");
  }
  auto processor = factory(context);
  if (processor && !*processor)
    return internal_error("logits processor '" + std::string(name) + "': its factory returned null");
  return processor;
}

}  // namespace logits_processor_registry
}  // namespace troupe

#include "troupe/logits_processor.hpp"

#include "named_factories.hpp"

namespace troupe {

Status LogitsProcessor::validate_request(const LogitsRequest&) const { return {}; }

namespace logits_processor_registry {
namespace {
detail::NamedFactories<LogitsProcessorFactory>& registry() {
  static detail::NamedFactories<LogitsProcessorFactory> r("Logits processor");
  return r;
}
}  // namespace

void register_processor(std::string_view name, LogitsProcessorFactory factory) { registry().add(name, factory); }

std::vector<std::string> registered_processors() { return registry().names(); }

bool is_registered(std::string_view name) { return registry().find(name) != nullptr; }

Result<std::unique_ptr<LogitsProcessor>> create(std::string_view name, const LogitsProcessorContext& context) {
  LogitsProcessorFactory factory = registry().find(name);
  if (!factory) {
    const std::string list = registry().joined_names();
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

#include "runtime/rank/spec_decode/speculative_config.hpp"

#include <fmt/format.h>

#include <optional>

#include "runtime/text/json/json_io.hpp"

namespace troupe::spec_decode {
namespace {

// The largest draft one step verifies (vLLM's MAX_SPEC_LEN is 128).
constexpr int kMaxSpeculativeTokens = 128;

Result<std::optional<int>> int_field(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::optional<int>{};
  if (!it->is_number_integer())
    return invalid_argument(fmt::format("--speculative-config: \"{}\" must be an integer, got {}", key, it->dump()));
  const auto v = it->get<int64_t>();
  if (v < 1 || v > 1 << 20)
    return invalid_argument(fmt::format("--speculative-config: \"{}\" must be at least 1, got {}", key, v));
  return std::optional<int>(static_cast<int>(v));
}

}  // namespace

Status validate(const SpeculativeConfig& c) {
  if (c.method.empty()) return {};
  if (c.method != "ngram")
    return invalid_argument("--speculative-config: method \"" + c.method + "\" is not supported (only \"ngram\")");
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > kMaxSpeculativeTokens)
    return invalid_argument(fmt::format("--speculative-config: num_speculative_tokens must be in 1..{}, got {}",
                                        kMaxSpeculativeTokens, c.num_speculative_tokens));
  if (c.prompt_lookup_min < 1 || c.prompt_lookup_max < 1)
    return invalid_argument(fmt::format("--speculative-config: prompt_lookup_min ({}) and prompt_lookup_max ({}) must "
                                        "be at least 1",
                                        c.prompt_lookup_min, c.prompt_lookup_max));
  if (c.prompt_lookup_min > c.prompt_lookup_max)
    return invalid_argument(fmt::format("--speculative-config: prompt_lookup_min ({}) must not exceed "
                                        "prompt_lookup_max ({})",
                                        c.prompt_lookup_min, c.prompt_lookup_max));
  return {};
}

Result<SpeculativeConfig> parse_speculative_config(std::string_view json) {
  json_io::ParseError error;
  nlohmann::json j = json_io::parse(json, &error);
  if (j.is_discarded())
    return invalid_argument(
        fmt::format("--speculative-config is not valid JSON (at byte {}): {}", error.offset, error.message));
  if (!j.is_object()) return invalid_argument("--speculative-config must be a JSON object, got " + j.dump());
  for (const auto& [key, value] : j.items()) {
    (void)value;
    if (key != "method" && key != "num_speculative_tokens" && key != "prompt_lookup_max" &&
        key != "prompt_lookup_min")
      return invalid_argument("--speculative-config: unknown key \"" + json_io::printable(key) +
                              "\" (known: method, num_speculative_tokens, prompt_lookup_max, prompt_lookup_min)");
  }
  SpeculativeConfig c;
  auto method = j.find("method");
  if (method == j.end() || !method->is_string())
    return invalid_argument("--speculative-config needs \"method\" as a string (\"ngram\")");
  c.method = method->get<std::string>();
  if (c.method == "[ngram]") c.method = "ngram";  // vLLM's legacy spelling
  if (c.method == "eagle" || c.method == "eagle3" || c.method == "medusa" || c.method == "mlp_speculator" ||
      c.method == "draft_model" || c.method == "deepseek_mtp" || c.method == "mtp")
    return not_supported("--speculative-config: method \"" + c.method +
                         "\" needs a draft model, which troupe does not implement; only \"ngram\" (prompt lookup) is");
  if (c.method != "ngram")
    return invalid_argument("--speculative-config: unknown method \"" + json_io::printable(c.method) +
                            "\" (supported: \"ngram\")");
  auto k = int_field(j, "num_speculative_tokens");
  if (!k) return k.status();
  if (!k->has_value()) return invalid_argument("--speculative-config needs \"num_speculative_tokens\"");
  c.num_speculative_tokens = **k;
  auto max_n = int_field(j, "prompt_lookup_max");
  if (!max_n) return max_n.status();
  auto min_n = int_field(j, "prompt_lookup_min");
  if (!min_n) return min_n.status();
  // vLLM's defaults: each bound defaults to the other, both to 5.
  c.prompt_lookup_max = max_n->value_or(min_n->value_or(5));
  c.prompt_lookup_min = min_n->value_or(max_n->value_or(5));
  TROUPE_RETURN_IF_ERROR(validate(c));
  return c;
}

std::string describe(const SpeculativeConfig& c) {
  if (!c.enabled()) return "off";
  return fmt::format("{}, {} speculative tokens, n-gram {}..{}", c.method, c.num_speculative_tokens,
                     c.prompt_lookup_min, c.prompt_lookup_max);
}

}  // namespace troupe::spec_decode

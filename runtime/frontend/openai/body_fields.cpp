#include "runtime/frontend/openai/body_fields.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <utility>

#include "troupe/log.hpp"

namespace troupe::openai::body {

using json = nlohmann::json;

Error parse_object(std::string_view body, const Limits& limits, json* out) {
  if (json_depth(body, limits.max_json_depth + 1) > limits.max_json_depth)
    return invalid_json(fmt::format("nesting deeper than {} levels", limits.max_json_depth));
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_json("could not parse the request body (or it is not UTF-8)");
  if (!j.is_object()) return invalid_json("the request body must be a JSON object");
  *out = std::move(j);
  return std::nullopt;
}

void log_unknown_fields(const json& j, std::initializer_list<const char*> known, Endpoint endpoint, const char* what) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool found = is_unimplemented_vllm_field(it.key(), endpoint);
    for (const char* k : known) found = found || it.key() == k;
    if (!found) TROUPE_LOG_DEBUG("{}: ignoring unknown field '{}'", what, it.key());
  }
}

const json* field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

Error get_string(const json& j, const char* key, std::string* out) {
  const json* v = field(j, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) return invalid_param(key, "must be a string");
  *out = v->get<std::string>();
  return std::nullopt;
}

Error get_bool(const json& j, const char* key, bool* out) {
  const json* v = field(j, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return invalid_param(key, "must be a boolean");
  *out = v->get<bool>();
  return std::nullopt;
}

Error get_double(const json& j, const char* key, std::optional<double>* out) {
  const json* v = field(j, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) return invalid_param(key, "must be a number");
  double d = v->get<double>();
  if (!std::isfinite(d)) return invalid_param(key, "must be a finite number");
  *out = d;
  return std::nullopt;
}

Error as_int(const json& v, const char* key, int64_t* out) {
  if (v.is_number_integer()) {
    *out = v.get<int64_t>();
    return std::nullopt;
  }
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    *out = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                          : static_cast<int64_t>(u);
    return std::nullopt;
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) {
      *out = static_cast<int64_t>(d);
      return std::nullopt;
    }
  }
  return invalid_param(key, "must be an integer");
}

Error get_int(const json& j, const char* key, std::optional<int64_t>* out) {
  const json* v = field(j, key);
  if (!v) return std::nullopt;
  int64_t x = 0;
  if (auto e = as_int(*v, key, &x)) return e;
  *out = x;
  return std::nullopt;
}

Error get_int32(const json& j, const char* key, const char* what, std::optional<int32_t>* out) {
  std::optional<int64_t> i;
  if (auto e = get_int(j, key, &i)) return e;
  if (!i) return std::nullopt;
  if (*i < std::numeric_limits<int32_t>::min() || *i > std::numeric_limits<int32_t>::max())
    return invalid_param(key, fmt::format("{}, got {}", what, *i));
  *out = static_cast<int32_t>(*i);
  return std::nullopt;
}

Error get_truncate_prompt_tokens(const json& j, std::optional<int64_t>* out) {
  if (auto e = get_int(j, "truncate_prompt_tokens", out)) return e;
  if (*out && **out < 1 && **out != -1)
    return invalid_param("truncate_prompt_tokens", "must be at least 1, or -1 for the model's maximum length");
  return std::nullopt;
}

Error parse_token_list(const json& v, const char* key, std::vector<int32_t>* out) {
  out->clear();
  out->reserve(v.size());
  for (const auto& t : v) {
    int64_t x = 0;
    if (auto e = as_int(t, key, &x)) return invalid_param(key, "token ids must be integers");
    if (x < 0 || x > std::numeric_limits<int32_t>::max()) return invalid_param(key, fmt::format("token id {} is out of range", x));
    out->push_back(static_cast<int32_t>(x));
  }
  return std::nullopt;
}

}  // namespace troupe::openai::body

#include "runtime/model_files/hf/generation_config.hpp"

#include <sys/stat.h>

#include <cmath>
#include <limits>

#include "runtime/text/json/json_io.hpp"

namespace troupe::hf {

Result<GenerationDefaults> read_generation_defaults(const nlohmann::json& c, const std::string& file) {
  GenerationDefaults d;
  d.origin = file;
  if (!c.is_object()) return data_loss(file + ": the top level is not a JSON object");
  auto bad = [&](const char* key, const char* expected) {
    return data_loss(file + ": " + key + " is " + c.at(key).dump().substr(0, 40) + ", expected " + expected);
  };
  // transformers' GenerationConfig defaults: a value equal to one of them is not in the diff.
  const std::pair<const char*, double> kNumbers[] = {
      {"temperature", 1.0}, {"top_p", 1.0}, {"min_p", NAN}, {"repetition_penalty", 1.0}};
  std::optional<double>* outs[] = {&d.temperature, &d.top_p, &d.min_p, &d.repetition_penalty};
  for (size_t i = 0; i < 4; ++i) {
    const auto it = c.find(kNumbers[i].first);
    if (it == c.end() || it->is_null()) continue;
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
      return bad(kNumbers[i].first, "a non-negative number");
    if (it->get<double>() != kNumbers[i].second) *outs[i] = it->get<double>();
  }
  if (auto it = c.find("top_k"); it != c.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < -1 || it->get<int64_t>() > std::numeric_limits<int32_t>::max())
      return bad("top_k", "an integer >= -1");
    if (it->get<int64_t>() != 50) d.top_k = it->get<int64_t>();
  }
  if (auto it = c.find("max_new_tokens"); it != c.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > std::numeric_limits<int32_t>::max())
      return bad("max_new_tokens", "a positive integer");
    d.max_tokens = it->get<int64_t>();
  }
  if (auto it = c.find("eos_token_id"); it != c.end() && !it->is_null()) {
    const nlohmann::json list = it->is_array() ? *it : nlohmann::json::array({*it});
    for (const auto& id : list) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max())
        return bad("eos_token_id", "a token id or a list of them");
      d.eos_token_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  return d;
}

Result<GenerationDefaults> read_generation_defaults_file(const std::string& dir) {
  const std::string file = dir + "/generation_config.json";
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return GenerationDefaults{};
  auto doc = json_io::read_file(file, uint64_t{16} << 20);
  if (!doc.ok()) return doc.status();
  return read_generation_defaults(*doc, file);
}

}  // namespace troupe::hf

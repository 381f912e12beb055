#include "troupe/config_view.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace troupe {

std::string ConfigView::get_string(std::string_view key, std::string_view fallback) const {
  auto v = get(key);
  return v ? std::move(*v) : std::string(fallback);
}

int64_t ConfigView::get_int(std::string_view key, int64_t fallback) const {
  auto v = get(key);
  if (!v || v->empty()) return fallback;
  int64_t out = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  return ec == std::errc() && end == v->data() + v->size() ? out : fallback;
}

double ConfigView::get_double(std::string_view key, double fallback) const {
  auto v = get(key);
  if (!v || v->empty()) return fallback;
  char* end = nullptr;
  const double out = std::strtod(v->c_str(), &end);
  return end == v->c_str() + v->size() && std::isfinite(out) ? out : fallback;
}

bool ConfigView::get_bool(std::string_view key, bool fallback) const {
  auto v = get(key);
  if (!v) return fallback;
  if (*v == "true") return true;
  if (*v == "false") return false;
  return fallback;
}

std::vector<std::string> ConfigView::get_list(std::string_view key) const {
  std::vector<std::string> out;
  auto v = get(key);
  if (!v) return out;
  size_t start = 0;
  while (start <= v->size()) {
    size_t comma = v->find(',', start);
    if (comma == std::string::npos) comma = v->size();
    if (comma > start) out.push_back(v->substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

ConfigValues::ConfigValues(const ConfigView& view) {
  for (auto& key : view.keys())
    if (auto v = view.get(key)) values_.emplace(key, std::move(*v));
}

std::optional<std::string> ConfigValues::get(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> ConfigValues::keys() const {
  std::vector<std::string> out;
  out.reserve(values_.size());
  for (const auto& [k, v] : values_) out.push_back(k);
  return out;
}

Status ConfigValues::set(std::string_view key, std::string_view value) {
  if (key.empty()) return invalid_argument("a setting needs a name");
  values_.insert_or_assign(std::string(key), std::string(value));
  return {};
}

}  // namespace troupe

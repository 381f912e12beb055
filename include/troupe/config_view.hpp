// The engine's settings as plugins see them: a read-only view by name
// ("cache.block_size", "parallel.tensor_parallel_size", "extra.my_flag"), not
// the engine's structs. The engine's own EngineConfig (runtime, outside the
// SDK and its fingerprint) may gain fields in any release without touching
// a plugin: a setting is a name and a text value, and names only ever grow.
// The names are listed in docs/plugins.md ("Engine data crosses as views").
//
// Values are text: integers in decimal, booleans "true"/"false", doubles in
// the shortest form that reads back the same, lists of names comma-separated.
// The typed getters parse them and answer `fallback` for a setting the engine
// lacks or a text that does not parse.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/status.hpp"

namespace troupe {

class ConfigView {
 public:
  /// The value of setting `key`, or nullopt when the engine has no such setting.
  virtual std::optional<std::string> get(std::string_view key) const = 0;
  /// Every setting's name, sorted.
  virtual std::vector<std::string> keys() const = 0;

  std::string get_string(std::string_view key, std::string_view fallback = {}) const;
  int64_t get_int(std::string_view key, int64_t fallback = 0) const;
  double get_double(std::string_view key, double fallback = 0.0) const;
  bool get_bool(std::string_view key, bool fallback = false) const;
  /// A comma-separated list, empty items dropped.
  std::vector<std::string> get_list(std::string_view key) const;

 protected:
  ~ConfigView() = default;
};

/// What Platform::check_and_update_config may change. A name the engine does not have,
/// or a value that does not parse as the setting's type, is an invalid_argument error.
class ConfigEditor : public ConfigView {
 public:
  virtual Status set(std::string_view key, std::string_view value) = 0;

  Status set_int(std::string_view key, int64_t value) { return set(key, std::to_string(value)); }
  Status set_bool(std::string_view key, bool value) { return set(key, value ? "true" : "false"); }

 protected:
  ~ConfigEditor() = default;
};

/// Settings held by value: a copy of a view (what a worker keeps, since the view it is
/// given lives only for the call), or settings made from scratch (the conformance kit,
/// tests). Any name may be set.
class ConfigValues final : public ConfigEditor {
 public:
  ConfigValues() = default;
  explicit ConfigValues(const ConfigView& view);
  ConfigValues(const ConfigValues&) = default;
  ConfigValues& operator=(const ConfigValues&) = default;
  ~ConfigValues() = default;

  std::optional<std::string> get(std::string_view key) const override;
  std::vector<std::string> keys() const override;
  Status set(std::string_view key, std::string_view value) override;

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

}  // namespace troupe

// The plugin host: discovers plugin manifests, filters them by TROUPE_PLUGINS,
// loads their libraries (the only dlopen in troupe), runs general plugins once
// per process and resolves the platform as vLLM does.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "troupe/config.hpp"
#include "troupe/io_processor.hpp"
#include "troupe/platform.hpp"
#include "troupe/stat_logger.hpp"
#include "troupe/status.hpp"

namespace troupe::plugin_host {

enum class PluginStatus {
  loaded,    // library loaded, descriptor accepted (and, for general plugins, registered)
  filtered,  // discovered but not named in TROUPE_PLUGINS
  failed,    // manifest, library, symbol or registration failed
  refused,   // ABI version / C++ ABI / group mismatch
};
const char* to_string(PluginStatus s);

/// The built-in plugin directory: TROUPE_BUILTIN_PLUGIN_DIR when set, else
/// <dir of libtroupe_plugin_host>/troupe/plugins, else <exe dir>/../lib/troupe/plugins.
std::string builtin_plugin_dir();
/// TROUPE_PLUGINS semantics: nullptr (unset) -> nullopt (all); "" -> {} (none);
/// "a, b" -> {"a", "b"} (trimmed, empty items dropped).
std::optional<std::vector<std::string>> parse_plugin_filter(const char* value);
/// Split a colon-separated path list, dropping empty entries.
std::vector<std::string> split_path_list(const char* value);

/// One discovered plugin and what became of it.
struct PluginRecord {
  std::string name;
  std::string group;
  std::string library;        // absolute path of the shared library
  std::string manifest;       // absolute path of the manifest
  PluginStatus status = PluginStatus::failed;
  std::string reason;         // why it was filtered, failed or refused (empty when loaded)
  bool builtin = false;       // found in a built-in directory (HostOptions::builtin_dirs)
};

/// A platform plugin's answer to its probe.
struct PlatformCandidate {
  std::string name;
  bool available = false;     // the probe returned a platform
  bool out_of_tree = false;
  std::string device_type;
  std::string reason;         // e.g. "probe returned no platform"
};

struct HostOptions {
  /// Plugin directories searched in order. Default: the built-in directory
  /// (<exe dir>/../lib/troupe/plugins), then each entry of TROUPE_PLUGIN_PATH.
  std::vector<std::string> plugin_dirs;
  /// Names allowed to load; nullopt = all (TROUPE_PLUGINS unset), empty = none.
  std::optional<std::vector<std::string>> allowed;
  /// Directories (also listed in plugin_dirs) holding troupe's own plugins. As
  /// vLLM's built-in platforms, their plugins are not subject to `allowed`.
  std::vector<std::string> builtin_dirs;
  /// Options from the environment: the built-in directory (TROUPE_BUILTIN_PLUGIN_DIR
  /// overrides it), TROUPE_PLUGIN_PATH and TROUPE_PLUGINS.
  static HostOptions from_environment();
};

class PluginHost {
 public:
  explicit PluginHost(HostOptions options);
  ~PluginHost();
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  /// The process-wide host built from the environment.
  static PluginHost& instance();

  /// Discover, filter and load every plugin; general plugins register once per
  /// process. Safe to call again (later calls do nothing). Logs vLLM's lines.
  void load_all();
  /// Resolve the platform: one out-of-tree platform beats built-ins; two or
  /// more out-of-tree platforms, or none at all, are errors. Cached.
  Result<Platform*> activate_platform();

  const std::vector<PluginRecord>& records() const;
  const std::vector<PlatformCandidate>& platform_candidates() const;
  /// Name of the activated platform plugin, if any.
  std::optional<std::string> activated_platform_name() const;
  /// The directories searched and the filter in force.
  const HostOptions& options() const;

  /// One logger per loaded stat-logger plugin.
  std::vector<std::unique_ptr<StatLogger>> make_stat_loggers(const EngineConfig& config, int engine_index);
  /// The IO processor plugin named `name`.
  Result<std::unique_ptr<IOProcessor>> make_io_processor(const std::string& name, const EngineConfig& config);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::plugin_host

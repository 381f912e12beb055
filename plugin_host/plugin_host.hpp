// The plugin host: discovers plugin manifests, filters them by TROUPE_PLUGINS,
// loads their libraries (the only dlopen in troupe), runs general plugins once
// per process and resolves the platform as vLLM does.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "troupe/config_view.hpp"
#include "troupe/io_processor.hpp"
#include "troupe/platform.hpp"
#include "troupe/stat_logger.hpp"
#include "troupe/status.hpp"

namespace troupe::plugin_host {

enum class PluginStatus {
  loaded,    // library loaded, descriptor accepted (and, for general plugins, registered)
  filtered,  // discovered but not named in TROUPE_PLUGINS
  failed,    // manifest, library, symbol or registration failed
  refused,   // ABI version / descriptor / C++ ABI / SDK fingerprint / group mismatch
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

/// What the engine asks of the platform to activate.
struct PlatformRequest {
  /// A platform plugin's name or device type ("cpu", "cuda"); "" or "auto": the one
  /// HostOptions::device (TROUPE_DEVICE) names, else chosen automatically.
  std::string device;
  /// Whether a platform can serve the model (its weight types, ...); empty: any can.
  /// Automatic choice skips a platform that cannot; an explicit one is an error naming
  /// which platforms could.
  std::function<Status(const Platform&)> can_serve;
  /// Names the model in errors ("SmolLM2-135M-Instruct.Q4_1.gguf").
  std::string what;
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
  /// The device to activate when a request names none (TROUPE_DEVICE); "" = automatic.
  std::string device;
  /// Options from the environment: the built-in directory (TROUPE_BUILTIN_PLUGIN_DIR
  /// overrides it), TROUPE_PLUGIN_PATH, TROUPE_PLUGINS and TROUPE_DEVICE.
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
  /// Resolve the platform, once per process (later calls check the request against it).
  /// An explicit device (request, else TROUPE_DEVICE) activates that platform or fails
  /// with the probe's reason. Automatically: one out-of-tree platform beats built-ins
  /// (two or more are an error), an accelerator beats the CPU; a platform that cannot
  /// serve the request's model (out-of-tree ones included) is passed over.
  Result<Platform*> activate_platform(const PlatformRequest& request = {});
  /// The name of the platform activate_platform(request) would give, activating nothing.
  Result<std::string> preview_platform(const PlatformRequest& request = {});

  /// The platform named `device` (plugin name or device type) as its probe returned it,
  /// activating nothing: for tools that compare platforms (platform-check's CPU reference).
  /// unavailable with the probe's reason when it declined; not_found when none provides it.
  Result<Platform*> platform(const std::string& device);

  const std::vector<PluginRecord>& records() const;
  const std::vector<PlatformCandidate>& platform_candidates() const;
  /// Name of the activated platform plugin, if any.
  std::optional<std::string> activated_platform_name() const;
  /// The directories searched and the filter in force.
  const HostOptions& options() const;

  /// One logger per loaded stat-logger plugin.
  std::vector<std::unique_ptr<StatLogger>> make_stat_loggers(const ConfigView& config, int engine_index);
  /// The IO processor plugin named `name`.
  Result<std::unique_ptr<IOProcessor>> make_io_processor(const std::string& name, const ConfigView& config);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::plugin_host

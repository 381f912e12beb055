// Plugin manifests: `<name>.troupe-plugin.json` files in a plugin directory,
// the C++ counterpart of a Python package's entry points.
#pragma once

#include <string>
#include <vector>

#include "troupe/status.hpp"

namespace troupe::plugin_host {

inline constexpr const char* kManifestSuffix = ".troupe-plugin.json";

struct Manifest {
  std::string path;     // absolute path of the manifest file
  std::string name;
  std::string group;
  std::string library;  // absolute path (a relative "library" is resolved against the manifest's directory)
  std::string symbol;   // entry symbol; defaults to troupe_plugin_entry
};

/// Manifest files of `dir`, sorted by file name so discovery order is stable.
/// A missing directory yields an empty list and a not_found status in `why`.
std::vector<std::string> list_manifests(const std::string& dir, Status* why);

/// Parse one manifest into `out`. Any missing or mistyped field is a data_loss error
/// naming the file; `out` keeps the fields read before the error (for reports).
Status parse_manifest(const std::string& path, Manifest* out);

/// The plugin name a manifest's file name suggests ("foo.troupe-plugin.json" -> "foo"),
/// used to report a manifest that cannot be parsed.
std::string name_from_manifest_path(const std::string& path);

/// True for the four groups troupe knows.
bool is_known_group(const std::string& group);

}  // namespace troupe::plugin_host

// The CPU platform for tests: loaded from the build tree's plugin directory
// through the real plugin host (no in-process shortcut).
#pragma once

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "plugin_host/plugin_host.hpp"
#include "troupe/platform.hpp"

namespace troupe::testing {

inline Platform* cpu_platform() {
  static plugin_host::PluginHost host([] {
    plugin_host::HostOptions o;
    o.plugin_dirs = {std::string(TROUPE_BINARY_DIR) + "/lib/troupe/plugins"};
    o.builtin_dirs = o.plugin_dirs;
    return o;
  }());
  host.load_all();
  auto p = host.activate_platform();
  return p.ok() && (*p)->device_type() == "cpu" ? *p : nullptr;
}

inline std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string stories_path() { return std::string(TROUPE_TEST_DATA_DIR) + "/stories260K.gguf"; }

/// stories260K with llama.feed_forward_length patched from 172 to 160: the FFN tensors then disagree.
inline std::vector<char> stories_with_wrong_hparams() {
  std::vector<char> d = read_bytes(stories_path());
  const std::string key = "llama.feed_forward_length";
  auto it = std::search(d.begin(), d.end(), key.begin(), key.end());
  if (it == d.end()) return {};
  const size_t value_at = static_cast<size_t>(it - d.begin()) + key.size() + 4;  // after the u32 type tag
  if (value_at + 4 > d.size() || static_cast<unsigned char>(d[value_at]) != 172) return {};
  d[value_at] = static_cast<char>(160);
  return d;
}

}  // namespace troupe::testing

// Opening a plugin library and checking its descriptor: the only dlopen in
// troupe. Libraries stay open for the life of the process (never dlclose):
// platforms, loggers and registered factories point into them.
#pragma once

#include <string>

#include "plugin_host/manifest.hpp"
#include "plugin_host/plugin_host.hpp"
#include "troupe/plugin.hpp"

namespace troupe::plugin_host {

struct LoadOutcome {
  PluginStatus status = PluginStatus::failed;  // loaded, failed or refused
  std::string reason;                          // empty when loaded
  const PluginDescriptor* descriptor = nullptr;
};

/// dlopen the manifest's library, call its entry symbol and check the
/// descriptor against this build's ABI: abi_version first, then
/// descriptor_size, cxx_abi, the layout fingerprint, the SDK header fingerprint and
/// the group named by the manifest.
LoadOutcome load_library(const Manifest& manifest);

}  // namespace troupe::plugin_host

// The plugin report: what was discovered, filtered, loaded and activated, and
// why, as JSON (`troupe plugins --json`, and a node's answer to
// `troupe plugins --node`).
#pragma once

#include <string>

#include "plugin_host/plugin_host.hpp"

namespace troupe::plugin_host {

/// Loads the plugins and, with `activate`, activates the platform automatically (both
/// idempotent), then reports them. Without `activate` (a node, whose platform the head
/// chooses) nothing is activated: "activated" stays null until then and "selected"
/// names the automatic choice. with_details adds each entry's manifest path and
/// built-in flag; without, each plugin entry is exactly {name, library, status, reason}.
std::string plugin_report_json(PluginHost& host, bool with_details, bool activate = true);

}  // namespace troupe::plugin_host

// The plugin report: what was discovered, filtered, loaded and activated, and
// why, as JSON (`troupe plugins --json`, and a node's answer to
// `troupe plugins --node`).
#pragma once

#include <string>

#include "plugin_host/plugin_host.hpp"

namespace troupe::plugin_host {

/// Loads the plugins and resolves the platform (both idempotent), then
/// reports them. with_details adds each entry's manifest path and built-in
/// flag; without, each plugin entry is exactly {name, library, status, reason}.
std::string plugin_report_json(PluginHost& host, bool with_details);

}  // namespace troupe::plugin_host

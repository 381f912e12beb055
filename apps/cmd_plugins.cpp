// `troupe plugins [--json]`: what was discovered, filtered, loaded and
// activated, and why. Always exits 0 once the report is printed: a missing
// platform is part of the report, not a failure of the command.
#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/command.hpp"
#include "plugin_host/plugin_host.hpp"
#include "troupe/plugin.hpp"

namespace troupe::apps {
namespace {

namespace ph = troupe::plugin_host;

constexpr const char* kGroups[] = {kGroupGeneral, kGroupPlatform, kGroupIOProcessor, kGroupStatLogger};


// with_details adds manifest paths and built-in flags for the text view; the
// JSON keeps each plugin entry to exactly {name, library, status, reason}.
nlohmann::json build_report(ph::PluginHost& host, bool with_details) {
  host.load_all();
  Result<Platform*> platform = host.activate_platform();

  nlohmann::json groups = nlohmann::json::object();
  for (const char* g : kGroups) groups[g] = nlohmann::json::array();
  for (const auto& r : host.records()) {
    // A manifest too broken to name its group is listed under "unknown".
    const std::string group = r.group.empty() ? "unknown" : r.group;
    if (!groups.contains(group)) groups[group] = nlohmann::json::array();
    groups[group].push_back({{"name", r.name},
                             {"library", r.library},
                             {"status", ph::to_string(r.status)},
                             {"reason", r.reason}});
    if (with_details) {
      groups[group].back()["manifest"] = r.manifest;
      groups[group].back()["builtin"] = r.builtin;
    }
  }

  nlohmann::json candidates = nlohmann::json::array();
  for (const auto& c : host.platform_candidates()) {
    candidates.push_back({{"name", c.name},
                          {"available", c.available},
                          {"out_of_tree", c.out_of_tree},
                          {"device_type", c.device_type},
                          {"reason", c.reason}});
  }
  nlohmann::json plat = {{"activated", nullptr}, {"candidates", candidates}, {"reason", ""}};
  if (platform.ok()) {
    plat["activated"] = *host.activated_platform_name();
    plat["device_type"] = (*platform)->device_type();
    plat["device_name"] = (*platform)->device_name(0);
  } else {
    plat["reason"] = platform.status().message();
  }

  const auto& opts = host.options();
  nlohmann::json filter = nullptr;
  if (opts.allowed) filter = *opts.allowed;
  return {{"groups", groups}, {"platform", plat}, {"plugin_dirs", opts.plugin_dirs}, {"allowed", filter}};
}

void print_text(const nlohmann::json& j) {
  std::cout << "Plugin directories:\n";
  for (const auto& d : j["plugin_dirs"]) std::cout << "  " << d.get<std::string>() << "\n";
  if (j["allowed"].is_null()) {
    std::cout << "TROUPE_PLUGINS: unset (all plugins load)\n";
  } else {
    std::string names;
    for (const auto& n : j["allowed"]) names += (names.empty() ? "" : ", ") + n.get<std::string>();
    std::cout << "TROUPE_PLUGINS: " << (names.empty() ? "(empty: no plugins load except built-ins)" : names) << "\n";
  }
  for (const auto& [group, list] : j["groups"].items()) {
    std::cout << "\n" << group << ":" << (list.empty() ? " (none)" : "") << "\n";
    for (const auto& p : list) {
      std::cout << "  " << p["name"].get<std::string>() << "  [" << p["status"].get<std::string>() << "]"
                << (p["builtin"].get<bool>() ? " built-in" : "") << "  " << p["library"].get<std::string>() << "\n";
      if (!p["reason"].get<std::string>().empty()) std::cout << "      " << p["reason"].get<std::string>() << "\n";
    }
  }
  const auto& plat = j["platform"];
  std::cout << "\nPlatform candidates:" << (plat["candidates"].empty() ? " (none)" : "") << "\n";
  for (const auto& c : plat["candidates"]) {
    std::cout << "  " << c["name"].get<std::string>() << ": "
              << (c["available"].get<bool>() ? "available" : "declined")
              << (c["out_of_tree"].get<bool>() ? ", out-of-tree" : "");
    if (!c["device_type"].get<std::string>().empty()) std::cout << ", device_type " << c["device_type"].get<std::string>();
    if (!c["reason"].get<std::string>().empty()) std::cout << " (" << c["reason"].get<std::string>() << ")";
    std::cout << "\n";
  }
  if (plat["activated"].is_null()) {
    std::cout << "Activated platform: none (" << plat["reason"].get<std::string>() << ")\n";
  } else {
    std::cout << "Activated platform: " << plat["activated"].get<std::string>() << " ("
              << plat["device_name"].get<std::string>() << ")\n";
  }
}

CommandRegistration plugins_command(
    "plugins", "List discovered plugins, their status, and the activated platform",
    [](CLI::App& sub) -> std::function<int()> {
      auto json = std::make_shared<bool>(false);
      sub.add_flag("--json", *json, "Print the report as JSON");
      return [json]() {
        nlohmann::json report = build_report(ph::PluginHost::instance(), !*json);
        if (*json) {
          std::cout << report.dump(2) << std::endl;
        } else {
          print_text(report);
        }
        return 0;
      };
    });

}  // namespace
}  // namespace troupe::apps

#include "plugin_host/report.hpp"

#include <nlohmann/json.hpp>

#include "troupe/plugin.hpp"
#include "troupe/quantization.hpp"

namespace troupe::plugin_host {
namespace {
constexpr const char* kGroups[] = {kGroupGeneral, kGroupPlatform, kGroupIOProcessor, kGroupStatLogger};
}  // namespace

std::string plugin_report_json(PluginHost& host, bool with_details, bool activate) {
  host.load_all();
  Result<Platform*> platform = not_found("no platform is active yet");
  if (activate || host.activated_platform_name()) platform = host.activate_platform();
  Result<std::string> selected = host.preview_platform();
  nlohmann::json groups = nlohmann::json::object();
  for (const char* g : kGroups) groups[g] = nlohmann::json::array();
  for (const auto& r : host.records()) {
    // A manifest too broken to name its group is listed under "unknown".
    const std::string group = r.group.empty() ? "unknown" : r.group;
    if (!groups.contains(group)) groups[group] = nlohmann::json::array();
    groups[group].push_back({{"name", r.name},
                             {"library", r.library},
                             {"status", to_string(r.status)},
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
  nlohmann::json plat = {{"activated", nullptr}, {"candidates", candidates}, {"reason", ""}, {"selected", nullptr}};
  if (selected.ok()) plat["selected"] = *selected;
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
  // The weight formats general plugins registered (troupe/quantization.hpp); load-time
  // methods are what --quantization accepts.
  nlohmann::json formats = nlohmann::json::array();
  for (const WeightFormat* f : weight_formats::all())
    if (!weight_formats::is_builtin(f->id))
      formats.push_back({{"name", f->name},
                         {"description", f->description},
                         {"load_time_method", f->quantize_row != nullptr}});
  nlohmann::json report = {{"groups", groups}, {"platform", plat}, {"plugin_dirs", opts.plugin_dirs},
                           {"allowed", filter}, {"weight_formats", formats}};
  return report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace troupe::plugin_host

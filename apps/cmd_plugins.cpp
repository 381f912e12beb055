// `troupe plugins [--json]`: what was discovered, filtered, loaded and
// activated, and why. Always exits 0 once the report is printed: a missing
// platform is part of the report, not a failure of the command.
#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/command.hpp"
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/engine_caf.hpp"
#include "actors/gate_actor.hpp"
#include "actors/status_error.hpp"
#include "apps/tls_options.hpp"
#include "net/handshake.hpp"   // read_secret_file
#include "net/link_guard.hpp"  // LinkAuth
#include "plugin_host/report.hpp"
#include "troupe/plugin.hpp"

namespace troupe::apps {
namespace {

namespace ph = troupe::plugin_host;

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
  if (j.contains("weight_formats") && !j["weight_formats"].empty()) {
    std::cout << "\nWeight formats from plugins (load-time methods go to --quantization):\n";
    for (const auto& f : j["weight_formats"])
      std::cout << "  " << f["name"].get<std::string>()
                << (f["load_time_method"].get<bool>() ? "  [load-time method]" : "") << "  "
                << f["description"].get<std::string>() << "\n";
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
  if (plat["activated"].is_null() && plat.contains("selected") && !plat["selected"].is_null()) {
    std::cout << "Activated platform: none yet (the head chooses; automatically it would be "
              << plat["selected"].get<std::string>() << ")\n";
  } else if (plat["activated"].is_null()) {
    std::cout << "Activated platform: none (" << plat["reason"].get<std::string>() << ")\n";
  } else {
    std::cout << "Activated platform: " << plat["activated"].get<std::string>() << " ("
              << plat["device_name"].get<std::string>() << ")\n";
  }
}

/// The report of the node at `address` (its own plugins and platform).
int node_report(const std::string& address, const std::string& secret_file, const net::TlsFiles& tls_files,
                bool json) {
  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "troupe plugins: error: %s\n", m.c_str());
    return 1;
  };
  std::string host;
  uint16_t port = 0;
  if (Status st = actors::parse_host_port(address, "--node", &host, &port); !st.ok()) return fail(st.message());
  std::string secret;
  if (!secret_file.empty()) {
    auto s = net::read_secret_file(secret_file);
    if (!s) return fail(s.status().message());
    secret = *s;
  }
  auto tls = net::TlsContext::load(tls_files);
  if (!tls) return fail(tls.status().message());
  caf::actor_system_config cfg;
  engine::configure_actor_system(cfg);
  caf::actor_system system{cfg};
  auto node = actors::connect_node(system, host, port, net::LinkAuth(secret, *tls), std::chrono::seconds(10));
  if (!node) return fail(node.status().message());
  std::string text;
  Status status;
  caf::scoped_actor self{system};
  self->request(*node, std::chrono::seconds(30), actors::report_atom_v)
      .receive([&](std::string& r) { text = std::move(r); },
               [&](caf::error& e) { status = actors::to_status(e, "node " + address); });
  if (!status.ok()) return fail(status.message());
  nlohmann::json report = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded()) return fail("node " + address + " sent a report that is not JSON");
  report["node"] = address;
  if (json) {
    // The same keys as a local report: each plugin entry is {name, library, status, reason}.
    for (auto& [group, list] : report["groups"].items())
      for (auto& p : list) {
        p.erase("manifest");
        p.erase("builtin");
      }
    std::cout << report.dump(2) << std::endl;
  } else {
    std::cout << "Node " << address << "\n";
    print_text(report);
  }
  return 0;
}

CommandRegistration plugins_command(
    "plugins", "List discovered plugins, their status, and the activated platform",
    [](CLI::App& sub) -> std::function<int()> {
      auto json = std::make_shared<bool>(false);
      auto node = std::make_shared<std::string>();
      auto secret_file = std::make_shared<std::string>();
      sub.add_flag("--json", *json, "Print the report as JSON");
      sub.add_option("--node", *node, "Report what the node at HOST:PORT (troupe node) loaded and activated");
      sub.add_option("--secret-file", *secret_file, "The node's secret (with --node)");
      auto tls = std::make_shared<net::TlsFiles>();
      add_tls_options(sub, tls.get());
      return [json, node, secret_file, tls]() {
        if (!node->empty()) return node_report(*node, *secret_file, *tls, *json);
        nlohmann::json report = nlohmann::json::parse(ph::plugin_report_json(ph::PluginHost::instance(), !*json));
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

#include "actors/plugin_host_actor.hpp"

#include <caf/all.hpp>

#include <map>

#include "actors/drop_unexpected.hpp"
#include "actors/status_error.hpp"
#include "actors/worker_actor.hpp"
#include "plugin_host/plugin_host.hpp"
#include "plugin_host/report.hpp"
#include "troupe/log.hpp"

namespace troupe::actors {
namespace {

struct PluginHostState {
  Platform* platform = nullptr;
  std::string node_host;                    // `troupe node --host`; "" in a head's process
  std::map<int32_t, worker_actor> workers;  // rank → its worker; kept so their lifetime follows the node's
  static inline const char* name = "troupe.plugin_host";
};

using Self = plugin_host_actor::stateful_pointer<PluginHostState>;

// The head names the platform (the one it activated for the model), so every
// node runs the same one; a node that cannot activate it says why.
Status activate(Self self, const std::string& device) {
  auto& host = plugin_host::PluginHost::instance();
  plugin_host::PlatformRequest request;
  request.device = device;
  auto platform = host.activate_platform(request);
  if (!platform) return platform.status();
  self->state.platform = *platform;
  return {};
}

plugin_host_actor::behavior_type plugin_host_behavior(Self self, std::string node_host) {
  self->state.node_host = std::move(node_host);
  drop_unexpected_messages(self);
  // A stopping node ends its workers with it, so their monitors (the head's scheduler) hear
  // of it at once; a worker busy in a step goes when the step returns.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    for (auto& [rank, worker] : self->state.workers) self->send_exit(worker, msg.reason);
    self->state.workers.clear();
    self->quit(msg.reason);
  });
  return {
      [=](load_atom) -> caf::result<std::string> {
        auto& host = plugin_host::PluginHost::instance();
        host.load_all();
        if (auto active = host.activated_platform_name()) return *active;
        auto selected = host.preview_platform();
        if (!selected) return to_error(selected.status());
        return *selected;
      },
      [=](worker_atom, int32_t rank, std::string& device) -> caf::result<worker_actor> {
        if (auto s = activate(self, device); !s) return to_error(s);
        if (rank < 0) return to_error(invalid_argument("rank " + std::to_string(rank) + " is negative"));
        auto& workers = self->state.workers;
        // A head that asks again (after a restart or a lost connection) replaces
        // what an earlier head left here; a platform that runs one rank per
        // process (its compute pool is per process) gets no second live rank.
        const bool one_per_process = !self->state.platform->supports("multiple_ranks_per_process");
        for (auto it = workers.begin(); it != workers.end();) {
          if (it->first == rank || one_per_process) {
            TROUPE_LOG_INFO("replacing the worker of rank {} with a new one for rank {}", it->first, rank);
            self->send_exit(it->second, caf::exit_reason::user_shutdown);
            it = workers.erase(it);
          } else {
            ++it;
          }
        }
        auto worker = spawn_worker_actor(self->system(), self->state.platform, rank);
        workers[rank] = worker;
        return worker;
      },
      [=](comm_id_atom, ParallelConfig parallel, std::string& device) -> caf::result<std::string> {
        if (auto s = activate(self, device); !s) return to_error(s);
        const std::string& own = self->state.node_host;
        // Across hosts, rank 0 listens on this node's own address; a node that listens on every
        // interface keeps the address the head reached it by.
        if (!parallel.communicator_host.empty() && !own.empty() && own != "0.0.0.0" && own != "::" && own != "[::]")
          parallel.communicator_host = own;
        auto id = self->state.platform->make_communicator_id(parallel);
        if (!id) return to_error(id.status());
        TROUPE_LOG_INFO("communicator for {} rank(s): {}", parallel.world_size(), id->empty() ? "none" : *id);
        return *id;
      },
      [=](report_atom) -> std::string {
        return plugin_host::plugin_report_json(plugin_host::PluginHost::instance(), /*with_details=*/true,
                                                  /*activate=*/false);
      },
  };
}

}  // namespace

plugin_host_actor spawn_plugin_host_actor(caf::actor_system& system, std::string node_host) {
  return system.spawn(plugin_host_behavior, std::move(node_host));
}

}  // namespace troupe::actors

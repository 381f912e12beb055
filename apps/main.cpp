// troupe: the command-line entry point. Subcommands live in cmd_*.cpp.
#include <csignal>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "apps/command.hpp"

namespace troupe::apps {
namespace {
struct Entry {
  std::string name;
  std::string description;
  CommandSetup setup;
};
std::vector<Entry>& entries() {
  static std::vector<Entry> e;
  return e;
}
}  // namespace

CommandRegistration::CommandRegistration(std::string name, std::string description, CommandSetup setup) {
  entries().push_back({std::move(name), std::move(description), std::move(setup)});
}

}  // namespace troupe::apps

int main(int argc, char** argv) {
  using namespace troupe::apps;
  // A write to a peer that has gone must fail with EPIPE, not kill a head or a node (seen
  // once as a head exiting on SIGPIPE, 141, after a node reset its TLS connection). The
  // TLS transports send with MSG_NOSIGNAL themselves (net/tls_socket);
  // this covers any other write to a closed socket.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"troupe: an actor-model LLM inference and serving engine"};
  app.require_subcommand(1);
  std::map<CLI::App*, std::function<int()>> runners;
  for (auto& e : entries()) {
    CLI::App* sub = app.add_subcommand(e.name, e.description);
    runners[sub] = e.setup(*sub);
  }
  CLI11_PARSE(app, argc, argv);
  for (auto* sub : app.get_subcommands()) {
    auto it = runners.find(sub);
    if (it != runners.end()) return it->second();
  }
  return 2;
}

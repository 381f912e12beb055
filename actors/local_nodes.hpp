// Node processes on this host that the head starts itself, as vLLM's
// multiprocessing executor does: when an engine needs several ranks and no
// --nodes were given, each rank gets a `troupe node` process on loopback,
// with a fresh secret, stopped when the engine stops (and, through
// PR_SET_PDEATHSIG, when the head dies).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "troupe/status.hpp"

namespace troupe::actors {

class LocalNodes {
 public:
  /// Start `count` nodes of `executable` (the troupe CLI) and wait, at most
  /// `timeout`, until each listens. Errors say which node failed and why.
  static Result<std::unique_ptr<LocalNodes>> start(const std::string& executable, int count,
                                                   std::chrono::milliseconds timeout);
  /// SIGTERM to every node, then SIGKILL to those still alive after 5 s.
  ~LocalNodes();
  LocalNodes(const LocalNodes&) = delete;
  LocalNodes& operator=(const LocalNodes&) = delete;

  /// "127.0.0.1:PORT" of each node, in start order.
  const std::vector<std::string>& addresses() const { return addresses_; }
  const std::vector<pid_t>& pids() const { return pids_; }
  /// The secret every node asks for.
  const std::string& secret() const { return secret_; }

  /// The troupe CLI to start nodes with: `configured` if set, else
  /// $TROUPE_NODE_EXECUTABLE, else this program if it is the troupe CLI, else
  /// a `troupe` beside this program; not_found otherwise.
  static Result<std::string> find_executable(const std::string& configured);

 private:
  LocalNodes() = default;
  std::string dir_;  // secret and port files
  std::string secret_;
  std::vector<pid_t> pids_;
  std::vector<std::string> addresses_;
};

}  // namespace troupe::actors

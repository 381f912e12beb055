// Subcommands of the `troupe` CLI register themselves here; main() builds
// the CLI11 app from the registered list. One file per subcommand.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace troupe::apps {

/// `setup` adds the subcommand's flags to `sub` and returns the function run when it is chosen.
using CommandSetup = std::function<std::function<int()>(CLI::App& sub)>;

struct CommandRegistration {
  CommandRegistration(std::string name, std::string description, CommandSetup setup);
};

}  // namespace troupe::apps

// The text of a caf::error for people: our actors put a troupe Status message
// into the error's context; show that rather than CAF's rendering of it.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/error.hpp>
#include <caf/message.hpp>

#include <string>

namespace troupe::actors {

inline std::string error_text(caf::actor_system& system, const caf::error& err) {
  const auto& ctx = err.context();
  if (ctx.size() == 1 && ctx.match_elements<std::string>()) return ctx.get_as<std::string>(0);
  return system.render(err);
}

}  // namespace troupe::actors

// Errors between actors: one CAF error code enum that mirrors troupe's
// StatusCode one to one, so a Status keeps its code from a worker (local or
// remote) to the caller and the HTTP answer. The message travels in the
// error's context.
#pragma once

#include <caf/error.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>
#include <caf/fwd.hpp>

#include <cstdint>
#include <string>

#include "troupe/status.hpp"

namespace troupe::actors {

enum class status_error : uint8_t {
  invalid_argument = static_cast<uint8_t>(StatusCode::invalid_argument),
  not_found = static_cast<uint8_t>(StatusCode::not_found),
  not_supported = static_cast<uint8_t>(StatusCode::not_supported),
  out_of_range = static_cast<uint8_t>(StatusCode::out_of_range),
  data_loss = static_cast<uint8_t>(StatusCode::data_loss),
  resource_exhausted = static_cast<uint8_t>(StatusCode::resource_exhausted),
  unavailable = static_cast<uint8_t>(StatusCode::unavailable),
  internal = static_cast<uint8_t>(StatusCode::internal),
};

/// The error category's name, as CAF renders it.
inline constexpr const char* kStatusErrorCategory = "troupe";

/// A failed Status as a caf::error (code and message); `status` must not be ok.
caf::error to_error(const Status& status);
/// The Status a caf::error stands for: ours keep their code and message; CAF's
/// own (a dead peer, a timeout) read as unavailable, with `what` in front.
Status to_status(const caf::error& error, const std::string& what = "");

/// Registers the category's renderer (configure_actor_system calls it).
void add_status_error_category(caf::actor_system_config& config);

}  // namespace troupe::actors

CAF_ERROR_CODE_ENUM(troupe::actors::status_error, "troupe")

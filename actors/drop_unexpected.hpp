// Actors that peers in other processes can reach drop a message they do not
// expect and log it (instead of CAF's print-to-stderr default); the sender
// gets sec::unexpected_message.
#pragma once

#include <caf/message_view.hpp>
#include <caf/scheduled_actor.hpp>
#include <caf/sec.hpp>
#include <caf/type_erased_tuple.hpp>

#include "troupe/log.hpp"

namespace troupe::actors {

inline void drop_unexpected_messages(caf::scheduled_actor* self) {
  self->set_default_handler([](caf::scheduled_actor* s, caf::message_view& x) -> caf::result<caf::message> {
    TROUPE_LOG_WARNING("{} dropped an unexpected message {}", s->name(), x.content().stringify());
    return caf::sec::unexpected_message;
  });
}

}  // namespace troupe::actors

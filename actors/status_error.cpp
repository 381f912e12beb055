#include "actors/status_error.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/message.hpp>
#include <caf/sec.hpp>

namespace troupe::actors {
namespace {

constexpr caf::atom_value kCategory = caf::atom("troupe");

std::string context_text(const caf::message& ctx) {
  if (ctx.size() == 1 && ctx.match_elements<std::string>()) return ctx.get_as<std::string>(0);
  return ctx.empty() ? std::string() : caf::to_string(ctx);
}

bool is_status_code(uint8_t code) {
  return code > static_cast<uint8_t>(StatusCode::ok) && code <= static_cast<uint8_t>(StatusCode::internal);
}

}  // namespace

caf::error to_error(const Status& status) {
  const auto code = status.ok() ? status_error::internal : static_cast<status_error>(status.code());
  return caf::make_error(code, status.ok() ? std::string("an ok status sent as an error") : status.message());
}

Status to_status(const caf::error& error, const std::string& what) {
  const std::string prefix = what.empty() ? "" : what + ": ";
  if (!error) return internal_error(prefix + "no error");
  if (error.category() == kCategory && is_status_code(error.code()))
    return Status(static_cast<StatusCode>(error.code()), prefix + context_text(error.context()));
  std::string text;
  if (error.category() == caf::atom("system")) {
    const auto sec = static_cast<caf::sec>(error.code());
    text = sec == caf::sec::request_receiver_down ? "its actor is gone (request_receiver_down)"
           : sec == caf::sec::request_timeout     ? "no answer in time (request_timeout)"
                                                  : caf::to_string(sec);
    if (auto ctx = context_text(error.context()); !ctx.empty()) text += " (" + ctx + ")";
  } else {
    text = caf::to_string(error);
  }
  return unavailable(prefix + text);
}

void add_status_error_category(caf::actor_system_config& config) {
  config.add_error_category(kCategory, [](uint8_t code, caf::atom_value, const caf::message& ctx) -> std::string {
    std::string name = is_status_code(code) ? to_string(static_cast<StatusCode>(code)) : "unknown";
    return "troupe::" + name + "(" + context_text(ctx) + ")";
  });
}

}  // namespace troupe::actors

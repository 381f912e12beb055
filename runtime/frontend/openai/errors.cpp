#include "runtime/frontend/openai/errors.hpp"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

namespace troupe::openai {

ApiError invalid_param(const std::string& param, const std::string& message) {
  ApiError e;
  e.http_status = 400;
  e.type = "BadRequestError";
  e.param = param;
  // The message names the field so that clients printing only the message still see it.
  e.message = param.empty() ? message : fmt::format("{}: {}", param, message);
  return e;
}

ApiError invalid_json(const std::string& detail) {
  ApiError e;
  e.message = fmt::format("Invalid JSON body: {}", detail);
  return e;
}

ApiError model_not_found(const std::string& model) {
  ApiError e;
  e.http_status = 404;
  e.type = "NotFoundError";
  e.param = "model";
  e.message = fmt::format("The model `{}` does not exist.", model);
  return e;
}

ApiError unauthorized() {
  ApiError e;
  e.http_status = 401;
  e.type = "AuthenticationError";
  e.message = "Unauthorized: a missing or invalid API key (send 'Authorization: Bearer <key>').";
  return e;
}

ApiError payload_too_large(uint64_t limit_bytes) {
  ApiError e;
  e.http_status = 413;
  e.type = "RequestEntityTooLargeError";
  e.message = fmt::format("Request body too large: the limit is {} bytes (--max-body-bytes).", limit_bytes);
  return e;
}

ApiError headers_too_large(uint64_t limit_bytes) {
  ApiError e;
  e.http_status = 431;
  e.type = "RequestHeaderFieldsTooLargeError";
  e.message = fmt::format("Request line and headers too large: the limit is {} bytes.", limit_bytes);
  return e;
}

ApiError malformed_request(const std::string& detail) {
  ApiError e;
  e.message = "Malformed HTTP request: " + detail;
  return e;
}

ApiError route_not_found(const std::string& method, const std::string& path) {
  ApiError e;
  e.http_status = 404;
  e.type = "NotFoundError";
  e.message = fmt::format("No route for {} {}", method, path);
  return e;
}

ApiError method_not_allowed(const std::string& method, const std::string& path) {
  ApiError e;
  e.http_status = 405;
  e.type = "MethodNotAllowedError";
  e.message = fmt::format("Method {} is not allowed on {}", method, path);
  return e;
}

ApiError from_status(const Status& status, const std::string& param) {
  ApiError e;
  e.param = param;
  e.message = status.message();
  switch (status.code()) {
    case StatusCode::ok:
    case StatusCode::internal:
    case StatusCode::data_loss:
      e.http_status = 500;
      e.type = "InternalServerError";
      break;
    case StatusCode::invalid_argument:
    case StatusCode::out_of_range:
    case StatusCode::not_supported:
      e.http_status = 400;
      e.type = "BadRequestError";
      break;
    case StatusCode::not_found:
      e.http_status = 404;
      e.type = "NotFoundError";
      break;
    case StatusCode::resource_exhausted:
    case StatusCode::unavailable:
      e.http_status = 503;
      e.type = "ServiceUnavailableError";
      break;
  }
  if (e.message.empty()) e.message = to_string(status.code());
  return e;
}

std::string render_error(const ApiError& error) {
  nlohmann::json j;
  j["error"] = {{"message", error.message},
                {"type", error.type},
                {"param", error.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(error.param)},
                {"code", error.http_status}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

const char* reason_phrase(int http_status) {
  switch (http_status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

}  // namespace troupe::openai

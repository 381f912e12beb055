// The one place where failures become HTTP answers: an ApiError carries the
// HTTP status and the OpenAI error envelope fields; every endpoint renders
// errors through render_error() so clients always see the same shape.
#pragma once

#include <cstdint>
#include <string>

#include "troupe/status.hpp"

namespace troupe::openai {

struct ApiError {
  int http_status = 400;
  std::string type = "BadRequestError";  // vLLM's names: BadRequestError, NotFoundError, ...
  std::string message;
  std::string param;  // the offending request field; empty renders as null
};

/// 400 naming the offending field in both "param" and the message.
ApiError invalid_param(const std::string& param, const std::string& message);
/// 400 for a body that is not valid JSON (or not an object).
ApiError invalid_json(const std::string& detail);
/// 404 with vLLM's wording: "The model `X` does not exist."
ApiError model_not_found(const std::string& model);
ApiError unauthorized();
ApiError payload_too_large(uint64_t limit_bytes);
/// 431: the request line and headers pass `limit_bytes`.
ApiError headers_too_large(uint64_t limit_bytes);
/// 400 for bytes that are not an HTTP/1.x request (`detail`: what the parser saw).
ApiError malformed_request(const std::string& detail);
ApiError route_not_found(const std::string& method, const std::string& path);
ApiError method_not_allowed(const std::string& method, const std::string& path);
/// The one map from a Status to an HTTP answer: invalid_argument, out_of_range and
/// not_supported -> 400, not_found -> 404, resource_exhausted and unavailable -> 503,
/// the rest -> 500. `param`: the request field at fault, if known (e.g. from
/// SamplingParams::validate or engine::InputProcessor).
ApiError from_status(const Status& status, const std::string& param = "");

/// {"error": {"message", "type", "param", "code"}} with code = the HTTP status.
std::string render_error(const ApiError& error);
/// "Bad Request", "Not Found", ... for the status line.
const char* reason_phrase(int http_status);

}  // namespace troupe::openai

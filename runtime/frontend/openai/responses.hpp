// OpenAI's Responses API (POST /v1/responses) as vLLM serves it, on top of chat
// completions: the request becomes a chat request (instructions as the system
// message, input items as messages, function tools and tool_choice in chat's form,
// max_output_tokens as max_tokens), and the chat answer becomes output items
// (reasoning, message with output_text, function_call). What troupe does not
// implement (store, previous_response_id, background, built-in tools, ...) is a 400
// naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/frontend/openai/errors.hpp"
#include "runtime/frontend/openai/protocol.hpp"
#include "runtime/frontend/openai/render.hpp"

namespace troupe::openai {

struct ResponsesRequest {
  ChatCompletionRequest chat;  // what the engine runs
  std::string request_id;      // vLLM's request_id: the response's id as given (empty: a random resp_ id)
  /// The request's settings a response object repeats (instructions, max_output_tokens,
  /// temperature, top_p, tools, tool_choice, parallel_tool_calls, metadata, text, user, ...).
  nlohmann::json echo = nlohmann::json::object();
};

/// Parse + validate a /v1/responses body; errors name the Responses field.
std::optional<ApiError> parse_responses_request(std::string_view body, const Limits& limits, ResponsesRequest* out);

/// The output of one answer as Responses items, in order: reasoning (when `has_reasoning`
/// and there is some), the message (its text; left out when empty and there are calls or
/// reasoning), then one function_call per tool call.
nlohmann::json response_output_items(const Choice& answer);

/// The response object: "completed", or "incomplete" with incomplete_details.reason
/// "max_output_tokens" when the answer was cut by the token limit.
struct ResponseUsage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t reasoning_tokens = 0;
};
nlohmann::json response_object(const std::string& id, int64_t created_at, const std::string& model,
                               const nlohmann::json& echo, const std::string& status, nlohmann::json output,
                               const std::optional<ResponseUsage>& usage);
/// The status of a finished answer from its finish_reason.
std::string response_status(const std::optional<std::string>& finish_reason);

/// "resp_<hex>", "msg_<hex>", "rs_<hex>", "fc_<hex>".
std::string make_response_item_id(const char* prefix);

}  // namespace troupe::openai

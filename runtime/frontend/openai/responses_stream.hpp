// The server-sent events of a streamed /v1/responses answer, as OpenAI (and vLLM)
// send them: response.created and response.in_progress; for each output item
// response.output_item.added, its deltas (response.reasoning_text.delta,
// response.output_text.delta inside a content part, response.function_call_arguments.delta)
// and their .done events, response.output_item.done; then response.completed (or
// incomplete) with the whole response. Every event carries a sequence_number.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/frontend/openai/render.hpp"
#include "runtime/frontend/openai/responses.hpp"

namespace troupe::openai {

class ResponsesEventStream {
 public:
  ResponsesEventStream(std::string id, int64_t created_at, std::string model, nlohmann::json echo);
  /// response.created and response.in_progress.
  std::string start();
  /// The events of one streamed piece: reasoning text, content text, tool-call deltas
  /// (a delta with an id starts a call). Opening an item closes the one before.
  std::string piece(std::string_view reasoning, std::string_view text, const std::vector<ToolCallDelta>& calls);
  /// Closes the open item and sends the final response with its status and usage:
  /// response.completed, response.incomplete or response.failed.
  std::string finish(const std::string& status, const ResponseUsage& usage);
  /// An error event (the stream ends after it).
  std::string error(const std::string& message);

 private:
  enum class Open { none, reasoning, message };
  std::string event(nlohmann::json body);
  std::string open_item(Open kind);
  std::string close_item();
  std::string close_calls();
  nlohmann::json snapshot(const std::string& status, const std::optional<ResponseUsage>& usage) const;

  std::string id_;
  int64_t created_at_ = 0;
  std::string model_;
  nlohmann::json echo_;
  int64_t sequence_ = 0;
  nlohmann::json output_ = nlohmann::json::array();  // items closed so far
  Open open_ = Open::none;
  nlohmann::json item_;      // the open reasoning or message item
  std::string text_;         // its text so far
  // Function calls stay open together (a parser may name the next call before the
  // arguments of the one before): their items follow output_ in order.
  struct OpenCall {
    int tool_index = 0;
    nlohmann::json item;
    std::string arguments;
  };
  std::vector<OpenCall> calls_;
};

}  // namespace troupe::openai

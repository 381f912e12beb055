// Tool calling as vLLM serves it: `tools` and `tool_choice` validated, the
// structured-output constraint that enforces "required" and a named function
// (the function's parameters schema; for "required" a list of calls, anyOf over
// the tools), and the constrained output turned into OpenAI tool_calls, whole or
// as streaming deltas.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/protocol/sampling_params.hpp"
#include "runtime/rank/structured/grammar.hpp"
#include "runtime/frontend/openai/errors.hpp"
#include "runtime/frontend/openai/render.hpp"
#include "troupe/status.hpp"

namespace troupe::openai {

enum class ToolChoice { none, automatic, required, named };

/// A chat request's tools as the server acts on them.
struct ToolsRequest {
  ToolChoice choice = ToolChoice::none;
  std::string named;               // the function of ToolChoice::named
  std::vector<std::string> names;  // every tool's function name, in request order
  /// Each tool's parameters schema (null: none), its keys in their written order.
  nlohmann::ordered_json parameters = nlohmann::ordered_json::array();
  std::vector<bool> strict;        // each tool's function.strict
  bool parallel_calls = true;      // parallel_tool_calls: false makes "required" at most one call
  bool forced() const { return choice == ToolChoice::required || choice == ToolChoice::named; }
};

/// Validates `tools` and `tool_choice` of a chat body (vLLM's defaults: "auto" with tools,
/// "none" without) and, for "required" or a named function, sets the structured-output
/// constraint on `sampling`, compiled under `limits` (a schema that cannot be enforced is
/// an error naming the keyword). A strict tool's (function.strict) schema is compiled
/// whatever the choice. Errors name the field.
/// `ordered`: the body with its keys in their written order (body::ordered_body), where the
/// schemas are read; null: from `body` (keys sorted).
std::optional<ApiError> parse_tools(const nlohmann::json& body, ToolsRequest* out, sampling::SamplingParams* sampling,
                                    const structured::GrammarLimits& limits = {},
                                    const nlohmann::ordered_json* ordered = nullptr);

/// tool_choice "auto" with strict tools and the hermes tool-call parser: a structural tag
/// (free text; after "<tool_call>" a strict tool's call, its arguments as its schema says).
/// Nothing for other parsers (their formats are not enforced) or when another structured
/// output is set.
std::optional<ApiError> constrain_strict_tools(const ToolsRequest& tools, const std::string& parser,
                                               const structured::GrammarLimits& limits,
                                               sampling::SamplingParams* sampling);

/// Every object schema in `schema` without additionalProperties gets false (vLLM's
/// disable_additional_properties; the tools' schemas).
void close_schema_objects(nlohmann::ordered_json* schema);

/// vLLM's tool-call id: "chatcmpl-tool-" and 32 random hex digits.
std::string make_tool_call_id();

/// The whole output of a forced choice as tool calls: a named function's arguments are the
/// text itself (as vLLM, even when cut short); "required" parses the list of
/// {"name", "parameters"} (invalid_argument when it does not parse, e.g. cut by max_tokens).
Result<std::vector<ToolCall>> forced_tool_calls(const ToolsRequest& tools, const std::string& text);

/// JSON text as Python's json.dumps(ensure_ascii=False) writes it (", " and ": "), which is
/// how vLLM writes a "required" call's arguments.
std::string python_json_dumps(const nlohmann::json& value);
/// The same with the keys in the order they were written (how json.dumps keeps a parsed
/// model output's keys; the tool-call parsers use it).
std::string python_json_dumps(const nlohmann::ordered_json& value);

/// Streams a forced choice's output as tool-call deltas, as vLLM does: a named function's
/// first delta carries the id, type and name with the text so far as arguments (its index
/// is the choice's index, as in vLLM), later ones the new text; "required" emits a call
/// once its "parameters" value starts, then that value's text as it grows.
class ForcedToolCallStream {
 public:
  ForcedToolCallStream(const ToolsRequest& tools, int choice_index);
  std::vector<ToolCallDelta> feed(std::string_view text);
  /// Whether any tool-call delta was emitted (vLLM's finish_reason is then "tool_calls").
  bool streamed() const { return streamed_; }

 private:
  std::vector<ToolCallDelta> feed_required(std::string_view text);

  ToolChoice choice_;
  std::string named_;
  int choice_index_ = 0;
  bool streamed_ = false;
  // "required": a small lexer over the list [{"name": ..., "parameters": {...}}, ...].
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
  std::string string_;      // the string being read at the call object's level
  std::string last_key_;    // the call object's last key
  bool expect_value_ = false;  // after a key's ':' at the call object's level
  std::string name_;        // the current call's name
  bool in_arguments_ = false;  // inside the current call's "parameters" value
  int calls_ = 0;           // calls started
};

}  // namespace troupe::openai

// The request fields that /v1/completions and /v1/chat/completions share
// (CommonFields: sampling numbers, stops, token constraints, ids, seeds,
// priority, output options, structured outputs), read in the order in which a
// body's errors are reported. Internal to the OpenAI front end.
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/frontend/openai/body_fields.hpp"
#include "runtime/frontend/openai/protocol.hpp"
#include "runtime/protocol/sampling_params.hpp"

namespace troupe::openai::body {

/// Every shared field into `c`; the first error. `chat`: the chat endpoint's variants
/// (max_completion_tokens, parallel_tool_calls; logprobs is its own there).
Error parse_common(const nlohmann::json& j, const Limits& limits, bool chat, CommonFields* c);
/// Fields that would change the answer and that troupe does not implement yet: refused,
/// never silently ignored (a client asking for JSON must not get prose). Also checks
/// response_format's shape, which parse_structured_output relies on.
Error refuse_unimplemented(const nlohmann::json& j, bool chat);
/// response_format json_object / json_schema (OpenAI), or vLLM's guided_json,
/// guided_choice and structured_outputs, into s->structured_output and its schema or
/// choices. A schema is compiled here once so that one troupe cannot enforce is a 400
/// naming why.
Error parse_structured_output(const nlohmann::json& j, sampling::SamplingParams* s);

}  // namespace troupe::openai::body

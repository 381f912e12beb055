// The request fields that /v1/completions and /v1/chat/completions share
// (CommonFields: sampling numbers, stops, token constraints, ids, seeds,
// priority, output options, structured outputs), read in the order in which a
// body's errors are reported. Internal to the OpenAI front end.
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/frontend/openai/body_fields.hpp"
#include "runtime/frontend/openai/protocol.hpp"
#include "runtime/protocol/sampling_params.hpp"
#include "runtime/rank/structured/grammar.hpp"

namespace troupe::openai::body {

/// Every shared field into `c`; the first error. `chat`: the chat endpoint's variants
/// (max_completion_tokens, parallel_tool_calls; logprobs is its own there).
/// `ordered`: the same body with its keys in their written order (ordered_body()), where
/// schemas are taken from, so that their properties keep their order; null: none.
Error parse_common(const nlohmann::json& j, const Limits& limits, bool chat, CommonFields* c,
                   const nlohmann::ordered_json* ordered = nullptr);
/// Fields that would change the answer and that troupe does not implement yet: refused,
/// never silently ignored (a client asking for JSON must not get prose). Also checks
/// response_format's shape, which parse_structured_output relies on.
Error refuse_unimplemented(const nlohmann::json& j, bool chat);
/// The structured output a body asks for, into s->structured_output and its spec, choices
/// and whitespace options: response_format json_object / json_schema / structural_tag
/// (OpenAI, vLLM), vLLM's guided_json, guided_regex, guided_grammar, guided_choice,
/// structural_tag, guided_whitespace_pattern and structured_outputs. At most one
/// constraint. It is compiled here (compile_structured_output), so that one troupe cannot
/// enforce is a 400 naming why before the request reaches the engine.
Error parse_structured_output(const nlohmann::json& j, const Limits& limits, sampling::SamplingParams* s,
                              const nlohmann::ordered_json* ordered = nullptr);
/// The body parsed again keeping its keys' order (nlohmann::json sorts them) when it holds a
/// field that carries a schema; a discarded value otherwise. An object's `properties` order is
/// the order the engine writes them in.
nlohmann::ordered_json ordered_body(std::string_view body, const nlohmann::json& j);
/// Compiles `s`'s structured output (if any) under `limits` in the process's grammar
/// cache, where the driver rank finds it again; an error names `param` and the keyword,
/// the limit, or the grammar's line and column.
Error compile_structured_output(const sampling::SamplingParams& s, const structured::GrammarLimits& limits,
                                const std::string& param);

}  // namespace troupe::openai::body

// vLLM's documented request fields that troupe knows but does not implement: each is a
// 400 naming it unless the request leaves it at vLLM's default (absent, null, or the
// default value), so no documented field is ever ignored silently (README's promise).
// Fields troupe implements are parsed in protocol.cpp; fields vLLM does not document
// stay ignored there at debug level, as vLLM does.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string_view>

#include "runtime/frontend/openai/errors.hpp"

namespace troupe::openai {

enum class Endpoint { completions, chat, embeddings, score, rerank };

/// The first field of `body` that vLLM documents for `endpoint`, that troupe does not
/// implement, and that is set to something other than vLLM's default: a 400 naming it.
std::optional<ApiError> refuse_unimplemented_vllm_fields(const nlohmann::json& body, Endpoint endpoint);

/// Whether `key` is one of those fields for `endpoint` (known: not logged as unknown).
bool is_unimplemented_vllm_field(std::string_view key, Endpoint endpoint);

}  // namespace troupe::openai

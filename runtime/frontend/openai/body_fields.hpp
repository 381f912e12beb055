// Reading a request body's fields, for the request parsers of this folder: a
// field that is absent or null counts as unset, a field of the wrong type is
// invalid_param naming it. Internal to the OpenAI front end.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/frontend/openai/errors.hpp"
#include "runtime/frontend/openai/protocol.hpp"
#include "runtime/frontend/openai/vllm_fields.hpp"

namespace troupe::openai::body {

using Error = std::optional<ApiError>;

/// Parses the body into an object, refusing deep nesting before the parser sees it.
Error parse_object(std::string_view body, const Limits& limits, nlohmann::json* out);
/// Fields vLLM does not document are ignored, as vLLM does (it logs them).
void log_unknown_fields(const nlohmann::json& j, std::initializer_list<const char*> known, Endpoint endpoint,
                        const char* what);
/// The field, or null when it is absent or null (clients send null for defaults).
const nlohmann::json* field(const nlohmann::json& j, const char* key);

Error get_string(const nlohmann::json& j, const char* key, std::string* out);
Error get_bool(const nlohmann::json& j, const char* key, bool* out);
/// A finite number.
Error get_double(const nlohmann::json& j, const char* key, std::optional<double>* out);
/// An integer: a JSON integer, or a float with an integral value (5.0).
Error as_int(const nlohmann::json& v, const char* key, int64_t* out);
Error get_int(const nlohmann::json& j, const char* key, std::optional<int64_t>* out);
/// An integer that fits in 32 bits; else invalid_param "<what>, got N".
Error get_int32(const nlohmann::json& j, const char* key, const char* what, std::optional<int32_t>* out);
/// vLLM's truncate_prompt_tokens: -1 (the model's maximum length) or at least 1; the engine
/// checks it against max_model_len and the tokenizer's special tokens.
Error get_truncate_prompt_tokens(const nlohmann::json& j, std::optional<int64_t>* out);
/// A list of token ids (integers in [0, 2^31)).
Error parse_token_list(const nlohmann::json& v, const char* key, std::vector<int32_t>* out);

}  // namespace troupe::openai::body

// OpenAI/vLLM request bodies parsed and validated into plain structs, with
// no server and no engine: every bad field becomes an ApiError naming it.
// Unknown fields are ignored (logged at debug), as vLLM does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/text/chat/chat_prompt.hpp"
#include "runtime/frontend/openai/errors.hpp"
#include "runtime/frontend/openai/tools.hpp"
#include "runtime/protocol/sampling_params.hpp"
#include "runtime/rank/structured/grammar.hpp"

namespace troupe::openai {

/// Bounds that keep one request from taking the server down.
/// The model's sampling defaults (generation_config.json, vLLM's --generation-config auto):
/// a request that leaves a field out gets these instead of vLLM's defaults.
struct SamplingDefaults {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
};

struct Limits {
  int max_n = 64;                      // choices per request
  size_t max_stop_strings = 64;
  size_t max_bad_words = 64;  // bad_words: words per request (each at most max_stop_string_bytes)
  size_t max_stop_string_bytes = 1024;
  size_t max_request_id_bytes = 256;  // request_id: logged and sent back
  size_t max_stop_token_ids = 1024;
  /// Nesting of the request body (nlohmann's parser recurses): a JSON schema under
  /// response_format may nest 32 schemas (two JSON levels each, an object and its
  /// "properties"), with an enum list at the bottom.
  int max_json_depth = 72;
  size_t max_prompts = 256;            // prompts in one completions request
  /// Structured outputs compile at admission under these (--structured-outputs-*).
  structured::GrammarLimits grammar;
  SamplingDefaults sampling_defaults;  // not a limit: what completions and chat start from
};

/// One prompt: text to tokenize, or token ids used as they are.
struct Prompt {
  bool is_tokens = false;
  std::string text;
  std::vector<int32_t> token_ids;
};

/// Fields shared by completions and chat completions.
struct CommonFields {
  std::string model;  // empty: the served model
  sampling::SamplingParams sampling;
  std::optional<int64_t> max_tokens;  // unset: max_model_len - prompt_len, as vLLM does
  int n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string user;
  int32_t priority = 0;        // vLLM: lower is served first (needs a priority scheduler policy)
  std::string cache_salt;      // vLLM: mixed into the prefix-cache hash; empty: none
  std::string request_id;      // vLLM: the response's id after its prefix; empty: a random one
  bool return_token_ids = false;            // vLLM: prompt and output token ids on each choice
  bool return_tokens_as_token_ids = false;  // vLLM: logprobs' tokens as "token_id:N"
  /// vLLM: cut the prompt to its last N tokens (-1: max_model_len); the engine checks it.
  std::optional<int64_t> truncate_prompt_tokens;
  /// vLLM's bad_words: words the output must not contain; admission turns them into token
  /// sequences (sampling.bad_words_token_ids).
  std::vector<std::string> bad_words;
  // vllm_xargs (per-request arguments of logits processors) goes to sampling.extra_args.
  /// The body's name of an engine request field where the two differ (chat's top_logprobs
  /// for logprobs, max_completion_tokens for max_tokens; the Responses API's own): the
  /// engine checks the values at admission and names its own field (admission_error).
  std::vector<std::pair<std::string, std::string>> body_names;
};

/// An admission refusal (engine::Engine::submit: the sampling ranges, the vocabulary, the
/// context, ...) as the answer to this body: the field the engine named, under the body's
/// own name, in "param" and at the head of the message.
ApiError admission_error(const Status& status, const std::string& engine_field, const CommonFields& common);

struct CompletionRequest {
  CommonFields common;
  std::vector<Prompt> prompts;
  bool echo = false;
};

struct ChatMessage {
  std::string role;
  std::string content;
};

struct ChatCompletionRequest {
  CommonFields common;
  std::vector<ChatMessage> messages;
  /// What the chat template renders: messages in vLLM's template form (key order kept,
  /// tool-call arguments as objects), tools (with tool_choice "none": vLLM still passes
  /// them), chat_template, chat_template_kwargs and the two flags below.
  chat::ChatPromptRequest chat;
  bool add_generation_prompt = true;
  bool continue_final_message = false;  // vLLM: continue the final (assistant) message
  bool include_reasoning = true;  // vLLM: false drops reasoning_content (with --reasoning-parser)
  int top_logprobs = 0;  // with logprobs=true
  /// tools and tool_choice; "required" and a named function have set common.sampling's
  /// structured-output constraint.
  ToolsRequest tools;
};

struct TokenizeRequest {
  std::string model;
  bool has_messages = false;
  std::string prompt;
  std::vector<ChatMessage> messages;
  chat::ChatPromptRequest chat;  // with messages: as ChatCompletionRequest::chat
  bool add_special_tokens = true;
  bool add_generation_prompt = true;
  bool continue_final_message = false;
};

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

/// POST /v1/embeddings (OpenAI) and /pooling (vLLM): inputs to pool.
struct EmbeddingRequest {
  std::string model;
  std::vector<Prompt> inputs;              // "input": a string, strings, token ids or token-id lists
  bool base64 = false;                     // encoding_format "base64" (little-endian float32), else "float"
  std::optional<int64_t> dimensions;       // matryoshka truncation
  std::optional<int64_t> truncate_prompt_tokens;  // vLLM: cut to N tokens (-1: max_model_len), special tokens kept
  std::optional<bool> normalize;           // vLLM's override of the model's normalization
  std::string user;
};

/// POST /score (vLLM): text_1 against each of text_2 (or pairwise for equal lists).
struct ScoreRequest {
  std::string model;
  std::vector<std::string> text_1;
  std::vector<std::string> text_2;
  std::optional<int64_t> truncate_prompt_tokens;
};

/// POST /rerank, /v1/rerank, /v2/rerank (vLLM, Jina and Cohere's shape): documents
/// ranked by their relevance to the query.
struct RerankRequest {
  std::string model;
  std::string query;
  std::vector<std::string> documents;  // strings, or objects {"text": string}
  int64_t top_n = 0;                   // 0: every document (vLLM's default)
  bool return_documents = true;        // each result carries {"document": {"text"}}
  std::optional<int64_t> truncate_prompt_tokens;
};

/// Parse + validate. On failure the ApiError is returned and `out` is unspecified.
std::optional<ApiError> parse_completion_request(std::string_view body, const Limits& limits,
                                                 CompletionRequest* out);
std::optional<ApiError> parse_chat_request(std::string_view body, const Limits& limits,
                                           ChatCompletionRequest* out);
std::optional<ApiError> parse_tokenize_request(std::string_view body, const Limits& limits,
                                               TokenizeRequest* out);
std::optional<ApiError> parse_embedding_request(std::string_view body, const Limits& limits, EmbeddingRequest* out);
std::optional<ApiError> parse_score_request(std::string_view body, const Limits& limits, ScoreRequest* out);
std::optional<ApiError> parse_rerank_request(std::string_view body, const Limits& limits, RerankRequest* out);
std::optional<ApiError> parse_detokenize_request(std::string_view body, const Limits& limits,
                                                 DetokenizeRequest* out);

/// Deepest nesting of arrays/objects in a JSON text (strings skipped); stops counting past `cap`.
int json_depth(std::string_view text, int cap);

/// Sampling parameters of choice i of n: seeded requests get seed + i so the choices differ.
sampling::SamplingParams choice_sampling(const sampling::SamplingParams& base, int index);

}  // namespace troupe::openai

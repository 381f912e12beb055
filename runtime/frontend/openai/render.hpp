// OpenAI/vLLM response bodies: completions, chat completions (whole and as
// stream chunks), usage, models, tokenize. Pure functions returning JSON text.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace troupe::openai {

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

/// One generated token's logprob and the most likely alternatives.
struct LogprobEntry {
  int32_t token_id = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};
/// Token id -> its text (for logprobs).
using TokenText = std::function<std::string(int32_t)>;

/// A function call in a chat answer (OpenAI's tool_calls[i], type "function").
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text
};
/// A streamed piece of a tool call: the first of a call carries id, type and name.
struct ToolCallDelta {
  int index = 0;
  std::optional<std::string> id;
  std::optional<std::string> name;
  std::string arguments;
};

struct Choice {
  int index = 0;
  std::string text;                    // completion text, or chat message content / delta
  std::optional<std::string> finish_reason;
  std::string stop_reason;             // the stop string that matched; empty renders as null
  bool has_logprobs = false;
  std::vector<LogprobEntry> logprobs;
  int64_t text_offset = 0;             // completions logprobs: offset of this piece in the choice text
  // vLLM's return_token_ids: the prompt's ids (a stream's first chunk; chat renders them on the
  // response, not the choice, as vLLM does) and the output's (per delta).
  std::optional<std::vector<int32_t>> prompt_token_ids;
  std::optional<std::vector<int32_t>> token_ids;
  // Chat only: a tool-calling answer's calls (its content is then ""), or a stream chunk's
  // tool-call deltas (the chunk then has no content).
  std::vector<ToolCall> tool_calls;
  std::vector<ToolCallDelta> tool_call_deltas;
  bool content_null = false;  // a whole chat answer's content is null (an auto tool call without text)
  // Chat with --reasoning-parser: a whole answer carries reasoning_content (null when
  // none) once `has_reasoning`; a stream chunk carries it when non-empty.
  bool has_reasoning = false;
  std::optional<std::string> reasoning;
};

/// "cmpl-<hex>" / "chatcmpl-<hex>": random, unique per request.
std::string make_request_id(const char* prefix);
int64_t unix_time_now();

std::string render_completion(const std::string& id, int64_t created, const std::string& model,
                              const std::vector<Choice>& choices, const Usage& usage, const TokenText& token_text);
std::string render_chat_completion(const std::string& id, int64_t created, const std::string& model,
                                   const std::vector<Choice>& choices, const Usage& usage,
                                   const TokenText& token_text);
/// One "text_completion" chunk (the JSON after "data: ").
std::string render_completion_chunk(const std::string& id, int64_t created, const std::string& model,
                                    const Choice& choice, const TokenText& token_text);
/// One "chat.completion.chunk"; `first` adds role "assistant" to the delta.
std::string render_chat_chunk(const std::string& id, int64_t created, const std::string& model, const Choice& choice,
                              bool first, const TokenText& token_text);
/// The final chunk of stream_options.include_usage: empty choices plus usage.
std::string render_usage_chunk(const std::string& id, int64_t created, const std::string& model, bool chat,
                               const Usage& usage);
/// "data: <json>\n\n"
std::string sse_event(const std::string& json_text);
inline const char* sse_done() { return "data: [DONE]\n\n"; }

/// A loaded LoRA adapter in /v1/models: its name and file (vLLM lists it with parent = the base model).
struct LoraCard {
  std::string name;
  std::string path;
};
std::string render_models(const std::string& served_name, const std::string& root, int64_t created,
                          int64_t max_model_len, const std::vector<LoraCard>& loras = {});
std::string render_tokenize(const std::vector<int32_t>& tokens, int64_t max_model_len);
std::string render_detokenize(const std::string& text);
std::string render_version(const std::string& version);

/// /v1/embeddings ("embedding" objects) and /pooling ("pooling" objects): one vector per
/// input, as floats or as base64 of little-endian float32; usage counts prompt tokens.
std::string render_embeddings(const std::string& id, int64_t created, const std::string& model, const char* object,
                              const std::vector<std::vector<float>>& vectors, bool base64, int64_t prompt_tokens);
/// /score: one {"index", "object": "score", "score"} per pair.
std::string render_scores(const std::string& id, int64_t created, const std::string& model,
                          const std::vector<double>& scores, int64_t prompt_tokens);
/// One ranked document of /rerank: `index` into the request's documents.
struct RerankResult {
  size_t index = 0;
  double relevance_score = 0;
};
/// /rerank (vLLM, Jina, Cohere): {"id", "model", "usage": {"total_tokens"}, "results": [{"index",
/// "relevance_score", "document": {"text"}}]} in the order given; `documents` empty: no "document".
std::string render_rerank(const std::string& id, const std::string& model, const std::vector<RerankResult>& results,
                          const std::vector<std::string>& documents, int64_t total_tokens);
/// Standard base64 (with padding) of `size` bytes.
std::string base64_encode(const void* data, size_t size);

}  // namespace troupe::openai

#include "runtime/frontend/openai/vllm_fields.hpp"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

namespace troupe::openai {
namespace {

using json = nlohmann::json;

constexpr unsigned bit(Endpoint e) { return 1u << static_cast<unsigned>(e); }
constexpr unsigned kGenerate = bit(Endpoint::completions) | bit(Endpoint::chat);
constexpr unsigned kPooling = bit(Endpoint::embeddings) | bit(Endpoint::score) | bit(Endpoint::rerank);

struct UnimplementedField {
  const char* key;
  unsigned endpoints;
  const char* default_json;  // vLLM's default besides null/absent ("" when null only)
  const char* why;           // appended to "KEY is not implemented in troupe yet"
};

// From vLLM's entrypoints/openai/protocol.py (CompletionRequest, ChatCompletionRequest,
// EmbeddingCompletionRequest/EmbeddingChatRequest, ScoreRequest, RerankRequest). An
// endpoint whose default differs has its own row.
constexpr UnimplementedField kFields[] = {
    {"prompt_embeds", bit(Endpoint::completions), "", " (prompt embeddings)"},
    {"add_special_tokens", bit(Endpoint::completions) | bit(Endpoint::embeddings), "true",
     " (troupe adds the tokenizer's special tokens as the model's file says)"},
    {"add_special_tokens", bit(Endpoint::chat), "false", " (the chat template places the special tokens)"},
    {"skip_special_tokens", kGenerate, "true", " (special tokens are always left out of the text)"},
    {"spaces_between_special_tokens", kGenerate, "true", ""},
    {"logits_processors", kGenerate, "", " (logits processors are plugins loaded with --logits-processors)"},
    {"kv_transfer_params", kGenerate, "", " (disaggregated serving)"},
    {"mm_processor_kwargs", bit(Endpoint::chat) | kPooling, "", " (multimodal input)"},
    {"echo", bit(Endpoint::chat), "false", " for chat"},
    {"documents", bit(Endpoint::chat), "", " (documents for the chat template)"},
    {"reasoning_effort", bit(Endpoint::chat), "", " (reasoning models)"},
    {"request_id", kPooling, "", " on this endpoint"},
    {"priority", kPooling, "0", " on pooling endpoints"},
    {"activation", bit(Endpoint::score) | bit(Endpoint::rerank), "", " (scores are cosine similarities)"},
    // The chat form of /v1/embeddings (vLLM's EmbeddingChatRequest).
    {"messages", bit(Endpoint::embeddings), "", " on /v1/embeddings (chat-form embeddings); send input"},
    {"chat_template", bit(Endpoint::embeddings), "", " on /v1/embeddings"},
    {"chat_template_kwargs", bit(Endpoint::embeddings), "", " on /v1/embeddings"},
    {"add_generation_prompt", bit(Endpoint::embeddings), "", " on /v1/embeddings"},
    {"continue_final_message", bit(Endpoint::embeddings), "false", " on /v1/embeddings"},
};

bool at_default(const json& value, const UnimplementedField& f) {
  if (value.is_null()) return true;
  if (!*f.default_json) return false;
  const json d = json::parse(f.default_json);
  // 0 and 0.0 alike; true only as a boolean.
  if (d.is_number() && value.is_number()) return d.get<double>() == value.get<double>();
  return d == value;
}

}  // namespace

std::optional<ApiError> refuse_unimplemented_vllm_fields(const json& body, Endpoint endpoint) {
  for (const auto& f : kFields) {
    if (!(f.endpoints & bit(endpoint))) continue;
    auto it = body.find(f.key);
    if (it == body.end() || at_default(*it, f)) continue;
    return invalid_param(f.key, fmt::format("{} is not implemented in troupe yet{}{}", f.key, f.why,
                                            *f.default_json ? fmt::format("; only its default ({}) is accepted",
                                                                          f.default_json)
                                                            : ""));
  }
  return std::nullopt;
}

bool is_unimplemented_vllm_field(std::string_view key, Endpoint endpoint) {
  for (const auto& f : kFields)
    if ((f.endpoints & bit(endpoint)) && key == f.key) return true;
  return false;
}

}  // namespace troupe::openai

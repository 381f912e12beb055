// The engine's request and output types, shared by the C++ API, the actors
// and the HTTP server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/protocol/pooling_params.hpp"
#include "runtime/protocol/sampling_params.hpp"
#include "runtime/protocol/finish_reason.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

struct GenerateRequest {
  std::string request_id;                 // empty: the engine assigns one
  std::string prompt;                     // tokenized unless prompt_token_ids is set
  std::vector<int32_t> prompt_token_ids;  // used as-is when not empty
  bool add_special_tokens = true;         // BOS etc. when tokenizing `prompt`
  sampling::SamplingParams sampling;
  /// vLLM's unset max_tokens: sampling.max_tokens becomes what the context has left after the prompt.
  bool max_tokens_fills_context = false;
  std::string cache_salt;                 // isolates this request's prefix-cache entries
  /// vLLM's priority: lower is served first; needs a scheduler policy that uses it (--scheduler-cls).
  int32_t priority = 0;
  /// Set: a pooling request (the pooling runner): one vector back, no text.
  std::optional<PoolingParams> pooling;
  /// vLLM's truncate_prompt_tokens: cut a longer prompt to N tokens (-1: max_model_len), keeping
  /// the special tokens the tokenizer adds; pooling keeps the text's start, generation its end.
  /// Unset: too long is an error.
  std::optional<int64_t> truncate_prompt_tokens;
  /// vLLM's bad_words: admission tokenizes each word (as is and after a space, as vLLM does)
  /// into sampling.bad_words_token_ids.
  std::vector<std::string> bad_words;
  /// The LoRA adapter to run with, by the name it was loaded under (Engine::load_lora_adapter,
  /// --lora-modules); empty: the base model.
  std::string lora_name;
  /// The replica that must serve it (vLLM's X-data-parallel-rank header), 0 .. data parallel
  /// size - 1; unset: the router chooses.
  std::optional<int32_t> data_parallel_rank;
};

/// A loaded LoRA adapter (vLLM's LoRARequest): its name, the id the ranks know it by, its file.
struct LoraAdapterInfo {
  std::string name;
  int64_t id = 0;
  std::string path;
};

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0;
  std::vector<int32_t> top_ids;           // the requested number of most likely tokens, best first
  std::vector<float> top_logprobs;
};

/// One streamed delta of a request. The last one has finished == true.
struct RequestOutput {
  std::string request_id;
  std::vector<int32_t> prompt_token_ids;  // first output only
  std::vector<int32_t> new_token_ids;     // tokens since the previous output
  std::string new_text;                   // text since the previous output
  std::vector<TokenLogprob> new_logprobs; // one per new token when logprobs were requested
  std::vector<float> embedding;           // a pooling request's pooled vector (in its only, final output)
  bool finished = false;
  FinishReason finish_reason = FinishReason::stop;  // meaningful when finished
  std::string stop_reason;                // the stop string or token id that ended it, if any
  Status error;                           // why, when finish_reason == error (its code travels to HTTP)
  int64_t num_prompt_tokens = 0;
  int64_t num_generated_tokens = 0;       // so far
};

/// Everything a finished request produced.
struct FinalOutput {
  std::string request_id;
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<TokenLogprob> logprobs;
  std::vector<float> embedding;
  bool finished = false;
  FinishReason finish_reason = FinishReason::stop;
  std::string stop_reason;
  Status error;
};

/// Fold one delta into an accumulated final output.
void accumulate(FinalOutput& final_output, const RequestOutput& delta);

}  // namespace troupe::engine

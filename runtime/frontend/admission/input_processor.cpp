#include "runtime/frontend/admission/input_processor.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace troupe::engine {
namespace {

// Names `name` as the field at fault and passes `status` on.
Status refuse(std::string* field, const char* name, Status status) {
  if (field) *field = name;
  return status;
}

std::string out_of_vocabulary(int32_t id, int64_t vocab) {
  return "token id " + std::to_string(id) + " is out of vocabulary (size " + std::to_string(vocab) + ")";
}

}  // namespace

InputProcessor::InputProcessor(InputProcessorSetup setup) : setup_(std::move(setup)) {
  vocab_size_ = setup_.tokenizer->vocab_size();
  if (setup_.model_info.vocab_size > 0) vocab_size_ = std::min<int64_t>(vocab_size_, setup_.model_info.vocab_size);
}

Result<AdmittedRequest> InputProcessor::process(GenerateRequest request, int64_t in_flight, std::string* field) {
  if (field) field->clear();
  const EngineConfig& config = setup_.config;
  const bool pooling_runner = config.model.runner == "pooling";
  if (request.pooling && !pooling_runner)
    return invalid_argument("model " + config.model.served_model_name +
                            " runs as a generate model (--runner generate): it does not answer pooling requests "
                            "(start it with --runner pooling)");
  if (!request.pooling && pooling_runner)
    return invalid_argument("model " + config.model.served_model_name +
                            " runs as a pooling model (--runner pooling): it answers embedding, pooling and score "
                            "requests, not generation");
  const char* prompt_field = request.pooling ? "input" : "prompt";
  std::vector<int32_t> ids = std::move(request.prompt_token_ids);
  // The special tokens the tokenizer put around the text ([CLS] ... [SEP], BOS): truncation keeps them.
  size_t prefix = 0, suffix = 0;
  if (ids.empty() && !request.prompt.empty()) {
    ids = setup_.tokenizer->encode(request.prompt, request.add_special_tokens, /*parse_special=*/true);
    if (request.add_special_tokens) {
      const tokenizer::Vocab& v = setup_.tokenizer->vocab();
      prefix = v.add_bos ? 1 : 0;
      suffix = (v.add_eos ? 1 : 0) + (v.add_sep ? 1 : 0);
    }
  }
  if (ids.empty())
    return refuse(field, prompt_field,
                  invalid_argument(request.pooling ? "The input cannot be empty" : "The decoder prompt cannot be empty"));
  if (request.truncate_prompt_tokens)
    TROUPE_RETURN_IF_ERROR(truncate(*request.truncate_prompt_tokens, request.pooling.has_value(), prefix, suffix, ids,
                                    field));
  for (int32_t id : ids)
    if (id < 0 || id >= vocab_size_) return refuse(field, prompt_field, out_of_range(out_of_vocabulary(id, vocab_size_)));
  const int64_t prompt_len = static_cast<int64_t>(ids.size());
  TROUPE_RETURN_IF_ERROR(request.pooling ? check_pooling(request, prompt_len, field)
                                         : check_generation(request, prompt_len, field));
  if (request.priority != 0 && !(setup_.policy && setup_.policy->uses_priority()))
    return refuse(field, "priority",
                  invalid_argument("priority: scheduler policy '" + config.scheduler.scheduler_cls +
                                   "' does not use priorities; start the engine with a policy that does "
                                   "(--scheduler-cls)"));
  const int64_t replicas = std::max(1, config.parallel.data_parallel_size);
  if (request.data_parallel_rank && (*request.data_parallel_rank < 0 || *request.data_parallel_rank >= replicas))
    return refuse(field, "X-data-parallel-rank",
                  invalid_argument("X-data-parallel-rank " + std::to_string(*request.data_parallel_rank) +
                                   " is out of range: the server runs " + std::to_string(replicas) +
                                   " replica(s), 0.." + std::to_string(replicas - 1)));
  const int64_t queued_cap = config.scheduler.max_num_queued_requests;
  if (queued_cap > 0 && in_flight >= replicas * (config.scheduler.max_num_seqs + queued_cap))
    return resource_exhausted("the engine's waiting queue is full (" + std::to_string(queued_cap) +
                              " queued requests per replica, --max-num-queued-requests); retry later");

  AdmittedRequest admitted;
  CoreRequest& core = admitted.request;
  {
    std::lock_guard lock(mu_);
    core.request_id = request.request_id.empty() ? "req-" + std::to_string(next_request_++) : request.request_id;
    core.seed = request.sampling.seed ? *request.sampling.seed : setup_.seeds();
  }
  if (!request.pooling && setup_.processors) {
    std::lock_guard lock(processors_mu_);
    TROUPE_RETURN_IF_ERROR(setup_.processors->validate(core.request_id, request.sampling.extra_args, ids));
  }
  if (!request.lora_name.empty()) {
    if (!setup_.loras) return not_found("The model `" + request.lora_name + "` does not exist.");
    auto lease = setup_.loras->acquire(request.lora_name);
    if (!lease) return lease.status();
    admitted.lora = std::move(lease).value();
    core.lora_id = admitted.lora->id();
  }
  core.prompt_token_ids = std::move(ids);
  core.priority = request.priority;
  core.sampling = std::move(request.sampling);
  core.cache_salt = std::move(request.cache_salt);
  core.pooling = std::move(request.pooling);
  core.data_parallel_rank = request.data_parallel_rank.value_or(-1);
  return admitted;
}

// vLLM's truncate_prompt_tokens, as a Hugging Face tokenizer truncates (truncation=True,
// max_length=n): -1 is the model's maximum length; the special tokens the tokenizer added
// stay and the text between them is cut to fit. Pooling models keep the start of the text
// (truncation side right, vLLM's side for every task but generation); generation keeps its
// end (side left). Token ids from the client carry no marked special tokens: cut plainly.
Status InputProcessor::truncate(int64_t n, bool pooling, size_t prefix, size_t suffix, std::vector<int32_t>& ids,
                                std::string* field) const {
  const int64_t max_len = setup_.config.model.max_model_len;
  if (n == -1) n = max_len;
  if (n < 1)
    return refuse(field, "truncate_prompt_tokens",
                  invalid_argument("truncate_prompt_tokens must be at least 1, or -1 for the model's maximum length"));
  if (n > max_len)
    return refuse(field, "truncate_prompt_tokens",
                  invalid_argument("truncate_prompt_tokens (" + std::to_string(n) +
                                   ") is greater than the model's maximum context length (" +
                                   std::to_string(max_len) + ")"));
  const size_t specials = prefix + suffix;
  if (static_cast<size_t>(n) < specials)
    return refuse(field, "truncate_prompt_tokens",
                  invalid_argument("truncate_prompt_tokens must be at least " + std::to_string(specials) +
                                   " here: the tokenizer adds " + std::to_string(specials) + " special tokens"));
  const size_t keep = static_cast<size_t>(n);
  if (ids.size() <= keep) return {};
  const size_t cut = ids.size() - keep;  // text tokens to drop
  const auto text_begin = ids.begin() + static_cast<std::ptrdiff_t>(prefix);
  const auto text_end = ids.end() - static_cast<std::ptrdiff_t>(suffix);
  if (pooling) ids.erase(text_end - static_cast<std::ptrdiff_t>(cut), text_end);
  else ids.erase(text_begin, text_begin + static_cast<std::ptrdiff_t>(cut));
  return {};
}

// The sampling parameters, once max_tokens is known, against the vocabulary and the context.
Status InputProcessor::check_generation(GenerateRequest& request, int64_t prompt_len, std::string* field) const {
  sampling::SamplingParams& s = request.sampling;
  const int64_t max_len = setup_.config.model.max_model_len;
  auto too_long = [&](int64_t completion) {
    return refuse(field, "max_tokens",
                  out_of_range("This model's maximum context length is " + std::to_string(max_len) +
                               " tokens. However, you requested " + std::to_string(prompt_len + completion) +
                               " tokens (" + std::to_string(prompt_len) + " in the messages, " +
                               std::to_string(completion) +
                               " in the completion). Please reduce the length of the messages or completion."));
  };
  const GenerationDefaults& defaults = setup_.config.model.generation_defaults;
  if (request.max_tokens_fills_context) {
    if (prompt_len >= max_len) return too_long(1);
    // vLLM: generation_config.json's max_new_tokens, capped by what the context leaves.
    const int64_t fill = defaults.max_tokens ? std::min(*defaults.max_tokens, max_len - prompt_len) : max_len - prompt_len;
    s.max_tokens = static_cast<int32_t>(std::min<int64_t>(fill, INT32_MAX));
  }
  // vLLM: generation_config.json's eos_token_id list stops generation too (not with ignore_eos).
  if (!s.ignore_eos)
    for (int32_t id : defaults.eos_token_ids)
      if (id < vocab_size_ && std::find(s.stop_token_ids.begin(), s.stop_token_ids.end(), id) == s.stop_token_ids.end())
        s.stop_token_ids.push_back(id);
  std::string param;
  if (Status st = s.validate(&param); !st.ok()) {
    if (field) *field = param;
    return st;
  }
  for (int32_t id : s.stop_token_ids)
    if (id >= vocab_size_)
      return refuse(field, "stop_token_ids", out_of_range("stop_token_ids: " + out_of_vocabulary(id, vocab_size_)));
  for (const auto& [id, bias] : s.logit_bias)
    if (id >= vocab_size_)
      return refuse(field, "logit_bias", out_of_range("logit_bias: " + out_of_vocabulary(id, vocab_size_)));
  for (int32_t id : s.allowed_token_ids)
    if (id >= vocab_size_)
      return refuse(field, "allowed_token_ids",
                    out_of_range("allowed_token_ids: " + out_of_vocabulary(id, vocab_size_)));
  TROUPE_RETURN_IF_ERROR(resolve_bad_words(request, field));
  if (prompt_len + s.max_tokens > max_len) return too_long(s.max_tokens);
  return {};
}

// vLLM's bad_words (SamplingParams.update_from_tokenizer): each word, its leading whitespace
// stripped, is tokenized without special tokens; then " " + word too, kept only when it starts
// with another token and has as many tokens (a new word token, not a space token before the
// same ones).
Status InputProcessor::resolve_bad_words(GenerateRequest& request, std::string* field) const {
  auto& out = request.sampling.bad_words_token_ids;  // C++ callers may have set ids already
  for (const std::string& word : request.bad_words) {
    const size_t start = word.find_first_not_of(" \t\n\r\f\v");
    if (start == std::string::npos)
      return refuse(field, "bad_words", invalid_argument("bad_words: a word cannot be empty or only whitespace"));
    const std::string bare = word.substr(start);
    std::vector<int32_t> plain = setup_.tokenizer->encode(bare, /*add_special=*/false, /*parse_special=*/true);
    std::vector<int32_t> spaced = setup_.tokenizer->encode(" " + bare, /*add_special=*/false, /*parse_special=*/true);
    if (plain.empty())
      return refuse(field, "bad_words", invalid_argument("bad_words: '" + bare + "' has no tokens"));
    for (const auto* ids : {&plain, &spaced})
      for (int32_t id : *ids)
        if (id < 0 || id >= vocab_size_)
          return refuse(field, "bad_words", out_of_range("bad_words: " + out_of_vocabulary(id, vocab_size_)));
    const bool keep_spaced = !spaced.empty() && spaced.front() != plain.front() && spaced.size() == plain.size();
    out.push_back(std::move(plain));
    if (keep_spaced) out.push_back(std::move(spaced));
  }
  return {};
}

// Checked here, not on the worker: a step that fails there fails every request in it.
Status InputProcessor::check_pooling(const GenerateRequest& request, int64_t prompt_len, std::string* field) const {
  const EngineConfig& config = setup_.config;
  const int64_t hidden = setup_.model_info.hidden_size;
  if (request.pooling->dimensions) {
    if (!config.model.pooling_matryoshka)
      return refuse(field, "dimensions",
                    invalid_argument("dimensions: model " + config.model.served_model_name +
                                     " does not support matryoshka representation (it keeps all " +
                                     std::to_string(hidden) + " dimensions)"));
    if (*request.pooling->dimensions < 1 || *request.pooling->dimensions > hidden)
      return refuse(field, "dimensions", invalid_argument("dimensions must be in 1.." + std::to_string(hidden)));
  }
  const int64_t max_len = config.model.max_model_len;
  if (prompt_len > max_len)
    return refuse(field, "input",
                  out_of_range("This model's maximum context length is " + std::to_string(max_len) +
                               " tokens. However, you requested " + std::to_string(prompt_len) +
                               " tokens in the input. Please reduce the length of the input, or set "
                               "truncate_prompt_tokens."));
  if (prompt_len > config.scheduler.max_num_batched_tokens)
    return refuse(field, "input",
                  out_of_range("the input has " + std::to_string(prompt_len) +
                               " tokens, more than max_num_batched_tokens " +
                               std::to_string(config.scheduler.max_num_batched_tokens) +
                               " (a pooling input runs in one step)"));
  return {};
}

}  // namespace troupe::engine

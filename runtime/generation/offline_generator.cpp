#include "runtime/generation/offline_generator.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "runtime/models/builtin_models.hpp"
#include "runtime/sampling/stop_checker.hpp"
#include "runtime/tokenizer/incremental_decoder.hpp"
#include "troupe/log.hpp"

namespace troupe::generation {

OfflineGenerator::~OfflineGenerator() {
  worker_.reset();  // the model points into the file: drop it first
}

Result<std::unique_ptr<OfflineGenerator>> OfflineGenerator::create(Platform& platform, EngineConfig config,
                                                                   const std::string& model_path) {
  runtime::register_builtin_models();
  std::unique_ptr<OfflineGenerator> g(new OfflineGenerator());
  auto file = gguf::GgufFile::open(model_path);
  if (!file.ok()) return file.status();
  g->file_ = std::shared_ptr<const gguf::GgufFile>(std::move(*file));
  g->source_ = std::make_unique<gguf::GgufModelSource>(g->file_);
  config.model.model_path = model_path;
  config.model.architecture = g->file_->architecture();

  // Every weight type must run on this platform: refuse early with the platform's reason.
  std::set<std::string> types;
  for (const auto& t : g->file_->tensors()) types.insert(std::string(to_string(t.type)));
  for (const auto& t : types) TROUPE_RETURN_IF_ERROR(platform.verify_quantization(t));
  config.model.quantization.clear();
  for (const auto& t : types) config.model.quantization += (config.model.quantization.empty() ? "" : ",") + t;

  TROUPE_RETURN_IF_ERROR(platform.check_and_update_config(config));
  auto tok = tokenizer::Tokenizer::from_gguf(*g->file_);
  if (!tok.ok()) return tok.status();
  g->tokenizer_ = std::move(*tok);

  auto worker = platform.make_worker(config, 0);
  if (!worker.ok()) return worker.status();
  g->worker_ = std::move(*worker);
  Worker& w = *g->worker_;
  TROUPE_RETURN_IF_ERROR(w.init_device());
  TROUPE_RETURN_IF_ERROR(w.load_model(*g->source_));
  if (w.model_info()->vocab_size < g->tokenizer_->vocab_size())
    return data_loss("the tokenizer has " + std::to_string(g->tokenizer_->vocab_size()) +
                     " tokens but the model only " + std::to_string(w.model_info()->vocab_size));
  auto spec = w.get_kv_cache_spec();
  if (!spec.ok()) return spec.status();
  auto avail = w.determine_available_memory();
  if (!avail.ok()) return avail.status();
  int64_t num_blocks = config.cache.num_gpu_blocks_override > 0 ? config.cache.num_gpu_blocks_override
                                                                 : *avail / spec->bytes_per_block();
  if (num_blocks < 1)
    return resource_exhausted("no room for a single KV block (" + std::to_string(spec->bytes_per_block()) +
                              " bytes) in " + std::to_string(*avail) + " bytes");
  int64_t max_len = config.model.max_model_len > 0 ? config.model.max_model_len : w.model_info()->context_length;
  if (max_len > num_blocks * spec->block_size) {
    TROUPE_LOG_WARNING("max_model_len {} exceeds the KV cache ({} tokens); limiting it", max_len,
                       num_blocks * spec->block_size);
    max_len = num_blocks * spec->block_size;
  }
  // One sequence at a time: no more blocks than one max-length sequence needs.
  num_blocks = std::min(num_blocks, (max_len + spec->block_size - 1) / spec->block_size);
  KvCacheConfig kv;
  kv.spec = *spec;
  kv.num_blocks = num_blocks;
  TROUPE_RETURN_IF_ERROR(w.initialize_from_config(kv));
  TROUPE_RETURN_IF_ERROR(w.compile_or_warm_up_model());
  g->num_blocks_ = num_blocks;
  g->max_model_len_ = max_len;
  g->block_table_.resize(num_blocks);
  std::iota(g->block_table_.begin(), g->block_table_.end(), 0);
  config.model.max_model_len = max_len;
  g->config_ = std::move(config);
  return g;
}

Result<GenerateOutput> OfflineGenerator::generate_text(const std::string& prompt,
                                                       const sampling::SamplingParams& params) {
  return generate(tokenizer_->encode(prompt, /*add_special=*/true, /*parse_special=*/true), params);
}

Result<GenerateOutput> OfflineGenerator::generate(const std::vector<int32_t>& prompt_ids,
                                                  const sampling::SamplingParams& params) {
  TROUPE_RETURN_IF_ERROR(params.validate());
  const int64_t vocab = worker_->model_info()->vocab_size;
  if (prompt_ids.empty()) return invalid_argument("the prompt is empty");
  for (int32_t id : prompt_ids)
    if (id < 0 || id >= vocab) return out_of_range("prompt token id " + std::to_string(id) + " is out of range");
  const int64_t n_prompt = static_cast<int64_t>(prompt_ids.size());
  if (n_prompt >= max_model_len_)
    return invalid_argument("the prompt has " + std::to_string(n_prompt) + " tokens; the maximum model length is " +
                            std::to_string(max_model_len_));
  sampling::SamplingParams p = params;
  p.max_tokens = static_cast<int32_t>(std::min<int64_t>(p.max_tokens, max_model_len_ - n_prompt));
  const uint64_t request_seed = p.seed ? *p.seed : std::random_device{}();
  const int block_size = config_.cache.block_size;
  const int64_t chunk = std::max<int64_t>(1, config_.scheduler.max_num_batched_tokens);

  GenerateOutput out;
  out.prompt_token_ids = prompt_ids;
  sampling::StopChecker stop(p);
  tokenizer::IncrementalDecoder decoder(*tokenizer_, /*skip_special=*/true);
  std::string text;
  ForwardBatch& b = request_.batch;

  // Fill the reused batch with tokens [pos, pos + n) of the single sequence.
  auto fill = [&](const int32_t* ids, int64_t pos, int64_t n) {
    b.token_ids.assign(ids, ids + n);
    b.positions.resize(n);
    b.slot_mapping.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      b.positions[i] = static_cast<int32_t>(pos + i);
      b.slot_mapping[i] = pos + i;  // block i/bs is block i/bs: slot == position
    }
    b.query_start = {0, static_cast<int32_t>(n)};
    b.seq_lens = {static_cast<int32_t>(pos + n)};
    if (b.block_tables.size() != 1) b.block_tables.resize(1);
    b.block_tables[0].assign(block_table_.begin(),
                             block_table_.begin() + (pos + n + block_size - 1) / block_size);
    b.logits_indices = {static_cast<int32_t>(n - 1)};
  };

  std::vector<float> logits;
  for (int64_t pos = 0; pos < n_prompt; pos += chunk) {
    const int64_t n = std::min(chunk, n_prompt - pos);
    fill(prompt_ids.data() + pos, pos, n);
    auto r = worker_->execute_model(request_);
    if (!r.ok()) return r.status();
    logits = std::move(r->logits);
  }
  int64_t pos = n_prompt;
  while (true) {
    auto s = sampling::sample(logits.data(), vocab, p, prompt_ids, out.token_ids,
                              sampling::derive_step_seed(request_seed, out.token_ids.size()));
    out.token_ids.push_back(s.token);
    const bool eog = tokenizer_->is_eog(s.token);
    size_t added = 0;
    const bool is_stop_id = std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), s.token) !=
                            p.stop_token_ids.end();
    if (!(eog && !p.ignore_eos) && !is_stop_id) {
      std::string piece = decoder.push(s.token);
      added = piece.size();
      text += piece;
    }
    auto d = stop.check(s.token, eog, text, added, out.token_ids.size());
    if (d.finished) {
      if (d.stop_reason.empty()) text += decoder.flush();
      text.resize(std::min(text.size(), d.stop_reason.empty() ? text.size() : d.text_length));
      out.finish_reason = d.finish_reason;
      break;
    }
    fill(&out.token_ids.back(), pos, 1);
    ++pos;
    auto r = worker_->execute_model(request_);
    if (!r.ok()) return r.status();
    logits = std::move(r->logits);
  }
  out.text = std::move(text);
  return out;
}

}  // namespace troupe::generation

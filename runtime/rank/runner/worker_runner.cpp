#include "runtime/rank/runner/worker_runner.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <span>

#include "runtime/model_files/source/model_artifacts.hpp"
#include "runtime/model_files/source/quantizing_source.hpp"
#include "runtime/rank/lora/lora_file.hpp"
#include "runtime/rank/models/builtin_models.hpp"
#include "runtime/rank/runner/pooling.hpp"
#include "runtime/rank/sampling/rejection_sampler.hpp"
#include "runtime/rank/sampling/sampler.hpp"
#include "runtime/rank/spec_decode/speculative_config.hpp"
#include "troupe/extensions.hpp"
#include "troupe/log.hpp"

namespace troupe::engine {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

WorkerRunner::~WorkerRunner() {
  worker_.reset();  // the model points into the file: drop it first
}

Result<std::unique_ptr<WorkerRunner>> WorkerRunner::create(const Platform& platform, const EngineConfig& config,
                                                           int32_t rank) {
  auto start = Clock::now();
  runtime::register_builtin_models();  // idempotent; a node process registers them here
  std::unique_ptr<WorkerRunner> r(new WorkerRunner());
  r->rank_ = rank;
  r->pooling_runner_ = config.model.runner == "pooling";
  if (r->pooling_runner_) {
    auto type = parse_pooling_type(config.model.pooling_type);
    if (!type) return type.status();
    r->pooling_defaults_.type = *type;
    r->pooling_defaults_.normalize = config.model.pooling_normalize;
    r->pooling_defaults_.matryoshka = config.model.pooling_matryoshka;
  }
  auto worker = platform.make_worker(config, rank);
  if (!worker) return worker.status();
  r->worker_ = std::move(worker).value();
  TROUPE_RETURN_IF_ERROR(r->worker_->init_device());
  auto model = open_model(config.model);
  if (!model) return model.status();
  r->model_ = std::move(model).value();
  const std::string& quantization = config.model.quantization;
  if (!quantization.empty() && quantization != "gguf" && weight_formats::find(quantization) == nullptr)
    return not_found("rank " + std::to_string(rank) + ": quantization method " + quantization +
                     " is not registered in this process (its plugin must load on every node: TROUPE_PLUGIN_PATH)");
  if (const WeightFormat* method = load_time_method(quantization)) {
    // --quantization NAME: the model sees the method's format where the file has f16/bf16/f32 matrices.
    auto quantized = quantize_at_load(std::move(r->model_.source), *method);
    if (!quantized) return quantized.status();
    r->model_.source = std::move(quantized).value();
    TROUPE_LOG_INFO("rank {}: weights quantized at load to {} ({})", rank, method->name, method->description);
  }
  TROUPE_RETURN_IF_ERROR(r->worker_->load_model(*r->model_.source));
  const ModelInfo* info = r->worker_->model_info();
  if (!info) return internal_error("platform " + platform.device_type() + ": load_model succeeded without model info");
  r->init_reply_.info = *info;
  r->init_reply_.platform = platform.device_type();
  r->init_reply_.device_name = platform.device_name(rank);
  if (r->is_driver() && !config.model.logits_processors.empty()) {
    if (r->pooling_runner_)
      return invalid_argument("logits processors (--logits-processors) apply to generation; this model runs as a "
                              "pooling model");
    auto tok = load_tokenizer(r->model_);
    if (!tok) return tok.status();
    auto chain = LogitsProcessorChain::create(config, info->vocab_size, std::move(tok).value());
    if (!chain) return chain.status();
    r->processors_ = std::move(chain).value();
  }
  if (r->is_driver() && !r->pooling_runner_) {
    WorkerRunner* self = r.get();
    r->structured_ = std::make_unique<StructuredOutputs>([self] { return load_tokenizer(self->model_); },
                                                         info->vocab_size);
  }
  if (r->is_driver() && config.speculative.enabled()) {
    TROUPE_RETURN_IF_ERROR(spec_decode::validate(config.speculative));
    if (r->pooling_runner_)
      return invalid_argument("speculative decoding (--speculative-config) applies to generation; this model runs as "
                              "a pooling model");
    if (r->processors_)
      return not_supported("speculative decoding (--speculative-config) together with logits processors "
                           "(--logits-processors) is not implemented yet");
    r->drafter_ = std::make_unique<spec_decode::NgramDrafter>(config.speculative);
    TROUPE_LOG_INFO("Speculative decoding: {}", spec_decode::describe(config.speculative));
  }
  r->init_reply_.load_seconds = since(start);
  return r;
}

Result<KvSizing> WorkerRunner::kv_sizing() {
  auto spec = worker_->get_kv_cache_spec();
  if (!spec) return spec.status();
  auto avail = worker_->determine_available_memory();
  if (!avail) return avail.status();
  return KvSizing{*spec, *avail};
}

Status WorkerRunner::initialize_cache(const KvCacheSpec& spec, int64_t num_blocks) {
  return worker_->initialize_from_config(KvCacheConfig{spec, num_blocks});
}

Status WorkerRunner::warm_up() { return worker_->compile_or_warm_up_model(); }

Result<StepOutput> WorkerRunner::execute(StepInput input) {
  if (is_driver()) {
    for (auto& id : input.finished_ids) {
      requests_.erase(id);
      if (processors_) processors_->remove_request(id);
      if (structured_) structured_->remove(id);
    }
    for (auto& r : input.new_requests) {
      // Again after a preemption: the processors replace its state.
      if (processors_ && !r.pooling)
        TROUPE_RETURN_IF_ERROR(processors_->add_request(r.request_id, r.params.extra_args, r.prompt_token_ids));
      if (structured_ && !r.pooling) TROUPE_RETURN_IF_ERROR(structured_->add(r));
      requests_[r.request_id] = std::move(r);
    }
  }
  StepOutput out;
  out.step = input.step;
  out.rank = rank_;
  auto t0 = Clock::now();
  request_.batch = std::move(input.batch);
  request_.return_hidden_states = pooling_runner_;
  plan_device_selection(input);
  auto result = worker_->execute_model(request_);
  if (!result) return result.status();
  out.model_seconds = since(t0);
  out.communicator_bytes = result->communicator_bytes;
  out.communicator_seconds = result->communicator_seconds;
  if (!is_driver()) return out;
  auto t1 = Clock::now();
  Status st = pooling_runner_ ? pool_rows(input, *result, out) : sample(input, *result, out);
  worker_->recycle_output(std::move(*result));  // its buffers serve the next step
  TROUPE_RETURN_IF_ERROR(st);
  out.sample_seconds = since(t1);
  return out;
}

Status WorkerRunner::pool_rows(const StepInput& input, const ModelRunnerOutput& result, StepOutput& out) {
  const ForwardBatch& b = request_.batch;
  const int64_t hidden = result.hidden_size;
  if (hidden <= 0 || static_cast<int64_t>(result.hidden_states.size()) != hidden * b.num_tokens())
    return internal_error("rank " + std::to_string(rank_) + " returned " + std::to_string(result.hidden_states.size()) +
                          " hidden-state values for " + std::to_string(b.num_tokens()) + " rows");
  out.tokens.resize(input.sample_ids.size());
  for (size_t i = 0; i < input.sample_ids.size(); ++i) {
    auto it = requests_.find(input.sample_ids[i]);
    if (it == requests_.end()) return internal_error("no state for pooling request " + input.sample_ids[i]);
    if (!it->second.pooling)
      return invalid_argument("request " + input.sample_ids[i] + " asks for generation, but this model runs as a pooling model");
    // The sequence whose last row is this logits row; its prompt is all in this step.
    const int32_t row = b.logits_indices[i];
    int32_t seq = 0;
    while (seq + 1 < static_cast<int32_t>(b.query_start.size()) && b.query_start[seq + 1] <= row) ++seq;
    const int32_t begin = b.query_start[seq];
    const int32_t count = b.query_start[seq + 1] - begin;
    if (b.seq_lens[seq] != count)
      return internal_error("pooling request " + input.sample_ids[i] + " was split over steps (chunked prefill)");
    TROUPE_RETURN_IF_ERROR(pool(result.hidden_states.data() + static_cast<int64_t>(begin) * hidden, count, hidden,
                                it->second.pooling_params, pooling_defaults_, &out.tokens[i].embedding));
    out.tokens[i].token = 0;
  }
  return {};
}

void WorkerRunner::plan_device_selection(const StepInput& input) {
  auto& plan = request_.token_selection;
  plan.clear();
  // Only a plain step qualifies: one row per request, no logits processors (they read the logits).
  if (!is_driver() || pooling_runner_ || processors_ || !input.draft_token_ids.empty() ||
      input.sample_ids.size() != request_.batch.logits_indices.size())
    return;
  plan.reserve(input.sample_ids.size());
  for (const auto& id : input.sample_ids) {
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second.pooling) return plan.clear();
    const SamplingState& req = it->second;
    auto row = sampling::device_selection(req.params, req.output_token_ids.size(),
                                          sampling::derive_step_seed(req.seed, req.output_token_ids.size()));
    if (!row) return plan.clear();  // one row needs the logits: they all come out
    plan.push_back(*row);
  }
}

Status WorkerRunner::sample(const StepInput& input, ModelRunnerOutput& result, StepOutput& out) {
  if (!result.sampled_token_ids.empty()) return take_device_tokens(input, result, out);
  auto& logits = result.logits;
  const int64_t vocab = result.vocab_size;
  const size_t entries = input.sample_ids.size();
  const bool with_drafts = !input.draft_token_ids.empty();
  if (with_drafts && input.draft_token_ids.size() != entries)
    return internal_error("step " + std::to_string(input.step) + ": " + std::to_string(input.draft_token_ids.size()) +
                          " draft lists for " + std::to_string(entries) + " sampled requests");
  auto drafts_of = [&](size_t i) -> std::span<const int32_t> {
    return with_drafts ? std::span<const int32_t>(input.draft_token_ids[i]) : std::span<const int32_t>();
  };
  size_t rows = 0;
  for (size_t i = 0; i < entries; ++i) rows += 1 + drafts_of(i).size();
  if (vocab <= 0 || static_cast<int64_t>(logits.size()) != vocab * static_cast<int64_t>(rows))
    return internal_error("rank " + std::to_string(rank_) + " returned " + std::to_string(logits.size()) +
                          " logits for " + std::to_string(rows) + " rows of vocabulary " + std::to_string(vocab));
  // Logprobs are the model's (vLLM's raw logprobs): rows that processors or a structured
  // output change keep an untouched copy for them.
  bool keep_raw = false;
  if (processors_ || structured_) {
    for (const auto& id : input.sample_ids) {
      auto it = requests_.find(id);
      keep_raw = keep_raw || (it != requests_.end() && it->second.params.logprobs >= 0 &&
                              (processors_ || structured_->has(id)));
    }
  }
  if (keep_raw) raw_logits_.assign(logits.begin(), logits.end());
  if (processors_) {
    if (rows != entries) return internal_error("draft tokens reached a driver with logits processors");
    std::vector<LogitsRow> views(rows);
    for (size_t i = 0; i < rows; ++i) {
      auto it = requests_.find(input.sample_ids[i]);
      if (it == requests_.end()) return internal_error("no sampling state for request " + input.sample_ids[i]);
      views[i] = LogitsRow{it->first, it->second.output_token_ids};
    }
    TROUPE_RETURN_IF_ERROR(processors_->apply(logits.data(), vocab, views));
  }
  out.tokens.clear();
  out.tokens.reserve(rows);
  if (with_drafts) out.num_accepted.assign(entries, 0);
  size_t row = 0;
  for (size_t i = 0; i < entries; ++i) {
    auto it = requests_.find(input.sample_ids[i]);
    if (it == requests_.end()) return internal_error("no sampling state for request " + input.sample_ids[i]);
    auto& req = it->second;
    float* first_row = logits.data() + static_cast<int64_t>(row) * vocab;
    const float* raw_row = keep_raw ? raw_logits_.data() + static_cast<int64_t>(row) * vocab : nullptr;
    const auto drafts = drafts_of(i);
    row += 1 + drafts.size();
    const bool structured = structured_ && structured_->has(it->first);
    if (structured) structured_->mask_rows(it->first, first_row, vocab, drafts);
    int64_t emitted = 0;  // the row of this request's next token
    auto emit = [&](sampling::SampleResult s) {
      if (raw_row && req.params.logprobs >= 0) sampling::add_logprobs(s, raw_row + emitted * vocab, vocab, req.params.logprobs);
      ++emitted;
      req.output_token_ids.push_back(s.token);
      if (structured) structured_->advance(it->first, s.token);
      SampledToken tok;
      tok.token = s.token;
      tok.logprob = s.logprob;
      for (auto& [id, lp] : s.top_logprobs) {
        tok.top_ids.push_back(id);
        tok.top_logprobs.push_back(lp);
      }
      out.tokens.push_back(std::move(tok));
    };
    if (drafts.empty()) {
      uint64_t step_seed = sampling::derive_step_seed(req.seed, req.output_token_ids.size());
      emit(sampling::sample(first_row, vocab, req.params, req.prompt_token_ids, req.output_token_ids, step_seed));
      continue;
    }
    auto verified = sampling::verify_drafts(first_row, vocab, req.params, req.prompt_token_ids, req.output_token_ids,
                                            drafts, req.seed);
    out.num_accepted[i] = verified.num_accepted;
    for (const auto& s : verified.tokens) emit(s);
  }
  if (drafter_) return propose_drafts(input, out);
  return {};
}

Status WorkerRunner::take_device_tokens(const StepInput& input, const ModelRunnerOutput& result, StepOutput& out) {
  const auto& ids = result.sampled_token_ids;
  if (request_.token_selection.empty() || ids.size() != input.sample_ids.size())
    return internal_error("rank " + std::to_string(rank_) + " chose " + std::to_string(ids.size()) +
                          " tokens on the device for " + std::to_string(input.sample_ids.size()) + " sampled requests");
  out.tokens.clear();
  out.tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = requests_.find(input.sample_ids[i]);
    if (it == requests_.end()) return internal_error("no sampling state for request " + input.sample_ids[i]);
    if (ids[i] < 0 || ids[i] >= result.vocab_size)
      return internal_error("the device chose token " + std::to_string(ids[i]) + " outside the vocabulary of " +
                            std::to_string(result.vocab_size));
    it->second.output_token_ids.push_back(ids[i]);
    SampledToken tok;
    tok.token = ids[i];
    out.tokens.push_back(std::move(tok));
  }
  if (drafter_) return propose_drafts(input, out);
  return {};
}

Status WorkerRunner::propose_drafts(const StepInput& input, StepOutput& out) {
  const size_t entries = input.sample_ids.size();
  std::vector<std::vector<int32_t>> contexts(entries);
  std::vector<std::span<const int32_t>> views(entries);
  std::vector<int32_t> budgets(entries, 0);
  for (size_t i = 0; i < entries; ++i) {
    const SamplingState& req = requests_.at(input.sample_ids[i]);
    contexts[i].reserve(req.prompt_token_ids.size() + req.output_token_ids.size());
    contexts[i].assign(req.prompt_token_ids.begin(), req.prompt_token_ids.end());
    contexts[i].insert(contexts[i].end(), req.output_token_ids.begin(), req.output_token_ids.end());
    views[i] = contexts[i];
    // The next step emits its drafts' accepted prefix and one more token: stay within max_tokens.
    const int64_t left = int64_t{req.params.max_tokens} - static_cast<int64_t>(req.output_token_ids.size()) - 1;
    budgets[i] = req.pooling ? 0 : static_cast<int32_t>(std::clamp<int64_t>(left, 0, drafter_->num_speculative_tokens()));
  }
  drafter_->propose(views, budgets);
  DraftTokensExtension& drafts = *drafter_;
  auto taken = drafts.take_draft_token_ids();
  if (!taken) return taken.status();
  out.draft_token_ids = std::move(taken).value();
  return {};
}

namespace {
// Resident set size of this process (/proc/self/statm), or -1 where it cannot be read.
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return -1;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}
}  // namespace

Result<int64_t> WorkerRunner::sleep(int level) {
  auto ext = require_extension<SleepModeExtension>(*worker_, "sleep mode");
  if (!ext.ok()) return ext.status();
  const int64_t before = resident_bytes();
  TROUPE_RETURN_IF_ERROR((*ext)->sleep(level));
  const int64_t after = resident_bytes();
  const int64_t freed = before >= 0 && after >= 0 ? before - after : 0;
  TROUPE_LOG_INFO("rank {} sleeps at level {}: {:.1f} MiB of resident memory freed", rank_, level,
                  static_cast<double>(freed) / (1 << 20));
  return freed;
}

Status WorkerRunner::wake_up(const std::vector<std::string>& tags) {
  auto ext = require_extension<SleepModeExtension>(*worker_, "sleep mode");
  if (!ext.ok()) return ext.status();
  return (*ext)->wake_up(tags);
}

Status WorkerRunner::add_lora(int64_t lora_id, const std::string& path) {
  auto ext = require_extension<LoraExtension>(*worker_, "LoRA");
  if (!ext.ok()) return ext.status();
  auto file = lora::read_lora_file(path);
  if (!file.ok()) return file.status();
  const std::string base_arch = model_.source->architecture();
  if ((*file)->architecture != base_arch)
    return invalid_argument("LoRA adapter " + path + " is for architecture '" + (*file)->architecture +
                            "', the model is '" + base_arch + "'");
  return (*ext)->add_lora(lora_id, (*file)->spec);  // the worker copies what it keeps
}

Status WorkerRunner::remove_lora(int64_t lora_id) {
  auto ext = require_extension<LoraExtension>(*worker_, "LoRA");
  if (!ext.ok()) return ext.status();
  return (*ext)->remove_lora(lora_id);
}

}  // namespace troupe::engine

#include "runtime/rank/runner/worker_runner.hpp"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <utility>

#include "runtime/model_files/source/model_artifacts.hpp"
#include "runtime/model_files/source/quantizing_source.hpp"
#include "runtime/rank/lora/lora_file.hpp"
#include "runtime/rank/structured/grammar_cache.hpp"
#include "runtime/rank/models/builtin_models.hpp"
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
    if (r->is_driver())
      r->pooler_ = std::make_unique<RowPooler>(
          rank, PoolingDefaults{*type, config.model.pooling_normalize, config.model.pooling_matryoshka});
  }
  TROUPE_RETURN_IF_ERROR(r->load(platform, config));
  if (r->is_driver()) TROUPE_RETURN_IF_ERROR(r->make_driver_parts(config));
  r->init_reply_.load_seconds = since(start);
  return r;
}

Status WorkerRunner::load(const Platform& platform, const EngineConfig& config) {
  auto worker = platform.make_worker(config, rank_);
  if (!worker) return worker.status();
  worker_ = std::move(worker).value();
  TROUPE_RETURN_IF_ERROR(worker_->init_device());
  auto model = open_model(config.model);
  if (!model) return model.status();
  model_ = std::move(model).value();
  const std::string& quantization = config.model.quantization;
  if (!quantization.empty() && quantization != "gguf" && weight_formats::find(quantization) == nullptr)
    return not_found("rank " + std::to_string(rank_) + ": quantization method " + quantization +
                     " is not registered in this process (its plugin must load on every node: TROUPE_PLUGIN_PATH)");
  if (const WeightFormat* method = load_time_method(quantization)) {
    // --quantization NAME: the model sees the method's format where the file has f16/bf16/f32 matrices.
    auto quantized = quantize_at_load(std::move(model_.source), *method);
    if (!quantized) return quantized.status();
    model_.source = std::move(quantized).value();
    TROUPE_LOG_INFO("rank {}: weights quantized at load to {} ({})", rank_, method->name, method->description);
  }
  TROUPE_RETURN_IF_ERROR(worker_->load_model(*model_.source));
  const ModelInfo* info = worker_->model_info();
  if (!info) return internal_error("platform " + platform.device_type() + ": load_model succeeded without model info");
  init_reply_.info = *info;
  init_reply_.platform = platform.device_type();
  init_reply_.device_name = platform.device_name(rank_);
  return {};
}

Status WorkerRunner::make_driver_parts(const EngineConfig& config) {
  const int64_t vocab_size = init_reply_.info.vocab_size;
  if (!config.model.logits_processors.empty()) {
    if (pooling_runner_)
      return invalid_argument("logits processors (--logits-processors) apply to generation; this model runs as a "
                              "pooling model");
    auto tok = load_tokenizer(model_);
    if (!tok) return tok.status();
    auto chain = LogitsProcessorChain::create(config, vocab_size, std::move(tok).value());
    if (!chain) return chain.status();
    processors_ = std::move(chain).value();
  }
  if (!pooling_runner_) {
    sampler_ = std::make_unique<StepSampler>(rank_);
    structured_ = std::make_unique<StructuredOutputs>([this] { return load_tokenizer(model_); }, vocab_size,
                                                      structured::grammar_limits(config.structured_outputs));
  }
  if (config.speculative.enabled()) {
    TROUPE_RETURN_IF_ERROR(spec_decode::validate(config.speculative));
    if (pooling_runner_)
      return invalid_argument("speculative decoding (--speculative-config) applies to generation; this model runs as "
                              "a pooling model");
    if (processors_)
      return not_supported("speculative decoding (--speculative-config) together with logits processors "
                           "(--logits-processors) is not implemented yet");
    drafter_ = std::make_unique<DraftProposer>(config.speculative);
    TROUPE_LOG_INFO("Speculative decoding: {}", spec_decode::describe(config.speculative));
  }
  return {};
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
  if (is_driver()) TROUPE_RETURN_IF_ERROR(update_requests(input));
  // The step's masks need only the requests' states after the previous step, never this
  // step's logits: a worker thread computes them while the model runs.
  if (structured_) structured_->begin_masks(input.sample_ids, input.draft_token_ids, masks_);
  StepOutput out;
  out.step = input.step;
  out.rank = rank_;
  auto t0 = Clock::now();
  request_.batch = std::move(input.batch);
  request_.return_hidden_states = pooling_runner_;
  request_.token_selection.clear();
  // Logits processors read the logits: no token is chosen on the device with them (nor for
  // a request with a structured output: sampling::device_selection).
  if (sampler_ && !processors_)
    sampler_->plan_device_selection(input, request_.batch.logits_indices.size(), requests_, request_.token_selection);
  auto result = worker_->execute_model(request_);
  // Waited for here (the time the model did not hide counts as sampling time).
  auto tm = Clock::now();
  if (structured_) structured_->end_masks();
  const double mask_seconds = since(tm);
  if (!result) return result.status();
  out.model_seconds = since(t0) - mask_seconds;
  if (!is_driver()) return out;
  auto t1 = Clock::now();
  Status st = finish_step(input, *result, out);
  worker_->recycle_output(std::move(*result));  // its buffers serve the next step
  TROUPE_RETURN_IF_ERROR(st);
  if (structured_) {
    out.failed = structured_->take_failures();
    out.structured_output_bytes = static_cast<int64_t>(structured_->grammar_bytes());
  }
  out.sample_seconds = since(t1) + mask_seconds;
  return out;
}

Status WorkerRunner::update_requests(StepInput& input) {
  for (auto& id : input.finished_ids) {
    requests_.remove(id);
    if (processors_) processors_->remove_request(id);
    if (structured_) structured_->remove(id);
  }
  for (auto& r : input.new_requests) {
    // Again after a preemption: the processors replace its state.
    if (processors_ && !r.pooling)
      TROUPE_RETURN_IF_ERROR(processors_->add_request(r.request_id, r.params.extra_args, r.prompt_token_ids));
    if (structured_ && !r.pooling) structured_->add(r);  // a grammar that fails ends this request alone
    requests_.add(std::move(r));
  }
  return {};
}

Status WorkerRunner::finish_step(const StepInput& input, ModelRunnerOutput& result, StepOutput& out) {
  if (pooler_) return pooler_->pool_rows(input.sample_ids, request_.batch, result, requests_, out);
  if (!result.sampled_token_ids.empty()) {
    TROUPE_RETURN_IF_ERROR(sampler_->take_device_tokens(input, result, request_.token_selection, requests_, out));
  } else {
    TROUPE_RETURN_IF_ERROR(sample_from_logits(input, result, out));
  }
  if (drafter_) return drafter_->propose(input.sample_ids, requests_, out);
  return {};
}

Status WorkerRunner::sample_from_logits(const StepInput& input, ModelRunnerOutput& result, StepOutput& out) {
  auto rows = sampler_->logits_rows(input, result);
  if (!rows) return rows.status();
  // Logprobs are the model's (vLLM's raw logprobs): rows that processors or a structured
  // output change keep an untouched copy for them.
  const bool keep_raw = needs_raw_logits(input);
  if (keep_raw) raw_logits_.assign(result.logits.begin(), result.logits.end());
  if (processors_) TROUPE_RETURN_IF_ERROR(apply_processors(input, *rows, result));
  if (structured_) masks_.apply(result.logits.data(), result.vocab_size, *rows);
  TROUPE_RETURN_IF_ERROR(sampler_->sample(input, result.logits.data(), keep_raw ? raw_logits_.data() : nullptr,
                                          result.vocab_size, requests_, out));
  if (structured_) structured_->advance(input.sample_ids, out);
  return {};
}

bool WorkerRunner::needs_raw_logits(const StepInput& input) const {
  if (!processors_ && !structured_) return false;
  for (const auto& id : input.sample_ids) {
    const SamplingState* req = requests_.find(id);
    if (req && req->params.logprobs >= 0 && (processors_ || structured_->has(id))) return true;
  }
  return false;
}

Status WorkerRunner::apply_processors(const StepInput& input, size_t rows, ModelRunnerOutput& result) {
  if (rows != input.sample_ids.size()) return internal_error("draft tokens reached a driver with logits processors");
  std::vector<LogitsRow> views(rows);
  for (size_t i = 0; i < rows; ++i) {
    const SamplingState* req = requests_.find(input.sample_ids[i]);
    if (!req) return internal_error("no sampling state for request " + input.sample_ids[i]);
    views[i] = LogitsRow{req->request_id, req->output_token_ids};
  }
  return processors_->apply(result.logits.data(), result.vocab_size, views);
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

#include "runtime/core/generation/offline_generator.hpp"

#include <algorithm>
#include <random>

#include "runtime/core/engine_core/kv_cache_setup.hpp"
#include "runtime/rank/models/builtin_models.hpp"

namespace troupe::generation {

OfflineGenerator::~OfflineGenerator() = default;

Result<std::unique_ptr<OfflineGenerator>> OfflineGenerator::create(Platform& platform, EngineConfig config,
                                                                   const std::string& model_path) {
  runtime::register_builtin_models();
  std::unique_ptr<OfflineGenerator> g(new OfflineGenerator());
  config.model.model_path = model_path;
  auto artifacts = engine::load_model_artifacts(config);
  if (!artifacts) return artifacts.status();
  g->artifacts_ = std::move(artifacts).value();
  // Every weight type must run on this platform: refuse early with the platform's reason.
  TROUPE_RETURN_IF_ERROR(engine::verify_weight_types(platform, g->artifacts_));
  TROUPE_RETURN_IF_ERROR(platform.check_and_update_config(config));

  g->executor_ = std::make_unique<engine::InProcessExecutor>(platform);
  auto loaded = g->executor_->run_on_all(engine::LoadModel{config});
  if (!loaded) return loaded.status();
  g->runner_ = g->executor_->driver();
  const ModelInfo& info = g->runner_->init_reply().info;
  if (info.vocab_size < g->artifacts_.tokenizer->vocab_size())
    return data_loss(model_path + ": the tokenizer has " + std::to_string(g->artifacts_.tokenizer->vocab_size()) +
                     " tokens but the model only " + std::to_string(info.vocab_size));
  // One sequence at a time: no more blocks than one max-length sequence needs.
  auto plan = engine::set_up_kv_cache(*g->executor_, config, info.context_length, {.one_sequence = true});
  if (!plan) return plan.status();
  config.model.max_model_len = plan->max_model_len;
  config.cache.block_size = plan->spec.block_size;
  g->max_model_len_ = plan->max_model_len;
  g->config_ = std::move(config);

  engine::EngineCoreConfig core;
  core.scheduler.max_num_batched_tokens = std::max<int64_t>(1, g->config_.scheduler.max_num_batched_tokens);
  core.scheduler.max_num_seqs = 1;
  core.scheduler.max_model_len = plan->max_model_len;
  core.kv.num_blocks = static_cast<int32_t>(std::min<int64_t>(plan->num_blocks, INT32_MAX));
  core.kv.block_size = plan->spec.block_size;
  core.kv.enable_prefix_caching = g->config_.cache.enable_prefix_caching;
  core.kv.sliding_window = info.sliding_window;
  auto* outputs = &g->outputs_;
  auto* spec = &g->spec_;
  g->core_ = std::make_unique<engine::EngineCore>(
      core, g->artifacts_.tokenizer, [outputs, spec](engine::EngineCoreOutputs out) {
        for (auto& o : out.outputs) outputs->push_back(std::move(o));
        if (!out.has_stats) return;
        const SpecDecodingStats& d = out.stats.scheduler.spec_decoding;
        spec->num_drafts += d.num_drafts;
        spec->num_draft_tokens += d.num_draft_tokens;
        spec->num_accepted_tokens += d.num_accepted_tokens;
        if (spec->num_accepted_tokens_per_pos.size() < d.num_accepted_tokens_per_pos.size())
          spec->num_accepted_tokens_per_pos.resize(d.num_accepted_tokens_per_pos.size(), 0);
        for (size_t i = 0; i < d.num_accepted_tokens_per_pos.size(); ++i)
          spec->num_accepted_tokens_per_pos[i] += d.num_accepted_tokens_per_pos[i];
      });
  return g;
}

Result<GenerateOutput> OfflineGenerator::generate_text(const std::string& prompt,
                                                       const sampling::SamplingParams& params) {
  return generate(tokenizer().encode(prompt, /*add_special=*/true, /*parse_special=*/true), params);
}

Result<GenerateOutput> OfflineGenerator::generate(const std::vector<int32_t>& prompt_ids,
                                                  const sampling::SamplingParams& params) {
  TROUPE_RETURN_IF_ERROR(params.validate());
  const int64_t vocab = model_info().vocab_size;
  if (prompt_ids.empty()) return invalid_argument("the prompt is empty");
  for (int32_t id : prompt_ids)
    if (id < 0 || id >= vocab) return out_of_range("prompt token id " + std::to_string(id) + " is out of range");
  const int64_t n_prompt = static_cast<int64_t>(prompt_ids.size());
  if (n_prompt >= max_model_len_)
    return invalid_argument("the prompt has " + std::to_string(n_prompt) + " tokens; the maximum model length is " +
                            std::to_string(max_model_len_));
  engine::CoreRequest req;
  req.request_id = "offline-" + std::to_string(next_request_++);
  req.prompt_token_ids = prompt_ids;
  req.sampling = params;
  // Generate what fits: the rest of the model length at most.
  req.sampling.max_tokens = static_cast<int32_t>(std::min<int64_t>(params.max_tokens, max_model_len_ - n_prompt));
  req.seed = params.seed ? *params.seed : std::random_device{}();
  outputs_.clear();
  TROUPE_RETURN_IF_ERROR(core_->add_request(std::move(req)));

  engine::FinalOutput final_output;
  while (!final_output.finished) {
    if (core_->step(*executor_) != engine::StepStatus::started)
      return internal_error("the offline generator's request could not be scheduled");
    for (const auto& o : outputs_) engine::accumulate(final_output, o);
    outputs_.clear();
  }
  if (final_output.finish_reason == FinishReason::error) return final_output.error;
  GenerateOutput out;
  out.prompt_token_ids = prompt_ids;
  out.token_ids = std::move(final_output.token_ids);
  out.text = std::move(final_output.text);
  out.finish_reason = final_output.finish_reason;
  return out;
}

}  // namespace troupe::generation

// inspect() overloads: how troupe's message types cross process boundaries
// (CAF 0.17 inspectors). Kept beside the messages, away from runtime/ and the
// SDK, which know nothing of CAF.
#pragma once

#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace troupe {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ModelConfig& x) {
  return f(caf::meta::type_name("ModelConfig"), x.model_path, x.load_format, x.model_shape, x.weight_type,
           x.served_model_name, x.architecture,
           x.max_model_len, x.dtype, x.quantization, x.seed, x.runner, x.pooling_type, x.pooling_normalize,
           x.pooling_matryoshka, x.enable_sleep_mode, x.logits_processors);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CacheConfig& x) {
  return f(caf::meta::type_name("CacheConfig"), x.block_size, x.cache_dtype, x.num_gpu_blocks_override,
           x.kv_cache_memory_bytes, x.memory_utilization, x.enable_prefix_caching);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SchedulerConfig& x) {
  return f(caf::meta::type_name("SchedulerConfig"), x.max_num_seqs, x.max_num_batched_tokens,
           x.max_num_queued_requests, x.scheduler_cls);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ParallelConfig& x) {
  return f(caf::meta::type_name("ParallelConfig"), x.tensor_parallel_size, x.pipeline_parallel_size,
           x.communicator_id, x.communicator_host, x.communicator_secret, x.num_threads, x.worker_cls,
           x.enable_expert_parallel, x.data_parallel_size);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CompilationConfig& x) {
  return f(caf::meta::type_name("CompilationConfig"), x.enforce_eager, x.graph_mode);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, LoraConfig& x) {
  return f(caf::meta::type_name("LoraConfig"), x.enable_lora, x.max_loras, x.max_lora_rank);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SpeculativeConfig& x) {
  return f(caf::meta::type_name("SpeculativeConfig"), x.method, x.num_speculative_tokens, x.prompt_lookup_max,
           x.prompt_lookup_min);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StructuredOutputsConfig& x) {
  return f(caf::meta::type_name("StructuredOutputsConfig"), x.compile_timeout_s, x.max_memory_mib, x.mask_timeout_ms);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, EngineConfig& x) {
  return f(caf::meta::type_name("EngineConfig"), x.device, x.model, x.cache, x.scheduler, x.parallel, x.compilation,
           x.lora, x.speculative, x.structured_outputs, x.extra);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ModelInfo& x) {
  return f(caf::meta::type_name("ModelInfo"), x.architecture, x.vocab_size, x.context_length, x.num_layers,
           x.num_heads, x.num_kv_heads, x.head_dim, x.hidden_size, x.weight_bytes, x.sliding_window);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, KvCacheSpec& x) {
  uint32_t dtype = static_cast<uint32_t>(x.dtype);
  return f(caf::meta::type_name("KvCacheSpec"), x.block_size, x.num_layers, x.num_kv_heads, x.head_dim, dtype,
           caf::meta::load_callback([&]() -> caf::error {
             x.dtype = static_cast<DType>(dtype);
             return caf::none;
           }));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ForwardBatch& x) {
  return f(caf::meta::type_name("ForwardBatch"), x.token_ids, x.positions, x.query_start, x.seq_lens,
           x.block_tables, x.slot_mapping, x.logits_indices, x.lora_ids);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SpecDecodingStats& x) {
  return f(caf::meta::type_name("SpecDecodingStats"), x.num_drafts, x.num_draft_tokens, x.num_accepted_tokens,
           x.num_accepted_tokens_per_pos);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SchedulerStats& x) {
  return f(caf::meta::type_name("SchedulerStats"), x.step, x.num_running_reqs, x.num_waiting_reqs,
           x.kv_cache_usage, x.prefix_cache_queries, x.prefix_cache_hits, x.num_preempted_reqs,
           x.num_scheduled_tokens, x.step_seconds, x.model_seconds, x.communicator_bytes, x.communicator_seconds,
           x.sleep_level, x.spec_decoding, x.structured_output_bytes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, FinishedRequestStats& x) {
  return f(caf::meta::type_name("FinishedRequestStats"), x.request_id, x.finish_reason, x.num_prompt_tokens,
           x.num_generation_tokens, x.e2e_latency_s, x.queued_time_s, x.prefill_time_s, x.decode_time_s,
           x.time_to_first_token_s, x.mean_time_per_output_token_s);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, IterationStats& x) {
  return f(caf::meta::type_name("IterationStats"), x.num_prompt_tokens, x.num_generation_tokens,
           x.time_to_first_tokens_s, x.inter_token_latencies_s, x.finished_requests);
}

}  // namespace troupe

namespace troupe::sampling {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SamplingParams& x) {
  bool has_seed = x.seed.has_value();
  uint64_t seed = x.seed.value_or(0);
  return f(caf::meta::type_name("SamplingParams"), x.temperature, x.top_p, x.top_k, x.min_p,
           x.repetition_penalty, x.presence_penalty, x.frequency_penalty, has_seed, seed, x.max_tokens, x.stop,
           x.stop_token_ids, x.ignore_eos, x.logprobs, x.extra_args, x.logit_bias, x.allowed_token_ids,
           x.min_tokens, x.min_tokens_banned_ids, x.bad_words_token_ids, x.include_stop_str_in_output, x.structured_output, x.structured_spec, x.choices, x.structured_compact, x.structured_whitespace_pattern,
           caf::meta::load_callback([&]() -> caf::error {
             x.seed = has_seed ? std::optional<uint64_t>(seed) : std::nullopt;
             return caf::none;
           }));
}

}  // namespace troupe::sampling

namespace troupe {

// Status crosses as (code, message); a code this build does not know reads as internal.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Status& x) {
  uint8_t code = static_cast<uint8_t>(x.code());
  std::string message = x.message();
  return f(caf::meta::type_name("Status"), code, message, caf::meta::load_callback([&]() -> caf::error {
             auto c = code <= static_cast<uint8_t>(StatusCode::internal) ? static_cast<StatusCode>(code)
                                                                          : StatusCode::internal;
             x = Status(c, std::move(message));
             return caf::none;
           }));
}

}  // namespace troupe

namespace troupe::engine {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WorkerInitReply& x) {
  return f(caf::meta::type_name("WorkerInitReply"), x.info, x.platform, x.device_name, x.load_seconds);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, KvSizing& x) {
  return f(caf::meta::type_name("KvSizing"), x.spec, x.available_bytes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, KvCachePlan& x) {
  return f(caf::meta::type_name("KvCachePlan"), x.spec, x.num_blocks, x.max_model_len, x.sliding_window);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PoolingParams& x) {
  uint8_t type = x.type ? static_cast<uint8_t>(*x.type) + 1 : 0;  // 0: unset
  uint8_t normalize = x.normalize ? (*x.normalize ? 2 : 1) : 0;
  int32_t dimensions = x.dimensions.value_or(0);
  return f(caf::meta::type_name("PoolingParams"), type, normalize, dimensions,
           caf::meta::load_callback([&]() -> caf::error {
             if (type > static_cast<uint8_t>(PoolingType::last) + 1) return caf::make_error(caf::sec::invalid_argument);
             x.type = type ? std::optional<PoolingType>(static_cast<PoolingType>(type - 1)) : std::nullopt;
             x.normalize = normalize ? std::optional<bool>(normalize == 2) : std::nullopt;
             x.dimensions = dimensions > 0 ? std::optional<int32_t>(dimensions) : std::nullopt;
             return caf::none;
           }));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SamplingState& x) {
  return f(caf::meta::type_name("SamplingState"), x.request_id, x.params, x.pooling, x.pooling_params, x.seed,
           x.prompt_token_ids, x.output_token_ids);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StepInput& x) {
  return f(caf::meta::type_name("StepInput"), x.step, x.batch, x.new_requests, x.finished_ids, x.sample_ids,
           x.draft_token_ids);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SampledToken& x) {
  return f(caf::meta::type_name("SampledToken"), x.token, x.logprob, x.top_ids, x.top_logprobs, x.embedding);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RequestFailure& x) {
  return f(caf::meta::type_name("RequestFailure"), x.request_id, x.error);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StepOutput& x) {
  return f(caf::meta::type_name("StepOutput"), x.step, x.rank, x.tokens, x.num_accepted, x.draft_token_ids, x.failed,
           x.model_seconds, x.sample_seconds, x.communicator_bytes, x.communicator_seconds, x.structured_output_bytes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CoreRequest& x) {
  bool pooling = x.pooling.has_value();
  PoolingParams params = x.pooling.value_or(PoolingParams{});
  return f(caf::meta::type_name("CoreRequest"), x.request_id, x.prompt_token_ids, x.sampling, x.seed, x.cache_salt,
           x.priority, x.lora_id, x.data_parallel_rank, pooling, params, caf::meta::load_callback([&]() -> caf::error {
             x.pooling = pooling ? std::optional<PoolingParams>(params) : std::nullopt;
             return caf::none;
           }));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenLogprob& x) {
  return f(caf::meta::type_name("TokenLogprob"), x.token_id, x.logprob, x.top_ids, x.top_logprobs);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RequestOutput& x) {
  uint8_t reason = static_cast<uint8_t>(x.finish_reason);
  return f(caf::meta::type_name("RequestOutput"), x.request_id, x.prompt_token_ids, x.new_token_ids, x.new_text,
           x.new_logprobs, x.embedding, x.finished, reason, x.stop_reason, x.error, x.num_prompt_tokens, x.num_generated_tokens,
           caf::meta::load_callback([&]() -> caf::error {
             if (reason > static_cast<uint8_t>(FinishReason::error)) return caf::make_error(caf::sec::invalid_argument);
             x.finish_reason = static_cast<FinishReason>(reason);
             return caf::none;
           }));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, EngineCoreOutputs& x) {
  // kv_events stay in the engine's process: the router and the publisher live there.
  return f(caf::meta::type_name("EngineCoreOutputs"), x.outputs, x.has_stats, x.stats, x.num_scheduled_requests,
           x.health);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StatsEvent& x) {
  return f(caf::meta::type_name("StatsEvent"), x.scheduler, x.iteration, x.engine_index);
}

// -- The collective call (runtime/protocol/rank_command.hpp) -------------------
// Commands and Done list their own fields; a variant crosses as a one-byte
// alternative index, then that alternative.

template <class T>
concept ListsItsFields = requires { T::kName; };

template <class Inspector, ListsItsFields T>
typename Inspector::result_type inspect(Inspector& f, T& x) {
  return x.fields([&](auto&... xs) { return f(caf::meta::type_name(T::kName), xs...); });
}

/// The alternative of a variant whose index was read (loading) or is held (saving).
template <class Variant>
struct VariantAlternative {
  uint8_t& index;
  Variant& v;
};

template <size_t I, class Inspector, class... Ts>
typename Inspector::result_type load_alternative(Inspector& f, uint8_t index, std::variant<Ts...>& v) {
  if constexpr (I == sizeof...(Ts)) {
    return caf::make_error(caf::sec::invalid_argument);  // a newer peer's command: refused, not guessed
  } else {
    if (index == I) return f(v.template emplace<I>());
    return load_alternative<I + 1>(f, index, v);
  }
}

template <class Inspector, class... Ts>
typename Inspector::result_type inspect(Inspector& f, VariantAlternative<std::variant<Ts...>>& x) {
  if constexpr (Inspector::reads_state)
    return std::visit([&](auto& alternative) { return f(alternative); }, x.v);
  else
    return load_alternative<0>(f, x.index, x.v);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RankCommand& x) {
  uint8_t index = static_cast<uint8_t>(x.op.index());
  VariantAlternative<RankCommand::Op> alternative{index, x.op};
  return f(caf::meta::type_name("RankCommand"), index, alternative);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RankReply& x) {
  uint8_t index = static_cast<uint8_t>(x.value.index());
  VariantAlternative<RankReply::Value> alternative{index, x.value};
  return f(caf::meta::type_name("RankReply"), index, alternative);
}

}  // namespace troupe::engine


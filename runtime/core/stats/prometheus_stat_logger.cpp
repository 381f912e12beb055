#include "runtime/core/stats/prometheus_stat_logger.hpp"

#include <prometheus/text_serializer.h>

#include <sstream>

namespace troupe::stats {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// Bucket boundaries as vLLM's (seconds and token counts).
const Histogram::BucketBoundaries kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                                  0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0,
                                                  640.0, 2560.0};
const Histogram::BucketBoundaries kItlBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                                                 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
const Histogram::BucketBoundaries kLatencyBuckets = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0,
                                                     20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
                                                     960.0, 1920.0, 7680.0};
const Histogram::BucketBoundaries kTokenBuckets = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000,
                                                   10000, 20000, 50000, 100000};

}  // namespace

PrometheusStatLogger::PrometheusStatLogger(std::string model_name, int engine_index)
    : registry_(std::make_shared<prometheus::Registry>()),
      labels_{{"model_name", std::move(model_name)}, {"engine", std::to_string(engine_index)}} {
  auto& r = *registry_;
  auto gauge = [&](const char* name, const char* help) -> prometheus::Gauge* {
    return &BuildGauge().Name(name).Help(help).Register(r).Add(labels_);
  };
  auto counter = [&](const char* name, const char* help) -> prometheus::Counter* {
    return &BuildCounter().Name(name).Help(help).Register(r).Add(labels_);
  };
  auto histogram = [&](const char* name, const char* help, const Histogram::BucketBoundaries& b) {
    return &BuildHistogram().Name(name).Help(help).Register(r).Add(labels_, b);
  };
  running_ = gauge("troupe:num_requests_running", "Number of requests in model execution batches.");
  waiting_ = gauge("troupe:num_requests_waiting", "Number of requests waiting to be processed.");
  kv_usage_ = gauge("troupe:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.");
  structured_bytes_ = gauge("troupe:structured_output_grammar_bytes",
                            "Bytes held by the grammars of the running structured-output requests (driver rank).");
  sleep_state_ = gauge("troupe:engine_sleep_state",
                       "Sleep mode: 0 awake, 1 weights offloaded and KV cache dropped, 2 both dropped.");
  num_blocks_ = gauge("troupe:cache_config_num_blocks", "Number of KV cache blocks.");
  prefix_queries_ = counter("troupe:prefix_cache_queries_total",
                            "Prefix cache queries, in terms of number of queried tokens.");
  prefix_hits_ = counter("troupe:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.");
  preemptions_ = counter("troupe:num_preemptions_total", "Cumulative number of preemptions from the engine.");
  prompt_tokens_ = counter("troupe:prompt_tokens_total", "Number of prefill tokens processed.");
  generation_tokens_ = counter("troupe:generation_tokens_total", "Number of generation tokens processed.");
  request_success_family_ = &BuildCounter()
                                 .Name("troupe:request_success_total")
                                 .Help("Count of successfully processed requests.")
                                 .Register(r);
  ttft_ = histogram("troupe:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                    kTtftBuckets);
  itl_ = histogram("troupe:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                   kItlBuckets);
  tpot_ = histogram("troupe:request_time_per_output_token_seconds",
                    "Histogram of time_per_output_token_seconds per request.", kItlBuckets);
  e2e_ = histogram("troupe:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                   kLatencyBuckets);
  queue_time_ = histogram("troupe:request_queue_time_seconds",
                          "Histogram of time spent in WAITING phase for request.", kLatencyBuckets);
  prefill_time_ = histogram("troupe:request_prefill_time_seconds",
                            "Histogram of time spent in PREFILL phase for request.", kLatencyBuckets);
  decode_time_ = histogram("troupe:request_decode_time_seconds",
                           "Histogram of time spent in DECODE phase for request.", kLatencyBuckets);
  prompt_tokens_hist_ = histogram("troupe:request_prompt_tokens", "Number of prefill tokens processed.",
                                  kTokenBuckets);
  generation_tokens_hist_ = histogram("troupe:request_generation_tokens",
                                      "Number of generation tokens processed.", kTokenBuckets);
  spec_drafts_ = counter("troupe:spec_decode_num_drafts_total", "Number of spec decoding drafts.");
  spec_draft_tokens_ = counter("troupe:spec_decode_num_draft_tokens_total", "Number of draft tokens.");
  spec_accepted_tokens_ = counter("troupe:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.");
  spec_accepted_per_pos_family_ = &BuildCounter()
                                       .Name("troupe:spec_decode_num_accepted_tokens_per_pos_total")
                                       .Help("Accepted tokens per draft position.")
                                       .Register(r);
  iteration_tokens_ = histogram("troupe:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
                                {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384});
}

void PrometheusStatLogger::record(const SchedulerStats* s, const IterationStats* it, int) {
  std::lock_guard lock(mu_);
  if (s) {
    running_->Set(s->num_running_reqs);
    waiting_->Set(s->num_waiting_reqs);
    kv_usage_->Set(s->kv_cache_usage);
    sleep_state_->Set(s->sleep_level);
    structured_bytes_->Set(static_cast<double>(s->structured_output_bytes));
    prefix_queries_->Increment(static_cast<double>(s->prefix_cache_queries));
    prefix_hits_->Increment(static_cast<double>(s->prefix_cache_hits));
    preemptions_->Increment(static_cast<double>(s->num_preempted_reqs));
    const SpecDecodingStats& d = s->spec_decoding;
    if (d.num_drafts > 0) {
      spec_drafts_->Increment(static_cast<double>(d.num_drafts));
      spec_draft_tokens_->Increment(static_cast<double>(d.num_draft_tokens));
      spec_accepted_tokens_->Increment(static_cast<double>(d.num_accepted_tokens));
      for (size_t pos = 0; pos < d.num_accepted_tokens_per_pos.size(); ++pos) {
        while (spec_accepted_per_pos_.size() <= pos) {
          auto labels = labels_;
          labels["position"] = std::to_string(spec_accepted_per_pos_.size());
          spec_accepted_per_pos_.push_back(&spec_accepted_per_pos_family_->Add(labels));
        }
        spec_accepted_per_pos_[pos]->Increment(static_cast<double>(d.num_accepted_tokens_per_pos[pos]));
      }
    }
  }
  if (!it) return;
  prompt_tokens_->Increment(static_cast<double>(it->num_prompt_tokens));
  generation_tokens_->Increment(static_cast<double>(it->num_generation_tokens));
  iteration_tokens_->Observe(static_cast<double>(it->num_prompt_tokens + it->num_generation_tokens));
  for (double v : it->time_to_first_tokens_s) ttft_->Observe(v);
  for (double v : it->inter_token_latencies_s) itl_->Observe(v);
  for (const auto& f : it->finished_requests) {
    auto found = request_success_.find(f.finish_reason);
    if (found == request_success_.end()) {
      auto labels = labels_;
      labels["finished_reason"] = f.finish_reason;
      found = request_success_.emplace(f.finish_reason, &request_success_family_->Add(labels)).first;
    }
    found->second->Increment();
    e2e_->Observe(f.e2e_latency_s);
    queue_time_->Observe(f.queued_time_s);
    prefill_time_->Observe(f.prefill_time_s);
    decode_time_->Observe(f.decode_time_s);
    tpot_->Observe(f.mean_time_per_output_token_s);
    prompt_tokens_hist_->Observe(static_cast<double>(f.num_prompt_tokens));
    generation_tokens_hist_->Observe(static_cast<double>(f.num_generation_tokens));
  }
}

void PrometheusStatLogger::set_cache_config(int64_t num_blocks, int) {
  std::lock_guard lock(mu_);
  num_blocks_->Set(static_cast<double>(num_blocks));
}

std::string PrometheusStatLogger::render() const {
  std::lock_guard lock(mu_);
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace troupe::stats

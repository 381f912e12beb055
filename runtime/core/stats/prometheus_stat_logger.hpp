// The built-in Prometheus stat logger: vLLM's metric names and types under
// the prefix "troupe:" (vLLM uses "vllm:"; dashboards port by renaming the
// prefix), each labelled with model_name and engine.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/core/stats/engine_stat_logger.hpp"

namespace troupe::stats {

class PrometheusStatLogger final : public EngineStatLogger {
 public:
  explicit PrometheusStatLogger(std::string model_name, int engine_index = 0);
  void record(const SchedulerStats* scheduler_stats, const IterationStats* iteration_stats,
              int engine_index) override;
  void log() override {}  // scraped, not pushed
  /// The Prometheus text exposition of every metric (for GET /metrics).
  std::string render() const;
  /// Set the configured KV cache size (troupe:cache_config_info-like gauge).
  void set_cache_config(int64_t num_blocks, int block_size);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  mutable std::mutex mu_;
  prometheus::Gauge* running_;
  prometheus::Gauge* waiting_;
  prometheus::Gauge* kv_usage_;
  prometheus::Gauge* num_blocks_;
  prometheus::Gauge* sleep_state_;
  prometheus::Gauge* structured_bytes_;
  prometheus::Counter* prefix_queries_;
  prometheus::Counter* prefix_hits_;
  prometheus::Counter* preemptions_;
  prometheus::Counter* spec_drafts_;           // speculative decoding (vLLM's spec_decode_* names)
  prometheus::Counter* spec_draft_tokens_;
  prometheus::Counter* spec_accepted_tokens_;
  prometheus::Family<prometheus::Counter>* spec_accepted_per_pos_family_;
  std::vector<prometheus::Counter*> spec_accepted_per_pos_;  // by draft position, made when first seen
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* generation_tokens_;
  prometheus::Family<prometheus::Counter>* request_success_family_;
  std::map<std::string, prometheus::Counter*> request_success_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* itl_;
  prometheus::Histogram* tpot_;
  prometheus::Histogram* e2e_;
  prometheus::Histogram* queue_time_;
  prometheus::Histogram* prefill_time_;
  prometheus::Histogram* decode_time_;
  prometheus::Histogram* prompt_tokens_hist_;
  prometheus::Histogram* generation_tokens_hist_;
  prometheus::Histogram* iteration_tokens_;
  prometheus::Labels labels_;
};

}  // namespace troupe::stats

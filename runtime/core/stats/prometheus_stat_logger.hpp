// The built-in Prometheus stat logger: vLLM's metric names and types twice, under
// troupe's prefix "troupe:" and under vLLM's own "vllm:" (so routers and vLLM's Grafana
// dashboard read a troupe server as they read vLLM), each series labelled with
// model_name and engine (the replica, as vLLM labels its data parallel engines).
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
  /// Series for engines 0 .. num_engines - 1 (the replicas), all made at once.
  explicit PrometheusStatLogger(std::string model_name, int num_engines = 1);
  ~PrometheusStatLogger() override;
  /// `engine_index` picks the engine's series; one outside 0 .. num_engines - 1 is dropped.
  void record(const SchedulerStats* scheduler_stats, const IterationStats* iteration_stats,
              int engine_index) override;
  void log() override {}  // scraped, not pushed
  /// The Prometheus text exposition of every metric (for GET /metrics).
  std::string render() const;
  /// Set the configured KV cache size of every engine (troupe:cache_config_num_blocks).
  void set_cache_config(int64_t num_blocks, int block_size);
  /// The metric prefixes, in the order rendered.
  static const std::vector<std::string>& prefixes();

 private:
  struct Series;  // one engine's metrics under one prefix
  void record_scheduler(Series& m, const SchedulerStats& s);
  void record_iteration(Series& m, const IterationStats& it);

  std::shared_ptr<prometheus::Registry> registry_;
  mutable std::mutex mu_;
  int num_engines_;
  std::vector<std::unique_ptr<Series>> series_;  // [prefix * num_engines + engine]
};

}  // namespace troupe::stats

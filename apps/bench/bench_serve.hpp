// `troupe bench serve`: a load generator for an OpenAI-compatible server,
// measuring what `vllm bench serve` measures (TTFT, TPOT, ITL, end-to-end
// latency, throughput) and writing its JSON keys.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "troupe/status.hpp"

namespace troupe::apps::bench {

struct BenchOptions {
  std::string base_url = "http://127.0.0.1:8000";
  std::string model;              // empty: the first of GET /v1/models
  int num_prompts = 64;
  int max_concurrency = 0;        // 0: unbounded (one client per prompt, capped at 512)
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s; inf: all at once
  int random_input_len = 128;
  int random_output_len = 128;
  uint64_t seed = 0;
  std::string result_file;        // JSON results; empty: none
  std::string api_key;
  double timeout_s = 600;         // per request
};

/// Per-request measurements (seconds).
struct RequestResult {
  bool success = false;
  std::string error;
  int64_t prompt_len = 0;
  int64_t output_tokens = 0;
  double ttft = 0;
  double latency = 0;
  std::vector<double> itl;
};

/// Summary statistics in milliseconds (numpy-style linear percentiles).
struct Stats {
  double mean = 0, median = 0, std = 0, p90 = 0, p99 = 0;
};
Stats summarize_ms(std::vector<double> seconds);
/// Linear-interpolated percentile of sorted values, p in [0, 100].
double percentile(const std::vector<double>& sorted, double p);

/// Run the benchmark, print the summary table; fails on setup errors only.
Status run_bench_serve(const BenchOptions& options);

}  // namespace troupe::apps::bench

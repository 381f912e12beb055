// `troupe bench serve`: a load generator for any OpenAI-compatible server
// (troupe, vLLM, llama-server), measuring what `vllm bench serve` measures
// (TTFT, TPOT, ITL, end-to-end latency, throughput) and writing its JSON keys.
// Prompts are text (apps/bench/text_prompts.hpp), fresh for every seed; token
// counts come from the responses' `usage` fields, so no /tokenize is needed.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
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
  int random_input_len = 128;     // prompt tokens aimed at (text sized by a probe request)
  int random_output_len = 128;
  std::optional<uint64_t> seed;   // prompts and arrivals; none: a fresh random seed per run
  std::string result_file;        // JSON results; empty: none
  std::string api_key;
  double timeout_s = 600;         // per request
};

/// Per-request measurements (seconds).
struct RequestResult {
  bool success = false;
  std::string error;
  int64_t prompt_len = 0;         // usage.prompt_tokens, or the estimate when the server sent none
  bool prompt_len_from_usage = false;
  int64_t output_tokens = 0;      // usage.completion_tokens, or the count of chunks with text
  bool output_from_usage = false;
  int64_t chunks = 0;             // streamed chunks that carried text
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

/// What one run measured (the printed table and the JSON file hold the same).
struct BenchSummary {
  std::string model;
  uint64_t seed = 0;
  int prompt_words = 0;            // words per prompt after the probe
  int64_t probe_prompt_tokens = -1;// the probe's usage.prompt_tokens (-1: the server sent no usage)
  int completed = 0, failed = 0;
  std::string first_error;
  int64_t input_tokens = 0, output_tokens = 0;
  bool input_from_usage = true;    // every completed request reported usage.prompt_tokens
  bool output_from_usage = true;   // every completed request reported usage.completion_tokens
  double duration_s = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  Stats ttft, tpot, itl, e2el;
  std::vector<RequestResult> requests;
};

/// Run the benchmark and print the summary table; fails on setup errors only
/// (failed requests are counted in the summary).
Result<BenchSummary> run_bench_serve(const BenchOptions& options);

}  // namespace troupe::apps::bench

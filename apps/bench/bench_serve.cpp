#include "apps/bench/bench_serve.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "apps/bench/http_client.hpp"
#include "apps/bench/text_prompts.hpp"

namespace troupe::apps::bench {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

http::Headers auth_headers(const BenchOptions& o) {
  http::Headers h;
  if (!o.api_key.empty()) h.emplace_back("Authorization", "Bearer " + o.api_key);
  return h;
}

Result<json> get_json(const http::Url& url, const std::string& path, const std::string& method, const std::string& body,
                      const BenchOptions& o) {
  auto r = http::request(url.host, url.port, method, url.base_path + path, body, auth_headers(o), {},
                         std::chrono::seconds(60));
  if (!r.ok()) return Status(r.status().code(), fmt::format("{} {}: {}", method, path, r.status().message()));
  if (r->status != 200) return unavailable(fmt::format("{} {} answered {}: {}", method, path, r->status, r->body));
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded()) return data_loss(fmt::format("{} {}: the answer is not JSON", method, path));
  return j;
}

// Sizes the prompts: one probe request (max_tokens 1) with a prompt of
// random_input_len words, from a seed no benchmark prompt uses, tells how many
// tokens a word makes on this server. A server without usage fields leaves
// one word per token, and the summary says the input counts are estimates.
struct PromptPlan {
  int words = 0;
  int64_t probe_tokens = -1;
  double tokens_per_word = 1.0;
};

Result<PromptPlan> plan_prompts(const http::Url& url, const BenchOptions& o, uint64_t seed) {
  PromptPlan plan;
  const int probe_words = std::max(8, o.random_input_len);
  const std::string probe = make_text_prompts(seed ^ 0x70726f6265ull, 1, probe_words)[0];
  json req = {{"model", o.model}, {"prompt", probe}, {"max_tokens", 1}, {"temperature", 0.0}};
  auto j = get_json(url, "/v1/completions", "POST", req.dump(), o);
  if (!j.ok()) return Status(j.status().code(), "probe request to /v1/completions failed: " + j.status().message());
  if (j->contains("usage") && (*j)["usage"].is_object())
    plan.probe_tokens = (*j)["usage"].value("prompt_tokens", int64_t{-1});
  plan.words = words_for_tokens(o.random_input_len, probe_words, plan.probe_tokens);
  if (plan.probe_tokens > 0) plan.tokens_per_word = static_cast<double>(plan.probe_tokens) / probe_words;
  return plan;
}

RequestResult run_one(const http::Url& url, const BenchOptions& o, const std::string& prompt, int64_t estimated_len) {
  RequestResult r;
  r.prompt_len = estimated_len;
  json body = {{"model", o.model},
               {"prompt", prompt},
               {"max_tokens", o.random_output_len},
               {"temperature", 0.0},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  const auto start = Clock::now();
  auto last = start;
  int64_t usage_completion = -1, usage_prompt = -1;
  bool done = false;
  std::string stream_error;
  http::SseParser sse;
  auto on_event = [&](std::string_view data) {
    if (data == "[DONE]") {
      done = true;
      return;
    }
    json j = json::parse(data, nullptr, false);
    if (j.is_discarded()) return;
    if (j.contains("error")) {
      const auto& e = j["error"];
      stream_error = e.is_object() ? e.value("message", "error event") : e.dump();
      return;
    }
    // The usage chunk (OpenAI: empty choices) or a final chunk carrying usage (llama-server).
    if (j.contains("usage") && j["usage"].is_object()) {
      usage_completion = j["usage"].value("completion_tokens", int64_t{-1});
      usage_prompt = j["usage"].value("prompt_tokens", int64_t{-1});
    }
    if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
    const auto& c = j["choices"][0];
    if (!c.contains("text") || !c["text"].is_string() || c["text"].get<std::string>().empty()) return;
    auto now = Clock::now();
    if (r.chunks == 0) r.ttft = std::chrono::duration<double>(now - start).count();
    else r.itl.push_back(std::chrono::duration<double>(now - last).count());
    last = now;
    ++r.chunks;
  };
  auto resp = http::request(url.host, url.port, "POST", url.base_path + "/v1/completions", body.dump(), auth_headers(o),
                            [&](std::string_view piece) {
                              sse.feed(piece, on_event);
                              return true;
                            },
                            std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000)));
  r.latency = std::chrono::duration<double>(Clock::now() - start).count();
  if (!resp.ok()) {
    r.error = resp.status().message();
    return r;
  }
  if (resp->status != 200) {
    r.error = fmt::format("HTTP {}", resp->status);
    return r;
  }
  if (!stream_error.empty()) {
    r.error = stream_error;
    return r;
  }
  if (!done) {
    r.error = "the stream ended without [DONE]";
    return r;
  }
  if (usage_prompt >= 0) {
    r.prompt_len = usage_prompt;
    r.prompt_len_from_usage = true;
  }
  r.output_from_usage = usage_completion >= 0;
  r.output_tokens = r.output_from_usage ? usage_completion : r.chunks;
  r.success = r.chunks > 0;
  if (!r.success) r.error = "no tokens received";
  return r;
}

void print_stats(const char* title, const char* name, const Stats& s) {
  std::printf("%s\n", fmt::format("{:-^50}", title).c_str());
  std::printf("%-40s %-10.2f\n", fmt::format("Mean {} (ms):", name).c_str(), s.mean);
  std::printf("%-40s %-10.2f\n", fmt::format("Median {} (ms):", name).c_str(), s.median);
  std::printf("%-40s %-10.2f\n", fmt::format("P90 {} (ms):", name).c_str(), s.p90);
  std::printf("%-40s %-10.2f\n", fmt::format("P99 {} (ms):", name).c_str(), s.p99);
}

void put_stats(json& j, const char* key, const Stats& s) {
  j[fmt::format("mean_{}_ms", key)] = s.mean;
  j[fmt::format("median_{}_ms", key)] = s.median;
  j[fmt::format("std_{}_ms", key)] = s.std;
  j[fmt::format("p90_{}_ms", key)] = s.p90;
  j[fmt::format("p99_{}_ms", key)] = s.p99;
}

}  // namespace

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Stats summarize_ms(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  for (double& x : v) x *= 1000.0;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(var / static_cast<double>(v.size()));
  s.median = percentile(v, 50);
  s.p90 = percentile(v, 90);
  s.p99 = percentile(v, 99);
  return s;
}

Result<BenchSummary> run_bench_serve(const BenchOptions& options) {
  BenchOptions o = options;
  if (o.num_prompts <= 0) return invalid_argument("--num-prompts must be positive");
  if (o.random_input_len <= 0 || o.random_output_len <= 0)
    return invalid_argument("--random-input-len and --random-output-len must be positive");
  if (o.max_concurrency < 0) return invalid_argument("--max-concurrency must be >= 0");
  if (!(o.request_rate > 0)) return invalid_argument("--request-rate must be positive (or inf)");
  if (!(o.timeout_s > 0)) return invalid_argument("--timeout must be positive");
  auto url = http::parse_url(o.base_url);
  if (!url.ok()) return url.status();

  if (o.model.empty()) {
    auto models = get_json(*url, "/v1/models", "GET", "", o);
    if (!models.ok()) return models.status();
    if (!models->contains("data") || !(*models)["data"].is_array() || (*models)["data"].empty())
      return data_loss("/v1/models lists no model");
    o.model = (*models)["data"][0].value("id", "");
  }
  BenchSummary sum;
  sum.model = o.model;
  sum.seed = o.seed ? *o.seed : std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  std::printf("Benchmarking %s at %s: %d prompts, input %d, output %d tokens, concurrency %s, rate %s, seed %llu\n",
              o.model.c_str(), o.base_url.c_str(), o.num_prompts, o.random_input_len, o.random_output_len,
              o.max_concurrency > 0 ? std::to_string(o.max_concurrency).c_str() : "unbounded",
              std::isinf(o.request_rate) ? "inf" : fmt::format("{}", o.request_rate).c_str(),
              static_cast<unsigned long long>(sum.seed));
  auto plan = plan_prompts(*url, o, sum.seed);
  if (!plan.ok()) return plan.status();
  sum.prompt_words = plan->words;
  sum.probe_prompt_tokens = plan->probe_tokens;
  if (plan->probe_tokens < 0)
    std::printf("The server reported no usage for the probe: prompts are %d words, input token counts are estimates\n",
                plan->words);
  const std::vector<std::string> prompts = make_text_prompts(sum.seed, o.num_prompts, plan->words);
  const int64_t estimated_len = std::lround(plan->words * plan->tokens_per_word);

  // Arrival offsets: all at 0 for an infinite rate, otherwise a Poisson process.
  std::vector<double> arrival(static_cast<size_t>(o.num_prompts), 0.0);
  if (!std::isinf(o.request_rate)) {
    std::mt19937_64 rng(sum.seed + 1);
    std::exponential_distribution<double> gap(o.request_rate);
    double t = 0;
    for (auto& a : arrival) {
      a = t;
      t += gap(rng);
    }
  }
  const int workers = std::min({o.num_prompts, o.max_concurrency > 0 ? o.max_concurrency : o.num_prompts, 512});
  std::vector<RequestResult> results(static_cast<size_t>(o.num_prompts));
  std::atomic<int> next{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      while (true) {
        int i = next.fetch_add(1);
        if (i >= o.num_prompts) return;
        std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(arrival[static_cast<size_t>(i)])));
        results[static_cast<size_t>(i)] = run_one(*url, o, prompts[static_cast<size_t>(i)], estimated_len);
      }
    });
  }
  for (auto& t : threads) t.join();
  sum.duration_s = std::chrono::duration<double>(Clock::now() - start).count();

  std::vector<double> ttfts, tpots, itls, e2els;
  json errors = json::array(), input_lens = json::array(), output_lens = json::array(), ttft_list = json::array();
  for (const auto& r : results) {
    input_lens.push_back(r.prompt_len);
    output_lens.push_back(r.output_tokens);
    ttft_list.push_back(r.ttft);
    errors.push_back(r.error);
    if (!r.success) {
      ++sum.failed;
      if (sum.first_error.empty()) sum.first_error = r.error;
      continue;
    }
    ++sum.completed;
    sum.input_tokens += r.prompt_len;
    sum.output_tokens += r.output_tokens;
    sum.input_from_usage = sum.input_from_usage && r.prompt_len_from_usage;
    sum.output_from_usage = sum.output_from_usage && r.output_from_usage;
    ttfts.push_back(r.ttft);
    e2els.push_back(r.latency);
    if (r.output_tokens > 1) tpots.push_back((r.latency - r.ttft) / static_cast<double>(r.output_tokens - 1));
    itls.insert(itls.end(), r.itl.begin(), r.itl.end());
  }
  if (sum.completed == 0) sum.input_from_usage = sum.output_from_usage = false;
  if (sum.failed > 0) std::fprintf(stderr, "first failure: %s\n", sum.first_error.c_str());
  sum.ttft = summarize_ms(ttfts);
  sum.tpot = summarize_ms(tpots);
  sum.itl = summarize_ms(itls);
  sum.e2el = summarize_ms(e2els);
  sum.request_throughput = sum.completed / sum.duration_s;
  sum.output_throughput = static_cast<double>(sum.output_tokens) / sum.duration_s;
  sum.total_token_throughput = static_cast<double>(sum.input_tokens + sum.output_tokens) / sum.duration_s;

  std::printf("============ Serving Benchmark Result ============\n");
  std::printf("%-40s %-10d\n", "Successful requests:", sum.completed);
  std::printf("%-40s %-10d\n", "Failed requests:", sum.failed);
  if (o.max_concurrency > 0) std::printf("%-40s %-10d\n", "Maximum request concurrency:", o.max_concurrency);
  std::printf("%-40s %-10.2f\n", "Benchmark duration (s):", sum.duration_s);
  std::printf("%-40s %-10lld%s\n", "Total input tokens:", static_cast<long long>(sum.input_tokens),
              sum.input_from_usage ? "" : " (estimated)");
  std::printf("%-40s %-10lld%s\n", "Total generated tokens:", static_cast<long long>(sum.output_tokens),
              sum.output_from_usage ? "" : " (counted as streamed chunks)");
  std::printf("%-40s %-10.2f\n", "Request throughput (req/s):", sum.request_throughput);
  std::printf("%-40s %-10.2f\n", "Output token throughput (tok/s):", sum.output_throughput);
  std::printf("%-40s %-10.2f\n", "Total Token throughput (tok/s):", sum.total_token_throughput);
  print_stats("Time to First Token", "TTFT", sum.ttft);
  print_stats("Time per Output Token (excl. 1st token)", "TPOT", sum.tpot);
  print_stats("Inter-token Latency", "ITL", sum.itl);
  print_stats("End-to-end Latency", "E2EL", sum.e2el);
  std::printf("==================================================\n");
  std::fflush(stdout);

  if (!o.result_file.empty()) {
    char date[32];
    std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y%m%d-%H%M%S", std::localtime(&now));
    json j = {{"date", date},
              {"backend", "openai"},
              {"base_url", o.base_url},
              {"model_id", o.model},
              {"seed", sum.seed},
              {"num_prompts", o.num_prompts},
              {"random_input_len", o.random_input_len},
              {"random_output_len", o.random_output_len},
              {"prompt_words", sum.prompt_words},
              {"probe_prompt_tokens", sum.probe_prompt_tokens},
              {"completed", sum.completed},
              {"failed", sum.failed},
              {"total_input_tokens", sum.input_tokens},
              {"total_output_tokens", sum.output_tokens},
              {"input_tokens_from", sum.input_from_usage ? "usage" : "estimate"},
              {"output_tokens_from", sum.output_from_usage ? "usage" : "chunks"},
              {"duration", sum.duration_s},
              {"request_throughput", sum.request_throughput},
              {"output_throughput", sum.output_throughput},
              {"total_token_throughput", sum.total_token_throughput},
              {"max_concurrency", o.max_concurrency > 0 ? json(o.max_concurrency) : json(nullptr)},
              {"request_rate", std::isinf(o.request_rate) ? json("inf") : json(o.request_rate)},
              {"input_lens", input_lens},
              {"output_lens", output_lens},
              {"ttfts", ttft_list},
              {"errors", errors}};
    put_stats(j, "ttft", sum.ttft);
    put_stats(j, "tpot", sum.tpot);
    put_stats(j, "itl", sum.itl);
    put_stats(j, "e2el", sum.e2el);
    std::ofstream f(o.result_file);
    if (!f) return invalid_argument("cannot write --result-file " + o.result_file);
    f << j.dump(2) << "\n";
    if (!f) return data_loss("writing --result-file " + o.result_file + " failed");
    std::printf("Results written to %s\n", o.result_file.c_str());
  }
  sum.requests = std::move(results);
  return sum;
}

}  // namespace troupe::apps::bench

// vLLM's metric names next to troupe's: the families and label sets the Prometheus stat
// logger exposes under "vllm:" are compared with the list vLLM documents, and every
// engine (replica) has its own series.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "runtime/core/stats/prometheus_stat_logger.hpp"

namespace troupe::stats {
namespace {

using LabelSets = std::map<std::string, std::set<std::set<std::string>>>;  // family -> label-name sets

// vLLM's documented metrics troupe reports, with their label names, as exposed (counters
// with their "_total" sample name). Taken from vLLM's documentation page "Production
// Metrics" (https://docs.vllm.ai/en/stable/usage/metrics/, "General Metrics" and
// "Speculative Decoding Metrics"; read 2026-12-08) and the series its v1
// PrometheusStatLogger makes (labels model_name and engine; finished_reason on
// request_success; position on the per-position acceptance counter). vLLM metrics left
// out, with the reason, are listed in docs/router.md ("Metrics").
const std::map<std::string, std::set<std::string>> kVllmDocumented = {
    {"vllm:num_requests_running", {"model_name", "engine"}},
    {"vllm:num_requests_waiting", {"model_name", "engine"}},
    {"vllm:kv_cache_usage_perc", {"model_name", "engine"}},
    {"vllm:prefix_cache_queries_total", {"model_name", "engine"}},
    {"vllm:prefix_cache_hits_total", {"model_name", "engine"}},
    {"vllm:num_preemptions_total", {"model_name", "engine"}},
    {"vllm:prompt_tokens_total", {"model_name", "engine"}},
    {"vllm:generation_tokens_total", {"model_name", "engine"}},
    {"vllm:request_success_total", {"model_name", "engine", "finished_reason"}},
    {"vllm:iteration_tokens_total", {"model_name", "engine"}},
    {"vllm:time_to_first_token_seconds", {"model_name", "engine"}},
    {"vllm:inter_token_latency_seconds", {"model_name", "engine"}},
    {"vllm:request_time_per_output_token_seconds", {"model_name", "engine"}},
    {"vllm:e2e_request_latency_seconds", {"model_name", "engine"}},
    {"vllm:request_queue_time_seconds", {"model_name", "engine"}},
    {"vllm:request_inference_time_seconds", {"model_name", "engine"}},
    {"vllm:request_prefill_time_seconds", {"model_name", "engine"}},
    {"vllm:request_decode_time_seconds", {"model_name", "engine"}},
    {"vllm:request_prompt_tokens", {"model_name", "engine"}},
    {"vllm:request_generation_tokens", {"model_name", "engine"}},
    {"vllm:spec_decode_num_drafts_total", {"model_name", "engine"}},
    {"vllm:spec_decode_num_draft_tokens_total", {"model_name", "engine"}},
    {"vllm:spec_decode_num_accepted_tokens_total", {"model_name", "engine"}},
    {"vllm:spec_decode_num_accepted_tokens_per_pos_total", {"model_name", "engine", "position"}},
};

// Every sample's family (a histogram's _bucket/_sum/_count folded) and its label names
// (a histogram's "le" left out), with the engine label's values.
LabelSets parse(const std::string& text, std::map<std::string, std::set<std::string>>* engines) {
  LabelSets out;
  std::set<std::string> histograms;
  static const std::regex type_line(R"(^# TYPE (\S+) histogram$)");
  static const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} \S+$)");
  static const std::regex label(R"(([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)\")");
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, type_line)) histograms.insert(m[1]);
    if (!std::regex_match(line, m, sample)) continue;
    std::string name = m[1];
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (name.size() > s.size() && name.ends_with(s) && histograms.count(name.substr(0, name.size() - s.size())))
        name = name.substr(0, name.size() - s.size());
    }
    std::set<std::string> names;
    const std::string labels = m[2];
    for (std::sregex_iterator it(labels.begin(), labels.end(), label), end; it != end; ++it) {
      if ((*it)[1] == "le") continue;
      names.insert((*it)[1]);
      if ((*it)[1] == "engine") (*engines)[name].insert((*it)[2]);
    }
    out[name].insert(names);
  }
  return out;
}

TEST(VllmMetricNames, DocumentedFamiliesAndLabelsPerEngine) {
  PrometheusStatLogger logger("smol", 2);
  SchedulerStats s;
  s.num_running_reqs = 1;
  s.spec_decoding.num_drafts = 1;
  s.spec_decoding.num_draft_tokens = 2;
  s.spec_decoding.num_accepted_tokens = 1;
  s.spec_decoding.num_accepted_tokens_per_pos = {1, 0};
  IterationStats it;
  it.num_prompt_tokens = 5;
  it.time_to_first_tokens_s = {0.1};
  it.inter_token_latencies_s = {0.01};
  it.finished_requests.push_back({"r", "stop", 5, 2, 0.5, 0.1, 0.2, 0.2, 0.1, 0.05});
  for (int e = 0; e < 2; ++e) logger.record(&s, &it, e);
  std::map<std::string, std::set<std::string>> engines;
  const LabelSets exposed = parse(logger.render(), &engines);
  for (const auto& [name, labels] : kVllmDocumented) {
    auto found = exposed.find(name);
    ASSERT_NE(found, exposed.end()) << name << " is not exposed";
    EXPECT_EQ(found->second, (std::set<std::set<std::string>>{labels})) << name;
    EXPECT_EQ(engines[name], (std::set<std::string>{"0", "1"})) << name;
  }
  // Nothing under vllm: that vLLM does not document, and every vllm: family has its troupe: twin.
  for (const auto& [name, labels] : exposed) {
    if (name.rfind("vllm:", 0) != 0) continue;
    EXPECT_TRUE(kVllmDocumented.count(name)) << name << " is exposed but not in vLLM's list";
    EXPECT_TRUE(exposed.count("troupe:" + name.substr(5))) << name << " has no troupe: twin";
  }
}

TEST(VllmMetricNames, AnEngineOutOfRangeIsDropped) {
  PrometheusStatLogger logger("smol", 1);
  SchedulerStats s;
  s.num_running_reqs = 3;
  logger.record(&s, nullptr, 5);
  const std::string text = logger.render();
  EXPECT_EQ(text.find("engine=\"5\""), std::string::npos);
  EXPECT_NE(text.find("vllm:num_requests_running{engine=\"0\",model_name=\"smol\"} 0"), std::string::npos) << text;
}

}  // namespace
}  // namespace troupe::stats

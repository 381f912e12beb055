// Speculative decoding in the built-in stat loggers: vLLM's "SpecDecoding metrics" log
// line over an interval, and the spec_decode counters of the Prometheus logger.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/core/stats/logging_stat_logger.hpp"
#include "runtime/core/stats/prometheus_stat_logger.hpp"

namespace troupe::stats {
namespace {

SchedulerStats step(int64_t drafts, int64_t draft_tokens, std::vector<int64_t> per_pos) {
  SchedulerStats s;
  s.spec_decoding.num_drafts = drafts;
  s.spec_decoding.num_draft_tokens = draft_tokens;
  for (int64_t a : per_pos) s.spec_decoding.num_accepted_tokens += a;
  s.spec_decoding.num_accepted_tokens_per_pos = std::move(per_pos);
  return s;
}

TEST(SpecDecodingStats, TheLogLineSumsTheInterval) {
  using Clock = LoggingStatLogger::Clock;
  Clock::time_point now{};
  std::vector<std::string> lines;
  LoggingStatLogger logger(0, [&](const std::string& l) { lines.push_back(l); }, [&] { return now; });
  // 4 drafts of 3 tokens: accepted 3, 2, 1 at positions 0, 1, 2 -> 6 of 12.
  SchedulerStats a = step(2, 6, {2, 1, 1});
  SchedulerStats b = step(2, 6, {1, 1});
  logger.record(&a, nullptr, 0);
  logger.record(&b, nullptr, 0);
  now += std::chrono::seconds(2);
  logger.log();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1],
            "SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: 3.00 tokens/s, Drafted "
            "throughput: 6.00 tokens/s, Accepted: 6 tokens, Drafted: 12 tokens, Per-position acceptance rate: 0.750, "
            "0.500, 0.250, Avg Draft acceptance rate: 50.0%");
  // The next interval starts from zero; without drafts there is no such line.
  SchedulerStats idle;
  logger.record(&idle, nullptr, 0);
  now += std::chrono::seconds(2);
  logger.log();
  for (size_t i = 2; i < lines.size(); ++i) EXPECT_EQ(lines[i].find("SpecDecoding"), std::string::npos) << lines[i];
}

TEST(SpecDecodingStats, PrometheusCountsUnderVllmsNames) {
  PrometheusStatLogger logger("m");
  SchedulerStats a = step(2, 6, {2, 1, 1});
  SchedulerStats b = step(1, 3, {1});
  logger.record(&a, nullptr, 0);
  logger.record(&b, nullptr, 0);
  const std::string text = logger.render();
  auto has = [&](const std::string& line) { EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text; };
  has("troupe:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 3");
  has("troupe:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"m\"} 9");
  has("troupe:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 5");
  has("troupe:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"0\"} 3");
  has("troupe:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"2\"} 1");
}

}  // namespace
}  // namespace troupe::stats

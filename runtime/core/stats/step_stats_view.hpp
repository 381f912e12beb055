// StepStats: one step's SchedulerStats and IterationStats as the SDK's
// StepStatsView, the names a stat-logger plugin reads (the table in
// step_stats_view.cpp; docs/plugins.md lists them).
#pragma once

#include "runtime/core/stats/engine_stats.hpp"
#include "troupe/stat_logger.hpp"

namespace troupe::stats {

class StepStats final : public StepStatsView {
 public:
  /// Either may be null; both must outlive the view.
  StepStats(const SchedulerStats* scheduler, const IterationStats* iteration)
      : scheduler_(scheduler), iteration_(iteration) {}

  std::optional<double> number(std::string_view name) const override;
  std::vector<std::string> number_names() const override;
  std::vector<double> series(std::string_view name) const override;
  int64_t num_finished_requests() const override;
  std::optional<double> finished_number(int64_t index, std::string_view name) const override;
  std::string finished_text(int64_t index, std::string_view name) const override;

 private:
  const FinishedRequestStats* finished(int64_t index) const;

  const SchedulerStats* scheduler_;
  const IterationStats* iteration_;
};

}  // namespace troupe::stats

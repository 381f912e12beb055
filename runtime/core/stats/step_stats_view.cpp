#include "runtime/core/stats/step_stats_view.hpp"

#include <algorithm>
#include <string>

namespace troupe::stats {
namespace {

template <class Struct>
struct NumberField {
  std::string_view name;
  double (*get)(const Struct&);
};

#define TROUPE_STAT(Struct, name_text, expr) \
  NumberField<Struct> { name_text, [](const Struct& x) { return static_cast<double>(expr); } }

// The names plugins read; they only ever grow (a renamed field keeps its old name here).
constexpr NumberField<SchedulerStats> kSchedulerNumbers[] = {
    TROUPE_STAT(SchedulerStats, "communicator_bytes", x.communicator_bytes),
    TROUPE_STAT(SchedulerStats, "communicator_seconds", x.communicator_seconds),
    TROUPE_STAT(SchedulerStats, "kv_cache_usage", x.kv_cache_usage),
    TROUPE_STAT(SchedulerStats, "model_seconds", x.model_seconds),
    TROUPE_STAT(SchedulerStats, "num_preempted_reqs", x.num_preempted_reqs),
    TROUPE_STAT(SchedulerStats, "num_running_reqs", x.num_running_reqs),
    TROUPE_STAT(SchedulerStats, "num_scheduled_tokens", x.num_scheduled_tokens),
    TROUPE_STAT(SchedulerStats, "num_waiting_reqs", x.num_waiting_reqs),
    TROUPE_STAT(SchedulerStats, "prefix_cache_hits", x.prefix_cache_hits),
    TROUPE_STAT(SchedulerStats, "prefix_cache_queries", x.prefix_cache_queries),
    TROUPE_STAT(SchedulerStats, "sleep_level", x.sleep_level),
    TROUPE_STAT(SchedulerStats, "spec_decoding.num_accepted_tokens", x.spec_decoding.num_accepted_tokens),
    TROUPE_STAT(SchedulerStats, "spec_decoding.num_draft_tokens", x.spec_decoding.num_draft_tokens),
    TROUPE_STAT(SchedulerStats, "spec_decoding.num_drafts", x.spec_decoding.num_drafts),
    TROUPE_STAT(SchedulerStats, "step", x.step),
    TROUPE_STAT(SchedulerStats, "step_seconds", x.step_seconds),
    TROUPE_STAT(SchedulerStats, "structured_output_bytes", x.structured_output_bytes),
};

constexpr NumberField<IterationStats> kIterationNumbers[] = {
    TROUPE_STAT(IterationStats, "num_generation_tokens", x.num_generation_tokens),
    TROUPE_STAT(IterationStats, "num_prompt_tokens", x.num_prompt_tokens),
};

constexpr NumberField<FinishedRequestStats> kFinishedNumbers[] = {
    TROUPE_STAT(FinishedRequestStats, "decode_time_s", x.decode_time_s),
    TROUPE_STAT(FinishedRequestStats, "e2e_latency_s", x.e2e_latency_s),
    TROUPE_STAT(FinishedRequestStats, "mean_time_per_output_token_s", x.mean_time_per_output_token_s),
    TROUPE_STAT(FinishedRequestStats, "num_generation_tokens", x.num_generation_tokens),
    TROUPE_STAT(FinishedRequestStats, "num_prompt_tokens", x.num_prompt_tokens),
    TROUPE_STAT(FinishedRequestStats, "prefill_time_s", x.prefill_time_s),
    TROUPE_STAT(FinishedRequestStats, "queued_time_s", x.queued_time_s),
    TROUPE_STAT(FinishedRequestStats, "time_to_first_token_s", x.time_to_first_token_s),
};

#undef TROUPE_STAT

template <class Struct, size_t N>
std::optional<double> lookup(const NumberField<Struct> (&table)[N], const Struct* x, std::string_view name) {
  if (!x) return std::nullopt;
  for (const auto& f : table)
    if (f.name == name) return f.get(*x);
  return std::nullopt;
}

}  // namespace

std::optional<double> StepStats::number(std::string_view name) const {
  if (auto v = lookup(kSchedulerNumbers, scheduler_, name)) return v;
  return lookup(kIterationNumbers, iteration_, name);
}

std::vector<std::string> StepStats::number_names() const {
  std::vector<std::string> out;
  if (scheduler_)
    for (const auto& f : kSchedulerNumbers) out.emplace_back(f.name);
  if (iteration_)
    for (const auto& f : kIterationNumbers) out.emplace_back(f.name);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<double> StepStats::series(std::string_view name) const {
  if (iteration_ && name == "time_to_first_tokens_s") return iteration_->time_to_first_tokens_s;
  if (iteration_ && name == "inter_token_latencies_s") return iteration_->inter_token_latencies_s;
  if (scheduler_ && name == "spec_decoding.num_accepted_tokens_per_pos") {
    const auto& per_pos = scheduler_->spec_decoding.num_accepted_tokens_per_pos;
    return std::vector<double>(per_pos.begin(), per_pos.end());
  }
  return {};
}

int64_t StepStats::num_finished_requests() const {
  return iteration_ ? static_cast<int64_t>(iteration_->finished_requests.size()) : 0;
}

const FinishedRequestStats* StepStats::finished(int64_t index) const {
  if (index < 0 || index >= num_finished_requests()) return nullptr;
  return &iteration_->finished_requests[static_cast<size_t>(index)];
}

std::optional<double> StepStats::finished_number(int64_t index, std::string_view name) const {
  return lookup(kFinishedNumbers, finished(index), name);
}

std::string StepStats::finished_text(int64_t index, std::string_view name) const {
  const FinishedRequestStats* r = finished(index);
  if (!r) return {};
  if (name == "request_id") return r->request_id;
  if (name == "finish_reason") return r->finish_reason;
  return {};
}

}  // namespace troupe::stats

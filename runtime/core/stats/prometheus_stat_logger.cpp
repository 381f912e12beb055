#include "runtime/core/stats/prometheus_stat_logger.hpp"

#include <prometheus/text_serializer.h>

#include <algorithm>
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

// The finish reasons vLLM makes request_success series for up front.
const char* const kFinishReasons[] = {"stop", "length", "abort", "error"};

}  // namespace

struct PrometheusStatLogger::Series {
  prometheus::Labels labels;
  prometheus::Gauge* running;
  prometheus::Gauge* waiting;
  prometheus::Gauge* kv_usage;
  prometheus::Gauge* num_blocks = nullptr;   // troupe: only
  prometheus::Gauge* sleep_state = nullptr;  // troupe: only (vLLM's has a sleep_state label per state)
  prometheus::Gauge* structured_bytes = nullptr;  // troupe: only
  prometheus::Counter* prefix_queries;
  prometheus::Counter* prefix_hits;
  prometheus::Counter* preemptions;
  prometheus::Counter* spec_drafts;  // speculative decoding (vLLM's spec_decode_* names)
  prometheus::Counter* spec_draft_tokens;
  prometheus::Counter* spec_accepted_tokens;
  prometheus::Family<prometheus::Counter>* spec_accepted_per_pos_family;
  std::vector<prometheus::Counter*> spec_accepted_per_pos;  // by draft position, made when first seen
  prometheus::Counter* prompt_tokens;
  prometheus::Counter* generation_tokens;
  prometheus::Family<prometheus::Counter>* request_success_family;
  std::map<std::string, prometheus::Counter*> request_success;
  prometheus::Histogram* ttft;
  prometheus::Histogram* itl;
  prometheus::Histogram* tpot;
  prometheus::Histogram* e2e;
  prometheus::Histogram* queue_time;
  prometheus::Histogram* inference_time;
  prometheus::Histogram* prefill_time;
  prometheus::Histogram* decode_time;
  prometheus::Histogram* prompt_tokens_hist;
  prometheus::Histogram* generation_tokens_hist;
  prometheus::Histogram* iteration_tokens;
};

namespace {

/// Every family of one prefix, registered once; each engine adds its labelled series.
struct Families {
  Families(prometheus::Registry& r, const std::string& p) : registry(r), prefix(p) {}
  prometheus::Registry& registry;
  std::string prefix;
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> gauges;
  std::map<std::string, prometheus::Family<prometheus::Counter>*> counters;
  std::map<std::string, prometheus::Family<prometheus::Histogram>*> histograms;

  prometheus::Family<prometheus::Gauge>& gauge_family(const char* name, const char* help) {
    auto& f = gauges[name];
    if (!f) f = &BuildGauge().Name(prefix + name).Help(help).Register(registry);
    return *f;
  }
  prometheus::Family<prometheus::Counter>& counter_family(const char* name, const char* help) {
    auto& f = counters[name];
    if (!f) f = &BuildCounter().Name(prefix + name).Help(help).Register(registry);
    return *f;
  }
  prometheus::Family<prometheus::Histogram>& histogram_family(const char* name, const char* help) {
    auto& f = histograms[name];
    if (!f) f = &BuildHistogram().Name(prefix + name).Help(help).Register(registry);
    return *f;
  }
};

}  // namespace

const std::vector<std::string>& PrometheusStatLogger::prefixes() {
  static const std::vector<std::string> kPrefixes = {"troupe:", "vllm:"};
  return kPrefixes;
}

PrometheusStatLogger::PrometheusStatLogger(std::string model_name, int num_engines)
    : registry_(std::make_shared<prometheus::Registry>()), num_engines_(std::max(1, num_engines)) {
  for (const std::string& prefix : prefixes()) {
    Families f(*registry_, prefix);
    const bool troupe_only = prefix == "troupe:";
    for (int e = 0; e < num_engines_; ++e) {
      auto m = std::make_unique<Series>();
      m->labels = {{"model_name", model_name}, {"engine", std::to_string(e)}};
      const auto& l = m->labels;
      auto gauge = [&](const char* name, const char* help) { return &f.gauge_family(name, help).Add(l); };
      auto counter = [&](const char* name, const char* help) { return &f.counter_family(name, help).Add(l); };
      auto histogram = [&](const char* name, const char* help, const Histogram::BucketBoundaries& b) {
        return &f.histogram_family(name, help).Add(l, b);
      };
      m->running = gauge("num_requests_running", "Number of requests in model execution batches.");
      m->waiting = gauge("num_requests_waiting", "Number of requests waiting to be processed.");
      m->kv_usage = gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.");
      if (troupe_only) {
        m->sleep_state = gauge("engine_sleep_state",
                               "Sleep mode: 0 awake, 1 weights offloaded and KV cache dropped, 2 both dropped.");
        m->num_blocks = gauge("cache_config_num_blocks", "Number of KV cache blocks.");
        m->structured_bytes =
            gauge("structured_output_grammar_bytes",
                  "Bytes held by the grammars of the running structured-output requests (driver rank).");
      }
      m->prefix_queries = counter("prefix_cache_queries_total",
                                  "Prefix cache queries, in terms of number of queried tokens.");
      m->prefix_hits = counter("prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.");
      m->preemptions = counter("num_preemptions_total", "Cumulative number of preemptions from the engine.");
      m->prompt_tokens = counter("prompt_tokens_total", "Number of prefill tokens processed.");
      m->generation_tokens = counter("generation_tokens_total", "Number of generation tokens processed.");
      m->request_success_family =
          &f.counter_family("request_success_total", "Count of successfully processed requests.");
      for (const char* reason : kFinishReasons) {
        auto labels = l;
        labels["finished_reason"] = reason;
        m->request_success[reason] = &m->request_success_family->Add(labels);
      }
      m->ttft = histogram("time_to_first_token_seconds", "Histogram of time to first token in seconds.", kTtftBuckets);
      m->itl = histogram("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", kItlBuckets);
      m->tpot = histogram("request_time_per_output_token_seconds",
                          "Histogram of time_per_output_token_seconds per request.", kItlBuckets);
      m->e2e = histogram("e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                         kLatencyBuckets);
      m->queue_time = histogram("request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                                kLatencyBuckets);
      m->inference_time = histogram("request_inference_time_seconds",
                                    "Histogram of time spent in RUNNING phase for request.", kLatencyBuckets);
      m->prefill_time = histogram("request_prefill_time_seconds",
                                  "Histogram of time spent in PREFILL phase for request.", kLatencyBuckets);
      m->decode_time = histogram("request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
                                 kLatencyBuckets);
      m->prompt_tokens_hist = histogram("request_prompt_tokens", "Number of prefill tokens processed.", kTokenBuckets);
      m->generation_tokens_hist =
          histogram("request_generation_tokens", "Number of generation tokens processed.", kTokenBuckets);
      m->spec_drafts = counter("spec_decode_num_drafts_total", "Number of spec decoding drafts.");
      m->spec_draft_tokens = counter("spec_decode_num_draft_tokens_total", "Number of draft tokens.");
      m->spec_accepted_tokens = counter("spec_decode_num_accepted_tokens_total", "Number of accepted tokens.");
      m->spec_accepted_per_pos_family = &f.counter_family("spec_decode_num_accepted_tokens_per_pos_total",
                                                          "Accepted tokens per draft position.");
      m->iteration_tokens = histogram("iteration_tokens_total", "Histogram of number of tokens per engine_step.",
                                      {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384});
      series_.push_back(std::move(m));
    }
  }
}

PrometheusStatLogger::~PrometheusStatLogger() = default;

void PrometheusStatLogger::record(const SchedulerStats* s, const IterationStats* it, int engine_index) {
  if (engine_index < 0 || engine_index >= num_engines_) return;
  std::lock_guard lock(mu_);
  for (size_t p = 0; p < prefixes().size(); ++p) {
    Series& m = *series_[p * static_cast<size_t>(num_engines_) + static_cast<size_t>(engine_index)];
    if (s) record_scheduler(m, *s);
    if (it) record_iteration(m, *it);
  }
}

void PrometheusStatLogger::record_scheduler(Series& m, const SchedulerStats& s) {
  m.running->Set(s.num_running_reqs);
  m.waiting->Set(s.num_waiting_reqs);
  m.kv_usage->Set(s.kv_cache_usage);
  if (m.sleep_state) m.sleep_state->Set(s.sleep_level);
  if (m.structured_bytes) m.structured_bytes->Set(static_cast<double>(s.structured_output_bytes));
  m.prefix_queries->Increment(static_cast<double>(s.prefix_cache_queries));
  m.prefix_hits->Increment(static_cast<double>(s.prefix_cache_hits));
  m.preemptions->Increment(static_cast<double>(s.num_preempted_reqs));
  const SpecDecodingStats& d = s.spec_decoding;
  if (d.num_drafts <= 0) return;
  m.spec_drafts->Increment(static_cast<double>(d.num_drafts));
  m.spec_draft_tokens->Increment(static_cast<double>(d.num_draft_tokens));
  m.spec_accepted_tokens->Increment(static_cast<double>(d.num_accepted_tokens));
  for (size_t pos = 0; pos < d.num_accepted_tokens_per_pos.size(); ++pos) {
    while (m.spec_accepted_per_pos.size() <= pos) {
      auto labels = m.labels;
      labels["position"] = std::to_string(m.spec_accepted_per_pos.size());
      m.spec_accepted_per_pos.push_back(&m.spec_accepted_per_pos_family->Add(labels));
    }
    m.spec_accepted_per_pos[pos]->Increment(static_cast<double>(d.num_accepted_tokens_per_pos[pos]));
  }
}

void PrometheusStatLogger::record_iteration(Series& m, const IterationStats& it) {
  m.prompt_tokens->Increment(static_cast<double>(it.num_prompt_tokens));
  m.generation_tokens->Increment(static_cast<double>(it.num_generation_tokens));
  m.iteration_tokens->Observe(static_cast<double>(it.num_prompt_tokens + it.num_generation_tokens));
  for (double v : it.time_to_first_tokens_s) m.ttft->Observe(v);
  for (double v : it.inter_token_latencies_s) m.itl->Observe(v);
  for (const auto& f : it.finished_requests) {
    auto found = m.request_success.find(f.finish_reason);
    if (found == m.request_success.end()) {
      auto labels = m.labels;
      labels["finished_reason"] = f.finish_reason;
      found = m.request_success.emplace(f.finish_reason, &m.request_success_family->Add(labels)).first;
    }
    found->second->Increment();
    m.e2e->Observe(f.e2e_latency_s);
    m.queue_time->Observe(f.queued_time_s);
    m.inference_time->Observe(f.prefill_time_s + f.decode_time_s);
    m.prefill_time->Observe(f.prefill_time_s);
    m.decode_time->Observe(f.decode_time_s);
    m.tpot->Observe(f.mean_time_per_output_token_s);
    m.prompt_tokens_hist->Observe(static_cast<double>(f.num_prompt_tokens));
    m.generation_tokens_hist->Observe(static_cast<double>(f.num_generation_tokens));
  }
}

void PrometheusStatLogger::set_cache_config(int64_t num_blocks, int) {
  std::lock_guard lock(mu_);
  for (auto& m : series_)
    if (m->num_blocks) m->num_blocks->Set(static_cast<double>(num_blocks));
}

std::string PrometheusStatLogger::render() const {
  std::lock_guard lock(mu_);
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace troupe::stats

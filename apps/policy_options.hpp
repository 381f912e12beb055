// The flags `troupe serve` and `troupe generate` share for the engine's
// pluggable policies (vLLM's names): --scheduler-cls (a registered scheduler
// policy, troupe/scheduler_policy.hpp) and --logits-processors (registered
// logits processors, troupe/logits_processor.hpp, applied in the given order).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "troupe/scheduler_policy.hpp"
#include "troupe/status.hpp"

namespace troupe::apps {

struct PolicyOptions {
  std::string scheduler_cls;      // empty: the default (fcfs), or what the platform sets
  std::string logits_processors;  // comma-separated names
};

inline void add_policy_options(CLI::App& sub, PolicyOptions* o) {
  sub.add_option("--scheduler-cls", o->scheduler_cls,
                 std::string("Scheduler policy: the order in which waiting requests are admitted and running ones "
                             "preempted. Built in: ") +
                     kFcfsSchedulerPolicy +
                     " (default, first come first served); general plugins register more (e.g. a priority policy "
                     "that honours the request's 'priority'). An unknown name fails at start, listing the "
                     "registered ones");
  sub.add_option("--logits-processors", o->logits_processors,
                 "Comma-separated logits processors, applied in this order to each step's logits before sampling; "
                 "registered by general plugins; per-request arguments come from the request body's 'vllm_xargs'");
}

/// Fills `config`; an empty item of --logits-processors is invalid_argument.
inline Status apply_policy_options(const PolicyOptions& o, EngineConfig* config) {
  if (!o.scheduler_cls.empty()) config->scheduler.scheduler_cls = o.scheduler_cls;
  config->model.logits_processors.clear();
  if (o.logits_processors.empty()) return {};
  size_t start = 0;
  for (;;) {
    const size_t comma = o.logits_processors.find(',', start);
    std::string name = o.logits_processors.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!name.empty() && name.front() == ' ') name.erase(name.begin());
    while (!name.empty() && name.back() == ' ') name.pop_back();
    if (name.empty()) return invalid_argument("--logits-processors has an empty name: '" + o.logits_processors + "'");
    config->model.logits_processors.push_back(std::move(name));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return {};
}

}  // namespace troupe::apps

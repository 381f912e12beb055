#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "conformance/check_util.hpp"

namespace troupe::conformance {

const char* to_string(Outcome o) {
  switch (o) {
    case Outcome::pass: return "pass";
    case Outcome::fail: return "FAIL";
    case Outcome::not_offered: return "not offered";
    case Outcome::skipped: return "skipped";
  }
  return "?";
}

int Report::count(Outcome o) const {
  return static_cast<int>(std::count_if(cases.begin(), cases.end(), [o](const CaseResult& c) { return c.outcome == o; }));
}

double tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::f32: return 1e-4;
    case DType::f16: return 2e-3;   // the reference may round activations to f16 too
    case DType::bf16: return 1e-2;
    default: return 3e-2;           // quantized weights: the reference quantizes activations to 8 bits
  }
}

double normalized_error(const std::vector<float>& got, const std::vector<float>& want, int64_t* worst_index) {
  double scale = 1e-6, worst = 0;
  *worst_index = -1;
  if (got.size() != want.size()) return INFINITY;
  for (float w : want) scale = std::max(scale, static_cast<double>(std::fabs(w)));
  for (size_t i = 0; i < got.size(); ++i) {
    double e = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!std::isfinite(got[i]) && std::isfinite(want[i])) e = INFINITY;
    if (!(e <= worst)) {  // also takes the first NaN
      worst = std::isnan(e) ? INFINITY : e;
      *worst_index = static_cast<int64_t>(i);
    }
  }
  return worst / scale;
}

bool selected(const Options& options, const std::string& group, const std::string& op) {
  return options.filter.empty() || op.find(options.filter) != std::string::npos || group == options.filter;
}

void compare_case(Session& target, Session& reference, Report* report, CaseResult meta, const RunFn& run) {
  auto want = run(reference);
  auto got = run(target);
  target.clear();
  reference.clear();
  if (!want.ok()) {
    meta.outcome = Outcome::skipped;
    meta.detail = "the reference " + reference.platform().device_type() + " cannot run it: " + want.status().message();
  } else if (!got.ok()) {
    meta.outcome = Outcome::fail;
    meta.detail = got.status().to_string();
  } else {
    int64_t at = -1;
    meta.worst_error = normalized_error(*got, *want, &at);
    meta.outcome = meta.worst_error <= meta.tolerance ? Outcome::pass : Outcome::fail;
    if (at >= 0 && got->size() == want->size())
      meta.detail = "worst at output " + std::to_string(at) + ": got " + std::to_string((*got)[static_cast<size_t>(at)]) +
                    ", reference " + std::to_string((*want)[static_cast<size_t>(at)]);
    else if (got->size() != want->size())
      meta.detail = "got " + std::to_string(got->size()) + " outputs, reference " + std::to_string(want->size());
  }
  report->cases.push_back(std::move(meta));
}

double runs_per_second(const std::function<void()>& op, const std::function<void()>& sync) {
  using clock = std::chrono::steady_clock;
  op();  // warm up
  sync();
  int runs = 0;
  const auto start = clock::now();
  double seconds = 0;
  do {
    for (int i = 0; i < std::max(1, runs); ++i) op();  // doubling batches: few syncs
    runs += std::max(1, runs);
    sync();
    seconds = std::chrono::duration<double>(clock::now() - start).count();
  } while (seconds < 0.03 && runs < (1 << 16));
  return runs / seconds;
}

}  // namespace troupe::conformance

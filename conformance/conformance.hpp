// The conformance kit: checks a platform against a reference platform (the
// CPU), the way ggml's test-backend-ops checks a backend. Every Ops method,
// the AttentionBackend and the DeviceCommunicator run the same random inputs
// on both, through each platform's own DeviceAllocator; the Worker contract
// runs in order on a real model and its greedy tokens are compared with
// golden ones; optional features are exercised where offered. Depends on the
// SDK only. `troupe platform-check` is its command-line front end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "troupe/model.hpp"
#include "troupe/platform.hpp"

namespace troupe::conformance {

struct Options {
  /// Run only the checks whose op name (or group) contains this text; "" runs all.
  std::string filter;
  uint64_t seed = 20240611;
  /// Measure each op's speed on the target and the reference (a line per op).
  bool measure_speed = true;
  /// Threads for platforms that take a thread count (config.parallel.num_threads); 0: their own choice.
  int num_threads = 0;
};

enum class Outcome { pass, fail, not_offered, skipped };
const char* to_string(Outcome o);

/// One comparison with the reference, one step of the worker contract, or one optional feature.
struct CaseResult {
  std::string group;  // "ops", "attention", "communicator", "worker", "feature"
  std::string op;     // "matmul", "paged_attention", "all_gather", "load_model", "sleep_mode", ...
  std::string shape;  // "in=64 out=7 tokens=1"
  std::string dtype;  // weight, element or KV cache type; "" when none applies
  Outcome outcome = Outcome::pass;
  /// max |target - reference| / max(max |reference|, 1e-6) over the outputs; +inf for NaN.
  double worst_error = 0;
  double tolerance = 0;
  std::string detail;  // why it failed or is not offered; what was compared
};

/// How fast an op ran on one representative shape, on the target and on the reference.
struct SpeedResult {
  std::string op, shape, dtype;
  std::string unit;  // "GB/s" (bytes the op must move) or "GFLOP/s"
  double target = 0, reference = 0;
};

struct Report {
  std::string platform, reference;
  std::vector<CaseResult> cases;
  std::vector<SpeedResult> speeds;
  /// What the check did not cover, and why ("communicator: a world of one rank only").
  std::vector<std::string> notes;
  int count(Outcome o) const;
  bool passed() const { return count(Outcome::fail) == 0; }
};

/// The weight types both platforms claim (supported_quantizations), in the reference's order.
std::vector<DType> common_weight_types(const Platform& target, const Platform& reference);

/// Every Ops method, the attention backend and the communicator of `target` against `reference`.
void check_kernels(const Platform& target, const Platform& reference, const Options& options, Report* report);

/// One prompt of the golden file and the tokens greedy decoding must give.
struct GoldenCase {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  /// Top-1/top-2 logit margin of the reference at each output step: a divergence is
  /// accepted only from a step whose margin is below kFragileMargin.
  std::vector<double> margins;
};
inline constexpr double kFragileMargin = 0.03;

/// The Worker contract in order (init_device, load_model, get_kv_cache_spec,
/// determine_available_memory, initialize_from_config, compile_or_warm_up_model,
/// execute_model) on `model`, greedy tokens against `goldens`; then the optional
/// features (sleep mode, LoRA, draft tokens) where the worker offers them.
void check_worker(const Platform& target, const ModelSource& model, const std::vector<GoldenCase>& goldens,
                  const Options& options, Report* report);

}  // namespace troupe::conformance

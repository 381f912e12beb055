// What the kernel checks share: tolerances per dtype, the error measure, the
// filter, one case run on both platforms, and speed measurement.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "conformance/conformance.hpp"
#include "conformance/session.hpp"
#include "troupe/named_ops/named_ops.hpp"

namespace troupe::conformance {

/// Normalised tolerance for outputs computed from inputs of `dtype` (weights or cache).
double tolerance_for(DType dtype);
/// Tolerance of ops over f32 values only (norms, rope, element-wise).
inline constexpr double kF32Tolerance = 1e-4;

/// max |got - want| / max(max |want|, 1e-6); +inf when got has a NaN/inf where want is finite.
double normalized_error(const std::vector<float>& got, const std::vector<float>& want, int64_t* worst_index);

/// Whether a check of `op` in `group` runs under `filter`.
bool selected(const Options& options, const std::string& group, const std::string& op);

/// Runs `run` on the target and on the reference session and records the comparison.
/// `run` returns the op's outputs copied back to the host (or the error the platform gave).
using RunFn = std::function<Result<std::vector<float>>(Session&)>;
void compare_case(Session& target, Session& reference, Report* report, CaseResult meta, const RunFn& run);

/// Records that the target does not offer `op`; `without` says what a model needing it does then.
inline void report_not_offered(Report* report, const std::string& group, const std::string& op,
                               const std::string& without) {
  CaseResult c;
  c.group = group;
  c.op = op;
  c.outcome = Outcome::not_offered;
  c.detail = without;
  report->cases.push_back(std::move(c));
}

/// Whether both sessions offer named op Op and the options select it. A reference without
/// it is a note; a target without it is a not_offered case whose detail (`without`) says
/// what a model needing it does then.
template <class Op>
bool both_offer(Session& target, Session& reference, const Options& options, Report* report,
                const std::string& without) {
  if (!selected(options, "ops", std::string(Op::name))) return false;
  if (!named_ops::supports<Op>(reference.ops())) {
    report->notes.push_back(std::string(Op::name) + " not checked: the reference does not offer it");
    return false;
  }
  if (named_ops::supports<Op>(target.ops())) return true;
  report_not_offered(report, "ops", std::string(Op::name), without);
  return false;
}

/// Times `op` (already set up in `s`) and returns runs per second; `sync` waits for the device.
double runs_per_second(const std::function<void()>& op, const std::function<void()>& sync);

}  // namespace troupe::conformance

/// `auto var = *expr;` or return expr's error from the enclosing function.
#define CONFORMANCE_ASSIGN(var, expr)          \
  auto var##_result_ = (expr);                 \
  if (!var##_result_.ok()) return var##_result_.status(); \
  auto var = std::move(*var##_result_)

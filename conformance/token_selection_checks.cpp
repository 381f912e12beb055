// The named op select_tokens (named_ops::SelectTokens) of the target against the reference's (the CPU's
// kernels/cpu/token_select): greedy rows with ties, and random rows under
// temperature, min_p, top_k and top_p with a fixed draw. The chosen ids must be
// equal. A platform that does not offer it is reported as not offered: the
// worker then copies logits out.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "conformance/check_util.hpp"
#include "conformance/random_data.hpp"
#include "troupe/named_ops/named_ops.hpp"

namespace troupe::conformance {
namespace {

// The ids chosen for `logits` [rows][vocab] under `params`, as floats for compare_case.
Result<std::vector<float>> select(Session& s, const std::vector<float>& logits, int64_t rows, int64_t vocab,
                                  const std::vector<TokenSelection>& params, bool* offered) {
  CONFORMANCE_ASSIGN(ld, s.put(logits));
  CONFORMANCE_ASSIGN(out, s.scratch(rows * static_cast<int64_t>(sizeof(int32_t))));
  const auto select_tokens = named_ops::find<named_ops::SelectTokens>(s.ops());
  if (!select_tokens || !select_tokens(s.ops(), ld, rows, vocab, params.data(), static_cast<int32_t*>(out))) {
    if (offered) *offered = false;
    return not_supported("select_tokens is not offered by platform " + s.platform().device_type());
  }
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  TROUPE_RETURN_IF_ERROR(s.get_bytes(ids.data(), out, rows * static_cast<int64_t>(sizeof(int32_t))));
  return std::vector<float>(ids.begin(), ids.end());
}

TokenSelection row(float temperature, float top_p, float min_p, int32_t top_k, double u) {
  TokenSelection t;
  t.temperature = temperature;
  t.top_p = top_p;
  t.min_p = min_p;
  t.top_k = top_k;
  t.u = u;
  return t;
}

}  // namespace

void check_token_selection(Session& target, Session& reference, const Options& options, Rng& rng, Report* report) {
  if (!selected(options, "ops", "select_tokens")) return;
  {
    bool offered = true;
    (void)select(target, {0.0f, 1.0f}, 1, 2, {row(0, 1, 0, 0, 0)}, &offered);
    target.clear();
    if (!offered) {
      report_not_offered(report, "ops", "select_tokens", "tokens are sampled on the host from copied-out logits");
      return;
    }
  }
  std::uniform_real_distribution<double> draw(0.0, 1.0);
  for (int64_t vocab : {1, 7, 1000, 50000})
    for (bool ties : {false, true}) {
      const int64_t rows = vocab == 1 ? 2 : 6;
      auto logits = random_floats(rng, rows * vocab, -6.0f, 6.0f);
      // Coarse logits: many equal maxima and equal probabilities (the lower id must win).
      if (ties) for (float& l : logits) l = std::round(l);
      std::vector<TokenSelection> params;
      const TokenSelection kinds[] = {row(0, 1, 0, 0, 0),          row(0.8f, 0.9f, 0, 0, draw(rng)),
                                      row(1.0f, 1, 0, 40, draw(rng)), row(1.3f, 0.95f, 0.05f, 0, draw(rng)),
                                      row(0.7f, 1, 0, 1, draw(rng)),  row(1.0f, 1, 0, 0, draw(rng))};
      for (int64_t r = 0; r < rows; ++r) params.push_back(kinds[r % 6]);
      CaseResult c;
      c.group = "ops";
      c.op = "select_tokens";
      c.shape = "rows=" + std::to_string(rows) + " vocab=" + std::to_string(vocab) + (ties ? " ties" : "");
      c.dtype = "f32";
      c.tolerance = 0;  // the same id or a failure
      compare_case(target, reference, report, std::move(c), [&](Session& s) {
        return select(s, logits, rows, vocab, params, nullptr);
      });
    }
}

}  // namespace troupe::conformance

// The scheduler with speculative decoding: drafts scheduled after the last known
// token, logits rows for each, rejected drafts rolled back (their KV slots computed
// again), max_tokens and the model length never passed, and the prefix cache holding
// only blocks of accepted tokens. A fake model with a simulated KV cache verifies the
// drafts greedily, so stale or wrongly cached KV changes the tokens it produces.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/core/sched/forward_batch_builder.hpp"
#include "runtime/core/sched/scheduler.hpp"
#include "tests/runtime/core/sched/fake_model.hpp"

namespace troupe::sched {
namespace {

using testing::next_token;
using testing::reference_output;

std::vector<int32_t> tokens(int n, int32_t start = 1) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

NewRequest request(std::string id, std::vector<int32_t> prompt, int64_t max_tokens) {
  NewRequest r;
  r.id = std::move(id);
  r.prompt_token_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  return r;
}

// Proposes the drafts of a request after a step: (id, its output so far) -> drafts.
using Drafter = std::function<std::vector<int32_t>(const std::string&, const std::vector<int32_t>&)>;

// The fake model of fake_model.hpp, verifying drafts: for each logits row of a sequence
// (after its last known token, then after each draft) the target token is next_token of
// the sequence read back from the simulated KV cache up to that row; drafts are accepted
// while they equal it (greedy verification), then the target's token is emitted.
class SpecFakeModel {
 public:
  SpecFakeModel(int32_t num_blocks, int32_t block_size) : kv_(num_blocks, block_size) {}

  std::unordered_map<std::string, StepTokens> run(const SchedulerOutput& out, const Drafter& drafter,
                                                  std::map<std::string, std::vector<int32_t>>& outputs) {
    const ForwardBatch b = make_forward_batch(out);
    EXPECT_EQ(b.num_tokens(), out.num_scheduled_tokens);
    if (!kv_.write(b)) return {};
    std::unordered_map<std::string, StepTokens> result;
    size_t logits_row = 0;
    for (int32_t s = 0; s < b.num_seqs(); ++s) {
      const ScheduledRequest& sr = out.scheduled[static_cast<size_t>(s)];
      if (!sr.needs_logits) {
        EXPECT_TRUE(sr.draft_token_ids.empty());
        continue;
      }
      const auto nd = static_cast<int32_t>(sr.draft_token_ids.size());
      const int32_t last_row = b.query_start[s + 1] - 1;
      // Rows: after the last known token, then after each draft.
      for (int32_t j = 0; j <= nd; ++j) {
        EXPECT_LT(logits_row + j, b.logits_indices.size());
        if (logits_row + j < b.logits_indices.size()) {
          EXPECT_EQ(b.logits_indices[logits_row + j], last_row - nd + j);
        }
      }
      logits_row += static_cast<size_t>(nd) + 1;
      StepTokens& st = result[sr.request_id];
      for (int32_t j = 0; j <= nd; ++j) {
        const int32_t target = next_token(kv_.read(b, s, b.seq_lens[s] - nd + j, out.block_size, sr.request_id));
        st.token_ids.push_back(target);
        if (j == nd || sr.draft_token_ids[static_cast<size_t>(j)] != target) break;
        ++accepted_;
      }
      drafted_ += nd;
      auto& o = outputs[sr.request_id];
      std::vector<int32_t> after = o;
      after.insert(after.end(), st.token_ids.begin(), st.token_ids.end());
      st.draft_token_ids = drafter(sr.request_id, after);
    }
    EXPECT_EQ(logits_row, b.logits_indices.size());
    return result;
  }

  int64_t drafted() const { return drafted_; }
  int64_t accepted() const { return accepted_; }

 private:
  testing::SimulatedKvCache kv_;
  int64_t drafted_ = 0, accepted_ = 0;
};

// Drives the scheduler until every request is done; returns each request's output.
std::map<std::string, std::vector<int32_t>> run_all(Scheduler& sched, SpecFakeModel& model, const Drafter& drafter) {
  std::map<std::string, std::vector<int32_t>> outputs;
  for (int steps = 0; sched.has_unfinished_requests(); ++steps) {
    EXPECT_LT(steps, 10000) << "no progress";
    if (steps >= 10000) break;
    SchedulerOutput out = sched.schedule();
    EXPECT_FALSE(out.empty());
    if (out.empty()) break;
    EXPECT_LE(out.num_scheduled_tokens, sched.config().max_num_batched_tokens);
    auto tokens_of = model.run(out, drafter, outputs);
    auto updates = sched.update_from_tokens(out, tokens_of);
    EXPECT_TRUE(updates.ok()) << updates.status().to_string();
    if (!updates.ok()) break;
    for (const RequestUpdate& u : *updates) {
      auto& o = outputs[u.request_id];
      o.insert(o.end(), u.new_token_ids.begin(), u.new_token_ids.end());
      if (const Request* r = sched.find_request(u.request_id)) {
        // Computed tokens: all known ones but the last (its KV comes with the next step).
        EXPECT_EQ(r->num_computed_tokens(), r->num_tokens() - 1) << u.request_id;
        EXPECT_LE(r->num_output_tokens() + static_cast<int64_t>(r->spec_token_ids().size()), r->max_tokens() - 1);
      }
    }
    EXPECT_TRUE(sched.kv_cache().pool().check_invariants().ok());
  }
  return outputs;
}

// Drafts from the reference output, with every third proposal wrong at a varying place,
// so steps accept all, some or none of their drafts.
struct ReferenceDrafter {
  std::map<std::string, std::vector<int32_t>> reference;
  int k = 4;
  int calls = 0;
  std::vector<int32_t> operator()(const std::string& id, const std::vector<int32_t>& output) {
    const auto& ref = reference.at(id);
    std::vector<int32_t> d;
    for (size_t i = output.size(); i < ref.size() && d.size() < static_cast<size_t>(k); ++i) d.push_back(ref[i]);
    // Past the reference (max_tokens): drafts the scheduler must cut.
    while (d.size() < static_cast<size_t>(k)) d.push_back(7);
    ++calls;
    if (calls % 3 == 0 && !d.empty()) d[static_cast<size_t>(calls / 3) % d.size()] ^= 1;
    return d;
  }
};

TEST(SpecDecodeScheduler, DraftsAreScheduledAfterTheLastTokenWithALogitsRowEach) {
  Scheduler sched({.max_num_batched_tokens = 64, .max_num_seqs = 4}, {.num_blocks = 16, .block_size = 4});
  ASSERT_TRUE(sched.add_request(request("a", tokens(5), 20)).ok());
  SchedulerOutput first = sched.schedule();
  ASSERT_EQ(first.scheduled.size(), 1u);
  auto up = sched.update_from_tokens(first, {{"a", StepTokens{{42}, {43, 44, 45}}}});
  ASSERT_TRUE(up.ok()) << up.status().to_string();
  SchedulerOutput second = sched.schedule();
  ASSERT_EQ(second.scheduled.size(), 1u);
  const ScheduledRequest& s = second.scheduled[0];
  EXPECT_EQ(s.num_computed_tokens, 5);
  EXPECT_EQ(s.token_ids, (std::vector<int32_t>{42, 43, 44, 45}));
  EXPECT_EQ(s.draft_token_ids, (std::vector<int32_t>{43, 44, 45}));
  EXPECT_TRUE(s.needs_logits);
  EXPECT_EQ(second.num_scheduled_tokens, 4);
  const ForwardBatch b = make_forward_batch(second);
  EXPECT_EQ(b.logits_indices, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(b.seq_lens, (std::vector<int32_t>{9}));
  // One draft accepted (43), then the target's 50: the two drafts after it roll back.
  auto up2 = sched.update_from_tokens(second, {{"a", StepTokens{{43, 50}, {}}}});
  ASSERT_TRUE(up2.ok());
  ASSERT_EQ(up2->size(), 1u);
  EXPECT_EQ((*up2)[0].new_token_ids, (std::vector<int32_t>{43, 50}));
  const Request* r = sched.find_request("a");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->num_tokens(), 8);
  EXPECT_EQ(r->num_computed_tokens(), 7);  // 5 + 42 + 43; 50 is computed next step
  EXPECT_TRUE(r->spec_token_ids().empty());
  SchedulerOutput third = sched.schedule();
  ASSERT_EQ(third.scheduled.size(), 1u);
  EXPECT_EQ(third.scheduled[0].token_ids, (std::vector<int32_t>{50}));
  EXPECT_EQ(third.scheduled[0].num_computed_tokens, 7);
}

TEST(SpecDecodeScheduler, MoreTokensThanDraftsPlusOneAreRefusedWithoutChange) {
  Scheduler sched({.max_num_batched_tokens = 64, .max_num_seqs = 4}, {.num_blocks = 16, .block_size = 4});
  ASSERT_TRUE(sched.add_request(request("a", tokens(5), 20)).ok());
  SchedulerOutput first = sched.schedule();
  auto up = sched.update_from_tokens(first, {{"a", StepTokens{{1, 2}, {}}}});
  ASSERT_FALSE(up.ok());
  EXPECT_NE(up.status().message().find("2 tokens for 0 drafts"), std::string::npos) << up.status().message();
  EXPECT_EQ(sched.find_request("a")->num_output_tokens(), 0);
  EXPECT_TRUE(sched.update_from_tokens(first, {{"a", StepTokens{{1}, {}}}}).ok());
}

TEST(SpecDecodeScheduler, TheTokenBudgetCutsDrafts) {
  Scheduler sched({.max_num_batched_tokens = 3, .max_num_seqs = 4}, {.num_blocks = 16, .block_size = 4});
  ASSERT_TRUE(sched.add_request(request("a", tokens(2), 20)).ok());
  SchedulerOutput first = sched.schedule();
  ASSERT_TRUE(sched.update_from_tokens(first, {{"a", StepTokens{{9}, {10, 11, 12, 13}}}}).ok());
  SchedulerOutput second = sched.schedule();
  ASSERT_EQ(second.scheduled.size(), 1u);
  EXPECT_EQ(second.scheduled[0].token_ids, (std::vector<int32_t>{9, 10, 11}));
  EXPECT_EQ(second.scheduled[0].draft_token_ids, (std::vector<int32_t>{10, 11}));
  EXPECT_EQ(make_forward_batch(second).logits_indices.size(), 3u);
}

TEST(SpecDecodeScheduler, DraftsNeverReachPastMaxTokensOrTheModelLength) {
  Scheduler sched({.max_num_batched_tokens = 64, .max_num_seqs = 4, .max_model_len = 12},
                  {.num_blocks = 16, .block_size = 4});
  ASSERT_TRUE(sched.add_request(request("a", tokens(3), 4)).ok());
  ASSERT_TRUE(sched.add_request(request("b", tokens(8), 4)).ok());
  SchedulerOutput first = sched.schedule();
  ASSERT_TRUE(sched.update_from_tokens(first, {{"a", StepTokens{{1}, {2, 3, 4, 5, 6}}},
                                               {"b", StepTokens{{1}, {2, 3, 4, 5, 6}}}})
                  .ok());
  // a: 1 of 4 tokens out, so at most 2 drafts (the step adds one more token). b: 9 of 12
  // tokens, so at most 2 drafts as well (9 + 2 + 1 = 12).
  EXPECT_EQ(sched.find_request("a")->spec_token_ids(), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(sched.find_request("b")->spec_token_ids(), (std::vector<int32_t>{2, 3}));
  SchedulerOutput second = sched.schedule();
  auto up = sched.update_from_tokens(second, {{"a", StepTokens{{2, 3, 4}, {}}}, {"b", StepTokens{{2, 3, 4}, {}}}});
  ASSERT_TRUE(up.ok());
  for (const auto& u : *up) {
    EXPECT_TRUE(u.finished) << u.request_id;
    EXPECT_EQ(u.finish_reason, FinishReason::length);
    EXPECT_EQ(u.new_token_ids.size(), 3u);
  }
  EXPECT_FALSE(sched.has_unfinished_requests());
}

TEST(SpecDecodeScheduler, GreedyVerificationGivesTheReferenceOutputsUnderEveryBudget) {
  for (int64_t budget : {3, 7, 64}) {
    for (bool caching : {false, true}) {
      SCOPED_TRACE(fmt::format("budget {}, prefix caching {}", budget, caching));
      constexpr int32_t kBlocks = 64, kBs = 4;
      Scheduler sched({.max_num_batched_tokens = budget, .max_num_seqs = 8},
                      {.num_blocks = kBlocks, .block_size = kBs, .enable_prefix_caching = caching});
      SpecFakeModel model(kBlocks, kBs);
      ReferenceDrafter drafter;
      std::map<std::string, std::vector<int32_t>> prompts = {
          {"a", tokens(9)}, {"b", tokens(5, 100)}, {"c", tokens(9)}, {"d", tokens(1, 300)}};
      std::map<std::string, int64_t> max_tokens = {{"a", 17}, {"b", 3}, {"c", 11}, {"d", 30}};
      for (const auto& [id, p] : prompts) {
        drafter.reference[id] = reference_output(p, max_tokens[id]);
        ASSERT_TRUE(sched.add_request(request(id, p, max_tokens[id])).ok());
      }
      auto outputs = run_all(sched, model, std::ref(drafter));
      for (const auto& [id, ref] : drafter.reference) EXPECT_EQ(outputs[id], ref) << id;
      EXPECT_GT(model.accepted(), 0);
      EXPECT_GT(model.drafted(), model.accepted());  // some drafts were rejected
    }
  }
}

TEST(SpecDecodeScheduler, ThePrefixCacheHoldsOnlyAcceptedTokens) {
  // "a" decodes with drafts, many rejected; then "b", whose prompt is a's prompt and
  // output, reuses a's cached blocks. A block cached with rejected drafts' KV in it
  // would give b another output than the reference.
  constexpr int32_t kBlocks = 64, kBs = 4;
  Scheduler sched({.max_num_batched_tokens = 64, .max_num_seqs = 8},
                  {.num_blocks = kBlocks, .block_size = kBs, .enable_prefix_caching = true});
  SpecFakeModel model(kBlocks, kBs);
  ReferenceDrafter drafter;
  drafter.k = 3;
  const std::vector<int32_t> prompt = tokens(6, 40);
  drafter.reference["a"] = reference_output(prompt, 26);
  ASSERT_TRUE(sched.add_request(request("a", prompt, 26)).ok());
  auto first = run_all(sched, model, std::ref(drafter));
  ASSERT_EQ(first["a"], drafter.reference["a"]);
  std::vector<int32_t> continued = prompt;
  continued.insert(continued.end(), first["a"].begin(), first["a"].end());
  drafter.reference["b"] = reference_output(continued, 9);
  ASSERT_TRUE(sched.add_request(request("b", continued, 9)).ok());
  SchedulerOutput out = sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  // 31 known tokens of a (its last output was never computed): 7 full blocks of 4 are cached.
  EXPECT_EQ(out.scheduled[0].num_computed_tokens, 28);
  std::map<std::string, std::vector<int32_t>> outputs;
  auto tokens_of = model.run(out, std::ref(drafter), outputs);
  auto up = sched.update_from_tokens(out, tokens_of);
  ASSERT_TRUE(up.ok());
  for (const auto& u : *up) outputs[u.request_id] = u.new_token_ids;
  auto rest = run_all(sched, model, std::ref(drafter));
  outputs["b"].insert(outputs["b"].end(), rest["b"].begin(), rest["b"].end());
  EXPECT_EQ(outputs["b"], drafter.reference["b"]);
}

TEST(SpecDecodeScheduler, PreemptionDropsTheDrafts) {
  // Two long requests in a cache too small for both: one is preempted and resumes from
  // scratch without drafts, and both still give the reference outputs.
  constexpr int32_t kBlocks = 10, kBs = 4;
  Scheduler sched({.max_num_batched_tokens = 64, .max_num_seqs = 8},
                  {.num_blocks = kBlocks, .block_size = kBs, .enable_prefix_caching = false});
  SpecFakeModel model(kBlocks, kBs);
  ReferenceDrafter drafter;
  for (const char* id : {"a", "b"}) {
    const std::vector<int32_t> p = tokens(4, id[0] == 'a' ? 1 : 500);
    drafter.reference[id] = reference_output(p, 20);
    ASSERT_TRUE(sched.add_request(request(id, p, 20)).ok());
  }
  auto outputs = run_all(sched, model, std::ref(drafter));
  for (const auto& [id, ref] : drafter.reference) EXPECT_EQ(outputs[id], ref) << id;
}

}  // namespace
}  // namespace troupe::sched

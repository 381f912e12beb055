// Randomized (fixed-seed) sequences of add / abort / finish / step against the
// scheduler, checking its invariants after every operation and every finished
// request's tokens against the fake model run alone.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/sched/scheduler.hpp"
#include "tests/runtime/core/sched/fake_model.hpp"

namespace troupe::sched {
namespace {

using testing::FakeModel;
using testing::reference_output;

struct Case {
  uint32_t seed;
  int32_t num_blocks;
  int32_t block_size;
  int64_t budget;
  int32_t max_num_seqs;
  bool prefix_caching;
  bool chunked;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << fmt::format("seed={} blocks={}x{} budget={} seqs={} caching={} chunked={}", c.seed, c.num_blocks,
                     c.block_size, c.budget, c.max_num_seqs, c.prefix_caching, c.chunked);
}

struct Tracked {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 0;
  std::vector<int32_t> outputs;
};

class Harness {
 public:
  explicit Harness(const Case& c)
      : rng_(c.seed),
        sched_({c.budget, c.max_num_seqs, 0, c.chunked}, {c.num_blocks, c.block_size, c.prefix_caching}),
        model_(c.num_blocks, c.block_size) {
    // Shared prefixes make prefix-cache hits (and shared blocks) common.
    for (int p = 0; p < 3; ++p) {
      std::vector<int32_t> prefix;
      for (int i = 0; i < 3 * c.block_size; ++i) prefix.push_back(static_cast<int32_t>(pick(50)));
      prefixes_.push_back(prefix);
    }
  }

  uint32_t pick(uint32_t n) { return static_cast<uint32_t>(rng_() % n); }

  void add() {
    const std::string id = fmt::format("q{}", next_id_++);
    std::vector<int32_t> prompt;
    if (pick(4) != 0) {
      const auto& pre = prefixes_[pick(3)];
      prompt.assign(pre.begin(), pre.begin() + pick(static_cast<uint32_t>(pre.size()) + 1));
    }
    const uint32_t tail = 1 + pick(10);
    for (uint32_t i = 0; i < tail; ++i) prompt.push_back(static_cast<int32_t>(pick(50)));
    const int64_t max_tokens = 1 + pick(12);
    std::optional<std::string> salt;
    if (pick(5) == 0) salt = pick(2) ? "s1" : "s2";
    const bool fits = static_cast<int64_t>(prompt.size()) + max_tokens <= sched_.kv_cache().capacity_tokens() &&
                      (sched_.config().enable_chunked_prefill ||
                       static_cast<int64_t>(prompt.size()) <= sched_.config().max_num_batched_tokens);
    Status s = sched_.add_request({id, prompt, max_tokens, salt});
    ASSERT_EQ(s.ok(), fits) << s.to_string();
    if (s.ok()) live_[id] = Tracked{prompt, max_tokens, {}};
  }

  std::string random_live() {
    auto it = live_.begin();
    std::advance(it, pick(static_cast<uint32_t>(live_.size())));
    return it->first;
  }

  void end(const std::string& id, FinishReason reason) {
    ASSERT_TRUE(sched_.finish_request(id, reason).ok());
    check_prefix_of_reference(id);
    live_.erase(id);
  }

  void step() {
    SchedulerOutput out = sched_.schedule();
    if (live_.empty()) {
      ASSERT_TRUE(out.empty());
      return;
    }
    ASSERT_FALSE(out.empty()) << "live requests but nothing scheduled";
    ASSERT_LE(out.num_scheduled_tokens, sched_.config().max_num_batched_tokens);
    ASSERT_LE(sched_.num_running(), sched_.config().max_num_seqs);
    preemptions_ += static_cast<int64_t>(out.preempted_ids.size());
    hits_ += sched_.stats().prefix_cache_hits;
    // Sometimes a client cancels while the step is on the device.
    if (pick(10) == 0) end(out.scheduled[pick(static_cast<uint32_t>(out.scheduled.size()))].request_id,
                           FinishReason::abort);
    auto sampled = model_.run(out);
    auto updates = sched_.update_from_output(out, sampled);
    ASSERT_TRUE(updates.ok()) << updates.status().to_string();
    for (const RequestUpdate& u : *updates) {
      ASSERT_TRUE(live_.contains(u.request_id));
      Tracked& t = live_[u.request_id];
      t.outputs.insert(t.outputs.end(), u.new_token_ids.begin(), u.new_token_ids.end());
      if (u.finished) {
        ASSERT_EQ(u.finish_reason, FinishReason::length);
        ASSERT_EQ(t.outputs, reference_output(t.prompt, t.max_tokens)) << u.request_id;
        ++completed_;
        live_.erase(u.request_id);
      }
    }
  }

  void check_prefix_of_reference(const std::string& id) {
    const Tracked& t = live_.at(id);
    const auto ref = reference_output(t.prompt, t.max_tokens);
    ASSERT_LE(t.outputs.size(), ref.size());
    ASSERT_TRUE(std::equal(t.outputs.begin(), t.outputs.end(), ref.begin())) << id;
  }

  void check_invariants() {
    const KvCacheManager& kv = sched_.kv_cache();
    const BlockPool& pool = kv.pool();
    Status s = pool.check_invariants();
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_EQ(sched_.num_running() + sched_.num_waiting(), static_cast<int32_t>(live_.size()));
    ASSERT_EQ(sched_.has_unfinished_requests(), !live_.empty());
    std::vector<int32_t> refs(static_cast<size_t>(pool.num_blocks()), 0);
    for (const auto& [id, t] : live_) {
      const Request* r = sched_.find_request(id);
      ASSERT_NE(r, nullptr) << id;
      const auto& table = kv.block_table(id);
      if (r->status() != RequestStatus::running) {
        ASSERT_TRUE(table.empty()) << id << " holds blocks while waiting";
      }
      ASSERT_GE(static_cast<int64_t>(table.size()) * kv.block_size(), r->num_computed_tokens());
      for (BlockId b : table) ++refs[static_cast<size_t>(b)];
    }
    for (BlockId b = 0; b < pool.num_blocks(); ++b) {
      ASSERT_GE(pool.block(b).ref_cnt, 0);
      // Every reference is a live request's table entry, and vice versa: no
      // block is both free and referenced, none leaks.
      ASSERT_EQ(pool.block(b).ref_cnt, refs[static_cast<size_t>(b)]) << "block " << b;
    }
    if (live_.empty()) {
      ASSERT_DOUBLE_EQ(kv.usage(), 0.0);
      ASSERT_EQ(kv.num_free_blocks(), pool.num_blocks());
    }
  }

  void run(int ops) {
    for (int i = 0; i < ops; ++i) {
      const uint32_t r = pick(100);
      if (r < 30) {
        add();
      } else if (r < 38 && !live_.empty()) {
        end(random_live(), FinishReason::abort);
      } else if (r < 42 && !live_.empty()) {
        end(random_live(), FinishReason::stop);
      } else {
        step();
      }
      if (::testing::Test::HasFatalFailure()) return;
      check_invariants();
      if (::testing::Test::HasFatalFailure()) return;
    }
    // Drain: everything left must finish.
    for (int i = 0; i < 100000 && !live_.empty(); ++i) {
      step();
      if (::testing::Test::HasFatalFailure()) return;
      check_invariants();
      if (::testing::Test::HasFatalFailure()) return;
    }
    ASSERT_TRUE(live_.empty());
    check_invariants();
  }

  int64_t preemptions_ = 0;
  int64_t hits_ = 0;
  int64_t completed_ = 0;

 private:
  std::mt19937 rng_;  // fixed algorithm: the same sequence everywhere
  Scheduler sched_;
  FakeModel model_;
  std::vector<std::vector<int32_t>> prefixes_;
  std::map<std::string, Tracked> live_;
  int next_id_ = 0;
};

class SchedulerProperty : public ::testing::TestWithParam<Case> {};

TEST_P(SchedulerProperty, InvariantsHoldAndOutputsMatchRunningAlone) {
  Harness h(GetParam());
  h.run(3000);
  EXPECT_GT(h.completed_, 50);
  RecordProperty("preemptions", static_cast<int>(h.preemptions_));
  RecordProperty("prefix_hit_tokens", static_cast<int>(h.hits_));
}

INSTANTIATE_TEST_SUITE_P(
    Configs, SchedulerProperty,
    ::testing::Values(Case{1, 12, 4, 16, 8, true, true},     // tiny pool: constant preemption
                      Case{2, 64, 4, 32, 16, true, true},    // roomy: many prefix hits
                      Case{3, 16, 2, 7, 3, true, true},      // odd budget, few seats
                      Case{4, 12, 4, 16, 8, false, true},    // prefix caching off
                      Case{5, 20, 8, 24, 4, true, false},    // chunked prefill off
                      Case{6, 10, 16, 64, 32, true, true})); // big blocks, few of them

TEST(SchedulerPropertyCoverage, TinyPoolPreemptsAndRoomyPoolHits) {
  // The randomized runs above are only meaningful if they exercise both paths.
  Harness tiny(Case{1, 12, 4, 16, 8, true, true});
  tiny.run(3000);
  EXPECT_GT(tiny.preemptions_, 0);
  Harness roomy(Case{2, 64, 4, 32, 16, true, true});
  roomy.run(3000);
  EXPECT_GT(roomy.hits_, 0);
}

}  // namespace
}  // namespace troupe::sched

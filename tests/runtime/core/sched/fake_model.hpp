// A deterministic stand-in for a model, for driving the scheduler in tests.
// It owns a simulated KV cache (one slot per token: the token and its
// position), writes each step's tokens through the batch's slot mapping, and
// derives the next token from the whole sequence read back through the block
// table. A wrong block table, slot mapping or prefix-cache hit therefore
// changes the generated tokens.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/core/sched/forward_batch_builder.hpp"
#include "runtime/core/sched/scheduler.hpp"

namespace troupe::sched::testing {

constexpr int32_t kVocab = 997;

/// The token that follows `history` (FNV-1a over the ids).
inline int32_t next_token(const std::vector<int32_t>& history) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : history) {
    h ^= static_cast<uint32_t>(t);
    h *= 1099511628211ull;
  }
  return static_cast<int32_t>(h % kVocab);
}

/// What `max_tokens` steps of the fake model give when a prompt runs alone.
inline std::vector<int32_t> reference_output(std::vector<int32_t> prompt, int64_t max_tokens) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < max_tokens; ++i) {
    out.push_back(next_token(prompt));
    prompt.push_back(out.back());
  }
  return out;
}

/// The KV cache of a fake model: one slot per token, holding the token and its position.
class SimulatedKvCache {
 public:
  SimulatedKvCache(int32_t num_blocks, int32_t block_size)
      : slots_(static_cast<size_t>(num_blocks) * block_size, Slot{-1, -1}) {}

  /// Writes every token of `b` at its slot (as a layer does, before any read); false, with a
  /// test failure, for a slot outside the cache.
  bool write(const ForwardBatch& b) {
    for (int32_t i = 0; i < b.num_tokens(); ++i) {
      const auto slot = static_cast<size_t>(b.slot_mapping[i]);
      EXPECT_LT(slot, slots_.size());
      if (slot >= slots_.size()) return false;
      slots_[slot] = Slot{b.token_ids[i], b.positions[i]};
    }
    return true;
  }
  /// Positions [0, len) of sequence `s` read back through its block table; a slot holding
  /// another position (stale) is a test failure naming `who`.
  std::vector<int32_t> read(const ForwardBatch& b, int32_t s, int64_t len, int64_t block_size,
                            const std::string& who) const {
    std::vector<int32_t> history;
    for (int64_t pos = 0; pos < len; ++pos) {
      const Slot& kv = slots_[static_cast<size_t>(b.block_tables[s][pos / block_size] * block_size + pos % block_size)];
      EXPECT_EQ(kv.position, pos) << "request " << who << " reads a stale slot";
      history.push_back(kv.token);
    }
    return history;
  }

 private:
  struct Slot {
    int32_t token;
    int32_t position;
  };
  std::vector<Slot> slots_;
};

class FakeModel {
 public:
  FakeModel(int32_t num_blocks, int32_t block_size) : kv_(num_blocks, block_size) {}

  /// Runs one step; returns the sampled token of each request that needs one.
  std::unordered_map<std::string, int32_t> run(const SchedulerOutput& out) {
    const ForwardBatch b = make_forward_batch(out);
    EXPECT_EQ(b.num_tokens(), out.num_scheduled_tokens);
    if (!kv_.write(b)) return {};
    std::unordered_map<std::string, int32_t> sampled;
    size_t logits_row = 0;
    for (int32_t s = 0; s < b.num_seqs(); ++s) {
      // Every scheduled sequence computes at least one token (its logits row).
      EXPECT_GT(b.query_start[s + 1], b.query_start[s]) << out.scheduled[s].request_id;
      const int32_t last_row = b.query_start[s + 1] - 1;
      if (logits_row >= b.logits_indices.size() || b.logits_indices[logits_row] != last_row) continue;
      ++logits_row;
      const std::string& id = out.scheduled[s].request_id;
      sampled[id] = next_token(kv_.read(b, s, b.seq_lens[s], out.block_size, id));
    }
    EXPECT_EQ(logits_row, b.logits_indices.size());
    return sampled;
  }

 private:
  SimulatedKvCache kv_;
};

}  // namespace troupe::sched::testing

#include "runtime/rank/structured/lexer_dfa.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_set>

namespace troupe::structured {
namespace {

constexpr size_t kMaxSets = size_t{1} << 20;
// Cached mask parts take at most this share of the grammar's memory budget.
constexpr size_t kMaskCacheShare = 4;
// A product search over (slice state, lexer state) pairs larger than this gives up
// (the slice's tokens are then walked one by one, which is always right).
constexpr size_t kMaxSlicePairs = 512;
constexpr size_t kSeenSlots = 4096;

std::string key_of(const void* data, size_t bytes, char tag) {
  std::string k(1, tag);
  k.append(static_cast<const char*>(data), bytes);
  return k;
}

thread_local uint64_t t_lexer_work = 0;

}  // namespace

uint64_t LexerDfa::thread_work() { return t_lexer_work; }

LexerDfa::LexerDfa(ExprStore& exprs, const std::vector<ExprId>& lexemes, size_t memory_budget)
    : exprs_(exprs),
      lexemes_(lexemes),
      memory_budget_(memory_budget),
      states_(std::max<size_t>(memory_budget / sizeof(State), 1024)),
      sets_(kMaxSets) {
  std::lock_guard<std::mutex> lock(mutex_);
  State* dead = states_.next_slot();
  auto zero = std::make_unique<uint8_t[]>(256);
  std::memset(zero.get(), 0, 256);
  dead->cls = zero.get();
  class_maps_.emplace(std::string(256, '\0'), std::move(zero));
  dead->to = std::make_unique<int32_t[]>(1);
  dead->to[0] = kDead;
  dead->ready.store(true, std::memory_order_relaxed);
  states_.publish();
  state_ids_.emplace(key_of(nullptr, 0, 'd'), kDead);
  intern_set_locked({});
}

bool LexerDfa::over_budget() const {
  size_t used = exprs_.memory_bytes() + items_.capacity() * sizeof(Item) +
                states_.allocated_chunks() * ChunkedVector<State>::kChunk * sizeof(State) +
                state_ids_.size() * 64 + sets_.size() * 96 + transition_bytes_ + class_maps_.size() * 320;
  return used > memory_budget_;
}

size_t LexerDfa::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exprs_.memory_bytes() + items_.capacity() * sizeof(Item) +
         states_.allocated_chunks() * ChunkedVector<State>::kChunk * sizeof(State) + state_ids_.size() * 64 +
         sets_.size() * 96 + mask_bytes_ + transition_bytes_ + class_maps_.size() * 320;
}

Status LexerDfa::status() const {
  if (!limited_.load(std::memory_order_acquire)) return {};
  std::lock_guard<std::mutex> lock(mutex_);
  return resource_exhausted(limit_reached_);
}

uint32_t LexerDfa::intern_set(const std::vector<uint32_t>& sorted_lexemes) {
  std::lock_guard<std::mutex> lock(mutex_);
  return intern_set_locked(sorted_lexemes);
}

uint32_t LexerDfa::intern_set_locked(const std::vector<uint32_t>& sorted) {
  std::string key = key_of(sorted.data(), sorted.size() * sizeof(uint32_t), 's');
  auto it = set_ids_.find(key);
  if (it != set_ids_.end()) return it->second;
  LexemeSet* slot = sets_.next_slot();
  if (slot == nullptr) {
    limit_reached_ = "grammar lexer: more than " + std::to_string(kMaxSets) + " lexeme sets";
    limited_.store(true, std::memory_order_release);
    return kEmptySet;
  }
  slot->members = sorted;
  slot->bits.assign((lexemes_.size() + 63) / 64, 0);
  for (uint32_t l : sorted) slot->bits[l / 64] |= uint64_t{1} << (l % 64);
  auto id = static_cast<uint32_t>(sets_.publish());
  set_ids_.emplace(std::move(key), id);
  return id;
}

int32_t LexerDfa::start_state(uint32_t set_id) {
  const LexemeSet& s = sets_[set_id];
  int32_t known = s.start_state.load(std::memory_order_acquire);
  if (known >= 0) return known;
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Item> items;
  for (uint32_t l : s.members) items.push_back({l, lexemes_[l]});
  int32_t state = items.empty() ? kDead : intern_state(items, /*start=*/true);
  s.start_state.store(state, std::memory_order_release);
  return state;
}

int32_t LexerDfa::intern_state(const std::vector<Item>& items, bool start) {
  std::string key = key_of(items.data(), items.size() * sizeof(Item), start ? 'S' : 'i');
  auto it = state_ids_.find(key);
  if (it != state_ids_.end()) return it->second;
  if (exprs_.overflowed() || over_budget()) {
    if (!limited_.load(std::memory_order_relaxed)) {
      limit_reached_ = exprs_.overflowed() ? "grammar lexer: regex term limit reached"
                                           : "grammar lexer: memory limit of " + std::to_string(memory_budget_ >> 20) +
                                                 " MiB reached";
      limited_.store(true, std::memory_order_release);
    }
    return kDead;
  }
  State* slot = states_.next_slot();
  if (slot == nullptr) {
    limit_reached_ = "grammar lexer: state limit reached";
    limited_.store(true, std::memory_order_release);
    return kDead;
  }
  slot->start = start;
  slot->items_begin = static_cast<uint32_t>(items_.size());
  slot->items_count = static_cast<uint32_t>(items.size());
  items_.insert(items_.end(), items.begin(), items.end());
  if (!start) {
    std::vector<uint32_t> accepted;
    for (const Item& item : items) {
      if (exprs_.nullable(item.expr)) accepted.push_back(item.lexeme);
    }
    if (!accepted.empty()) slot->accept_set = static_cast<int32_t>(intern_set_locked(accepted));
  }
  auto id = static_cast<int32_t>(states_.publish());
  state_ids_.emplace(std::move(key), id);
  return id;
}

void LexerDfa::build_transitions(int32_t state) {
  std::lock_guard<std::mutex> lock(mutex_);
  State& s = states_[static_cast<size_t>(state)];
  if (s.ready.load(std::memory_order_relaxed)) return;
  const uint64_t work0 = exprs_.work();
  struct Account {
    const ExprStore& e;
    uint64_t w0;
    ~Account() { t_lexer_work += e.work() - w0; }
  } account{exprs_, work0};
  std::vector<Item> items(items_.begin() + s.items_begin, items_.begin() + s.items_begin + s.items_count);
  ByteClasses classes;
  for (const Item& item : items) classes = refine(classes, exprs_.classes(item.expr));
  std::vector<uint8_t> reps = classes.representatives();
  std::vector<int32_t> target(reps.size(), kDead);
  std::vector<Item> next;
  t_lexer_work += reps.size() * items.size();  // derivative lookups, memoised or not
  for (size_t c = 0; c < reps.size(); ++c) {
    next.clear();
    for (const Item& item : items) {
      ExprId d = exprs_.derivative(item.expr, reps[c]);
      if (d != ExprStore::kNothing && exprs_.is_live(d)) next.push_back({item.lexeme, d});
    }
    target[c] = next.empty() ? kDead : intern_state(next, /*start=*/false);
  }
  std::string key(reinterpret_cast<const char*>(classes.class_of.data()), 256);
  auto map = class_maps_.find(key);
  if (map == class_maps_.end()) {
    auto bytes = std::make_unique<uint8_t[]>(256);
    std::memcpy(bytes.get(), classes.class_of.data(), 256);
    map = class_maps_.emplace(std::move(key), std::move(bytes)).first;
  }
  s.cls = map->second.get();
  s.to = std::make_unique<int32_t[]>(target.size());
  std::copy(target.begin(), target.end(), s.to.get());
  transition_bytes_ += target.size() * sizeof(int32_t);
  s.ready.store(true, std::memory_order_release);
}

bool LexerDfa::slice_allows_all(int32_t state, uint32_t slice, const SliceAutomaton& automaton) {
  State& s = states_[static_cast<size_t>(state)];
  const uint32_t bit = uint32_t{1} << slice;
  if (s.slices_known.load(std::memory_order_acquire) & bit) return (s.slices_pass.load(std::memory_order_relaxed) & bit) != 0;
  // Breadth-first over (slice state, lexer state) pairs, one layer per byte of depth.
  bool pass = state != kDead;
  std::vector<std::pair<int16_t, int32_t>> frontier{{0, state}}, next;
  // The pairs seen: a small open-addressing set, stamped per search (no clearing).
  static thread_local std::vector<uint64_t> keys(kSeenSlots);
  static thread_local std::vector<uint32_t> stamps(kSeenSlots, 0);
  static thread_local uint32_t stamp = 0;
  if (++stamp == 0) {
    std::fill(stamps.begin(), stamps.end(), 0);
    stamp = 1;
  }
  size_t seen = 0;
  auto insert = [&](uint64_t key) {
    size_t i = (key * 0x9E3779B97F4A7C15ULL) >> 52;  // kSeenSlots == 4096
    while (stamps[i] == stamp) {
      if (keys[i] == key) return false;
      i = (i + 1) & (kSeenSlots - 1);
    }
    stamps[i] = stamp;
    keys[i] = key;
    ++seen;
    return true;
  };
  insert(uint64_t{static_cast<uint32_t>(state)});
  for (uint32_t depth = 0; pass && depth < automaton.max_bytes && !frontier.empty(); ++depth) {
    next.clear();
    for (auto [u, q] : frontier) {
      const DfaRow row = transitions(q);
      const auto& unext = automaton.next[static_cast<size_t>(u)];
      for (int b = 0; b < 256 && pass; ++b) {
        int16_t u2 = unext[static_cast<size_t>(b)];
        if (u2 < 0) continue;
        int32_t q2 = row[static_cast<uint8_t>(b)];
        if (q2 == kDead) {
          pass = false;
          break;
        }
        uint64_t key = (uint64_t{static_cast<uint16_t>(u2)} << 32) | static_cast<uint32_t>(q2);
        if (insert(key)) next.emplace_back(u2, q2);
      }
      if (seen > kMaxSlicePairs) pass = false;
    }
    frontier.swap(next);
  }
  if (pass) s.slices_pass.fetch_or(bit, std::memory_order_relaxed);
  s.slices_known.fetch_or(bit, std::memory_order_release);
  return pass;
}

const StateMask* LexerDfa::cache_mask(int32_t state, std::unique_ptr<StateMask>& mask) {
  std::lock_guard<std::mutex> lock(mutex_);
  State& s = states_[static_cast<size_t>(state)];
  if (const StateMask* existing = s.mask.load(std::memory_order_acquire)) return existing;
  if (mask_bytes_ + mask->bytes() > memory_budget_ / kMaskCacheShare) return nullptr;
  mask_bytes_ += mask->bytes();
  masks_.push_back(std::move(mask));
  s.mask.store(masks_.back().get(), std::memory_order_release);
  return masks_.back().get();
}

std::string LexerDfa::describe_state(int32_t state) {
  std::lock_guard<std::mutex> lock(mutex_);
  const State& s = states_[static_cast<size_t>(state)];
  std::string out = s.start ? "start{" : "{";
  for (uint32_t i = 0; i < s.items_count; ++i) {
    const Item& item = items_[s.items_begin + i];
    out += (i ? ", " : "") + std::to_string(item.lexeme) + ":" + std::to_string(item.expr);
  }
  return out + "}";
}

}  // namespace troupe::structured

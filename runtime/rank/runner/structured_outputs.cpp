#include "runtime/rank/runner/structured_outputs.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <unordered_set>
#include <utility>

#include "runtime/rank/structured/grammar_cache.hpp"
#include "troupe/log.hpp"

namespace troupe::engine {

void TokenMasks::reset(size_t rows, int64_t vocab_size) {
  vocab_size_ = vocab_size;
  words_ = static_cast<size_t>((vocab_size + 63) / 64);
  masked_.assign(rows, 0);  // allowed_ grows when a row is masked: steps without a mask need none
}

uint64_t* TokenMasks::row(size_t row) {
  masked_[row] = 1;
  if (allowed_.size() < masked_.size() * words_) allowed_.resize(masked_.size() * words_);
  uint64_t* out = allowed_.data() + row * words_;
  std::fill_n(out, words_, uint64_t{0});
  return out;
}

void TokenMasks::apply(float* logits, int64_t vocab_size, size_t rows) const {
  if (vocab_size != vocab_size_) return;
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  for (size_t r = 0; r < std::min(rows, masked_.size()); ++r) {
    if (!masked_[r]) continue;
    const uint64_t* bits = allowed_.data() + r * words_;
    float* row = logits + static_cast<int64_t>(r) * vocab_size;
    for (int64_t id = 0; id < vocab_size; ++id)
      if (!(bits[static_cast<size_t>(id) / 64] >> (id % 64) & 1)) row[id] = kMasked;
  }
}

StructuredOutputs::StructuredOutputs(TokenizerLoader load, int64_t vocab_size, structured::GrammarLimits limits)
    : load_(std::move(load)), vocab_size_(vocab_size), limits_(limits) {}

StructuredOutputs::~StructuredOutputs() {
  end_masks();
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

Status StructuredOutputs::load_vocabulary() {
  if (vocab_) return {};
  auto tok = load_();
  if (!tok) return tok.status();
  const auto& t = **tok;
  // The bytes each token adds inside a text (not decode(), which strips a first token's
  // space); control tokens add none and are never allowed, end-of-generation ones are
  // allowed where the grammar may end.
  std::vector<std::string> bytes(static_cast<size_t>(t.vocab_size()));
  for (int32_t id = 0; id < t.vocab_size(); ++id)
    if (!t.is_special(id)) bytes[static_cast<size_t>(id)] = t.token_to_piece(id, /*special=*/false);
  vocab_ = structured::TokenVocabulary::create(std::move(bytes), t.eog_ids(), vocab_size_);
  TROUPE_LOG_DEBUG("structured output: the vocabulary's tries hold {:.1f} MiB",
                   static_cast<double>(vocab_->memory_bytes()) / (1 << 20));
  return {};
}

void StructuredOutputs::fail(const std::string& request_id, State* state, Status error) {
  if (state) {
    if (state->failed) return;
    state->failed = true;
  }
  TROUPE_LOG_WARNING("structured output of request {} failed: {}", request_id, error.message());
  failures_.push_back(RequestFailure{request_id, std::move(error)});
}

void StructuredOutputs::add(const SamplingState& request) {
  states_.erase(request.request_id);
  auto spec = structured::grammar_spec(request.params);
  if (!spec) return;
  State& state = states_[request.request_id];
  if (Status st = load_vocabulary(); !st.ok()) return fail(request.request_id, &state, std::move(st));
  auto grammar = structured::GrammarCache::shared().get(*spec, limits_);
  if (!grammar.ok()) {
    return fail(request.request_id, &state,
                Status(grammar.status().code(), "structured output: " + grammar.status().message()));
  }
  state.grammar = *grammar;
  state.matcher = std::make_unique<structured::GrammarMatcher>(state.grammar, vocab_);
  for (int32_t token : request.output_token_ids) {
    if (!state.matcher->accept_token(token)) {
      return fail(request.request_id, &state,
                  internal_error("structured output: the grammar refuses a token the request already has"));
    }
  }
}

void StructuredOutputs::begin_masks(const std::vector<std::string>& sample_ids,
                                    const std::vector<std::vector<int32_t>>& drafts, TokenMasks& masks) {
  end_masks();
  size_t rows = 0;
  bool any = false;
  for (size_t i = 0; i < sample_ids.size(); ++i) {
    rows += 1 + (i < drafts.size() ? drafts[i].size() : 0);
    auto it = states_.find(sample_ids[i]);
    any = any || (it != states_.end() && !it->second.failed);
  }
  masks.reset(rows, vocab_size_);
  if (!any) return;  // no thread for a step without a structured output
  job_ids_ = sample_ids;
  job_drafts_ = drafts;
  job_masks_ = &masks;
  {
    std::lock_guard lock(mutex_);
    job_pending_ = true;
    if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  }
  cv_.notify_all();
}

void StructuredOutputs::end_masks() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [this] { return !job_pending_; });
}

void StructuredOutputs::worker_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || job_pending_; });
    if (job_pending_) {
      lock.unlock();
      run_masks();  // the caller waits in end_masks() before touching anything run_masks reads
      lock.lock();
      job_pending_ = false;
      cv_.notify_all();
      continue;
    }
    if (stop_) return;
  }
}

void StructuredOutputs::run_masks() {
  TokenMasks& masks = *job_masks_;
  size_t first = 0;
  for (size_t i = 0; i < job_ids_.size(); ++i) {
    std::span<const int32_t> drafts;
    if (i < job_drafts_.size()) drafts = job_drafts_[i];
    auto it = states_.find(job_ids_[i]);
    if (it != states_.end() && !it->second.failed) mask_request(it->first, it->second, drafts, first, masks);
    first += 1 + drafts.size();
  }
}

void StructuredOutputs::mask_request(const std::string& request_id, State& state, std::span<const int32_t> drafts,
                                     size_t first, TokenMasks& masks) {
  structured::GrammarMatcher& m = *state.matcher;
  size_t accepted = 0;
  for (size_t j = 0; j <= drafts.size(); ++j) {
    Status st = m.fill_mask(masks.row(first + j));
    if (!st.ok()) {
      for (size_t k = 0; k <= drafts.size(); ++k) masks.unmask(first + k);
      fail(request_id, &state, Status(st.code(), "structured output: " + st.message()));
      break;
    }
    if (j == drafts.size() || !m.accept_token(drafts[j])) break;
    ++accepted;
  }
  m.rollback(accepted);
}

std::vector<RequestFailure> StructuredOutputs::take_failures() {
  std::vector<RequestFailure> out;
  out.swap(failures_);
  return out;
}

void StructuredOutputs::advance(const std::string& request_id, int32_t token) {
  auto it = states_.find(request_id);
  if (it == states_.end() || it->second.failed) return;
  if (!it->second.matcher->accept_token(token))
    fail(request_id, &it->second, internal_error("structured output: the grammar refuses the sampled token"));
}

void StructuredOutputs::advance(const std::vector<std::string>& sample_ids, const StepOutput& out) {
  size_t t = 0;
  for (size_t i = 0; i < sample_ids.size(); ++i) {
    const size_t n = 1 + (i < out.num_accepted.size() ? static_cast<size_t>(out.num_accepted[i]) : 0);
    for (size_t k = 0; k < n && t < out.tokens.size(); ++k) advance(sample_ids[i], out.tokens[t++].token);
  }
}

size_t StructuredOutputs::grammar_bytes() const {
  std::unordered_set<const structured::Grammar*> seen;
  size_t bytes = 0;
  for (const auto& [id, state] : states_)
    if (state.grammar && seen.insert(state.grammar.get()).second) bytes += state.grammar->memory_bytes();
  return bytes;
}

}  // namespace troupe::engine

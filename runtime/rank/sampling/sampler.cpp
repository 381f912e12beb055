#include "runtime/rank/sampling/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "troupe/check.hpp"

namespace troupe::sampling {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Scratch reused across calls on one thread: no allocation per step once warm.
struct Scratch {
  std::vector<float> work;
  std::vector<int32_t> idx;
  std::vector<int32_t> counts;
  std::vector<uint8_t> seen;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

void apply_penalties(float* l, int64_t vocab, const SamplingParams& p, std::span<const int32_t> prompt,
                     std::span<const int32_t> output, Scratch& s) {
  const bool rep = p.repetition_penalty != 1.0f;
  const bool pres_freq = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (!rep && !pres_freq) return;
  if (static_cast<int64_t>(s.seen.size()) < vocab) s.seen.assign(vocab, 0);
  if (static_cast<int64_t>(s.counts.size()) < vocab) s.counts.assign(vocab, 0);
  auto valid = [vocab](int32_t id) { return id >= 0 && id < vocab; };
  if (rep) {
    // vLLM: divide positive logits, multiply negative ones, once per distinct token.
    for (auto ids : {prompt, output})
      for (int32_t id : ids)
        if (valid(id) && !s.seen[id]) {
          s.seen[id] = 1;
          l[id] = l[id] > 0 ? l[id] / p.repetition_penalty : l[id] * p.repetition_penalty;
        }
    for (auto ids : {prompt, output})
      for (int32_t id : ids)
        if (valid(id)) s.seen[id] = 0;
  }
  if (pres_freq) {
    for (int32_t id : output)
      if (valid(id)) ++s.counts[id];
    for (int32_t id : output)
      if (valid(id) && s.counts[id] > 0) {
        l[id] -= p.frequency_penalty * static_cast<float>(s.counts[id]) + p.presence_penalty;
        s.counts[id] = 0;  // each distinct token once; also resets the scratch
      }
  }
}

// vLLM's order: allowed_token_ids, bad_words, then logit_bias and min_tokens, all before
// the penalties. Ids outside the vocabulary are skipped (the API refuses them earlier).
void apply_bias_and_masks(float* l, int64_t vocab, const SamplingParams& p, std::span<const int32_t> output,
                          Scratch& s) {
  const size_t num_output = output.size();
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  auto valid = [vocab](int32_t id) { return id >= 0 && id < vocab; };
  if (!p.allowed_token_ids.empty()) {
    if (static_cast<int64_t>(s.seen.size()) < vocab) s.seen.assign(vocab, 0);
    for (int32_t id : p.allowed_token_ids)
      if (valid(id)) s.seen[id] = 1;
    for (int64_t i = 0; i < vocab; ++i) {
      if (!s.seen[i]) l[i] = kMasked;
      s.seen[i] = 0;
    }
  }
  apply_bad_words(l, vocab, p.bad_words_token_ids, output);
  for (const auto& [id, bias] : p.logit_bias)
    if (valid(id)) l[id] += bias;
  if (static_cast<int64_t>(num_output) < p.min_tokens && !p.min_tokens_banned_ids.empty()) {
    // Unless that would leave nothing to sample (allowed_token_ids only of stop tokens).
    bool other = false;
    if (static_cast<int64_t>(s.seen.size()) < vocab) s.seen.assign(vocab, 0);
    for (int32_t id : p.min_tokens_banned_ids)
      if (valid(id)) s.seen[id] = 1;
    for (int64_t i = 0; i < vocab && !other; ++i) other = !s.seen[i] && l[i] != kMasked;
    for (int32_t id : p.min_tokens_banned_ids)
      if (valid(id)) {
        s.seen[id] = 0;
        if (other) l[id] = kMasked;
      }
  }
}

int32_t argmax(const float* l, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i)
    if (l[i] > l[best]) best = i;  // strict: the first index wins ties
  return static_cast<int32_t>(best);
}

// Random sampling's candidates, as sample() draws from them: `l` becomes the
// unnormalised probabilities exp((l - max) / T), and s.idx[0, returned) the ids
// that survive min_p, top_k and top_p (sorted by probability when top_p applies).
size_t keep_candidates(float* l, int64_t vocab, const SamplingParams& p, Scratch& s) {
  const float inv_t = 1.0f / p.temperature;
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i) mx = std::max(mx, l[i]);
  for (int64_t i = 0; i < vocab; ++i) l[i] = std::exp((l[i] - mx) * inv_t);  // unnormalised, max is 1
  s.idx.resize(vocab);
  std::iota(s.idx.begin(), s.idx.end(), 0);
  auto begin = s.idx.begin();
  auto end = s.idx.end();
  auto by_prob = [l](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  if (p.min_p > 0.0f) end = std::remove_if(begin, end, [l, &p](int32_t i) { return l[i] < p.min_p; });
  if (p.top_k > 0 && p.top_k < end - begin) {
    std::nth_element(begin, begin + p.top_k, end, by_prob);
    end = begin + p.top_k;
  }
  if (p.top_p < 1.0f) {
    std::sort(begin, end, by_prob);
    double total = 0;
    for (auto it = begin; it != end; ++it) total += l[*it];
    double cum = 0;
    auto it = begin;
    for (; it != end; ++it) {
      cum += l[*it];
      if (cum >= p.top_p * total) {
        ++it;
        break;
      }
    }
    end = it;
  }
  return static_cast<size_t>(end - begin);
}

}  // namespace

void apply_bad_words(float* logits, int64_t vocab, std::span<const std::vector<int32_t>> bad_words_token_ids,
                     std::span<const int32_t> output_ids) {
  for (const auto& word : bad_words_token_ids) {
    if (word.empty()) continue;
    const size_t prefix = word.size() - 1;
    if (prefix > output_ids.size()) continue;  // the output is too short to end with the prefix
    if (!std::equal(word.begin(), word.end() - 1, output_ids.end() - static_cast<std::ptrdiff_t>(prefix))) continue;
    const int32_t last = word.back();
    if (last >= 0 && last < vocab) logits[last] = -std::numeric_limits<float>::infinity();
  }
}

uint64_t derive_step_seed(uint64_t request_seed, uint64_t num_output_tokens) {
  return splitmix64(splitmix64(request_seed) ^ (num_output_tokens * 0xd1b54a32d192ed03ULL));
}

SampleResult sample(const float* logits, int64_t vocab, const SamplingParams& p, std::span<const int32_t> prompt_ids,
                    std::span<const int32_t> output_ids, uint64_t seed_for_this_step) {
  TROUPE_CHECK(vocab > 0 && logits != nullptr, "sample() needs a non-empty logits row");
  Scratch& s = scratch();
  s.work.assign(logits, logits + vocab);
  float* l = s.work.data();
  apply_bias_and_masks(l, vocab, p, output_ids, s);
  apply_penalties(l, vocab, p, prompt_ids, output_ids, s);

  int32_t token = 0;
  if (p.greedy()) {
    token = argmax(l, vocab);
  } else {
    const size_t kept = keep_candidates(l, vocab, p, s);
    auto begin = s.idx.begin();
    auto end = begin + static_cast<std::ptrdiff_t>(kept);
    if (begin == end) {  // cannot happen (max prob is 1 >= min_p), but never sample from nothing
      token = argmax(logits, vocab);
    } else {
      double total = 0;
      for (auto it = begin; it != end; ++it) total += l[*it];
      const double u = static_cast<double>(splitmix64(seed_for_this_step) >> 11) * 0x1.0p-53 * total;
      double cum = 0;
      token = *(end - 1);
      for (auto it = begin; it != end; ++it) {
        cum += l[*it];
        if (u < cum) {
          token = *it;
          break;
        }
      }
    }
  }

  SampleResult r;
  r.token = token;
  add_logprobs(r, logits, vocab, p.logprobs);
  return r;
}

void add_logprobs(SampleResult& r, const float* logits, int64_t vocab, int32_t num_logprobs) {
  // Log-probabilities of the raw model distribution (vLLM's default logprobs mode),
  // only when asked for: a log-sum-exp over the whole vocabulary per token.
  if (num_logprobs < 0) return;
  Scratch& s = scratch();
  const int32_t token = r.token;
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  r.logprob = logits[token] - lse;
  r.top_logprobs.clear();
  if (num_logprobs > 0) {
    const int64_t n = std::min<int64_t>(num_logprobs, vocab);
    s.idx.resize(vocab);
    std::iota(s.idx.begin(), s.idx.end(), 0);
    std::partial_sort(s.idx.begin(), s.idx.begin() + n, s.idx.end(), [logits](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int64_t i = 0; i < n; ++i) r.top_logprobs.emplace_back(s.idx[i], logits[s.idx[i]] - lse);
  }
}

void target_probs(const float* logits, int64_t vocab, const SamplingParams& p, std::span<const int32_t> prompt_ids,
                  std::span<const int32_t> output_ids, std::vector<float>& probs) {
  TROUPE_CHECK(vocab > 0 && logits != nullptr, "target_probs() needs a non-empty logits row");
  TROUPE_CHECK(!p.greedy(), "target_probs() is for random sampling");
  Scratch& s = scratch();
  s.work.assign(logits, logits + vocab);
  float* l = s.work.data();
  apply_bias_and_masks(l, vocab, p, output_ids, s);
  apply_penalties(l, vocab, p, prompt_ids, output_ids, s);
  const size_t kept = keep_candidates(l, vocab, p, s);
  probs.assign(static_cast<size_t>(vocab), 0.0f);
  double total = 0;
  for (size_t i = 0; i < kept; ++i) total += l[s.idx[i]];
  if (kept == 0 || !(total > 0)) {
    probs[static_cast<size_t>(argmax(logits, vocab))] = 1.0f;
    return;
  }
  for (size_t i = 0; i < kept; ++i) probs[static_cast<size_t>(s.idx[i])] = static_cast<float>(l[s.idx[i]] / total);
}

double uniform01(uint64_t seed) { return static_cast<double>(splitmix64(seed) >> 11) * 0x1.0p-53; }

std::optional<TokenSelection> device_selection(const SamplingParams& p, size_t num_output_tokens,
                                               uint64_t seed_for_this_step) {
  if (p.logprobs >= 0 || p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f)
    return std::nullopt;
  if (!p.logit_bias.empty() || !p.allowed_token_ids.empty() || !p.bad_words_token_ids.empty() ||
      !p.structured_output.empty() ||
      static_cast<int64_t>(num_output_tokens) < p.min_tokens)
    return std::nullopt;
  TokenSelection s;
  s.temperature = p.greedy() ? 0.0f : p.temperature;
  s.top_p = p.top_p;
  s.min_p = p.min_p;
  s.top_k = p.top_k;
  s.u = p.greedy() ? 0.0 : uniform01(seed_for_this_step);
  return s;
}

}  // namespace troupe::sampling

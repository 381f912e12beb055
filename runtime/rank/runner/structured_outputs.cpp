#include "runtime/rank/runner/structured_outputs.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <string_view>
#include <utility>

namespace troupe::engine {

void TokenMasks::reset(size_t rows, int64_t vocab_size) {
  vocab_size_ = vocab_size;
  words_ = static_cast<size_t>((vocab_size + 63) / 64);
  masked_.assign(rows, 0);  // allowed_ grows when a row is masked: steps without a mask need none
}

void TokenMasks::set(size_t row, const std::vector<uint64_t>& allowed) {
  masked_[row] = 1;
  if (allowed_.size() < masked_.size() * words_) allowed_.resize(masked_.size() * words_);
  auto out = allowed_.begin() + static_cast<ptrdiff_t>(row * words_);
  std::fill_n(out, words_, uint64_t{0});
  std::copy_n(allowed.begin(), std::min(words_, allowed.size()), out);
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

StructuredOutputs::StructuredOutputs(TokenizerLoader load, int64_t vocab_size)
    : load_(std::move(load)), vocab_size_(vocab_size) {}

StructuredOutputs::~StructuredOutputs() = default;

Status StructuredOutputs::add(const SamplingState& request) {
  states_.erase(request.request_id);
  const std::string& kind = request.params.structured_output;
  if (kind.empty()) return {};
  if (!masker_) {
    auto tok = load_();
    if (!tok) return tok.status();
    const auto& t = **tok;
    texts_.resize(static_cast<size_t>(t.vocab_size()));
    for (int32_t id = 0; id < t.vocab_size(); ++id) texts_[static_cast<size_t>(id)] = t.decode({id}, /*skip_special=*/true);
    masker_ = std::make_unique<structured::JsonTokenMasker>(texts_, t.eog_ids(), vocab_size_);
  }
  if (kind == "choice") {
    State state{nullptr, structured::JsonMatcher(), request.params.choices, {}};
    for (int32_t token : request.output_token_ids) state.output += text(token);
    states_.insert_or_assign(request.request_id, std::move(state));
    return {};
  }
  std::shared_ptr<const structured::CompiledSchema> schema;
  if (kind == "json_object") {
    schema = structured::json_object_schema();
  } else if (kind == "json_schema") {
    auto& cached = schemas_[request.params.json_schema];
    if (!cached) {
      if (schemas_.size() > 64) {  // many distinct schemas: start over (their masks age out of the cache)
        schemas_.clear();
        return add(request);
      }
      auto compiled = structured::compile_json_schema(request.params.json_schema);
      if (!compiled) {
        schemas_.erase(request.params.json_schema);
        return compiled.status();
      }
      cached = *compiled;
    }
    schema = cached;
  } else {
    return invalid_argument("structured output '" + kind +
                            "' is not implemented (json_object, json_schema and choice are)");
  }
  State state{schema, structured::JsonMatcher(schema.get()), {}, {}};
  for (int32_t token : request.output_token_ids) (void)state.matcher.feed(text(token));
  states_.insert_or_assign(request.request_id, std::move(state));
  return {};
}

const std::string& StructuredOutputs::text(int32_t token) const {
  static const std::string kNone;
  return token >= 0 && static_cast<size_t>(token) < texts_.size() ? texts_[static_cast<size_t>(token)] : kNone;
}

void StructuredOutputs::compute_masks(const std::vector<std::string>& sample_ids,
                                      const std::vector<std::vector<int32_t>>& drafts, TokenMasks& masks) {
  auto drafts_of = [&](size_t i) {
    return i < drafts.size() ? std::span<const int32_t>(drafts[i]) : std::span<const int32_t>();
  };
  size_t rows = 0;
  for (size_t i = 0; i < sample_ids.size(); ++i) rows += 1 + drafts_of(i).size();
  masks.reset(rows, masker_ ? masker_->vocab_size() : vocab_size_);
  size_t first = 0;
  for (size_t i = 0; i < sample_ids.size(); ++i) {
    auto it = states_.find(sample_ids[i]);
    if (it != states_.end() && masker_) mask_request(it->second, drafts_of(i), first, masks);
    first += 1 + drafts_of(i).size();
  }
}

void StructuredOutputs::mask_request(const State& state, std::span<const int32_t> drafts, size_t first,
                                     TokenMasks& masks) {
  if (!state.schema) {  // a choice: the output so far, extended along the drafts
    std::string output = state.output;
    for (size_t j = 0; j <= drafts.size(); ++j) {
      masks.set(first + j, allowed_choices(state, output));
      if (j < drafts.size()) output += text(drafts[j]);
    }
    return;
  }
  structured::JsonMatcher matcher = state.matcher;
  for (size_t j = 0; j <= drafts.size(); ++j) {
    masks.set(first + j, masker_->allowed(matcher));
    if (j < drafts.size() && !matcher.feed(text(drafts[j]))) break;
  }
}

std::vector<uint64_t> StructuredOutputs::allowed_choices(const State& state, const std::string& output) const {
  std::vector<std::string_view> rests;
  bool whole = false;
  for (const auto& c : state.choices) {
    if (c.size() < output.size() || c.compare(0, output.size(), output) != 0) continue;
    if (c.size() == output.size()) {
      whole = true;
    } else {
      rests.emplace_back(std::string_view(c).substr(output.size()));
    }
  }
  return masker_->allowed_choices(rests, whole);
}

void StructuredOutputs::advance(const std::string& request_id, int32_t token) {
  auto it = states_.find(request_id);
  if (it == states_.end()) return;
  if (it->second.schema) {
    (void)it->second.matcher.feed(text(token));
  } else {
    it->second.output += text(token);
  }
}

void StructuredOutputs::advance(const std::vector<std::string>& sample_ids, const StepOutput& out) {
  size_t t = 0;
  for (size_t i = 0; i < sample_ids.size(); ++i) {
    const size_t n = 1 + (i < out.num_accepted.size() ? static_cast<size_t>(out.num_accepted[i]) : 0);
    for (size_t k = 0; k < n && t < out.tokens.size(); ++k) advance(sample_ids[i], out.tokens[t++].token);
  }
}

}  // namespace troupe::engine

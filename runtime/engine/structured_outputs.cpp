#include "runtime/engine/structured_outputs.hpp"

#include <utility>

namespace troupe::engine {

StructuredOutputs::StructuredOutputs(TokenizerLoader load, int64_t vocab_size)
    : load_(std::move(load)), vocab_size_(vocab_size) {}

StructuredOutputs::~StructuredOutputs() = default;

Status StructuredOutputs::add(const SamplingState& request) {
  states_.erase(request.request_id);
  if (request.params.structured_output.empty()) return {};
  if (request.params.structured_output != "json_object")
    return invalid_argument("structured output '" + request.params.structured_output +
                            "' is not implemented (json_object is)");
  if (!masker_) {
    auto tok = load_();
    if (!tok) return tok.status();
    const auto& t = **tok;
    texts_.resize(static_cast<size_t>(t.vocab_size()));
    for (int32_t id = 0; id < t.vocab_size(); ++id) texts_[static_cast<size_t>(id)] = t.decode({id}, /*skip_special=*/true);
    masker_ = std::make_unique<structured::JsonTokenMasker>(texts_, t.eog_ids(), vocab_size_);
  }
  structured::JsonMatcher state;
  for (int32_t token : request.output_token_ids) (void)state.feed(text(token));
  states_[request.request_id] = state;
  return {};
}

const std::string& StructuredOutputs::text(int32_t token) const {
  static const std::string kNone;
  return token >= 0 && static_cast<size_t>(token) < texts_.size() ? texts_[static_cast<size_t>(token)] : kNone;
}

void StructuredOutputs::mask_rows(const std::string& request_id, float* first_row, int64_t vocab,
                                  std::span<const int32_t> drafts) {
  auto it = states_.find(request_id);
  if (it == states_.end() || !masker_ || vocab != masker_->vocab_size()) return;
  structured::JsonMatcher state = it->second;
  for (size_t j = 0; j <= drafts.size(); ++j) {
    masker_->mask(state, first_row + static_cast<int64_t>(j) * vocab);
    if (j < drafts.size() && !state.feed(text(drafts[j]))) break;
  }
}

void StructuredOutputs::advance(const std::string& request_id, int32_t token) {
  auto it = states_.find(request_id);
  if (it != states_.end()) (void)it->second.feed(text(token));
}

}  // namespace troupe::engine

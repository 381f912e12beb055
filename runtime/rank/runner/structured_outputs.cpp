#include "runtime/rank/runner/structured_outputs.hpp"

#include <utility>

namespace troupe::engine {

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

void StructuredOutputs::mask_rows(const std::string& request_id, float* first_row, int64_t vocab,
                                  std::span<const int32_t> drafts) {
  auto it = states_.find(request_id);
  if (it == states_.end() || !masker_ || vocab != masker_->vocab_size()) return;
  if (!it->second.schema) {  // a choice: the output so far, extended along the drafts
    std::string output = it->second.output;
    for (size_t j = 0; j <= drafts.size(); ++j) {
      mask_choice(it->second, output, first_row + static_cast<int64_t>(j) * vocab);
      if (j < drafts.size()) output += text(drafts[j]);
    }
    return;
  }
  structured::JsonMatcher state = it->second.matcher;
  for (size_t j = 0; j <= drafts.size(); ++j) {
    masker_->mask(state, first_row + static_cast<int64_t>(j) * vocab);
    if (j < drafts.size() && !state.feed(text(drafts[j]))) break;
  }
}

void StructuredOutputs::mask_choice(const State& state, const std::string& output, float* row) const {
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
  masker_->mask_choices(rests, whole, row);
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

}  // namespace troupe::engine

// Example general plugin: registers the logits processor "banned_words".
// A request that sends
//   {"vllm_xargs": {"banned_words": ["dragon", "Lily"]}}
// never gets any of those strings in its generated text (case-sensitive, also
// inside longer words); the other rows of the batch are left untouched.
// Enable it with `--logits-processors banned_words`.
//
// How: the output text is the concatenation of its tokens' texts (the
// TokenizerView's token_text). Before each step, a token is banned (its logit
// set to -infinity) when appending its text to the output so far would
// complete a banned word: either its text contains the word, or the output
// ends with the word's first k bytes and the token's text starts with the
// rest. Checking whole texts rather than the words' tokenizations also
// catches a word spelled with other tokens than its usual ones.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "troupe/logits_processor.hpp"
#include "troupe/plugin.hpp"

namespace {

using json = nlohmann::json;

constexpr size_t kMaxWords = 64;
constexpr size_t kMaxWordBytes = 256;

/// The request's banned words, or an error naming what is wrong with its vllm_xargs.
troupe::Result<std::vector<std::string>> parse_words(std::string_view args_json) {
  const json args = json::parse(args_json, nullptr, /*allow_exceptions=*/false);
  if (args.is_discarded() || !args.is_object()) return troupe::invalid_argument("vllm_xargs must be a JSON object");
  const auto it = args.find("banned_words");
  std::vector<std::string> words;
  if (it == args.end()) return words;  // not this processor's request
  if (!it->is_array()) return troupe::invalid_argument("vllm_xargs.banned_words must be a list of strings");
  if (it->size() > kMaxWords)
    return troupe::invalid_argument("vllm_xargs.banned_words: at most " + std::to_string(kMaxWords) + " words");
  for (const auto& w : *it) {
    if (!w.is_string()) return troupe::invalid_argument("vllm_xargs.banned_words must be a list of strings");
    std::string word = w.get<std::string>();
    if (word.empty()) return troupe::invalid_argument("vllm_xargs.banned_words: a word is empty");
    if (word.size() > kMaxWordBytes)
      return troupe::invalid_argument("vllm_xargs.banned_words: a word is longer than " +
                                      std::to_string(kMaxWordBytes) + " bytes");
    words.push_back(std::move(word));
  }
  return words;
}

class BannedWords final : public troupe::LogitsProcessor {
 public:
  explicit BannedWords(const troupe::LogitsProcessorContext& context)
      : tokenizer_(context.tokenizer), vocab_size_(context.vocab_size) {}

  troupe::Status validate_request(const troupe::LogitsRequest& request) const override {
    return parse_words(request.args_json).status();
  }

  troupe::Status add_request(const troupe::LogitsRequest& request) override {
    auto words = parse_words(request.args_json);
    if (!words) return words.status();
    const std::string id(request.request_id);
    requests_.erase(id);
    if (words->empty()) return {};
    load_texts();
    State state;
    for (const std::string& word : *words) {
      // Tokens whose own text holds the word are banned at every step.
      for (int32_t t = 0; t < static_cast<int32_t>(texts_.size()); ++t)
        if (texts_[t].find(word) != std::string::npos) state.always.push_back(t);
      state.longest = std::max(state.longest, word.size());
    }
    std::sort(state.always.begin(), state.always.end());
    state.always.erase(std::unique(state.always.begin(), state.always.end()), state.always.end());
    state.words = std::move(words).value();
    requests_.emplace(id, std::move(state));
    return {};
  }

  void remove_request(std::string_view request_id) override { requests_.erase(std::string(request_id)); }

  troupe::Status apply(const troupe::LogitsBatch& batch) override {
    constexpr float kBanned = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < batch.rows.size(); ++i) {
      const auto it = requests_.find(std::string(batch.rows[i].request_id));
      if (it == requests_.end()) continue;  // no banned words: this row stays as it is
      const State& state = it->second;
      float* logits = batch.row(i);
      for (int32_t t : state.always) logits[t] = kBanned;
      // The output's last longest-1 bytes: a word can start there and end in the next token.
      const std::string tail = output_tail(batch.rows[i].output_token_ids, state.longest - 1);
      for (const std::string& word : state.words) {
        for (size_t k = 1; k < word.size(); ++k) {
          if (tail.size() < k || tail.compare(tail.size() - k, k, word, 0, k) != 0) continue;
          const std::string_view rest = std::string_view(word).substr(k);
          for (int32_t t = 0; t < static_cast<int32_t>(texts_.size()); ++t)
            if (std::string_view(texts_[t]).starts_with(rest)) logits[t] = kBanned;
        }
      }
    }
    return {};
  }

 private:
  struct State {
    std::vector<std::string> words;
    std::vector<int32_t> always;  // sorted token ids whose text contains a word
    size_t longest = 0;           // bytes of the longest word
  };

  /// Every token's text, once (token ids past the tokenizer's vocabulary have none).
  void load_texts() {
    if (!texts_.empty() || !tokenizer_) return;
    const int64_t n = std::min<int64_t>(vocab_size_, tokenizer_->vocab_size());
    texts_.resize(static_cast<size_t>(n));
    for (int32_t t = 0; t < n; ++t) texts_[t] = tokenizer_->token_text(t);
  }

  /// The last `bytes` bytes (or fewer) of the text of `ids`.
  std::string output_tail(std::span<const int32_t> ids, size_t bytes) const {
    std::string tail;
    for (auto it = ids.rbegin(); it != ids.rend() && tail.size() < bytes; ++it)
      if (*it >= 0 && *it < static_cast<int32_t>(texts_.size())) tail.insert(0, texts_[*it]);
    if (tail.size() > bytes) tail.erase(0, tail.size() - bytes);
    return tail;
  }

  const troupe::TokenizerView* tokenizer_;
  int64_t vocab_size_;
  std::vector<std::string> texts_;
  std::unordered_map<std::string, State> requests_;
};

troupe::Result<std::unique_ptr<troupe::LogitsProcessor>> make_banned_words(
    const troupe::LogitsProcessorContext& context) {
  if (!context.tokenizer) return troupe::invalid_argument("banned_words needs the model's tokenizer");
  return std::unique_ptr<troupe::LogitsProcessor>(std::make_unique<BannedWords>(context));
}

troupe::Status register_banned_words() {
  troupe::logits_processor_registry::register_processor("banned_words", &make_banned_words);
  return {};
}

}  // namespace

TROUPE_PLUGIN(troupe::general_plugin("banned_words", &register_banned_words))

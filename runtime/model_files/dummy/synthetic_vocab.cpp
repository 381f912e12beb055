#include "runtime/model_files/dummy/synthetic_vocab.hpp"

#include <array>
#include <string_view>

#include "runtime/request/tokenizer/unicode.hpp"

namespace troupe::dummy {
namespace {

constexpr int32_t kNormal = 1;
constexpr int32_t kControl = 3;
constexpr int64_t kNumSpecial = 4;

// Bytes from most to least common in English-like text; the rest follow in byte order.
std::array<uint8_t, 256> byte_ranking() {
  constexpr std::string_view kCommon =
      " etaoinsrhldcumfpgwybvkxjqzETAOINSRHLDCUMFPGWYBVKXJQZ0123456789.,'\"-?!:;()\n";
  std::array<uint8_t, 256> order{};
  std::array<bool, 256> used{};
  size_t n = 0;
  for (char c : kCommon) {
    const auto b = static_cast<uint8_t>(c);
    if (!used[b]) order[n++] = b, used[b] = true;
  }
  for (int b = 0; b < 256; ++b)
    if (!used[b]) order[n++] = static_cast<uint8_t>(b);
  return order;
}

// ChatML, the format the <|im_start|> / <|im_end|> tokens serve.
constexpr const char* kChatTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

}  // namespace

Result<SyntheticVocab> make_synthetic_vocab(int64_t n_vocab) {
  constexpr int64_t kMaxMerges = 256ll * 256 + 256ll * 256 * 256;
  const int64_t n_merges = n_vocab - 256 - kNumSpecial;
  if (n_merges < 1 || n_merges > kMaxMerges)
    return invalid_argument("a synthetic vocabulary holds " + std::to_string(256 + kNumSpecial + 1) + " to " +
                            std::to_string(256 + kNumSpecial + kMaxMerges) + " tokens, not " + std::to_string(n_vocab));
  SyntheticVocab v;
  v.tokens.reserve(static_cast<size_t>(n_vocab));
  v.types.assign(static_cast<size_t>(n_vocab), kNormal);
  v.merges.reserve(static_cast<size_t>(n_merges));
  for (int b = 0; b < 256; ++b) v.tokens.push_back(tokenizer::byte_to_bpe_char(static_cast<uint8_t>(b)));

  const std::array<uint8_t, 256> order = byte_ranking();
  auto text = [&](int rank) -> const std::string& { return v.tokens[order[static_cast<size_t>(rank)]]; };
  auto full = [&] { return static_cast<int64_t>(v.merges.size()) == n_merges; };
  auto add = [&](const std::string& left, const std::string& right) {
    v.merges.push_back(left + " " + right);
    v.tokens.push_back(left + right);
  };
  // Pairs, shell by shell: shell k holds the pairs whose less common byte has rank k.
  for (int k = 0; k < 256 && !full(); ++k) {
    for (int j = 0; j < k && !full(); ++j) {
      add(text(j), text(k));
      if (!full()) add(text(k), text(j));
    }
    if (!full()) add(text(k), text(k));
  }
  // Then (pair, byte) triples by the same shells.
  for (int k = 0; k < 256 && !full(); ++k)
    for (int i = 0; i <= k && !full(); ++i)
      for (int j = 0; j <= k && !full(); ++j)
        for (int l = 0; l <= k && !full(); ++l) {
          if (i != k && j != k && l != k) continue;
          add(text(i) + text(j), text(l));
        }

  for (const char* s : {"<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"}) {
    v.types[v.tokens.size()] = kControl;
    v.tokens.emplace_back(s);
  }
  v.bos_id = static_cast<int32_t>(n_vocab - 4);
  v.eos_id = static_cast<int32_t>(n_vocab - 3);
  v.im_start_id = static_cast<int32_t>(n_vocab - 2);
  v.im_end_id = static_cast<int32_t>(n_vocab - 1);
  return v;
}

void add_tokenizer_metadata(const SyntheticVocab& v, gguf::GgufBuilder& b) {
  b.set_string("tokenizer.ggml.model", "gpt2");
  b.set_string("tokenizer.ggml.pre", "gpt-2");
  b.set_string_array("tokenizer.ggml.tokens", v.tokens);
  b.set_i32_array("tokenizer.ggml.token_type", v.types);
  b.set_string_array("tokenizer.ggml.merges", v.merges);
  b.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos_id));
  b.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id));
  b.set_u32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(v.im_end_id));
  b.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.eos_id));
  b.set_bool("tokenizer.ggml.add_bos_token", true);
  b.set_bool("tokenizer.ggml.add_eos_token", false);
  b.set_string("tokenizer.chat_template", kChatTemplate);
}

}  // namespace troupe::dummy

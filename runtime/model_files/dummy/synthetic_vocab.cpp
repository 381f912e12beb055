#include "runtime/model_files/dummy/synthetic_vocab.hpp"

#include <array>
#include <string_view>
#include <vector>

#include "runtime/text/tokenizer/unicode.hpp"

namespace troupe::dummy {
namespace {

constexpr int32_t kNormal = 1;
constexpr int32_t kControl = 3;

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

// The control tokens of a style, in id order, and which of them play which part (-1: none).
struct Specials {
  std::vector<const char*> tokens;
  int bos, eos, eot, unk, pad;
  const char* chat_template;
  bool add_bos = true;
};

// ChatML, the format the <|im_start|> / <|im_end|> tokens serve.
constexpr const char* kChatMlTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
// Phi-3's turns: <|role|>, the text, <|end|>.
constexpr const char* kPhi3Template =
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}";
// Gemma's turns: <start_of_turn>user|model, the text, <end_of_turn>.
constexpr const char* kGemmaTemplate =
    "{{ bos_token }}{% for message in messages %}{% set role = 'model' if message['role'] == 'assistant' else "
    "message['role'] %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}";

Specials specials_of(VocabStyle style) {
  switch (style) {
    case VocabStyle::phi3:
      return {{"<unk>", "<s>", "</s>", "<|endoftext|>", "<|assistant|>", "<|system|>", "<|end|>", "<|user|>"},
              1, 3, 6, 0, 3, kPhi3Template};
    case VocabStyle::gemma:
      return {{"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"}, 2, 1, 5, 3, 0, kGemmaTemplate};
    case VocabStyle::gpt2:  // GPT-2's one special token (id 50256 in its 50257), no template
      return {{"<|endoftext|>"}, 0, 0, -1, 0, -1, "", false};
    case VocabStyle::chatml:
      break;
  }
  return {{"<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"}, 0, 1, 3, -1, 1, kChatMlTemplate};
}

}  // namespace

VocabStyle vocab_style_of(std::string_view arch) {
  if (arch == "phi3") return VocabStyle::phi3;
  if (arch == "gemma2" || arch == "gemma3") return VocabStyle::gemma;
  if (arch == "gpt2") return VocabStyle::gpt2;
  return VocabStyle::chatml;
}

Result<SyntheticVocab> make_synthetic_vocab(int64_t n_vocab, VocabStyle style) {
  constexpr int64_t kMaxMerges = 256ll * 256 + 256ll * 256 * 256;
  const Specials sp = specials_of(style);
  const auto n_special = static_cast<int64_t>(sp.tokens.size());
  const int64_t n_merges = n_vocab - 256 - n_special;
  if (n_merges < 1 || n_merges > kMaxMerges)
    return invalid_argument("a synthetic vocabulary holds " + std::to_string(256 + n_special + 1) + " to " +
                            std::to_string(256 + n_special + kMaxMerges) + " tokens, not " + std::to_string(n_vocab));
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

  const auto first = static_cast<int32_t>(n_vocab - n_special);
  for (const char* s : sp.tokens) {
    v.types[v.tokens.size()] = kControl;
    v.tokens.emplace_back(s);
  }
  auto id = [first](int index) { return index < 0 ? -1 : first + index; };
  v.bos_id = id(sp.bos);
  v.eos_id = id(sp.eos);
  v.eot_id = id(sp.eot);
  v.unk_id = id(sp.unk);
  v.pad_id = id(sp.pad);
  v.chat_template = sp.chat_template;
  v.add_bos = sp.add_bos;
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
  if (v.eot_id >= 0) b.set_u32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(v.eot_id));
  if (v.unk_id >= 0) b.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk_id));
  if (v.pad_id >= 0) b.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad_id));
  b.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  b.set_bool("tokenizer.ggml.add_eos_token", false);
  if (!v.chat_template.empty()) b.set_string("tokenizer.chat_template", v.chat_template);
}

}  // namespace troupe::dummy

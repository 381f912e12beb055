// Vocab -> tokenizer.json / tokenizer_config.json (see the header for the layouts).
// Built with ordered_json so the files read like the real ones (tokens in id order).
#include "runtime/text/tokenizer/tokenizer_json_writer.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <unordered_map>

#include "runtime/text/tokenizer/pretokenize.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"

namespace troupe::tokenizer {

namespace {

using ojson = nlohmann::ordered_json;

constexpr const char* kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
constexpr const char* kVocabPlaceholder = "\x01vocab\x01";  // replaced by the vocab's text

// Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF),
// what a JSON writer may emit.
bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0, min = 0;
    if (b0 < 0x80) {
      ++i;
      continue;
    } else if ((b0 & 0xE0) == 0xC0) {
      n = 2, cp = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
      n = 3, cp = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
      n = 4, cp = b0 & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = cp << 6 | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

// Byte offsets of the code point boundaries inside `s` (valid UTF-8), 0 and size() excluded.
std::vector<size_t> inner_boundaries(std::string_view s) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) cuts.push_back(i);
  }
  return cuts;
}

bool is_added(TokenType t) {
  return t == TokenType::control || t == TokenType::unknown || t == TokenType::user_defined;
}

ojson byte_level(bool add_prefix_space, bool trim_offsets, bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", add_prefix_space},
          {"trim_offsets", trim_offsets},
          {"use_regex", use_regex}};
}

ojson replace(const std::string& from, const std::string& to) {
  return {{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
}

ojson template_processing(const Vocab& v, bool add_bos, bool add_eos) {
  ojson single = ojson::array(), pair = ojson::array(), specials = ojson::object();
  auto special = [&](int32_t id, int type_id, ojson* out) {
    const std::string& text = v.tokens[static_cast<size_t>(id)];
    out->push_back({{"SpecialToken", {{"id", text}, {"type_id", type_id}}}});
    specials[text] = {{"id", text}, {"ids", {id}}, {"tokens", {text}}};
  };
  auto sequence = [](const char* id, int type_id, ojson* out) {
    out->push_back({{"Sequence", {{"id", id}, {"type_id", type_id}}}});
  };
  if (add_bos) special(v.bos_id, 0, &single);
  sequence("A", 0, &single);
  if (add_eos) special(v.eos_id, 0, &single);
  if (add_bos) special(v.bos_id, 0, &pair);
  sequence("A", 0, &pair);
  if (add_eos) special(v.eos_id, 0, &pair);
  if (add_bos) special(v.bos_id, 1, &pair);
  sequence("B", 1, &pair);
  if (add_eos) special(v.eos_id, 1, &pair);
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}};
}

// Hugging Face's SentencePiece conversion (SentencePieceExtractor): every
// split of a token into two tokens is a merge; merges are ordered by the
// merged token's score, highest first (stable: ties keep id order), and the
// splits of one token by the ids of their two halves. Rank-ordered BPE over
// these merges then merges as SentencePiece's score-ordered BPE does.
std::vector<std::pair<int32_t, int32_t>> merges_from_scores(const Vocab& v,
                                                            const std::unordered_map<std::string_view, int32_t>& ids) {
  const size_t n = v.tokens.size();
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto score = [&](int32_t id) { return v.scores.empty() ? 0.0f : v.scores[static_cast<size_t>(id)]; };
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return score(a) > score(b); });
  std::vector<std::pair<int32_t, int32_t>> merges, local;
  for (int32_t id : order) {
    const std::string_view text = v.tokens[static_cast<size_t>(id)];
    auto it = ids.find(text);
    if (it == ids.end() || it->second != id) continue;  // a duplicate text: the map's token stands for it
    local.clear();
    for (size_t cut : inner_boundaries(text)) {
      auto l = ids.find(text.substr(0, cut));
      auto r = ids.find(text.substr(cut));
      if (l != ids.end() && r != ids.end()) local.emplace_back(l->second, r->second);
    }
    std::sort(local.begin(), local.end());
    merges.insert(merges.end(), local.begin(), local.end());
  }
  return merges;
}

}  // namespace

Result<HfTokenizerFiles> write_hf_tokenizer(const Vocab& input, const std::string& chat_template) {
  if (input.kind == VocabKind::wpm) {
    return invalid_argument("tokenizer.json writer: WordPiece vocabularies are not written (only byte-level and "
                            "SentencePiece-style BPE)");
  }
  if (input.tokens.empty()) return invalid_argument("tokenizer.json writer: the vocabulary is empty");
  // The vocab as the engine settles it: the tokens llama.cpp retypes by their
  // text (</s>, <|im_end|>, ...: control) are written as the added tokens they act as.
  auto settled = Tokenizer::from_vocab(input);
  if (!settled.ok()) return Status(settled.status().code(), "tokenizer.json writer: " + settled.status().message());
  const Vocab& v = (*settled)->vocab();
  const size_t n = v.tokens.size();
  if (!v.types.empty() && v.types.size() != n)
    return invalid_argument("tokenizer.json writer: token types do not match the tokens");
  if (!v.scores.empty() && v.scores.size() != n)
    return invalid_argument("tokenizer.json writer: token scores do not match the tokens");
  auto type_of = [&](size_t i) { return v.types.empty() ? TokenType::normal : v.types[i]; };
  auto valid_id = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < n; };
  const bool spm = v.kind == VocabKind::spm;

  // Texts as the engine keys them: an empty text is "[EMPTY_<id>]"; each text once.
  std::vector<std::string> texts(v.tokens);
  std::unordered_map<std::string_view, int32_t> ids;
  ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (texts[i].empty()) texts[i] = "[EMPTY_" + std::to_string(i) + "]";
    if (!valid_utf8(texts[i])) {
      return invalid_argument("tokenizer.json writer: token " + std::to_string(i) + " is not valid UTF-8");
    }
  }
  for (size_t i = 0; i < n; ++i) {
    auto [it, inserted] = ids.emplace(texts[i], static_cast<int32_t>(i));
    if (!inserted) {
      return invalid_argument("tokenizer.json writer: tokens " + std::to_string(it->second) + " and " +
                              std::to_string(i) + " have the same text, which tokenizer.json cannot hold");
    }
  }
  Vocab named = v;  // the template needs the keyed texts
  named.tokens = texts;

  ojson added = ojson::array();
  // model.vocab is written as text: ordered_json finds keys by linear search,
  // quadratic over a large vocabulary (texts are unique, checked above).
  std::string vocab = "{";
  for (size_t i = 0; i < n; ++i) {
    const TokenType t = type_of(i);
    // SentencePiece-style files keep every token in the model's vocab (Llama 2,
    // Gemma); byte-level ones only the ordinary tokens (Llama 3, Qwen2).
    if (spm || !is_added(t)) {
      if (vocab.size() > 1) vocab += ',';
      vocab += ojson(texts[i]).dump();
      vocab += ':';
      vocab += std::to_string(i);
    }
    if (is_added(t)) {
      added.push_back({{"id", i},
                       {"content", texts[i]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", t != TokenType::user_defined}});
    }
  }

  vocab += '}';
  ojson merges = ojson::array();
  if (spm) {
    for (const auto& [l, r] : merges_from_scores(v, ids)) {
      merges.push_back({texts[static_cast<size_t>(l)], texts[static_cast<size_t>(r)]});
    }
  } else {
    for (size_t r = 0; r < v.merges.size(); ++r) {
      const std::string& m = v.merges[r];
      const size_t sp = m.find(' ', 1);
      if (sp == std::string::npos || sp + 1 >= m.size() || !valid_utf8(m)) {
        return invalid_argument("tokenizer.json writer: merge " + std::to_string(r) + " is malformed");
      }
      merges.push_back({m.substr(0, sp), m.substr(sp + 1)});
    }
  }

  const bool add_bos = v.add_bos && valid_id(v.bos_id);
  const bool add_eos = v.add_eos && valid_id(v.eos_id);
  const bool unk = valid_id(v.unk_id);
  ojson model = {{"type", "BPE"},
                 {"dropout", nullptr},
                 {"unk_token", spm && unk ? ojson(texts[static_cast<size_t>(v.unk_id)]) : ojson(nullptr)},
                 {"continuing_subword_prefix", nullptr},
                 {"end_of_word_suffix", nullptr},
                 {"fuse_unk", spm},
                 {"byte_fallback", spm},
                 {"ignore_merges", !spm && v.ignore_merges},
                 {"vocab", kVocabPlaceholder},
                 {"merges", std::move(merges)}};

  ojson doc = ojson::object();
  doc["version"] = "1.0";
  doc["truncation"] = nullptr;
  doc["padding"] = nullptr;
  doc["added_tokens"] = std::move(added);
  if (spm) {
    doc["normalizer"] = v.add_space_prefix
                            ? ojson{{"type", "Sequence"},
                                    {"normalizers", {{{"type", "Prepend"}, {"prepend", kSpace}}, replace(" ", kSpace)}}}
                            : replace(" ", kSpace);
    doc["pre_tokenizer"] = nullptr;
    doc["post_processor"] = template_processing(named, add_bos, add_eos);
    ojson decoders = {replace(kSpace, " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}};
    if (v.add_space_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    doc["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
  } else {
    doc["normalizer"] = nullptr;
    switch (v.pre) {
      case PreTokenizer::gpt2: doc["pre_tokenizer"] = byte_level(false, true, true); break;
      case PreTokenizer::smollm:
        doc["pre_tokenizer"] = {{"type", "Sequence"},
                                {"pretokenizers",
                                 {{{"type", "Digits"}, {"individual_digits", true}}, byte_level(false, true, true)}}};
        break;
      case PreTokenizer::llama3:
      case PreTokenizer::qwen2:
      case PreTokenizer::qwen35:
      case PreTokenizer::tekken:
        doc["pre_tokenizer"] = {
            {"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"},
               {"pattern", {{"Regex", std::string(hf_split_regex(v.pre))}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              byte_level(false, true, false)}}};
        break;
    }
    ojson byte_post = byte_level(true, false, true);
    doc["post_processor"] = add_bos || add_eos ? ojson{{"type", "Sequence"},
                                                       {"processors", {byte_post, template_processing(named, add_bos, add_eos)}}}
                                               : byte_post;
    doc["decoder"] = byte_level(true, true, true);
  }
  doc["model"] = std::move(model);

  ojson config = ojson::object();
  config["add_bos_token"] = add_bos;
  config["add_eos_token"] = add_eos;
  auto token_or_null = [&](int32_t id) { return valid_id(id) ? ojson(texts[static_cast<size_t>(id)]) : ojson(nullptr); };
  config["bos_token"] = token_or_null(v.bos_id);
  config["eos_token"] = token_or_null(v.eos_id);
  config["unk_token"] = token_or_null(v.unk_id);
  config["pad_token"] = token_or_null(v.pad_id);
  config["clean_up_tokenization_spaces"] = false;
  config["tokenizer_class"] = "PreTrainedTokenizerFast";
  if (!chat_template.empty()) {
    if (!valid_utf8(chat_template)) return invalid_argument("tokenizer.json writer: the chat template is not valid UTF-8");
    config["chat_template"] = chat_template;
  }

  HfTokenizerFiles files;
  files.tokenizer_json = doc.dump();
  const std::string placeholder = ojson(kVocabPlaceholder).dump();
  const size_t at = files.tokenizer_json.rfind(placeholder);
  if (at == std::string::npos) return internal_error("tokenizer.json writer: lost the vocab placeholder");
  files.tokenizer_json.replace(at, placeholder.size(), vocab);
  files.tokenizer_config_json = config.dump(2);  // small: indented as real files are
  return files;
}

Status write_hf_tokenizer_files(const HfTokenizerFiles& files, const std::string& dir) {
  for (const auto& [name, text] : {std::pair<const char*, const std::string*>{"tokenizer.json", &files.tokenizer_json},
                                   {"tokenizer_config.json", &files.tokenizer_config_json}}) {
    const std::string path = dir + "/" + name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(text->data(), static_cast<std::streamsize>(text->size()));
    out.close();
    if (!out) return invalid_argument(path + ": cannot be written");
  }
  return {};
}

}  // namespace troupe::tokenizer

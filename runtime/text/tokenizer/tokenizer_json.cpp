// tokenizer.json, read without exceptions: every field's JSON type is checked
// before use. Supported (the BERT family): model WordPiece, normalizer
// BertNormalizer or null, pre_tokenizer BertPreTokenizer, post_processor
// TemplateProcessing / BertProcessing or null, decoder WordPiece or null.
#include "runtime/text/tokenizer/tokenizer_json.hpp"

#include <filesystem>
#include <map>
#include <optional>

#include "runtime/text/json/json_io.hpp"
#include "runtime/text/tokenizer/tokenizer.hpp"
#include "runtime/text/tokenizer/tokenizer_json_fields.hpp"

namespace troupe::tokenizer {

namespace {

using json = nlohmann::json;
using json_fields::kMaxTokenizerJsonBytes;
using json_fields::quote;
using json_fields::fill_tokens_by_id;
using json_fields::Reader;
using json_fields::TemplateIds;
using json_fields::read_template;

Status read_normalizer(const Reader& r, const json& doc, WordPieceConfig* c) {
  const json* n = nullptr;
  TROUPE_RETURN_IF_ERROR(r.object(doc, "normalizer", "", &n, false));
  if (n == nullptr) {  // none: text goes to the pre-tokenizer as it is
    c->clean_text = c->handle_chinese_chars = c->strip_accents = c->lowercase = false;
    return {};
  }
  std::string type;
  TROUPE_RETURN_IF_ERROR(r.string(*n, "type", "normalizer.", &type));
  if (type != "BertNormalizer") {
    return r.unsupported("normalizer type " + quote(type) + " is not supported (supported: BertNormalizer, null)");
  }
  c->clean_text = c->handle_chinese_chars = c->lowercase = true;
  TROUPE_RETURN_IF_ERROR(r.boolean(*n, "clean_text", "normalizer.", &c->clean_text));
  TROUPE_RETURN_IF_ERROR(r.boolean(*n, "handle_chinese_chars", "normalizer.", &c->handle_chinese_chars));
  TROUPE_RETURN_IF_ERROR(r.boolean(*n, "lowercase", "normalizer.", &c->lowercase));
  c->strip_accents = c->lowercase;  // null or absent: follow lowercase, as BertNormalizer does
  auto sa = n->find("strip_accents");
  if (sa != n->end() && !sa->is_null()) TROUPE_RETURN_IF_ERROR(r.boolean(*n, "strip_accents", "normalizer.", &c->strip_accents));
  return {};
}

Status read_pre_tokenizer(const Reader& r, const json& doc) {
  const json* p = nullptr;
  TROUPE_RETURN_IF_ERROR(r.object(doc, "pre_tokenizer", "", &p, true));
  std::string type;
  TROUPE_RETURN_IF_ERROR(r.string(*p, "type", "pre_tokenizer.", &type));
  if (type != "BertPreTokenizer") {
    return r.unsupported("pre_tokenizer type " + quote(type) + " is not supported (supported: BertPreTokenizer)");
  }
  return {};
}

Status read_post_processor(const Reader& r, const json& doc, TemplateIds* out) {
  const json* p = nullptr;
  TROUPE_RETURN_IF_ERROR(r.object(doc, "post_processor", "", &p, false));
  if (p == nullptr) return {};
  std::string type;
  TROUPE_RETURN_IF_ERROR(r.string(*p, "type", "post_processor.", &type));
  if (type == "TemplateProcessing") return read_template(r, *p, out);
  if (type == "BertProcessing") {
    // {"sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}
    for (const char* key : {"cls", "sep"}) {
      auto it = p->find(key);
      std::optional<uint64_t> id;
      if (it != p->end() && it->is_array() && it->size() == 2) id = json_io::non_negative_integer((*it)[1]);
      if (!id || *id > static_cast<uint64_t>(INT32_MAX)) {
        return r.bad(std::string("post_processor.") + key + " is not a [token, id] pair");
      }
      (std::string_view(key) == "cls" ? out->prefix : out->suffix) = static_cast<int32_t>(*id);
    }
    return {};
  }
  return r.unsupported("post_processor type " + quote(type) +
                       " is not supported (supported: TemplateProcessing, BertProcessing, null)");
}

Status read_decoder(const Reader& r, const json& doc, WordPieceConfig* c) {
  const json* d = nullptr;
  TROUPE_RETURN_IF_ERROR(r.object(doc, "decoder", "", &d, false));
  c->decode_cleanup = false;
  if (d == nullptr) return {};
  std::string type;
  TROUPE_RETURN_IF_ERROR(r.string(*d, "type", "decoder.", &type));
  if (type != "WordPiece") {
    return r.unsupported("decoder type " + quote(type) + " is not supported (supported: WordPiece, null)");
  }
  c->decode_cleanup = true;
  return r.boolean(*d, "cleanup", "decoder.", &c->decode_cleanup);
}

}  // namespace

Result<Vocab> vocab_from_tokenizer_json(const json& doc, const std::string& name) {
  const Reader r(name);
  if (!doc.is_object()) return r.bad(std::string("the top level is a JSON ") + doc.type_name() + ", expected an object");
  const json* model = nullptr;
  TROUPE_RETURN_IF_ERROR(r.object(doc, "model", "", &model, true));
  std::string type;
  TROUPE_RETURN_IF_ERROR(r.string(*model, "type", "model.", &type));
  if (type == "BPE") return vocab_from_bpe_tokenizer_json(doc, nullptr, name);
  if (type != "WordPiece") {
    return r.unsupported("model.type " + quote(type.empty() ? std::string("(none)") : type) +
                         " is not supported by the tokenizer.json reader (supported: WordPiece, BPE)");
  }

  Vocab v;
  v.kind = VocabKind::wpm;
  WordPieceConfig& c = v.wpm;
  c.normalizer = WordPieceConfig::Normalizer::bert;
  std::string unk = "[UNK]";
  TROUPE_RETURN_IF_ERROR(r.string(*model, "unk_token", "model.", &unk));
  TROUPE_RETURN_IF_ERROR(r.string(*model, "continuing_subword_prefix", "model.", &c.continuing_prefix));
  c.word_prefix.clear();
  int64_t max_chars = c.max_input_chars_per_word;
  TROUPE_RETURN_IF_ERROR(r.count(*model, "max_input_chars_per_word", "model.", INT32_MAX, &max_chars));
  c.max_input_chars_per_word = static_cast<int>(max_chars);

  // Tokens by id: the model's vocab, then the added tokens (same id and text, or new ids).
  const json* vocab = nullptr;
  TROUPE_RETURN_IF_ERROR(r.object(*model, "vocab", "model.", &vocab, true));
  std::map<int64_t, std::pair<std::string, TokenType>> by_id;
  auto add = [&](const std::string& text, int64_t id, TokenType t, const std::string& where) -> Status {
    auto [it, inserted] = by_id.emplace(id, std::make_pair(text, t));
    if (!inserted) {
      if (it->second.first != text) {
        return r.bad(where + ": id " + std::to_string(id) + " is both " + quote(it->second.first) + " and " +
                     quote(text));
      }
      it->second.second = t;
    }
    return {};
  };
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    const std::optional<uint64_t> id = json_io::non_negative_integer(it.value());
    if (!id || *id > static_cast<uint64_t>(INT32_MAX)) {
      return r.bad("model.vocab[" + quote(it.key()) + "] is " + it.value().dump().substr(0, 40) +
                   ", expected a token id");
    }
    TROUPE_RETURN_IF_ERROR(add(it.key(), static_cast<int64_t>(*id), TokenType::normal, "model.vocab"));
  }
  auto added = doc.find("added_tokens");
  if (added != doc.end() && !added->is_null()) {
    if (!added->is_array()) return r.bad(std::string("added_tokens is a JSON ") + added->type_name() + ", expected an array");
    for (size_t i = 0; i < added->size(); ++i) {
      const json& a = (*added)[i];
      const std::string where = "added_tokens[" + std::to_string(i) + "]";
      if (!a.is_object()) return r.bad(where + " is not an object");
      std::string content;
      int64_t id = -1;
      bool special = false;
      TROUPE_RETURN_IF_ERROR(r.string(a, "content", where + ".", &content));
      TROUPE_RETURN_IF_ERROR(r.count(a, "id", where + ".", INT32_MAX, &id));
      TROUPE_RETURN_IF_ERROR(r.boolean(a, "special", where + ".", &special));
      if (id < 0 || content.empty()) return r.bad(where + " needs an id and a non-empty content");
      TROUPE_RETURN_IF_ERROR(add(content, id, special ? TokenType::control : TokenType::user_defined, where));
    }
  }
  TROUPE_RETURN_IF_ERROR(fill_tokens_by_id(r, by_id, v));
  auto find_id = [&](const std::string& text) -> int32_t {
    for (size_t i = 0; i < v.tokens.size(); ++i)
      if (v.tokens[i] == text) return static_cast<int32_t>(i);
    return -1;
  };
  v.unk_id = find_id(unk);
  if (v.unk_id < 0) return r.bad("model.unk_token " + quote(unk) + " is not in the vocabulary");
  if (v.types[v.unk_id] == TokenType::normal) v.types[v.unk_id] = TokenType::unknown;
  v.mask_id = find_id("[MASK]");
  v.pad_id = find_id("[PAD]");
  const json* padding = nullptr;
  TROUPE_RETURN_IF_ERROR(r.object(doc, "padding", "", &padding, false));
  if (padding != nullptr) {
    int64_t pad = v.pad_id;
    TROUPE_RETURN_IF_ERROR(r.count(*padding, "pad_id", "padding.", INT32_MAX, &pad));
    v.pad_id = static_cast<int32_t>(pad);
  }

  TROUPE_RETURN_IF_ERROR(read_normalizer(r, doc, &c));
  TROUPE_RETURN_IF_ERROR(read_pre_tokenizer(r, doc));
  TemplateIds tpl;
  TROUPE_RETURN_IF_ERROR(read_post_processor(r, doc, &tpl));
  TROUPE_RETURN_IF_ERROR(read_decoder(r, doc, &c));
  const int64_t n = static_cast<int64_t>(v.tokens.size());
  for (const auto& [side, id] : {std::make_pair("before", tpl.prefix), std::make_pair("after", tpl.suffix)}) {
    if (id && *id >= n) {
      return r.bad(std::string("post_processor: the special token ") + side + " $A has id " + std::to_string(*id) +
                   ", past the " + std::to_string(n) + " tokens");
    }
  }
  if (tpl.prefix) {
    v.cls_id = v.bos_id = *tpl.prefix;
    v.add_bos = true;
  }
  if (tpl.suffix) {
    v.sep_id = *tpl.suffix;
    v.add_sep = true;
  }
  if (v.cls_id < 0) v.cls_id = find_id("[CLS]");
  if (v.sep_id < 0) v.sep_id = find_id("[SEP]");
  return v;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_tokenizer_json(const std::string& path) {
  auto doc = json_io::read_file(path, kMaxTokenizerJsonBytes);
  if (!doc.ok()) return doc.status();
  const json* model = doc->is_object() ? &*doc : nullptr;
  auto model_it = model ? model->find("model") : json::const_iterator();
  const bool bpe = model && model_it != model->end() && model_it->is_object() &&
                   model_it->value("type", json()) == json("BPE");
  json config;
  if (bpe) {  // tokenizer_config.json beside it, when there is one
    const size_t slash = path.find_last_of('/');
    const std::string config_path =
        (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + "tokenizer_config.json";
    if (std::filesystem::exists(config_path)) {
      auto c = json_io::read_file(config_path, kMaxTokenizerJsonBytes);
      if (!c.ok()) return c.status();
      config = std::move(*c);
    }
  }
  auto vocab = bpe ? vocab_from_bpe_tokenizer_json(*doc, config.is_null() ? nullptr : &config, path)
                   : vocab_from_tokenizer_json(*doc, path);
  if (!vocab.ok()) return vocab.status();
  auto tok = from_vocab(std::move(*vocab));
  if (!tok.ok()) return Status(tok.status().code(), path + ": " + tok.status().message());
  return tok;
}

}  // namespace troupe::tokenizer

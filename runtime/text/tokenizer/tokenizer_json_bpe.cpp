// tokenizer.json with a BPE model: byte-level (Llama 3, Qwen2, Mistral, GPT-2,
// SmolLM) and SentencePiece-style with byte fallback (Llama 2, Gemma), read
// into a Vocab whose HfBpeConfig says how text is prepared and decoded.
// Everything outside these layouts is refused by name (not_supported).
#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>
#include <unordered_map>

#include "runtime/text/tokenizer/pretokenize.hpp"
#include "runtime/text/tokenizer/tokenizer_json.hpp"
#include "runtime/text/tokenizer/tokenizer_json_fields.hpp"

namespace troupe::tokenizer {

namespace {

using json = nlohmann::json;
using json_fields::quote;
using json_fields::fill_tokens_by_id;
using json_fields::Reader;

std::string type_of(const json& j) {
  if (!j.is_object()) return {};
  auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The items of a component: a Sequence's list (under `list_key`), or the one component.
Status flatten(const Reader& r, const json& j, const char* list_key, const std::string& where,
               std::vector<const json*>* out) {
  if (!j.is_object()) return r.bad(where + " is not an object");
  if (type_of(j) != "Sequence") {
    out->push_back(&j);
    return {};
  }
  auto it = j.find(list_key);
  if (it == j.end() || !it->is_array()) return r.bad(where + "." + list_key + " is missing or not an array");
  for (const json& item : *it) TROUPE_RETURN_IF_ERROR(flatten(r, item, list_key, where, out));
  return {};
}

// A Replace pattern: {"String": s} (a {"Regex": ...} is refused).
Status string_pattern(const Reader& r, const json& item, const std::string& where, std::string* out) {
  auto p = item.find("pattern");
  if (p == item.end() || !p->is_object()) return r.bad(where + ".pattern is missing or not an object");
  auto s = p->find("String");
  if (s == p->end()) {
    return r.unsupported(where + ".pattern " + quote(p->dump()) + " is not supported (supported: a String pattern)");
  }
  if (!s->is_string()) return r.bad(where + ".pattern.String is not a string");
  *out = s->get<std::string>();
  return {};
}

Status read_normalizer(const Reader& r, const json& doc, HfBpeConfig* hf) {
  auto n = doc.find("normalizer");
  if (n == doc.end() || n->is_null()) return {};
  std::vector<const json*> items;
  TROUPE_RETURN_IF_ERROR(flatten(r, *n, "normalizers", "normalizer", &items));
  for (const json* item : items) {
    const std::string type = type_of(*item);
    using Kind = HfBpeConfig::Step::Kind;
    if (type == "NFC") {
      hf->normalizer.push_back({Kind::nfc, {}, {}});
    } else if (type == "Replace") {
      HfBpeConfig::Step step{Kind::replace, {}, {}};
      TROUPE_RETURN_IF_ERROR(string_pattern(r, *item, "normalizer.Replace", &step.from));
      TROUPE_RETURN_IF_ERROR(r.string(*item, "content", "normalizer.Replace.", &step.to));
      if (step.from.empty()) return r.bad("normalizer.Replace has an empty pattern");
      hf->normalizer.push_back(std::move(step));
    } else if (type == "Prepend") {
      HfBpeConfig::Step step{Kind::prepend, {}, {}};
      TROUPE_RETURN_IF_ERROR(r.string(*item, "prepend", "normalizer.Prepend.", &step.to));
      hf->normalizer.push_back(std::move(step));
    } else {
      return r.unsupported("normalizer type " + quote(type.empty() ? item->dump() : type) +
                           " is not supported for BPE (supported: NFC, Replace, Prepend, Sequence of them, null)");
    }
  }
  return {};
}

Status read_byte_level(const Reader& r, const json& item, const std::string& where, bool* add_prefix_space,
                       bool* use_regex) {
  *add_prefix_space = false;
  *use_regex = true;
  TROUPE_RETURN_IF_ERROR(r.boolean(item, "add_prefix_space", where + ".", add_prefix_space));
  return r.boolean(item, "use_regex", where + ".", use_regex);
}

Status read_metaspace(const Reader& r, const json& item, const std::string& where, std::string* replacement,
                      HfBpeConfig::Prepend* prepend, bool* split) {
  *replacement = "\xE2\x96\x81";
  TROUPE_RETURN_IF_ERROR(r.string(item, "replacement", where + ".", replacement));
  if (replacement->empty()) return r.bad(where + ".replacement is empty");
  // prepend_scheme (tokenizers >= 0.14) or the older add_prefix_space.
  std::string scheme;
  TROUPE_RETURN_IF_ERROR(r.string(item, "prepend_scheme", where + ".", &scheme));
  if (scheme.empty()) {
    bool add_prefix_space = true;
    TROUPE_RETURN_IF_ERROR(r.boolean(item, "add_prefix_space", where + ".", &add_prefix_space));
    scheme = add_prefix_space ? "always" : "never";
  }
  if (scheme == "always") {
    *prepend = HfBpeConfig::Prepend::always;
  } else if (scheme == "first") {
    *prepend = HfBpeConfig::Prepend::first;
  } else if (scheme == "never") {
    *prepend = HfBpeConfig::Prepend::never;
  } else {
    return r.unsupported(where + ".prepend_scheme " + quote(scheme) + " is not supported (always, first, never)");
  }
  if (split != nullptr) {
    *split = true;
    TROUPE_RETURN_IF_ERROR(r.boolean(item, "split", where + ".", split));
  }
  return {};
}

// The pre-tokenizer layouts real files use, and nothing else.
Status read_pre_tokenizer(const Reader& r, const json& doc, Vocab* v) {
  HfBpeConfig& hf = v->hf;
  auto p = doc.find("pre_tokenizer");
  std::vector<const json*> items;
  if (p != doc.end() && !p->is_null()) TROUPE_RETURN_IF_ERROR(flatten(r, *p, "pretokenizers", "pre_tokenizer", &items));
  std::string shape;
  for (const json* item : items) shape += (shape.empty() ? "" : ", ") + type_of(*item);
  auto refuse = [&](const std::string& why) {
    return r.unsupported("pre_tokenizer [" + shape + "] is not supported (" + why + ")");
  };
  if (items.empty()) {  // SentencePiece-style with the normalizer doing the work (Llama 2, Gemma)
    hf.byte_level = false;
    return {};
  }
  const std::string last = type_of(*items.back());
  if (last == "Metaspace") {
    if (items.size() != 1) return refuse("Metaspace must stand alone");
    hf.byte_level = false;
    hf.metaspace = true;
    return read_metaspace(r, *items[0], "pre_tokenizer.Metaspace", &hf.metaspace_replacement, &hf.metaspace_prepend,
                          &hf.metaspace_split);
  }
  if (last != "ByteLevel") {
    return refuse("supported: ByteLevel, Split(regex) + ByteLevel, Digits + ByteLevel, Metaspace, null");
  }
  hf.byte_level = true;
  bool add_prefix_space = false, use_regex = true;
  TROUPE_RETURN_IF_ERROR(
      read_byte_level(r, *items.back(), "pre_tokenizer.ByteLevel", &add_prefix_space, &use_regex));
  if (items.size() == 1) {
    hf.byte_level_prefix_space = add_prefix_space;
    hf.split = use_regex;
    v->pre = PreTokenizer::gpt2;
    return {};
  }
  if (items.size() != 2) return refuse("too many steps");
  if (add_prefix_space) return refuse("ByteLevel add_prefix_space after another pre-tokenizer");
  const json& first = *items[0];
  const std::string first_type = type_of(first);
  if (first_type == "Digits") {
    bool individual = false;
    TROUPE_RETURN_IF_ERROR(r.boolean(first, "individual_digits", "pre_tokenizer.Digits.", &individual));
    if (!individual || !use_regex) return refuse("Digits is supported as SmolLM's: individual_digits, then ByteLevel's regex");
    v->pre = PreTokenizer::smollm;
    return {};
  }
  if (first_type != "Split") return refuse("the step before ByteLevel must be Split or Digits");
  if (use_regex) return refuse("Split, then ByteLevel with its own regex too");
  auto pattern = first.find("pattern");
  std::string regex, behavior;
  bool invert = false;
  if (pattern == first.end() || !pattern->is_object()) return r.bad("pre_tokenizer.Split.pattern is missing or not an object");
  auto re = pattern->find("Regex");
  if (re == pattern->end() || !re->is_string()) {
    return r.unsupported("pre_tokenizer.Split.pattern " + quote(pattern->dump()) + " is not supported (a known Regex)");
  }
  regex = re->get<std::string>();
  TROUPE_RETURN_IF_ERROR(r.string(first, "behavior", "pre_tokenizer.Split.", &behavior));
  TROUPE_RETURN_IF_ERROR(r.boolean(first, "invert", "pre_tokenizer.Split.", &invert));
  if (behavior != "Isolated" || invert) {
    return r.unsupported("pre_tokenizer.Split behavior " + quote(behavior) + (invert ? " inverted" : "") +
                         " is not supported (Isolated)");
  }
  if (!pre_tokenizer_of_hf_regex(regex, &v->pre)) {
    return r.unsupported("pre_tokenizer.Split regex " + quote(regex) +
                         " is not supported (known: the GPT-2, Llama 3, Qwen2, Qwen3.5 and Mistral tekken regexes)");
  }
  return {};
}

Status read_decoder(const Reader& r, const json& doc, HfBpeConfig* hf, bool* byte_fallback) {
  auto d = doc.find("decoder");
  std::vector<const json*> items;
  if (d != doc.end() && !d->is_null()) TROUPE_RETURN_IF_ERROR(flatten(r, *d, "decoders", "decoder", &items));
  if (hf->byte_level) {
    if (items.size() != 1 || type_of(*items[0]) != "ByteLevel") {
      return r.unsupported("decoder " + (d == doc.end() ? std::string("null") : quote(d->dump())) +
                           " is not supported with a ByteLevel pre-tokenizer (supported: ByteLevel)");
    }
    return {};
  }
  for (const json* item : items) {
    const std::string type = type_of(*item);
    if (type == "Replace") {
      std::string from, to;
      TROUPE_RETURN_IF_ERROR(string_pattern(r, *item, "decoder.Replace", &from));
      TROUPE_RETURN_IF_ERROR(r.string(*item, "content", "decoder.Replace.", &to));
      if (to != " " || from.empty()) {
        return r.unsupported("decoder.Replace " + quote(from) + " -> " + quote(to) + " is not supported (X -> ' ')");
      }
      hf->decode_space = from;
    } else if (type == "ByteFallback") {
      *byte_fallback = true;  // <0xNN> tokens decode to their byte
    } else if (type == "Fuse") {
      // pieces are concatenated anyway
    } else if (type == "Strip") {
      std::string content;
      int64_t start = 0, stop = 0;
      TROUPE_RETURN_IF_ERROR(r.string(*item, "content", "decoder.Strip.", &content));
      TROUPE_RETURN_IF_ERROR(r.count(*item, "start", "decoder.Strip.", 1 << 20, &start));
      TROUPE_RETURN_IF_ERROR(r.count(*item, "stop", "decoder.Strip.", 1 << 20, &stop));
      if (content != " " || start != 1 || stop != 0 || item != items.back()) {
        return r.unsupported("decoder.Strip " + quote(item->dump()) + " is not supported (one leading ' ', last)");
      }
      hf->decode_strip_space = true;
    } else if (type == "Metaspace") {
      HfBpeConfig::Prepend prepend = HfBpeConfig::Prepend::never;
      TROUPE_RETURN_IF_ERROR(read_metaspace(r, *item, "decoder.Metaspace", &hf->decode_space, &prepend, nullptr));
      hf->decode_first_token_spaces = prepend != HfBpeConfig::Prepend::never;
    } else {
      return r.unsupported("decoder type " + quote(type.empty() ? item->dump() : type) +
                           " is not supported for SentencePiece-style BPE (supported: Replace, ByteFallback, Fuse, "
                           "Strip, Metaspace, Sequence of them)");
    }
  }
  return {};
}

Status read_post_processor(const Reader& r, const json& doc, json_fields::TemplateIds* tpl) {
  auto p = doc.find("post_processor");
  if (p == doc.end() || p->is_null()) return {};
  std::vector<const json*> items;
  TROUPE_RETURN_IF_ERROR(flatten(r, *p, "processors", "post_processor", &items));
  bool seen_template = false;
  for (const json* item : items) {
    const std::string type = type_of(*item);
    if (type == "ByteLevel") continue;  // offsets only
    if (type == "TemplateProcessing" && !seen_template) {
      seen_template = true;
      TROUPE_RETURN_IF_ERROR(json_fields::read_template(r, *item, tpl));
      continue;
    }
    return r.unsupported("post_processor type " + quote(type.empty() ? item->dump() : type) +
                         " is not supported for BPE (supported: ByteLevel, TemplateProcessing, Sequence of them)");
  }
  return {};
}

// A special token of tokenizer_config.json: "text", {"content": "text", ...} or null.
Status config_token(const Reader& r, const json& config, const char* key, std::optional<std::string>* out) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return {};
  if (it->is_string()) {
    *out = it->get<std::string>();
    return {};
  }
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) {
      *out = c->get<std::string>();
      return {};
    }
  }
  return r.bad(std::string("tokenizer_config.json: ") + key + " is neither a string nor {\"content\": string}");
}

}  // namespace

Result<Vocab> vocab_from_bpe_tokenizer_json(const json& doc, const json* config, const std::string& name) {
  const Reader r(name);
  const json* model = nullptr;
  TROUPE_RETURN_IF_ERROR(r.object(doc, "model", "", &model, true));
  Vocab v;
  v.kind = VocabKind::bpe;
  HfBpeConfig& hf = v.hf;
  hf.enabled = true;
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model->find(key);
    if (it != model->end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty())) {
      return r.unsupported(std::string("model.") + key + " " + quote(it->dump()) + " is not supported (null)");
    }
  }
  auto dropout = model->find("dropout");
  if (dropout != model->end() && !dropout->is_null() && !(dropout->is_number() && dropout->get<double>() == 0.0)) {
    return r.unsupported("model.dropout " + dropout->dump() + " is not supported (null)");
  }
  std::string unk;
  auto unk_it = model->find("unk_token");
  if (unk_it != model->end() && !unk_it->is_null()) TROUPE_RETURN_IF_ERROR(r.string(*model, "unk_token", "model.", &unk));
  TROUPE_RETURN_IF_ERROR(r.boolean(*model, "fuse_unk", "model.", &hf.fuse_unk));
  TROUPE_RETURN_IF_ERROR(r.boolean(*model, "byte_fallback", "model.", &hf.byte_fallback));
  TROUPE_RETURN_IF_ERROR(r.boolean(*model, "ignore_merges", "model.", &v.ignore_merges));

  // Tokens by id: the model's vocab, then the added tokens (same id and text, or new ids).
  const json* vocab = nullptr;
  TROUPE_RETURN_IF_ERROR(r.object(*model, "vocab", "model.", &vocab, true));
  std::map<int64_t, std::pair<std::string, TokenType>> by_id;
  auto add = [&](const std::string& text, int64_t id, TokenType t, const std::string& where) -> Status {
    auto [it, inserted] = by_id.emplace(id, std::make_pair(text, t));
    if (!inserted) {
      if (it->second.first != text) {
        return r.bad(where + ": id " + std::to_string(id) + " is both " + quote(it->second.first) + " and " + quote(text));
      }
      it->second.second = t;
    }
    return {};
  };
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    const std::optional<uint64_t> id = json_io::non_negative_integer(it.value());
    if (!id || *id > static_cast<uint64_t>(INT32_MAX)) {
      return r.bad("model.vocab[" + quote(it.key()) + "] is " + it.value().dump().substr(0, 40) + ", expected a token id");
    }
    TROUPE_RETURN_IF_ERROR(add(it.key(), static_cast<int64_t>(*id), TokenType::normal, "model.vocab"));
  }
  std::vector<int64_t> lstrip, rstrip;
  auto added = doc.find("added_tokens");
  if (added != doc.end() && !added->is_null()) {
    if (!added->is_array()) return r.bad(std::string("added_tokens is a JSON ") + added->type_name() + ", expected an array");
    for (size_t i = 0; i < added->size(); ++i) {
      const json& a = (*added)[i];
      const std::string where = "added_tokens[" + std::to_string(i) + "]";
      if (!a.is_object()) return r.bad(where + " is not an object");
      std::string content;
      int64_t id = -1;
      bool special = false, single_word = false, l = false, rs = false, normalized = false;
      TROUPE_RETURN_IF_ERROR(r.string(a, "content", where + ".", &content));
      TROUPE_RETURN_IF_ERROR(r.count(a, "id", where + ".", INT32_MAX, &id));
      TROUPE_RETURN_IF_ERROR(r.boolean(a, "special", where + ".", &special));
      TROUPE_RETURN_IF_ERROR(r.boolean(a, "single_word", where + ".", &single_word));
      TROUPE_RETURN_IF_ERROR(r.boolean(a, "lstrip", where + ".", &l));
      TROUPE_RETURN_IF_ERROR(r.boolean(a, "rstrip", where + ".", &rs));
      TROUPE_RETURN_IF_ERROR(r.boolean(a, "normalized", where + ".", &normalized));
      if (id < 0 || content.empty()) return r.bad(where + " needs an id and a non-empty content");
      if (single_word) return r.unsupported(where + " (" + quote(content) + ") single_word true is not supported");
      if (l) lstrip.push_back(id);
      if (rs) rstrip.push_back(id);
      TROUPE_RETURN_IF_ERROR(add(content, id, special ? TokenType::control : TokenType::user_defined, where));
    }
  }
  TROUPE_RETURN_IF_ERROR(fill_tokens_by_id(r, by_id, v));
  for (int64_t id : lstrip) hf.lstrip_ids.push_back(static_cast<int32_t>(id));
  for (int64_t id : rstrip) hf.rstrip_ids.push_back(static_cast<int32_t>(id));
  std::sort(hf.lstrip_ids.begin(), hf.lstrip_ids.end());
  std::sort(hf.rstrip_ids.begin(), hf.rstrip_ids.end());

  std::unordered_map<std::string_view, int32_t> ids;
  ids.reserve(v.tokens.size());
  for (size_t i = 0; i < v.tokens.size(); ++i) ids.emplace(v.tokens[i], static_cast<int32_t>(i));
  auto find_id = [&](const std::string& text) -> int32_t {
    auto it = ids.find(text);
    return it == ids.end() ? -1 : it->second;
  };

  // Merges: "left right" strings (older files) or [left, right] pairs.
  auto merges = model->find("merges");
  if (merges == model->end() || !merges->is_array()) return r.bad("model.merges is missing or not an array");
  v.merge_pairs.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& m = (*merges)[i];
    const std::string where = "model.merges[" + std::to_string(i) + "]";
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string::npos) {
        return r.bad(where + " " + quote(s) + " is not \"left right\"");
      }
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
      if (left.empty() || right.empty()) return r.bad(where + " has an empty side");
    } else {
      return r.bad(where + " is neither \"left right\" nor [left, right]");
    }
    if (find_id(left) < 0 || find_id(right) < 0 || find_id(left + right) < 0) {
      return r.bad(where + " " + quote(left + " " + right) + " merges tokens that are not in the vocabulary");
    }
    v.merge_pairs.emplace_back(std::move(left), std::move(right));
  }

  TROUPE_RETURN_IF_ERROR(read_normalizer(r, doc, &hf));
  TROUPE_RETURN_IF_ERROR(read_pre_tokenizer(r, doc, &v));
  if (hf.byte_level && hf.byte_fallback) return r.unsupported("model.byte_fallback with a ByteLevel pre-tokenizer is not supported");
  bool decodes_bytes = false;
  TROUPE_RETURN_IF_ERROR(read_decoder(r, doc, &hf, &decodes_bytes));
  json_fields::TemplateIds tpl;
  TROUPE_RETURN_IF_ERROR(read_post_processor(r, doc, &tpl));
  const int64_t n = static_cast<int64_t>(v.tokens.size());
  for (const auto& [side, id] : {std::make_pair("before", tpl.prefix), std::make_pair("after", tpl.suffix)}) {
    if (id && *id >= n) {
      return r.bad(std::string("post_processor: the special token ") + side + " $A has id " + std::to_string(*id) +
                   ", past the " + std::to_string(n) + " tokens");
    }
  }
  // Added tokens matched in normalized text: the same as in raw text unless a Replace rewrites them.
  if (added != doc.end() && added->is_array()) {
    for (const json& a : *added) {
      if (!a.value("normalized", false)) continue;
      const std::string content = a.value("content", "");
      for (const HfBpeConfig::Step& step : hf.normalizer) {
        if (step.kind == HfBpeConfig::Step::Kind::replace && content.find(step.from) != std::string::npos) {
          return r.unsupported("added token " + quote(content) +
                               " with normalized true is not supported under a Replace that rewrites it");
        }
      }
    }
  }

  if (!unk.empty()) {
    v.unk_id = find_id(unk);
    if (v.unk_id < 0) return r.bad("model.unk_token " + quote(unk) + " is not in the vocabulary");
    if (v.types[v.unk_id] == TokenType::normal) v.types[v.unk_id] = TokenType::unknown;
  }
  if (decodes_bytes) {  // <0xNN> tokens decode to their byte (the ByteFallback decoder)
    for (size_t i = 0; i < v.tokens.size(); ++i) {
      const std::string& t = v.tokens[i];
      if (v.types[i] == TokenType::normal && t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
          std::isxdigit(static_cast<unsigned char>(t[3])) && std::isxdigit(static_cast<unsigned char>(t[4]))) {
        v.types[i] = TokenType::byte;
      }
    }
  }

  // BOS/EOS: the template's tokens, then tokenizer_config.json's names and add flags.
  if (tpl.prefix) {
    v.bos_id = *tpl.prefix;
    v.add_bos = true;
  }
  int32_t suffix = tpl.suffix ? *tpl.suffix : -1;
  bool add_eos = false, has_add_eos = false;
  if (config != nullptr) {
    if (!config->is_object()) return r.bad("tokenizer_config.json: the top level is not an object");
    std::optional<std::string> bos, eos, pad;
    TROUPE_RETURN_IF_ERROR(config_token(r, *config, "bos_token", &bos));
    TROUPE_RETURN_IF_ERROR(config_token(r, *config, "eos_token", &eos));
    TROUPE_RETURN_IF_ERROR(config_token(r, *config, "pad_token", &pad));
    for (auto [text, id, key] : {std::tuple{&bos, &v.bos_id, "bos_token"}, {&eos, &v.eos_id, "eos_token"},
                                 {&pad, &v.pad_id, "pad_token"}}) {
      if (!*text) continue;
      *id = find_id(**text);
      if (*id < 0) return r.bad(std::string("tokenizer_config.json: ") + key + " " + quote(**text) + " is not a token");
    }
    // Explicit add flags win over the template, as LlamaTokenizerFast / GemmaTokenizerFast rebuild it from them.
    TROUPE_RETURN_IF_ERROR(r.boolean(*config, "add_bos_token", "tokenizer_config.json: ", &v.add_bos));
    has_add_eos = config->contains("add_eos_token");
    TROUPE_RETURN_IF_ERROR(r.boolean(*config, "add_eos_token", "tokenizer_config.json: ", &add_eos));
  }
  if (suffix >= 0 && suffix == v.eos_id) {
    v.add_eos = has_add_eos ? add_eos : true;
    suffix = -1;
  } else {
    v.add_eos = add_eos;
  }
  if (suffix >= 0) {
    v.sep_id = suffix;
    v.add_sep = true;
  }
  return v;
}

}  // namespace troupe::tokenizer

// Field readers for tokenizer.json / tokenizer_config.json, without
// exceptions: every field's JSON type is checked before use, and errors start
// with the file's name and say which field is wrong.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "runtime/text/json/json_io.hpp"
#include "runtime/text/tokenizer/vocab.hpp"
#include "troupe/status.hpp"

namespace troupe::tokenizer::json_fields {

using json = nlohmann::json;

// tokenizer.json files of large vocabularies reach tens of MB; this bounds a mistake.
inline constexpr uint64_t kMaxTokenizerJsonBytes = uint64_t{512} << 20;

inline std::string quote(std::string_view s) {
  std::string out = "'";  // built in steps: g++ 12 warns (-Wrestrict) on "'" + std::string
  out += json_io::printable(s);
  out += '\'';
  return out;
}

/// Field readers: absent -> the default; present with another JSON type -> data_loss.
class Reader {
 public:
  explicit Reader(const std::string& name) : name_(name) {}

  Status bad(const std::string& what) const { return data_loss(name_ + ": " + what); }
  Status unsupported(const std::string& what) const { return not_supported(name_ + ": " + what); }

  Status object(const json& parent, const char* key, const std::string& where, const json** out,
                bool required) const {
    *out = nullptr;
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) {
      return required ? bad(where + key + " is missing") : Status{};
    }
    if (!it->is_object()) return bad(where + key + " is a JSON " + it->type_name() + ", expected an object");
    *out = &*it;
    return {};
  }

  Status string(const json& parent, const char* key, const std::string& where, std::string* out) const {
    auto it = parent.find(key);
    if (it == parent.end()) return {};
    if (!it->is_string()) return bad(where + key + " is a JSON " + it->type_name() + ", expected a string");
    *out = it->get<std::string>();
    return {};
  }

  Status boolean(const json& parent, const char* key, const std::string& where, bool* out) const {
    auto it = parent.find(key);
    if (it == parent.end()) return {};
    if (!it->is_boolean()) return bad(where + key + " is a JSON " + it->type_name() + ", expected true or false");
    *out = it->get<bool>();
    return {};
  }

  /// A non-negative integer up to `max`.
  Status count(const json& parent, const char* key, const std::string& where, int64_t max, int64_t* out) const {
    auto it = parent.find(key);
    if (it == parent.end()) return {};
    const std::optional<uint64_t> v = json_io::non_negative_integer(*it);
    if (!v || *v > static_cast<uint64_t>(max)) {
      return bad(where + key + " is " + it->dump().substr(0, 40) + ", expected an integer in 0.." +
                 std::to_string(max));
    }
    *out = static_cast<int64_t>(*v);
    return {};
  }

 private:
  const std::string& name_;
};

/// TemplateProcessing's "single" template: at most one special token on each side of $A.
struct TemplateIds {
  std::optional<int32_t> prefix;  // the special token before $A ([CLS])
  std::optional<int32_t> suffix;  // the special token after $A ([SEP])
};

/// The one id of special token `token` in TemplateProcessing's special_tokens map.
inline Status template_special_id(const Reader& r, const json& specials, const std::string& token, int32_t* id) {
  const std::string where = "post_processor.special_tokens[" + quote(token) + "]";
  auto it = specials.find(token);
  if (it == specials.end() || !it->is_object()) return r.bad(where + " is missing or not an object");
  auto ids = it->find("ids");
  if (ids == it->end() || !ids->is_array()) return r.bad(where + ".ids is missing or not an array");
  if (ids->size() != 1) {
    return r.unsupported(where + " maps to " + std::to_string(ids->size()) + " ids (supported: exactly one)");
  }
  const std::optional<uint64_t> v = json_io::non_negative_integer((*ids)[0]);
  if (!v || *v > static_cast<uint64_t>(INT32_MAX)) return r.bad(where + ".ids[0] is not a token id");
  *id = static_cast<int32_t>(*v);
  return {};
}

inline Status read_template(const Reader& r, const json& p, TemplateIds* out) {
  auto single = p.find("single");
  if (single == p.end() || !single->is_array()) return r.bad("post_processor.single is missing or not an array");
  const json* specials = nullptr;
  TROUPE_RETURN_IF_ERROR(r.object(p, "special_tokens", "post_processor.", &specials, false));
  static const json kEmpty = json::object();
  if (specials == nullptr) specials = &kEmpty;
  bool seen_a = false;
  std::string shape;
  for (const json& item : *single) {
    if (!item.is_object() || item.size() != 1) return r.bad("post_processor.single has an item that is not {\"Kind\": {...}}");
    const std::string kind = item.begin().key();
    const json& body = item.begin().value();
    if (!body.is_object()) return r.bad("post_processor.single item " + quote(kind) + " is not an object");
    std::string id;
    TROUPE_RETURN_IF_ERROR(r.string(body, "id", "post_processor.single." + kind + ".", &id));
    shape += shape.empty() ? "" : " ";
    if (kind == "Sequence") {
      if (seen_a || id != "A") return r.unsupported("post_processor template with sequence " + quote(id) + " is not supported");
      seen_a = true;
      shape += "$A";
      continue;
    }
    if (kind != "SpecialToken") return r.bad("post_processor.single has an item of unknown kind " + quote(kind));
    shape += id;
    std::optional<int32_t>& slot = seen_a ? out->suffix : out->prefix;
    if (slot) {
      return r.unsupported("post_processor template with two special tokens on one side of $A is not supported");
    }
    int32_t tid = -1;
    TROUPE_RETURN_IF_ERROR(template_special_id(r, *specials, id, &tid));
    slot = tid;
  }
  if (!seen_a) return r.unsupported("post_processor template '" + shape + "' has no $A");
  return {};
}

/// The tokens read by id (model.vocab and added_tokens) as `v`'s tokens and types, in id
/// order. Ids must be 0..n-1: a map is sorted, so a hole shows as an id past its rank.
inline Status fill_tokens_by_id(const Reader& r, const std::map<int64_t, std::pair<std::string, TokenType>>& by_id,
                                Vocab& v) {
  if (by_id.empty()) return r.bad("model.vocab is empty");
  int64_t expect = 0;
  for (const auto& [id, entry] : by_id) {
    if (id != expect) {
      return r.bad("token ids are not contiguous: no token has id " + std::to_string(expect) + " (" +
                   std::to_string(by_id.size()) + " tokens, largest id " + std::to_string(by_id.rbegin()->first) + ")");
    }
    v.tokens.push_back(entry.first);
    v.types.push_back(entry.second);
    ++expect;
  }
  return {};
}

}  // namespace troupe::tokenizer::json_fields

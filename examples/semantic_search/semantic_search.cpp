// Semantic search as an IO processor plugin: a request {"query", "documents",
// "top_k"} becomes one batch of prompts (the query, then every document); the
// pooled vectors come back in that order and the documents are ranked by
// cosine similarity to the query. JSON is read and written by hand so the
// plugin needs nothing but the SDK.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "troupe/plugin.hpp"

namespace {

/// A tiny JSON reader for this request's shape: an object of a string, an array of strings and an integer.
class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  troupe::Status fail(const std::string& what) const {
    return troupe::invalid_argument("semantic_search: " + what + " (at byte " + std::to_string(i_) + ")");
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    ws();
    return i_ < s_.size() && s_[i_] == c;
  }
  troupe::Status string(std::string* out) {
    if (!eat('"')) return fail("expected a string");
    out->clear();
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) return fail("unterminated escape");
        char e = s_[i_++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          case 'u': {
            if (i_ + 4 > s_.size()) return fail("bad \\u escape");
            unsigned cp = std::stoul(s_.substr(i_, 4), nullptr, 16);
            i_ += 4;
            // Basic multilingual plane only, as UTF-8.
            if (cp < 0x80) {
              *out += static_cast<char>(cp);
            } else if (cp < 0x800) {
              *out += static_cast<char>(0xC0 | (cp >> 6));
              *out += static_cast<char>(0x80 | (cp & 63));
            } else {
              *out += static_cast<char>(0xE0 | (cp >> 12));
              *out += static_cast<char>(0x80 | ((cp >> 6) & 63));
              *out += static_cast<char>(0x80 | (cp & 63));
            }
            continue;
          }
          default: c = e;
        }
      }
      *out += c;
    }
    if (!eat('"')) return fail("unterminated string");
    return {};
  }
  troupe::Status integer(long* out) {
    ws();
    size_t start = i_;
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    if (start == i_ || (i_ - start > 9)) return fail("expected an integer");
    *out = std::stol(s_.substr(start, i_ - start));
    return {};
  }
  bool done() {
    ws();
    return i_ == s_.size();
  }

 private:
  const std::string& s_;
  size_t i_ = 0;
};

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

struct Search {
  std::string query;
  std::vector<std::string> documents;
  long top_k = 0;  // 0: all
};

/// Parses the request (or the normalized form it produced).
troupe::Result<Search> parse(const std::string& body) {
  Search s;
  Reader r(body);
  if (!r.eat('{')) return r.fail("the request must be a JSON object");
  bool has_query = false, has_docs = false;
  while (!r.peek('}')) {
    std::string key;
    TROUPE_RETURN_IF_ERROR(r.string(&key));
    if (!r.eat(':')) return r.fail("expected ':'");
    if (key == "query") {
      TROUPE_RETURN_IF_ERROR(r.string(&s.query));
      has_query = true;
    } else if (key == "documents") {
      if (!r.eat('[')) return r.fail("documents must be an array of strings");
      while (!r.peek(']')) {
        std::string d;
        TROUPE_RETURN_IF_ERROR(r.string(&d));
        s.documents.push_back(std::move(d));
        if (!r.eat(',')) break;
      }
      if (!r.eat(']')) return r.fail("expected ']'");
      has_docs = true;
    } else if (key == "top_k") {
      TROUPE_RETURN_IF_ERROR(r.integer(&s.top_k));
    } else {
      return r.fail("unknown field '" + key + "' (query, documents, top_k)");
    }
    if (!r.eat(',')) break;
  }
  if (!r.eat('}') || !r.done()) return r.fail("expected the end of the object");
  if (!has_query || s.query.empty()) return troupe::invalid_argument("semantic_search: 'query' is required");
  if (!has_docs || s.documents.empty())
    return troupe::invalid_argument("semantic_search: 'documents' must be a non-empty list of strings");
  for (const auto& d : s.documents)
    if (d.empty()) return troupe::invalid_argument("semantic_search: documents must not be empty");
  if (s.top_k < 0) return troupe::invalid_argument("semantic_search: top_k must be >= 0");
  return s;
}

class SemanticSearch final : public troupe::IOProcessor {
 public:
  troupe::Result<std::string> parse_request(const std::string& request_json) override {
    auto s = parse(request_json);
    if (!s) return s.status();
    std::string out = "{\"query\":";
    out += quote(s->query);
    out += ",\"documents\":[";
    for (size_t i = 0; i < s->documents.size(); ++i) {
      if (i) out += ',';
      out += quote(s->documents[i]);
    }
    out += "],\"top_k\":";
    out += std::to_string(s->top_k);
    out += '}';
    return out;
  }
  troupe::Result<std::vector<std::string>> pre_process(const std::string& parsed) override {
    auto s = parse(parsed);
    if (!s) return s.status();
    std::vector<std::string> prompts{s->query};
    prompts.insert(prompts.end(), s->documents.begin(), s->documents.end());
    return prompts;
  }
  troupe::Result<std::string> post_process(const std::vector<troupe::PoolingOutput>& outputs,
                                           const std::string& parsed) override {
    auto s = parse(parsed);
    if (!s) return s.status();
    if (outputs.size() != s->documents.size() + 1)
      return troupe::internal_error("semantic_search: " + std::to_string(outputs.size()) + " outputs for " +
                                    std::to_string(s->documents.size() + 1) + " prompts");
    const auto& q = outputs[0].data;
    std::vector<std::pair<double, size_t>> ranked;
    for (size_t i = 0; i < s->documents.size(); ++i) {
      const auto& d = outputs[i + 1].data;
      double qd = 0, qq = 0, dd = 0;
      for (size_t k = 0; k < q.size() && k < d.size(); ++k) qd += q[k] * d[k], qq += q[k] * q[k], dd += d[k] * d[k];
      ranked.emplace_back(qq > 0 && dd > 0 ? qd / std::sqrt(qq * dd) : 0.0, i);
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    if (s->top_k > 0 && static_cast<size_t>(s->top_k) < ranked.size()) ranked.resize(static_cast<size_t>(s->top_k));
    std::string out = "[";
    for (size_t i = 0; i < ranked.size(); ++i) {
      char score[32];
      std::snprintf(score, sizeof score, "%.6f", ranked[i].first);
      if (i) out += ',';
      out += "{\"index\":";
      out += std::to_string(ranked[i].second);
      out += ",\"document\":";
      out += quote(s->documents[ranked[i].second]);
      out += ",\"score\":";
      out += score;
      out += '}';
    }
    out += ']';
    return out;
  }
  troupe::Result<std::string> output_to_response(const std::string& output) override {
    std::string out = "{\"object\":\"semantic_search\",\"results\":";
    out += output;
    out += '}';
    return out;
  }
};

troupe::IOProcessor* make_semantic_search(const troupe::ConfigView&) { return new SemanticSearch(); }

}  // namespace

TROUPE_PLUGIN(troupe::io_processor_plugin("semantic_search", &make_semantic_search))

#include "runtime/rank/structured/grammar_cache.hpp"

#include <algorithm>

#include "runtime/rank/structured/grammar_frontends.hpp"

namespace troupe::structured {
namespace {

std::string key_of(const GrammarSpec& spec) {
  std::string k(1, static_cast<char>('0' + static_cast<int>(spec.kind)));
  k += spec.json.compact ? 'c' : 'w';
  k += std::to_string(spec.json.max_whitespace) + ":";
  if (spec.json.whitespace_pattern) k += std::to_string(spec.json.whitespace_pattern->size()) + ":" + *spec.json.whitespace_pattern;
  k += "|";
  for (const std::string& c : spec.choices) k += std::to_string(c.size()) + ":" + c;
  return k + "|" + spec.text;
}

}  // namespace

Result<std::shared_ptr<const Grammar>> compile_grammar(const GrammarSpec& spec, const GrammarLimits& limits) {
  switch (spec.kind) {
    case GrammarKind::json_schema: return compile_json_schema_grammar(spec.text, spec.json, limits);
    case GrammarKind::json_object: return compile_json_schema_grammar(R"({"type": "object"})", spec.json, limits);
    case GrammarKind::regex: return compile_regex_grammar(spec.text, limits);
    case GrammarKind::choice: return compile_choice_grammar(spec.choices, limits);
    case GrammarKind::grammar: return compile_grammar_text(spec.text, limits);
    case GrammarKind::structural_tag: return compile_structural_tag(spec.text, spec.json, limits);
  }
  return internal_error("unknown grammar kind");
}

GrammarCache::GrammarCache(const GrammarLimits& limits, size_t max_entries, size_t max_bytes)
    : limits_(limits), max_entries_(max_entries), max_bytes_(max_bytes) {}

Result<std::shared_ptr<const Grammar>> GrammarCache::get(const GrammarSpec& spec) {
  std::string key = key_of(spec);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->grammar;
    }
  }
  // Compiled outside the lock: another request's grammar may compile meanwhile.
  auto grammar = compile_grammar(spec, limits_);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key);
  if (it != index_.end()) return it->second->grammar;
  lru_.push_front(Entry{std::move(key), grammar});
  index_.emplace(lru_.front().key, lru_.begin());
  evict();
  return grammar;
}

void GrammarCache::evict() {
  size_t bytes = 0;
  for (const Entry& e : lru_) bytes += e.grammar.ok() ? (*e.grammar)->memory_bytes() : e.key.size();
  while (lru_.size() > 1 && (lru_.size() > max_entries_ || bytes > max_bytes_)) {
    const Entry& last = lru_.back();
    bytes -= std::min(bytes, last.grammar.ok() ? (*last.grammar)->memory_bytes() : last.key.size());
    index_.erase(last.key);
    lru_.pop_back();
  }
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lru_.size();
}

size_t GrammarCache::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t bytes = 0;
  for (const Entry& e : lru_) bytes += e.grammar.ok() ? (*e.grammar)->memory_bytes() : e.key.size();
  return bytes;
}

}  // namespace troupe::structured

#include "runtime/rank/structured/grammar_cache.hpp"

#include <algorithm>
#include <chrono>

#include "runtime/rank/structured/grammar_frontends.hpp"
#include "troupe/log.hpp"

namespace troupe::structured {
namespace {

std::string key_of(const GrammarSpec& spec, const GrammarLimits& limits) {
  std::string k(1, static_cast<char>('0' + static_cast<int>(spec.kind)));
  k += std::to_string(limits.compile_seconds) + "," + std::to_string(limits.memory_bytes) + "," +
       std::to_string(limits.max_row_items) + "," + std::to_string(limits.max_mask_steps) + "," +
       std::to_string(limits.max_mask_derivatives) + "," + std::to_string(limits.max_mask_seconds) + ";";
  k += spec.json.compact ? 'c' : 'w';
  k += std::to_string(spec.json.max_whitespace) + ":";
  if (spec.json.whitespace_pattern) k += std::to_string(spec.json.whitespace_pattern->size()) + ":" + *spec.json.whitespace_pattern;
  k += "|";
  for (const std::string& c : spec.choices) k += std::to_string(c.size()) + ":" + c;
  return k + "|" + spec.text;
}

const char* kind_name(GrammarKind kind) {
  switch (kind) {
    case GrammarKind::json_schema: return "json_schema";
    case GrammarKind::json_object: return "json_object";
    case GrammarKind::regex: return "regex";
    case GrammarKind::choice: return "choice";
    case GrammarKind::grammar: return "grammar";
    case GrammarKind::structural_tag: return "structural_tag";
  }
  return "?";
}

}  // namespace

GrammarLimits grammar_limits(const StructuredOutputsConfig& config) {
  GrammarLimits limits;
  limits.compile_seconds = config.compile_timeout_s;
  limits.memory_bytes = static_cast<size_t>(std::max<int64_t>(config.max_memory_mib, 1)) << 20;
  limits.max_mask_seconds = std::max(config.mask_timeout_ms, 0.0) / 1000.0;
  return limits;
}

std::optional<GrammarSpec> grammar_spec(const sampling::SamplingParams& p) {
  const std::string& k = p.structured_output;
  if (k.empty()) return std::nullopt;
  GrammarSpec spec;
  if (k == "json_schema") spec.kind = GrammarKind::json_schema;
  else if (k == "json_object") spec.kind = GrammarKind::json_object;
  else if (k == "regex") spec.kind = GrammarKind::regex;
  else if (k == "choice") spec.kind = GrammarKind::choice;
  else if (k == "grammar") spec.kind = GrammarKind::grammar;
  else if (k == "structural_tag") spec.kind = GrammarKind::structural_tag;
  else return std::nullopt;  // SamplingParams::validate refuses it first
  spec.text = p.structured_spec;
  spec.choices = p.choices;
  spec.json.compact = p.structured_compact;
  if (!p.structured_whitespace_pattern.empty()) spec.json.whitespace_pattern = p.structured_whitespace_pattern;
  return spec;
}

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

GrammarCache& GrammarCache::shared() {
  static GrammarCache cache;
  return cache;
}

Result<std::shared_ptr<const Grammar>> GrammarCache::get(const GrammarSpec& spec, const GrammarLimits& limits) {
  std::string key = key_of(spec, limits);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->grammar;
    }
  }
  // Compiled outside the lock: another request's grammar may compile meanwhile.
  const auto t0 = std::chrono::steady_clock::now();
  auto grammar = compile_grammar(spec, limits);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (grammar.ok()) {
    TROUPE_LOG_DEBUG("structured output: {} grammar compiled in {:.2f} ms, {:.1f} KiB ({} lexemes, {} rules)",
                     kind_name(spec.kind), ms, static_cast<double>((*grammar)->memory_bytes()) / 1024.0,
                     (*grammar)->num_lexemes(), (*grammar)->num_rules());
  } else {
    TROUPE_LOG_DEBUG("structured output: {} refused in {:.2f} ms: {}", kind_name(spec.kind), ms,
                     grammar.status().message());
  }
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

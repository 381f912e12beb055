// One entry point for every kind of structured output, and a bounded cache
// of compiled grammars by their text: requests with the same schema share one
// grammar (and the lexer states and mask parts it has built). Failures are
// cached too, so a bad schema sent again is refused without compiling.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/rank/structured/grammar.hpp"
#include "runtime/rank/structured/json_schema_grammar.hpp"
#include "troupe/status.hpp"

namespace troupe::structured {

enum class GrammarKind { json_schema, json_object, regex, choice, grammar, structural_tag };

struct GrammarSpec {
  GrammarKind kind = GrammarKind::json_object;
  std::string text;                  // schema, regex, grammar or structural tag (JSON)
  std::vector<std::string> choices;  // choice
  JsonSchemaOptions json;            // json_schema, json_object, structural_tag
};

/// Compiles any kind (no cache).
Result<std::shared_ptr<const Grammar>> compile_grammar(const GrammarSpec& spec, const GrammarLimits& limits = {});

class GrammarCache {
 public:
  /// At most max_entries grammars, and (past the newest) at most max_bytes of them
  /// together; least recently used first out.
  explicit GrammarCache(const GrammarLimits& limits = {}, size_t max_entries = 256,
                        size_t max_bytes = size_t{1} << 30);

  Result<std::shared_ptr<const Grammar>> get(const GrammarSpec& spec);
  size_t size() const;
  /// Bytes held by the cached grammars now (they grow as their lexers build states).
  size_t memory_bytes() const;

 private:
  struct Entry {
    std::string key;
    Result<std::shared_ptr<const Grammar>> grammar;
  };
  void evict();

  GrammarLimits limits_;
  size_t max_entries_, max_bytes_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace troupe::structured

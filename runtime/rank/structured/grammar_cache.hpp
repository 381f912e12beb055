// One entry point for every kind of structured output, and a bounded cache
// of compiled grammars by their text: requests with the same schema share one
// grammar (and the lexer states and mask parts it has built). Failures are
// cached too, so a bad schema sent again is refused without compiling.
// GrammarCache::shared() is the process's one cache: the API compiles a
// request's grammar there at admission (a bad one is a 400), and the driver
// rank of the same process finds it there by text.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "runtime/protocol/sampling_params.hpp"
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

/// What a request's sampling params ask for (structured_output and its spec, choices and
/// whitespace options); nullopt for free text.
std::optional<GrammarSpec> grammar_spec(const sampling::SamplingParams& params);

/// The limits the engine's settings give (compile time and memory, a mask's wall time; the
/// per-mask work bounds keep their defaults).
GrammarLimits grammar_limits(const StructuredOutputsConfig& config);

/// Compiles any kind (no cache).
Result<std::shared_ptr<const Grammar>> compile_grammar(const GrammarSpec& spec, const GrammarLimits& limits = {});

class GrammarCache {
 public:
  /// At most max_entries grammars, and (past the newest) at most max_bytes of them
  /// together; least recently used first out.
  explicit GrammarCache(const GrammarLimits& limits = {}, size_t max_entries = 256,
                        size_t max_bytes = size_t{1} << 30);

  Result<std::shared_ptr<const Grammar>> get(const GrammarSpec& spec) { return get(spec, limits_); }
  /// Compiled under `limits` (part of the key: the same text under other limits is another entry).
  Result<std::shared_ptr<const Grammar>> get(const GrammarSpec& spec, const GrammarLimits& limits);
  /// The process's cache (256 grammars, 1 GiB).
  static GrammarCache& shared();
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

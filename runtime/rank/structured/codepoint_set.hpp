// Sets of Unicode code points (sorted disjoint ranges) and their UTF-8 byte
// regexes: a regex front end works on code points, the lexer on bytes.
// Surrogates (U+D800..U+DFFF) have no UTF-8 form and are never encoded.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/rank/structured/regex_expr.hpp"

namespace troupe::structured {

class CodepointSet {
 public:
  static constexpr uint32_t kMax = 0x10FFFF;

  CodepointSet() = default;
  static CodepointSet of(uint32_t cp) { return range(cp, cp); }
  static CodepointSet range(uint32_t lo, uint32_t hi);
  static CodepointSet all() { return range(0, kMax); }

  void add(uint32_t lo, uint32_t hi);
  void add(uint32_t cp) { add(cp, cp); }
  void add(const CodepointSet& other);
  CodepointSet complement() const;
  CodepointSet intersect(const CodepointSet& other) const;
  CodepointSet minus(const CodepointSet& other) const { return intersect(other.complement()); }
  bool contains(uint32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }
  bool operator==(const CodepointSet& o) const { return ranges_ == o.ranges_; }

 private:
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

/// The UTF-8 encodings of the set's code points as one byte regex.
ExprId utf8_expr(ExprStore& store, const CodepointSet& set);
/// Appends the UTF-8 bytes of one code point.
void append_utf8(std::string& out, uint32_t cp);

}  // namespace troupe::structured

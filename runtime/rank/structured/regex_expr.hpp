// Regular expressions over bytes as hash-consed terms, matched by Brzozowski
// derivatives: the derivative of an expression by a byte is the expression of
// what may follow that byte, so a lexer's DFA is built lazily, one state per
// distinct derivative. Terms are normalised as they are built (alternations
// flattened, sorted and deduplicated, concatenations right-nested, counted
// repetitions kept as counts), which keeps the number of derivatives finite and
// `a{1,100000}` one term instead of 100000. Intersection and complement are
// terms too (a key that is none of the declared ones; a pattern with a length
// bound); a term built with them can denote the empty language without being
// `nothing`, so is_live() searches its derivatives.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace troupe::structured {

using ExprId = uint32_t;

/// A set of bytes (256 bits).
struct ByteSet {
  std::array<uint64_t, 4> words{};

  static ByteSet all();
  static ByteSet range(uint8_t lo, uint8_t hi);
  bool has(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi);
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  bool full() const;
  ByteSet operator|(const ByteSet& o) const;
  ByteSet operator&(const ByteSet& o) const;
  ByteSet operator~() const;
  bool operator==(const ByteSet& o) const { return words == o.words; }
};

/// A partition of the bytes into classes whose derivatives agree: class_of[b] in [0, count).
struct ByteClasses {
  std::array<uint8_t, 256> class_of{};
  uint16_t count = 1;
  /// One byte of each class.
  std::vector<uint8_t> representatives() const;
};

/// The coarsest partition finer than both.
ByteClasses refine(const ByteClasses& p, const ByteClasses& q);

enum class ExprKind : uint8_t { nothing, empty, bytes, concat, alt, both, negate, repeat };

class ExprStore {
 public:
  static constexpr ExprId kNothing = 0;  // the empty language
  static constexpr ExprId kEmpty = 1;    // the empty string
  static constexpr uint32_t kUnbounded = UINT32_MAX;

  /// max_nodes: past it, new terms are `nothing` and overflowed() turns true (callers check
  /// it and report the limit).
  explicit ExprStore(size_t max_nodes = 4'000'000);

  ExprId bytes(const ByteSet& set);
  ExprId byte(uint8_t b);
  ExprId literal(std::string_view text);
  /// Alternatives of fixed strings, factored into a prefix tree (cheap derivatives for
  /// 100k enum values).
  ExprId literal_set(std::vector<std::string_view> texts);
  ExprId concat(ExprId a, ExprId b);
  ExprId concat(std::span<const ExprId> parts);
  ExprId alt(ExprId a, ExprId b);
  ExprId alt(std::span<const ExprId> parts);
  ExprId both(ExprId a, ExprId b);  // intersection
  ExprId both(std::span<const ExprId> parts);
  ExprId negate(ExprId a);          // complement (all byte strings not in a)
  ExprId repeat(ExprId a, uint32_t lo, uint32_t hi);  // a{lo,hi}; hi may be kUnbounded
  ExprId star(ExprId a) { return repeat(a, 0, kUnbounded); }
  ExprId plus(ExprId a) { return repeat(a, 1, kUnbounded); }
  ExprId optional(ExprId a) { return alt(a, kEmpty); }

  ExprKind kind(ExprId e) const { return nodes_[e].kind; }
  bool nullable(ExprId e) const { return nodes_[e].nullable; }
  /// Built with intersection or complement somewhere below: may be empty though not `nothing`.
  bool has_boolean(ExprId e) const { return nodes_[e].boolean; }
  /// The term for what may follow byte b.
  ExprId derivative(ExprId e, uint8_t b);
  /// Bytes with equal derivatives share a class (a coarser partition is never returned).
  const ByteClasses& classes(ExprId e);
  /// Some byte string matches e. Searches derivatives for terms with intersection or
  /// complement, within `budget` terms; past it, answers true (an unfinishable lexeme then
  /// shows as one the output cannot complete, never as accepted text).
  bool is_live(ExprId e, size_t budget = 4096);
  /// e matches exactly `text` (derivatives; for tests and literal checks).
  bool matches(ExprId e, std::string_view text);

  size_t size() const { return nodes_.size(); }
  /// Derivatives computed so far (a measure of the work done, for per-mask bounds).
  uint64_t work() const { return work_; }
  bool overflowed() const { return overflowed_; }
  size_t memory_bytes() const;

 private:
  struct Node {
    ExprKind kind;
    bool nullable;
    bool boolean;
    uint32_t a = 0;  // bytes: set index; concat/negate/repeat: first child; alt/both: list offset
    uint32_t b = 0;  // concat: second child; alt/both: list length
    uint32_t lo = 0, hi = 0;  // repeat
    uint32_t hash = 0;
  };

  ExprId intern(Node node, std::span<const ExprId> list);
  bool same(const Node& x, std::span<const ExprId> xl, ExprId y) const;
  std::span<const ExprId> list(const Node& n) const { return {lists_.data() + n.a, n.b}; }
  ExprId nary(ExprKind kind, std::span<const ExprId> parts);
  ExprId derive(ExprId e, uint8_t b);
  void grow_table();

  std::vector<Node> nodes_;
  std::vector<ExprId> lists_;
  std::vector<ByteSet> sets_;
  std::vector<uint32_t> table_;  // open addressing over node ids; UINT32_MAX is free
  size_t max_nodes_;
  bool overflowed_ = false;
  uint32_t depth_ = 0;  // derivative / class recursion (a chain of nullable parts nests it)
  uint64_t work_ = 0;
  std::unordered_map<uint64_t, ExprId> derivatives_;  // (e << 8 | byte) -> derivative
  std::unordered_map<ExprId, uint32_t> class_index_;  // e -> index into classes_ (shared partitions)
  std::vector<ByteClasses> classes_;
  std::unordered_map<std::string, uint32_t> class_ids_;
  std::unordered_map<ExprId, bool> live_;
};

}  // namespace troupe::structured

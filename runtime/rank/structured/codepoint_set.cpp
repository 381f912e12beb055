#include "runtime/rank/structured/codepoint_set.hpp"

#include <algorithm>

#include "runtime/text/tokenizer/unicode.hpp"

namespace troupe::structured {

CodepointSet CodepointSet::range(uint32_t lo, uint32_t hi) {
  CodepointSet s;
  s.add(lo, hi);
  return s;
}

void CodepointSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  hi = std::min(hi, kMax);
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), std::make_pair(lo, uint32_t{0}));
  ranges_.insert(it, {lo, hi});
  // Merge overlapping or touching neighbours.
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  ranges_.swap(merged);
}

void CodepointSet::add(const CodepointSet& other) {
  for (const auto& [lo, hi] : other.ranges_) add(lo, hi);
}

CodepointSet CodepointSet::complement() const {
  CodepointSet c;
  uint32_t next = 0;
  for (const auto& [lo, hi] : ranges_) {
    if (lo > next) c.ranges_.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMax) c.ranges_.emplace_back(next, kMax);
  return c;
}

CodepointSet CodepointSet::intersect(const CodepointSet& other) const {
  CodepointSet r;
  size_t i = 0, j = 0;
  while (i < ranges_.size() && j < other.ranges_.size()) {
    uint32_t lo = std::max(ranges_[i].first, other.ranges_[j].first);
    uint32_t hi = std::min(ranges_[i].second, other.ranges_[j].second);
    if (lo <= hi) r.ranges_.emplace_back(lo, hi);
    if (ranges_[i].second < other.ranges_[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return r;
}

bool CodepointSet::contains(uint32_t cp) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), std::make_pair(cp, UINT32_MAX));
  return it != ranges_.begin() && std::prev(it)->second >= cp;
}

void append_utf8(std::string& out, uint32_t cp) { tokenizer::append_utf8(cp, &out); }

namespace {

int utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// [lo, hi] with one encoded length: split until every byte position of the range is
// an independent byte range, then one concatenation of byte ranges.
void encode_same_length(ExprStore& s, uint32_t lo, uint32_t hi, int n, std::vector<ExprId>& out) {
  for (int i = 1; i < n; ++i) {
    uint32_t m = (uint32_t{1} << (6 * i)) - 1;  // the low bits the last i bytes carry
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        encode_same_length(s, lo, lo | m, n, out);
        encode_same_length(s, (lo | m) + 1, hi, n, out);
        return;
      }
      if ((hi & m) != m) {
        encode_same_length(s, lo, (hi & ~m) - 1, n, out);
        encode_same_length(s, hi & ~m, hi, n, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  std::vector<ExprId> parts;
  for (size_t k = 0; k < a.size(); ++k) {
    parts.push_back(s.bytes(ByteSet::range(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]))));
  }
  out.push_back(s.concat(parts));
}

}  // namespace

ExprId utf8_expr(ExprStore& store, const CodepointSet& set) {
  static const uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  CodepointSet valid = set.minus(CodepointSet::range(0xD800, 0xDFFF));
  std::vector<ExprId> alts;
  for (auto [lo, hi] : valid.ranges()) {
    for (uint32_t end : kLengthEnds) {
      if (lo > hi) break;
      if (lo > end) continue;
      uint32_t top = std::min(hi, end);
      encode_same_length(store, lo, top, utf8_length(lo), alts);
      lo = top + 1;
    }
  }
  return store.alt(alts);
}

}  // namespace troupe::structured

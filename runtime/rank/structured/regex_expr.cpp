#include "runtime/rank/structured/regex_expr.hpp"

#include <algorithm>
#include <map>
#include <string>

namespace troupe::structured {

ByteSet ByteSet::all() {
  ByteSet s;
  s.words.fill(~uint64_t{0});
  return s;
}

ByteSet ByteSet::range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  s.add_range(lo, hi);
  return s;
}

void ByteSet::add_range(uint8_t lo, uint8_t hi) {
  for (int b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
}

bool ByteSet::full() const {
  return (words[0] & words[1] & words[2] & words[3]) == ~uint64_t{0};
}

ByteSet ByteSet::operator|(const ByteSet& o) const {
  ByteSet r;
  for (int i = 0; i < 4; ++i) r.words[i] = words[i] | o.words[i];
  return r;
}

ByteSet ByteSet::operator&(const ByteSet& o) const {
  ByteSet r;
  for (int i = 0; i < 4; ++i) r.words[i] = words[i] & o.words[i];
  return r;
}

ByteSet ByteSet::operator~() const {
  ByteSet r;
  for (int i = 0; i < 4; ++i) r.words[i] = ~words[i];
  return r;
}

std::vector<uint8_t> ByteClasses::representatives() const {
  std::vector<uint8_t> reps(count, 0);
  std::vector<bool> seen(count, false);
  for (int b = 0; b < 256; ++b) {
    uint8_t c = class_of[b];
    if (!seen[c]) {
      seen[c] = true;
      reps[c] = static_cast<uint8_t>(b);
    }
  }
  return reps;
}

namespace {

uint32_t mix(uint32_t h, uint64_t v) {
  uint64_t x = (h ^ v) * 0x9E3779B97F4A7C15ULL;
  return static_cast<uint32_t>(x ^ (x >> 29));
}

}  // namespace

ByteClasses refine(const ByteClasses& p, const ByteClasses& q) {
  if (q.count == 1) return p;
  if (p.count == 1) return q;
  ByteClasses r;
  std::vector<int16_t> ids(static_cast<size_t>(p.count) * q.count, -1);
  uint16_t next = 0;
  for (int b = 0; b < 256; ++b) {
    int16_t& id = ids[static_cast<size_t>(p.class_of[b]) * q.count + q.class_of[b]];
    if (id < 0) id = static_cast<int16_t>(next++);
    r.class_of[b] = static_cast<uint8_t>(id);
  }
  r.count = next;
  return r;
}

ExprStore::ExprStore(size_t max_nodes) : max_nodes_(max_nodes) {
  table_.assign(1024, UINT32_MAX);
  intern(Node{ExprKind::nothing, false, false}, {});
  intern(Node{ExprKind::empty, true, false}, {});
}

size_t ExprStore::memory_bytes() const {
  return nodes_.capacity() * sizeof(Node) + lists_.capacity() * sizeof(ExprId) + sets_.capacity() * sizeof(ByteSet) +
         table_.capacity() * sizeof(uint32_t) + derivatives_.size() * 32 + classes_.capacity() * sizeof(ByteClasses) +
         class_ids_.size() * 320 + class_index_.size() * 24 + live_.size() * 24;
}

bool ExprStore::same(const Node& x, std::span<const ExprId> xl, ExprId y) const {
  const Node& n = nodes_[y];
  if (n.kind != x.kind || n.hash != x.hash) return false;
  switch (x.kind) {
    case ExprKind::nothing:
    case ExprKind::empty:
      return true;
    case ExprKind::bytes:
      return sets_[n.a] == sets_[x.a];
    case ExprKind::concat:
      return n.a == x.a && n.b == x.b;
    case ExprKind::negate:
      return n.a == x.a;
    case ExprKind::repeat:
      return n.a == x.a && n.lo == x.lo && n.hi == x.hi;
    case ExprKind::alt:
    case ExprKind::both: {
      auto yl = list(n);
      return std::equal(xl.begin(), xl.end(), yl.begin(), yl.end());
    }
  }
  return false;
}

void ExprStore::grow_table() {
  std::vector<uint32_t> bigger(table_.size() * 2, UINT32_MAX);
  size_t mask = bigger.size() - 1;
  for (uint32_t id : table_) {
    if (id == UINT32_MAX) continue;
    size_t i = nodes_[id].hash & mask;
    while (bigger[i] != UINT32_MAX) i = (i + 1) & mask;
    bigger[i] = id;
  }
  table_.swap(bigger);
}

// Finds or adds the term. For bytes, x.a is a provisional index into sets_ (the set is
// appended by the caller and dropped again when the term already exists).
ExprId ExprStore::intern(Node x, std::span<const ExprId> xl) {
  uint32_t h = mix(static_cast<uint32_t>(x.kind), x.lo * 31ULL + x.hi);
  switch (x.kind) {
    case ExprKind::bytes:
      for (uint64_t w : sets_[x.a].words) h = mix(h, w);
      break;
    case ExprKind::alt:
    case ExprKind::both:
      for (ExprId e : xl) h = mix(h, e);
      break;
    default:
      h = mix(mix(h, x.a), x.b);
  }
  x.hash = h;
  size_t mask = table_.size() - 1;
  size_t i = h & mask;
  while (table_[i] != UINT32_MAX) {
    if (same(x, xl, table_[i])) {
      if (x.kind == ExprKind::bytes) sets_.pop_back();
      return table_[i];
    }
    i = (i + 1) & mask;
  }
  if (nodes_.size() >= max_nodes_) {
    overflowed_ = true;
    if (x.kind == ExprKind::bytes) sets_.pop_back();
    return kNothing;
  }
  if (x.kind == ExprKind::alt || x.kind == ExprKind::both) {
    x.a = static_cast<uint32_t>(lists_.size());
    x.b = static_cast<uint32_t>(xl.size());
    lists_.insert(lists_.end(), xl.begin(), xl.end());
  }
  ExprId id = static_cast<ExprId>(nodes_.size());
  nodes_.push_back(x);
  table_[i] = id;
  if (nodes_.size() * 2 > table_.size()) grow_table();
  return id;
}

ExprId ExprStore::bytes(const ByteSet& set) {
  if (set.empty()) return kNothing;
  sets_.push_back(set);
  return intern(Node{ExprKind::bytes, false, false, static_cast<uint32_t>(sets_.size() - 1)}, {});
}

ExprId ExprStore::byte(uint8_t b) {
  ByteSet s;
  s.add(b);
  return bytes(s);
}

ExprId ExprStore::literal(std::string_view text) {
  ExprId e = kEmpty;
  for (size_t i = text.size(); i-- > 0;) e = concat(byte(static_cast<uint8_t>(text[i])), e);
  return e;
}

ExprId ExprStore::literal_set(std::vector<std::string_view> texts) {
  std::sort(texts.begin(), texts.end());
  texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
  // Recursive factoring over sorted ranges sharing a prefix of `depth` bytes.
  struct Builder {
    ExprStore& s;
    const std::vector<std::string_view>& t;
    ExprId build(size_t lo, size_t hi, size_t depth) {
      std::vector<ExprId> alts;
      size_t i = lo;
      if (i < hi && t[i].size() == depth) {
        alts.push_back(kEmpty);
        ++i;
      }
      while (i < hi) {
        uint8_t c = static_cast<uint8_t>(t[i][depth]);
        size_t j = i;
        while (j < hi && static_cast<uint8_t>(t[j][depth]) == c) ++j;
        alts.push_back(s.concat(s.byte(c), build(i, j, depth + 1)));
        i = j;
      }
      return s.alt(alts);
    }
  };
  Builder b{*this, texts};
  return b.build(0, texts.size(), 0);
}

ExprId ExprStore::concat(ExprId a, ExprId b) {
  if (a == kNothing || b == kNothing) return kNothing;
  if (a == kEmpty) return b;
  if (b == kEmpty) return a;
  Node na = nodes_[a];
  if (na.kind == ExprKind::concat) return concat(na.a, concat(na.b, b));
  const Node& nb = nodes_[b];
  return intern(Node{ExprKind::concat, na.nullable && nb.nullable, na.boolean || nb.boolean, a, b}, {});
}

ExprId ExprStore::concat(std::span<const ExprId> parts) {
  ExprId e = kEmpty;
  for (size_t i = parts.size(); i-- > 0;) e = concat(parts[i], e);
  return e;
}

ExprId ExprStore::alt(ExprId a, ExprId b) {
  ExprId parts[2] = {a, b};
  return alt(parts);
}

ExprId ExprStore::alt(std::span<const ExprId> parts) { return nary(ExprKind::alt, parts); }

ExprId ExprStore::both(ExprId a, ExprId b) {
  ExprId parts[2] = {a, b};
  return both(parts);
}

ExprId ExprStore::both(std::span<const ExprId> parts) { return nary(ExprKind::both, parts); }

// Alternation and intersection: flattened, byte sets merged, sorted, deduplicated.
ExprId ExprStore::nary(ExprKind kind, std::span<const ExprId> parts) {
  const bool is_alt = kind == ExprKind::alt;
  std::vector<ExprId> flat;
  ByteSet merged = is_alt ? ByteSet{} : ByteSet::all();
  bool any_bytes = false;
  auto add = [&](ExprId e, auto&& self) -> bool {  // false: the whole term is decided
    if (e == kNothing) return is_alt;  // alternation drops it; intersection with it is empty
    const Node& n = nodes_[e];
    if (n.kind == kind) {
      for (ExprId c : list(n)) {
        if (!self(c, self)) return false;
      }
      return true;
    }
    if (n.kind == ExprKind::bytes) {
      any_bytes = true;
      merged = is_alt ? (merged | sets_[n.a]) : (merged & sets_[n.a]);
      return true;
    }
    flat.push_back(e);
    return true;
  };
  for (ExprId p : parts) {
    if (!add(p, add)) return kNothing;
  }
  if (any_bytes) {
    ExprId b = bytes(merged);
    if (!is_alt && b == kNothing) return kNothing;
    flat.push_back(b);
  }
  std::sort(flat.begin(), flat.end());
  flat.erase(std::unique(flat.begin(), flat.end()), flat.end());
  if (flat.empty()) return is_alt ? kNothing : negate(kNothing);
  if (flat.size() == 1) return flat[0];
  bool nullable = !is_alt;
  bool boolean = !is_alt;
  for (ExprId e : flat) {
    nullable = is_alt ? (nullable || nodes_[e].nullable) : (nullable && nodes_[e].nullable);
    boolean = boolean || nodes_[e].boolean;
  }
  return intern(Node{kind, nullable, boolean}, flat);
}

ExprId ExprStore::negate(ExprId a) {
  const Node& n = nodes_[a];
  if (n.kind == ExprKind::negate) return n.a;
  return intern(Node{ExprKind::negate, !n.nullable, true, a}, {});
}

ExprId ExprStore::repeat(ExprId a, uint32_t lo, uint32_t hi) {
  if (hi != kUnbounded && lo > hi) return kNothing;
  if (a == kNothing) return lo == 0 ? kEmpty : kNothing;
  if (a == kEmpty || hi == 0) return kEmpty;
  if (lo == 1 && hi == 1) return a;
  const Node& n = nodes_[a];
  if (n.nullable) lo = 0;  // each copy may be empty
  if (n.kind == ExprKind::repeat && n.lo == 0 && n.hi == kUnbounded && hi == kUnbounded) return a;
  return intern(Node{ExprKind::repeat, lo == 0, n.boolean, a, 0, lo, hi}, {});
}

namespace {
// Deeper recursion (a regex of thousands of optional parts in a row) is refused through
// overflowed() instead of exhausting the stack.
constexpr uint32_t kMaxRecursion = 4000;
}  // namespace

ExprId ExprStore::derivative(ExprId e, uint8_t b) {
  if (e <= kEmpty) return kNothing;
  uint64_t key = (uint64_t{e} << 8) | b;
  auto it = derivatives_.find(key);
  if (it != derivatives_.end()) return it->second;
  if (depth_ >= kMaxRecursion) {
    overflowed_ = true;
    return kNothing;
  }
  ++depth_;
  ++work_;
  ExprId d = derive(e, b);
  --depth_;
  derivatives_.emplace(key, d);
  return d;
}

ExprId ExprStore::derive(ExprId e, uint8_t b) {
  Node n = nodes_[e];  // a copy: derivatives add nodes
  switch (n.kind) {
    case ExprKind::nothing:
    case ExprKind::empty:
      return kNothing;
    case ExprKind::bytes:
      return sets_[n.a].has(b) ? kEmpty : kNothing;
    case ExprKind::concat: {
      ExprId first = concat(derivative(n.a, b), n.b);
      if (!nodes_[n.a].nullable) return first;
      return alt(first, derivative(n.b, b));
    }
    case ExprKind::alt:
    case ExprKind::both: {
      std::vector<ExprId> kids(list(n).begin(), list(n).end());
      for (ExprId& k : kids) k = derivative(k, b);
      return n.kind == ExprKind::alt ? alt(kids) : both(kids);
    }
    case ExprKind::negate:
      return negate(derivative(n.a, b));
    case ExprKind::repeat: {
      uint32_t lo = n.lo > 0 ? n.lo - 1 : 0;
      uint32_t hi = n.hi == kUnbounded ? kUnbounded : n.hi - 1;
      return concat(derivative(n.a, b), repeat(n.a, lo, hi));
    }
  }
  return kNothing;
}

const ByteClasses& ExprStore::classes(ExprId e) {
  auto it = class_index_.find(e);
  if (it != class_index_.end()) return classes_[it->second];
  static const ByteClasses kOne;
  if (depth_ >= kMaxRecursion) {
    overflowed_ = true;
    return kOne;
  }
  struct Depth {
    uint32_t& d;
    explicit Depth(uint32_t& x) : d(++x) {}
    ~Depth() { --d; }
  } depth(depth_);
  Node n = nodes_[e];
  ByteClasses c;  // one class
  switch (n.kind) {
    case ExprKind::nothing:
    case ExprKind::empty:
      break;
    case ExprKind::bytes:
      if (!sets_[n.a].full()) {
        for (int b = 0; b < 256; ++b) c.class_of[b] = sets_[n.a].has(static_cast<uint8_t>(b)) ? 1 : 0;
        c.count = 2;
      }
      break;
    case ExprKind::concat:
      c = classes(n.a);
      if (nodes_[n.a].nullable) c = refine(c, classes(n.b));
      break;
    case ExprKind::alt:
    case ExprKind::both: {
      std::vector<ExprId> kids(list(n).begin(), list(n).end());
      for (ExprId k : kids) c = refine(c, classes(k));
      break;
    }
    case ExprKind::negate:
    case ExprKind::repeat:
      c = classes(n.a);
      break;
  }
  std::string key(reinterpret_cast<const char*>(c.class_of.data()), 256);
  auto [id, fresh] = class_ids_.emplace(std::move(key), static_cast<uint32_t>(classes_.size()));
  if (fresh) classes_.push_back(c);
  class_index_.emplace(e, id->second);
  return classes_[id->second];
}

bool ExprStore::is_live(ExprId e, size_t budget) {
  if (e == kNothing) return false;
  if (!nodes_[e].boolean || nodes_[e].nullable) return true;
  auto it = live_.find(e);
  if (it != live_.end()) return it->second;
  // Depth-first over derivatives, one byte per class, until a nullable term: a long
  // completion (minLength 100) is found in about 100 steps.
  std::vector<ExprId> stack{e};
  std::unordered_map<ExprId, bool> seen{{e, true}};
  bool live = false;
  bool exhausted = true;
  while (!stack.empty() && !live) {
    if (seen.size() > budget) {
      exhausted = false;
      break;
    }
    ExprId x = stack.back();
    stack.pop_back();
    for (uint8_t rep : classes(x).representatives()) {
      ExprId d = derivative(x, rep);
      if (d == kNothing || seen.count(d)) continue;
      if (nodes_[d].nullable || !nodes_[d].boolean) {
        live = true;
        break;
      }
      if (auto known = live_.find(d); known != live_.end()) {
        if (known->second) {
          live = true;
          break;
        }
        continue;
      }
      seen.emplace(d, true);
      stack.push_back(d);
    }
  }
  if (!live && !exhausted) live = true;  // out of budget: unknown, so not refused
  if (live || exhausted) live_.emplace(e, live);
  return live;
}

bool ExprStore::matches(ExprId e, std::string_view text) {
  for (char c : text) {
    e = derivative(e, static_cast<uint8_t>(c));
    if (e == kNothing) return false;
  }
  return nullable(e);
}

}  // namespace troupe::structured

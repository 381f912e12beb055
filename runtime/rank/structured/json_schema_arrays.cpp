// Arrays: position i's schema is every part's prefix schema at i (prefixItems,
// or items in its array form) or else its schema for later items (items, or
// additionalItems with the array form). Positions up to max(prefix, minItems)
// are spelt out, the first minItems required; later items repeat, spelt out
// up to maxItems when it is bounded.
#include <algorithm>

#include "runtime/rank/structured/json_schema_compiler.hpp"

namespace troupe::structured {
namespace {

constexpr uint64_t kMaxSpeltItems = 100'000;

}  // namespace

std::vector<SchemaCompiler::ArrayPart> SchemaCompiler::array_parts(const SchemaFacts& f) {
  std::vector<ArrayPart> parts;
  for (const SchemaJson* node : f.parts) {
    if (!node->is_object()) continue;
    auto find = [&](const char* k) -> const SchemaJson* {
      auto it = node->find(k);
      return it == node->end() ? nullptr : &*it;
    };
    const SchemaJson* prefix_items = find("prefixItems");
    const SchemaJson* items = find("items");
    const SchemaJson* additional = find("additionalItems");
    ArrayPart p;
    if (prefix_items && prefix_items->is_array()) {
      p.prefix = prefix_items;
      p.tail = items;
    } else if (items && items->is_array()) {
      p.prefix = items;
      p.tail = additional;
    } else {
      p.tail = items;
    }
    if (p.prefix || p.tail) parts.push_back(p);
  }
  return parts;
}

Result<Symbol> SchemaCompiler::array(const SchemaFacts& f) {
  std::vector<ArrayPart> parts = array_parts(f);
  size_t prefix_len = 0;
  for (const ArrayPart& p : parts) {
    if (p.prefix) prefix_len = std::max(prefix_len, p.prefix->size());
  }
  auto at = [&](uint64_t i) {
    Conjunction c;
    for (const ArrayPart& p : parts) {
      if (p.prefix && i < p.prefix->size()) {
        c.push_back({&(*p.prefix)[static_cast<size_t>(i)], 0});
      } else if (p.tail) {
        c.push_back({p.tail, 0});
      }
    }
    return c;
  };
  const uint64_t min = f.min_items;
  const std::optional<uint64_t> max = f.max_items;
  if (max && min > *max) return b_.rule("never");
  uint64_t spelt = std::max<uint64_t>(prefix_len, min);
  if (max) spelt = std::min(spelt, *max);
  const bool bounded_tail = max.has_value();
  const uint64_t last = bounded_tail ? *max : spelt;  // positions [spelt, last) are optional
  if (last > kMaxSpeltItems) {
    return invalid_argument("JSON Schema: minItems/maxItems of " + std::to_string(last) + " is over the limit of " +
                            std::to_string(kMaxSpeltItems));
  }
  // items(i): the items from position i on.
  std::vector<Symbol> items(static_cast<size_t>(last) + 1);
  for (auto& r : items) r = b_.rule("items");
  for (uint64_t i = 0; i < last; ++i) {
    TROUPE_RETURN_IF_ERROR(b_.check_budget());
    auto v = value(at(i));
    if (!v) return v.status();
    std::vector<Symbol> rhs;
    if (i > 0) rhs.push_back(comma_);
    rhs.push_back(*v);
    rhs.push_back(items[static_cast<size_t>(i + 1)]);
    b_.add(items[static_cast<size_t>(i)], std::move(rhs));
    if (i >= min) b_.add(items[static_cast<size_t>(i)], {});
  }
  Symbol& end = items[static_cast<size_t>(last)];
  b_.add(end, {});
  if (!bounded_tail) {
    // Any number of further items: tail -> "," item tail | empty (no comma before the first).
    auto v = value(at(last));
    if (!v) return v.status();
    Symbol more = b_.rule("more items");
    b_.add(more, {comma_, *v, more});
    b_.add(more, {});
    if (last == 0) {
      b_.add(end, {*v, more});
    } else {
      b_.add(end, {comma_, *v, more});
    }
  }
  Symbol arr = b_.rule("array");
  b_.add(arr, {open_array_, items[0], close_array_});
  return arr;
}

}  // namespace troupe::structured

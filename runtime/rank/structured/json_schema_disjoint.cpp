// oneOf needs its branches to be disjoint for "exactly one" to be the same as
// "at least one" (anyOf, which a grammar can enforce). This proves it where it
// can: different types, enum values the other branch refuses, disjoint number
// ranges or lengths, a required property the other branch forbids or requires
// with a disjoint value (tagged unions), disjoint item or property counts.
// What it cannot prove, the compiler refuses rather than accept a value that
// matches two branches.
#include <algorithm>

#include "runtime/rank/structured/json_schema_compiler.hpp"

namespace troupe::structured {
namespace {

constexpr int kMaxDepth = 8;
constexpr size_t kMaxChecks = 5000;

// Every value in the range of one bound pair is outside the other's.
bool ranges_disjoint(const NumberConstraints& a, const NumberConstraints& b) {
  auto below = [](const std::optional<NumberBound>& upper, const std::optional<NumberBound>& lower) {
    if (!upper || !lower) return false;
    int c = upper->value.compare(lower->value);
    return c < 0 || (c == 0 && (upper->exclusive || lower->exclusive));
  };
  return below(a.upper, b.lower) || below(b.upper, a.lower);
}

bool counts_disjoint(uint64_t min_a, const std::optional<uint64_t>& max_a, uint64_t min_b,
                     const std::optional<uint64_t>& max_b) {
  return (max_a && *max_a < min_b) || (max_b && *max_b < min_a);
}

std::vector<std::string> required_keys(const std::vector<const SchemaJson*>& parts) {
  std::vector<std::string> keys;
  for (const SchemaJson* p : parts) {
    if (!p->is_object()) continue;
    auto it = p->find("required");
    if (it == p->end() || !it->is_array()) continue;
    for (const auto& k : *it) {
      if (k.is_string()) keys.push_back(k.get<std::string>());
    }
  }
  return keys;
}

}  // namespace

Result<bool> SchemaCompiler::disjoint(const Conjunction& a, const Conjunction& b, int depth) {
  if (depth > kMaxDepth || ++disjoint_checks_ > kMaxChecks) return false;
  auto fa = facts_.facts(facts_.normalize(a));
  if (!fa) return fa.status();
  auto fb = facts_.facts(facts_.normalize(b));
  if (!fb) return fb.status();
  if (fa->never || fb->never) return true;
  // A side with choices left: every one of its alternatives must be disjoint from the other side.
  for (int side = 0; side < 2; ++side) {
    const SchemaFacts& f = side == 0 ? *fa : *fb;
    if (f.choices.empty()) continue;
    const SchemaFacts::Choice& c = f.choices.front();
    for (const auto& branch : (*c.node)[c.which == 1 ? "anyOf" : "oneOf"]) {
      Conjunction next = side == 0 ? a : b;
      next.push_back({c.node, c.which});
      next.push_back({&branch, 0});
      auto d = side == 0 ? disjoint(next, b, depth + 1) : disjoint(a, next, depth + 1);
      if (!d || !*d) return d;
    }
    return true;
  }
  const uint8_t common = fa->types & fb->types;
  if (common == 0) return true;
  for (int side = 0; side < 2; ++side) {
    const SchemaFacts& f = side == 0 ? *fa : *fb;
    if (!f.has_enum) continue;
    bool all_refused = true;
    for (const SchemaJson* v : f.enum_values) {
      auto own = satisfies_facts(*v, f, 0, /*member_of_enum=*/true);
      if (!own) return own.status();
      if (!*own) continue;
      auto other = satisfies(*v, side == 0 ? b : a, 0);
      if (!other) return other.status();
      if (*other) {
        all_refused = false;
        break;
      }
    }
    if (all_refused) return true;
  }
  if (common & (kNullType | kBooleanType)) return false;
  if ((common & (kIntegerType | kFractionType)) && !ranges_disjoint(fa->number, fb->number)) return false;
  if ((common & kStringType) &&
      !counts_disjoint(fa->string.min_length, fa->string.max_length, fb->string.min_length, fb->string.max_length)) {
    return false;
  }
  if (common & kArrayType) {
    bool apart = counts_disjoint(fa->min_items, fa->max_items, fb->min_items, fb->max_items);
    if (!apart && fa->min_items > 0 && fb->min_items > 0) {
      auto first = [&](const SchemaFacts& f) {
        Conjunction c;
        for (const ArrayPart& p : array_parts(f)) {
          if (p.prefix && !p.prefix->empty()) {
            c.push_back({&(*p.prefix)[0], 0});
          } else if (p.tail) {
            c.push_back({p.tail, 0});
          }
        }
        return c;
      };
      auto d = disjoint(first(*fa), first(*fb), depth + 1);
      if (!d) return d;
      apart = *d;
    }
    if (!apart) return false;
  }
  if (common & kObjectType) {
    bool apart = counts_disjoint(fa->min_properties, fa->max_properties, fb->min_properties, fb->max_properties);
    std::vector<ObjectPart> pa = object_parts(*fa), pb = object_parts(*fb);
    std::vector<std::string> ra = required_keys(fa->parts), rb = required_keys(fb->parts);
    // A key one side requires and the other forbids, or both require with disjoint values.
    for (int side = 0; side < 2 && !apart; ++side) {
      const auto& req = side == 0 ? ra : rb;
      const auto& other_req = side == 0 ? rb : ra;
      for (const std::string& k : req) {
        bool declared = false;
        auto theirs = property_schema(side == 0 ? pb : pa, k, &declared);
        if (!theirs) return theirs.status();
        auto tf = facts_.facts(facts_.normalize(*theirs));
        if (!tf) return tf.status();
        if (tf->never) {
          apart = true;
          break;
        }
        if (side == 0 && std::find(other_req.begin(), other_req.end(), k) != other_req.end()) {
          auto mine = property_schema(pa, k, &declared);
          if (!mine) return mine.status();
          auto d = disjoint(*mine, *theirs, depth + 1);
          if (!d) return d;
          if (*d) {
            apart = true;
            break;
          }
        }
      }
    }
    if (!apart) return false;
  }
  return true;
}

}  // namespace troupe::structured

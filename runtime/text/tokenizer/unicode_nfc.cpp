#include "runtime/text/tokenizer/unicode_nfc.hpp"

#include <algorithm>
#include <vector>

#include "runtime/text/tokenizer/unicode.hpp"
#include "runtime/text/tokenizer/unicode_bert.hpp"

namespace troupe::tokenizer {

namespace {

// Hangul syllables compose arithmetically (Unicode 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// The primary composite of (a, b), or 0.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  using unicode_nfc_detail::kCompositionCount;
  using unicode_nfc_detail::kCompositions;
  const auto* end = kCompositions + kCompositionCount;
  const auto* it = std::lower_bound(kCompositions, end, std::pair{a, b},
                                    [](const unicode_nfc_detail::Composition& c, std::pair<uint32_t, uint32_t> key) {
                                      return c.first < key.first || (c.first == key.first && c.second < key.second);
                                    });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

}  // namespace

uint8_t combining_class(uint32_t cp) {
  using unicode_nfc_detail::kCombiningClassCount;
  using unicode_nfc_detail::kCombiningClasses;
  const auto* end = kCombiningClasses + kCombiningClassCount;
  const auto* it = std::lower_bound(kCombiningClasses, end, cp,
                                    [](const unicode_nfc_detail::CombiningClassRange& r, uint32_t v) { return r.last < v; });
  return it != end && it->first <= cp ? it->ccc : 0;
}

std::string nfc(std::string_view text) {
  if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
    return std::string(text);
  std::vector<uint32_t> d;
  d.reserve(text.size());
  for (uint32_t cp : utf8_to_codepoints_replacing(text)) append_nfd(cp > 0x10FFFF ? 0xFFFD : cp, &d);
  // Canonical ordering: each run of non-starters sorted by class, stably.
  for (size_t i = 0; i < d.size();) {
    if (combining_class(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && combining_class(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + static_cast<std::ptrdiff_t>(i), d.begin() + static_cast<std::ptrdiff_t>(j),
                     [](uint32_t a, uint32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  // Canonical composition: a character joins the last starter unless blocked
  // by a character of the same or a higher class between them.
  std::vector<uint32_t> out;
  out.reserve(d.size());
  size_t starter = 0;
  int last_class = -1;  // -1: no starter yet
  for (uint32_t c : d) {
    const int cc = combining_class(c);
    // last_class 0: the starter is the previous character (absorbed marks do not count).
    if (last_class >= 0 && (last_class == 0 || last_class < cc)) {
      if (const uint32_t comp = compose(out[starter], c); comp != 0) {
        out[starter] = comp;
        continue;
      }
    }
    if (cc == 0) {
      starter = out.size();
      last_class = 0;
    } else if (last_class >= 0) {
      last_class = cc;
    }
    out.push_back(c);
  }
  std::string s;
  s.reserve(text.size());
  for (uint32_t cp : out) append_utf8(cp, &s);
  return s;
}

}  // namespace troupe::tokenizer

#include "runtime/text/tokenizer/unicode_bert.hpp"

#include <algorithm>

#include "runtime/text/tokenizer/unicode.hpp"

namespace troupe::tokenizer {

using namespace unicode_bert_detail;  // NOLINT: this file implements them

uint8_t category_flags(uint32_t cp) {
  const CategoryRange* end = kCategoryRanges + kCategoryRangeCount;
  const CategoryRange* it =
      std::lower_bound(kCategoryRanges, end, cp, [](const CategoryRange& r, uint32_t v) { return r.last < v; });
  if (it == end || it->first > cp) return 0;
  return it->flags;
}

bool is_cjk_ideograph(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) ||
         (cp >= 0x2B920 && cp <= 0x2CEAF) ||  // 0x2B820 in Unicode; 0x2B920 in the reference code
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

namespace {

// Hangul syllables decompose arithmetically (Unicode 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = 11172;

const Decomposition* find_decomposition(uint32_t cp) {
  const Decomposition* end = kDecompositions + kDecompositionCount;
  const Decomposition* it =
      std::lower_bound(kDecompositions, end, cp, [](const Decomposition& d, uint32_t v) { return d.cp < v; });
  return it != end && it->cp == cp ? it : nullptr;
}

}  // namespace

void append_nfd(uint32_t cp, std::vector<uint32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  const Decomposition* d = find_decomposition(cp);
  if (d == nullptr) {
    out->push_back(cp);
    return;
  }
  out->insert(out->end(), kDecompositionData + d->offset, kDecompositionData + d->offset + d->length);
}

uint32_t nfd_first(uint32_t cp) {
  if (cp >= kSBase && cp < kSBase + kSCount) return kLBase + (cp - kSBase) / kNCount;
  const Decomposition* d = find_decomposition(cp);
  return d == nullptr ? cp : kDecompositionData[d->offset];
}

uint32_t to_lower_simple(uint32_t cp) {
  const LowercaseRun* end = kLowercaseRuns + kLowercaseRunCount;
  const LowercaseRun* it =
      std::lower_bound(kLowercaseRuns, end, cp, [](const LowercaseRun& r, uint32_t v) { return r.last < v; });
  if (it == end || it->first > cp || (cp - it->first) % it->stride != 0) return cp;
  return static_cast<uint32_t>(static_cast<int64_t>(cp) + it->delta);
}

void append_lower(uint32_t cp, std::vector<uint32_t>* out) {
  out->push_back(to_lower_simple(cp));
  if (cp == 0x130) out->push_back(0x307);  // the one full mapping longer than one code point
}

std::vector<uint32_t> utf8_to_codepoints_lossy(std::string_view s) {
  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      cps.push_back(b0);
      ++i;
      continue;
    }
    size_t n = 0;
    uint32_t v = 0, min = 0;
    if ((b0 & 0xE0) == 0xC0) {
      n = 2, v = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
      n = 3, v = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
      n = 4, v = b0 & 0x07, min = 0x10000;
    }
    size_t k = 1;
    for (; n != 0 && k < n && i + k < s.size(); ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) break;
      v = (v << 6) | (b & 0x3F);
    }
    if (n != 0 && k == n && v >= min && v <= 0x10FFFF && !(v >= 0xD800 && v <= 0xDFFF)) {
      cps.push_back(v);
      i += n;
    } else {
      cps.push_back(0xFFFD);  // one replacement per maximal invalid prefix
      i += std::max<size_t>(k, 1);
    }
  }
  return cps;
}

}  // namespace troupe::tokenizer

// Unicode Normalization Form C (canonical decomposition, canonical ordering,
// canonical composition), for tokenizer.json's NFC normalizer (Qwen2). The
// decompositions come from unicode_bert_nfd_table.cpp; combining classes and
// composites from unicode_nfc_ccc_table.cpp and unicode_nfc_composition_table.cpp
// (gen_unicode_nfc_table.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::tokenizer {

namespace unicode_nfc_detail {
struct CombiningClassRange {
  uint32_t first;
  uint32_t last;
  uint8_t ccc;
};
struct Composition {
  uint32_t first;
  uint32_t second;
  uint32_t composite;
};
extern const CombiningClassRange kCombiningClasses[];
extern const size_t kCombiningClassCount;
extern const Composition kCompositions[];
extern const size_t kCompositionCount;
}  // namespace unicode_nfc_detail

/// Canonical combining class of `cp` (0 for starters).
uint8_t combining_class(uint32_t cp);

/// NFC of UTF-8 `text`; an invalid byte becomes U+FFFD first (as the
/// pre-tokenizers treat it). ASCII text comes back unchanged without work.
std::string nfc(std::string_view text);

}  // namespace troupe::tokenizer

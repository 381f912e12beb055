// Helpers for the grammar engine's tests: a byte-level vocabulary, whole-text
// acceptance, and compile-or-fail wrappers.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/rank/structured/grammar.hpp"
#include "runtime/rank/structured/grammar_matcher.hpp"
#include "runtime/rank/structured/token_vocabulary.hpp"

namespace troupe::structured::testing {

/// Tokens 0..255 are the single bytes; 256 ends the output.
inline std::shared_ptr<const TokenVocabulary> byte_vocab() {
  static const auto v = [] {
    std::vector<std::string> texts;
    for (int b = 0; b < 256; ++b) texts.emplace_back(1, static_cast<char>(b));
    texts.emplace_back();
    return TokenVocabulary::create(std::move(texts), {256}, 257);
  }();
  return v;
}

/// The whole text is a sentence of the grammar.
inline bool accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  if (!g) return false;
  GrammarMatcher m(g, byte_vocab());
  return m.accept_bytes(text) && m.can_end();
}

/// The text is a prefix of some sentence.
inline bool prefix_ok(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  if (!g) return false;
  GrammarMatcher m(g, byte_vocab());
  return m.accept_bytes(text);
}

template <class R>
std::shared_ptr<const Grammar> ok_or_null(R&& compiled) {
  EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
  return compiled.ok() ? *compiled : nullptr;
}

template <class R>
std::string error_of(R&& compiled) {
  EXPECT_FALSE(compiled.ok());
  return compiled.ok() ? std::string() : compiled.status().message();
}

}  // namespace troupe::structured::testing

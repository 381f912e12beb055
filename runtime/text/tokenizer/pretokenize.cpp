#include "runtime/text/tokenizer/pretokenize.hpp"

#include <cstdint>
#include <utility>

#include "runtime/text/tokenizer/unicode.hpp"

namespace troupe::tokenizer {

namespace {

enum class Cls : uint8_t { none, letter, number, space, other };

// Text as code points plus their classes; scanners return chunk lengths in code points.
// As llama.cpp's unicode_regex_split, an invalid UTF-8 byte is U+FFFD from here on.
struct Scan {
  std::vector<uint32_t> cps;
  std::vector<Cls> cls;

  // marks_are_letters: Qwen3.5's [\p{L}\p{M}]+, where a combining mark counts as a letter.
  Scan(std::string_view text, bool marks_are_letters) : cps(utf8_to_codepoints_replacing(text)) {
    const uint8_t letter = marks_are_letters ? kLetter | kMark : kLetter;
    cls.reserve(cps.size());
    for (uint32_t cp : cps) {
      const uint8_t f = codepoint_flags(cp);
      cls.push_back(f & kWhitespace ? Cls::space : f & letter ? Cls::letter : f & kNumber ? Cls::number : Cls::other);
    }
  }
};

using Span = std::pair<size_t, size_t>;  // [first, last) code point indices

size_t run_of(const Scan& s, size_t j, size_t end, Cls c) {
  while (j < end && s.cls[j] == c) ++j;
  return j;
}

bool is_nl(uint32_t c) { return c == '\r' || c == '\n'; }

uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// Length (2 or 3) of a contraction 's 't 're 've 'm 'll 'd at i, or 0.
size_t contraction(const Scan& s, size_t i, size_t end, bool any_case) {
  if (s.cps[i] != '\'' || i + 1 >= end) return 0;
  auto at = [&](size_t k) { return any_case ? ascii_lower(s.cps[k]) : s.cps[k]; };
  const uint32_t c1 = at(i + 1);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (i + 2 < end) {
    const uint32_t c2 = at(i + 2);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  }
  return 0;
}

// Trailing whitespace rule shared by all: \s+(?!\S)|\s+ over the run [i, j).
size_t whitespace_tail(size_t i, size_t j, size_t end) {
  if (j == end) return j - i;
  return j - i > 1 ? j - i - 1 : 1;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void split_gpt2(const Scan& s, size_t begin, size_t end, std::vector<Span>* out) {
  for (size_t i = begin; i < end;) {
    size_t n = contraction(s, i, end, /*any_case=*/false);
    if (n == 0) {
      const size_t off = (s.cps[i] == ' ' && i + 1 < end && s.cls[i + 1] != Cls::space) ? 1 : 0;
      const Cls c = s.cls[i + off];
      if (c != Cls::space) {
        n = run_of(s, i + off, end, c) - i;
      } else {
        n = whitespace_tail(i, run_of(s, i, end, Cls::space), end);
      }
    }
    out->emplace_back(i, i + n);
    i += n;
  }
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// with D = 3 (Llama-3) or 1 (Qwen2; Qwen3.5 too, with \p{M} beside \p{L} throughout).
void split_llama3(const Scan& s, size_t begin, size_t end, size_t max_digits, std::vector<Span>* out) {
  for (size_t i = begin; i < end;) {
    const uint32_t c = s.cps[i];
    const Cls cl = s.cls[i];
    size_t n = contraction(s, i, end, /*any_case=*/true);
    if (n == 0) {
      if (cl == Cls::letter) {
        n = run_of(s, i, end, Cls::letter) - i;
      } else if (cl != Cls::number && !is_nl(c) && i + 1 < end && s.cls[i + 1] == Cls::letter) {
        n = run_of(s, i + 1, end, Cls::letter) - i;
      } else if (cl == Cls::number) {
        size_t j = i;
        while (j < end && j - i < max_digits && s.cls[j] == Cls::number) ++j;
        n = j - i;
      } else {
        const size_t off = (c == ' ' && i + 1 < end && s.cls[i + 1] == Cls::other) ? 1 : 0;
        if (s.cls[i + off] == Cls::other) {
          size_t j = run_of(s, i + off, end, Cls::other);
          while (j < end && is_nl(s.cps[j])) ++j;
          n = j - i;
        } else {  // whitespace
          const size_t j = run_of(s, i, end, Cls::space);
          size_t last_nl = end;
          for (size_t k = i; k < j; ++k) {
            if (is_nl(s.cps[k])) last_nl = k;
          }
          n = last_nl != end ? last_nl + 1 - i : whitespace_tail(i, j, end);
        }
      }
    }
    out->emplace_back(i, i + n);
    i += n;
  }
}

// Tekken (Mistral-Nemo):
// [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|
// [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|
// \p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Call U the first bracket (upper), W the second (lower): Lm, Lo and marks are
// in both, and a mark may also be the optional leading character. The first
// match of a backtracking engine is what the scanner returns: each
// alternative is tried with the leading character, then without, in order.
// (llama.cpp's adapted form tells case apart by ASCII only; this is the
// original, which tokenizer.json and mistral-common's tekken.json carry.)
void split_tekken(const Scan& s, size_t begin, size_t end, std::vector<Span>* out) {
  constexpr size_t kNone = static_cast<size_t>(-1);
  std::vector<uint8_t> side(end, 0);  // bit 1: in U, bit 2: in W
  for (size_t k = begin; k < end; ++k) {
    const uint8_t f = codepoint_flags(s.cps[k]);
    if (f & kMark) {
      side[k] = 3;
    } else if (f & kLetter) {
      const uint8_t c = codepoint_case(s.cps[k]);
      side[k] = c == kUpper ? 1 : c == kLower ? 2 : 3;
    }
  }
  auto upper = [&](size_t k) { return k < end && (side[k] & 1); };
  auto lower = [&](size_t k) { return k < end && (side[k] & 2); };
  // U*W+ from j: U* takes its longest run, then gives back until W+ can start.
  auto upper_star_lower_plus = [&](size_t j) -> size_t {
    size_t k = j;
    while (upper(k)) ++k;
    if (lower(k)) {
      while (lower(k)) ++k;
      return k;
    }
    for (size_t q = k; q > j; --q) {
      if (lower(q - 1)) return q;  // W+ from q-1 stops at q: q is U-only or past the run
    }
    return kNone;
  };
  // U+W* from j.
  auto upper_plus_lower_star = [&](size_t j) -> size_t {
    size_t k = j;
    while (upper(k)) ++k;
    if (k == j) return kNone;
    while (lower(k)) ++k;
    return k;
  };
  for (size_t i = begin; i < end;) {
    const uint32_t c = s.cps[i];
    const Cls cl = s.cls[i];
    const bool lead = !is_nl(c) && cl != Cls::letter && cl != Cls::number;  // [^\r\n\p{L}\p{N}]
    size_t m = kNone;
    if (lead) m = upper_star_lower_plus(i + 1);
    if (m == kNone) m = upper_star_lower_plus(i);
    if (m == kNone && lead) m = upper_plus_lower_star(i + 1);
    if (m == kNone) m = upper_plus_lower_star(i);
    size_t n = 0;
    if (m != kNone) {
      n = m - i;
    } else if (cl == Cls::number) {
      n = 1;
    } else {
      const size_t off = (c == ' ' && i + 1 < end && s.cls[i + 1] == Cls::other) ? 1 : 0;
      if (s.cls[i + off] == Cls::other) {
        // [\r\n/]* after the run: line breaks, and '/' again after them.
        size_t j = run_of(s, i + off, end, Cls::other);
        while (j < end && (is_nl(s.cps[j]) || s.cps[j] == '/')) ++j;
        n = j - i;
      } else {  // whitespace
        const size_t j = run_of(s, i, end, Cls::space);
        size_t last_nl = end;
        for (size_t k = i; k < j; ++k) {
          if (is_nl(s.cps[k])) last_nl = k;
        }
        n = last_nl != end ? last_nl + 1 - i : whitespace_tail(i, j, end);
      }
    }
    out->emplace_back(i, i + n);
    i += n;
  }
}

// SmolLM: \p{N} first (every digit its own chunk), then the GPT-2 rules inside what is left.
void split_smollm(const Scan& s, std::vector<Span>* out) {
  const size_t n = s.cps.size();
  for (size_t i = 0; i < n;) {
    if (s.cls[i] == Cls::number) {
      out->emplace_back(i, i + 1);
      ++i;
      continue;
    }
    size_t j = i;
    while (j < n && s.cls[j] != Cls::number) ++j;
    split_gpt2(s, i, j, out);
    i = j;
  }
}

}  // namespace

std::vector<std::string> pre_tokenize(PreTokenizer pre, std::string_view text) {
  const Scan s(text, pre == PreTokenizer::qwen35);
  std::vector<Span> spans;
  switch (pre) {
    case PreTokenizer::gpt2: split_gpt2(s, 0, s.cps.size(), &spans); break;
    case PreTokenizer::smollm: split_smollm(s, &spans); break;
    case PreTokenizer::llama3: split_llama3(s, 0, s.cps.size(), 3, &spans); break;
    case PreTokenizer::qwen2:
    case PreTokenizer::qwen35: split_llama3(s, 0, s.cps.size(), 1, &spans); break;
    case PreTokenizer::tekken: split_tekken(s, 0, s.cps.size(), &spans); break;
  }
  // Chunks are the code points encoded again (llama.cpp's words), so invalid
  // bytes come out as U+FFFD and overlong forms in their shortest encoding.
  std::vector<std::string> chunks;
  chunks.reserve(spans.size());
  for (const auto& [a, b] : spans) {
    std::string& chunk = chunks.emplace_back();
    for (size_t k = a; k < b; ++k) append_utf8(s.cps[k] <= 0x10FFFF ? s.cps[k] : 0xFFFD, &chunk);
  }
  return chunks;
}

namespace {

constexpr std::string_view kTekkenRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct HfRegex {
  PreTokenizer pre;
  std::string_view original;  // as tokenizer.json files carry it
  std::string_view adapted;   // llama.cpp's case-folding-free form
};

const HfRegex kHfRegexes[] = {
    {PreTokenizer::gpt2, R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
     R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))"},
    {PreTokenizer::llama3,
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {PreTokenizer::qwen2,
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {PreTokenizer::qwen35,
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    // llama.cpp's adapted tekken regex tells case apart by ASCII only, so it is a
    // different split and not accepted as this one.
    {PreTokenizer::tekken, kTekkenRegex, kTekkenRegex},
};

}  // namespace

std::string_view hf_split_regex(PreTokenizer pre) {
  for (const HfRegex& r : kHfRegexes) {
    if (r.pre == pre) return r.original;
  }
  return {};
}

bool pre_tokenizer_of_hf_regex(std::string_view regex, PreTokenizer* pre) {
  for (const HfRegex& r : kHfRegexes) {
    if (regex == r.original || regex == r.adapted) {
      *pre = r.pre;
      return true;
    }
  }
  return false;
}

}  // namespace troupe::tokenizer

#include "runtime/text/tokenizer/unicode.hpp"

#include <algorithm>
#include <array>

namespace troupe::tokenizer {

namespace {

uint8_t flags_in(const unicode_detail::CodepointRange* ranges, size_t count, uint32_t cp) {
  const auto* end = ranges + count;
  // First range whose last >= cp.
  const auto* it = std::lower_bound(ranges, end, cp,
                                    [](const unicode_detail::CodepointRange& r, uint32_t v) { return r.last < v; });
  if (it == end || it->first > cp) return 0;
  return it->flags;
}

}  // namespace

uint8_t codepoint_flags(uint32_t cp) { return flags_in(unicode_detail::kRanges, unicode_detail::kRangeCount, cp); }

uint8_t codepoint_case(uint32_t cp) {
  return flags_in(unicode_detail::kCaseRanges, unicode_detail::kCaseRangeCount, cp);
}

size_t utf8_len(unsigned char lead) {
  static const size_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[lead >> 4];
}

namespace {

// Decode one sequence at `i`; returns its length, or 0 when invalid.
size_t decode_one(std::string_view s, size_t i, uint32_t* cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t n = 0;
  uint32_t v = 0;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2;
    v = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3;
    v = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4;
    v = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b & 0x3F);
  }
  *cp = v;
  return n;
}

}  // namespace

void utf8_decode_with_offsets(std::string_view text, std::vector<uint32_t>* cps, std::vector<size_t>* offsets) {
  cps->clear();
  if (offsets) offsets->clear();
  cps->reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    size_t n = decode_one(text, i, &cp);
    if (n == 0) {  // invalid: keep the byte so nothing is lost
      cp = static_cast<unsigned char>(text[i]);
      n = 1;
    }
    cps->push_back(cp);
    if (offsets) offsets->push_back(i);
    i += n;
  }
}

std::vector<uint32_t> utf8_to_codepoints_replacing(std::string_view text) {
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t n = decode_one(text, i, &cp);
    cps.push_back(n == 0 ? 0xFFFD : cp);
    i += n == 0 ? 1 : n;
  }
  return cps;
}

std::vector<uint32_t> utf8_to_codepoints(std::string_view text) {
  std::vector<uint32_t> cps;
  utf8_decode_with_offsets(text, &cps, nullptr);
  return cps;
}

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

struct ByteMap {
  std::array<std::string, 256> to_text;
  std::array<uint32_t, 256> to_cp{};
  ByteMap() {
    // Printable Latin-1 bytes map to themselves; the rest to 256, 257, ... in byte order.
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool visible = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = visible ? b : next++;
      append_utf8(to_cp[b], &to_text[b]);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

const std::string& byte_to_bpe_char(uint8_t byte) { return byte_map().to_text[byte]; }

int bpe_char_to_byte(uint32_t cp) {
  if (cp >= 0x21 && cp <= 0xFF && cp != 0xAD && !(cp >= 0x7F && cp <= 0xA0)) return static_cast<int>(cp);
  if (cp >= 256 && cp < 256 + 68) {
    const auto& m = byte_map().to_cp;
    for (int b = 0; b < 256; ++b) {
      if (m[b] == cp) return b;
    }
  }
  return -1;
}

std::string bytes_to_bpe_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += byte_to_bpe_char(static_cast<uint8_t>(c));
  return out;
}

std::string bpe_text_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::vector<uint32_t> cps = utf8_to_codepoints(text);
  for (uint32_t cp : cps) {
    const int b = bpe_char_to_byte(cp);
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      append_utf8(cp, &out);
    }
  }
  return out;
}

size_t utf8_complete_prefix(std::string_view bytes) {
  // Only the last 3 bytes can start an unfinished sequence.
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<unsigned char>(bytes[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation: look further back
    if (b < 0x80) return n;
    const size_t need = utf8_len(b);
    if ((b & 0xC0) == 0xC0 && (b & 0xF8) != 0xF8 && need > back) {
      // Check the bytes seen so far are continuations; otherwise it is invalid, not incomplete.
      for (size_t k = n - back + 1; k < n; ++k) {
        if ((static_cast<unsigned char>(bytes[k]) & 0xC0) != 0x80) return n;
      }
      return n - back;
    }
    return n;
  }
  return n;
}

}  // namespace troupe::tokenizer

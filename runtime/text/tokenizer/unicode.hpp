// UTF-8 helpers, the Unicode categories the pre-tokenizers need, and the
// GPT-2 byte <-> code point mapping of byte-level BPE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::tokenizer {

namespace unicode_detail {
struct CodepointRange {
  uint32_t first;
  uint32_t last;
  uint8_t flags;
};
extern const CodepointRange kRanges[];
extern const size_t kRangeCount;
extern const CodepointRange kCaseRanges[];  // unicode_case_table.cpp
extern const size_t kCaseRangeCount;
}  // namespace unicode_detail

enum CodepointFlag : uint8_t { kLetter = 1, kNumber = 2, kWhitespace = 4, kMark = 8 };

/// Category flags of `cp` (0 for everything that is not a letter, number, space or mark).
uint8_t codepoint_flags(uint32_t cp);
enum CaseFlag : uint8_t { kUpper = 1, kLower = 2 };
/// kUpper for \p{Lu} and \p{Lt}, kLower for \p{Ll}, 0 for everything else.
uint8_t codepoint_case(uint32_t cp);
inline bool is_letter(uint32_t cp) { return codepoint_flags(cp) & kLetter; }
inline bool is_number(uint32_t cp) { return codepoint_flags(cp) & kNumber; }
inline bool is_whitespace(uint32_t cp) { return codepoint_flags(cp) & kWhitespace; }

/// Length of the UTF-8 sequence that starts with `lead` (1 for stray bytes), as llama.cpp's utf8_len.
size_t utf8_len(unsigned char lead);
/// Decode `text` into code points; invalid sequences become one code point per byte (the byte value).
std::vector<uint32_t> utf8_to_codepoints(std::string_view text);
/// Decode the code points of `text` together with the byte offset where each one starts.
/// Decode as llama.cpp's unicode_cpts_from_utf8: an invalid or truncated
/// sequence becomes U+FFFD and decoding goes on at the next byte; overlong
/// forms and surrogates decode as they are.
std::vector<uint32_t> utf8_to_codepoints_replacing(std::string_view text);
void utf8_decode_with_offsets(std::string_view text, std::vector<uint32_t>* cps, std::vector<size_t>* offsets);
void append_utf8(uint32_t cp, std::string* out);

/// GPT-2 bytes_to_unicode: byte -> UTF-8 text of its visible code point.
const std::string& byte_to_bpe_char(uint8_t byte);
/// Inverse: code point -> byte, or -1 when `cp` is not one of the 256 mapped code points.
int bpe_char_to_byte(uint32_t cp);
/// Map every byte of `bytes` to its visible code point (the byte-level BPE "encode").
std::string bytes_to_bpe_text(std::string_view bytes);
/// Inverse of bytes_to_bpe_text; code points outside the map are kept as UTF-8.
std::string bpe_text_to_bytes(std::string_view text);

/// Length of the longest prefix of `bytes` that does not end inside a UTF-8 sequence
/// (invalid bytes count as complete so they never block output).
size_t utf8_complete_prefix(std::string_view bytes);

}  // namespace troupe::tokenizer

// UTF-8 and Unicode helpers for the tokenizer: decoding, validation, the
// lossy repair HF `tokenizers` (Rust String::from_utf8_lossy) applies, the
// character classes its components test (Rust char methods), and Unicode
// normalization forms through utf8proc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmrt::tok {

// Length of the UTF-8 sequence that starts with `lead` (1 for continuation or
// invalid bytes, so loops always advance).
inline size_t utf8SeqLen(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return lead >= 0xC2 ? 2 : 1;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 1;
}

// Decodes the code point at s[i] of a VALID UTF-8 string and advances i.
inline char32_t decodeUtf8(std::string_view s, size_t& i) {
  uint8_t c = static_cast<uint8_t>(s[i]);
  if (c < 0x80) {
    ++i;
    return c;
  }
  if (c < 0xE0) {
    char32_t cp = ((c & 0x1Fu) << 6) | (static_cast<uint8_t>(s[i + 1]) & 0x3Fu);
    i += 2;
    return cp;
  }
  if (c < 0xF0) {
    char32_t cp = ((c & 0x0Fu) << 12) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 6) |
                  (static_cast<uint8_t>(s[i + 2]) & 0x3Fu);
    i += 3;
    return cp;
  }
  char32_t cp = ((c & 0x07u) << 18) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 12) |
                ((static_cast<uint8_t>(s[i + 2]) & 0x3Fu) << 6) | (static_cast<uint8_t>(s[i + 3]) & 0x3Fu);
  i += 4;
  return cp;
}

// Decodes the last code point of a valid UTF-8 string (which must be non-empty).
char32_t lastCodePoint(std::string_view s);

void appendUtf8(std::string& out, char32_t cp);
std::string toUtf8(char32_t cp);

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or values above U+10FFFF).
bool isValidUtf8(std::string_view s);
// Length of the longest prefix of `s` that is well-formed UTF-8.
size_t validUtf8Prefix(std::string_view s);
// Replaces each maximal ill-formed subpart with U+FFFD, exactly as Rust's
// String::from_utf8_lossy (and Python's errors="replace") do.
std::string utf8Lossy(std::string_view s);

// ---- character classes (Rust `char` semantics) ------------------------------
bool isWhitespace(char32_t c);      // Unicode White_Space (char::is_whitespace)
bool isNumeric(char32_t c);         // categories Nd, Nl, No (char::is_numeric)
bool isAlphabetic(char32_t c);      // letters (L*), Nl, and Other_Alphabetic marks
bool isAlphanumeric(char32_t c);    // isAlphabetic || isNumeric
bool isPunctuation(char32_t c);     // ASCII punctuation or Unicode P* (HF is_punc)
bool isWordChar(char32_t c);        // regex \w: Alphabetic, M*, Nd, Pc, Join_Control
bool isControl(char32_t c);         // Cc, Cf, Co, Cs except \t \n \r (BERT's control characters)
bool isMark(char32_t c);            // M* (combining marks, stripped by StripAccents)
bool isNonspacingMark(char32_t c);  // Mn (stripped by BertNormalizer's strip_accents)
bool isChineseChar(char32_t c);     // BERT's CJK ranges

// ---- normalization forms ----------------------------------------------------
enum class NormForm { kNFC, kNFD, kNFKC, kNFKD };
// Returns `s` converted to the form (input must be valid UTF-8).
std::string normalizeUnicode(std::string_view s, NormForm form);
// Full lowercase mapping of every character (Rust str::to_lowercase, without
// the final-sigma rule).
std::string toLowerUnicode(std::string_view s);

}  // namespace llmrt::tok

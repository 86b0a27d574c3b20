// GPT-2's byte-level alphabet: every byte maps to one printable character
// (printable Latin-1 bytes to themselves, the rest to U+0100..U+0143), so any
// byte string becomes text that a BPE vocabulary can spell.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmrt::tok {

// The regex the ByteLevel pre-tokenizer splits with when use_regex is set.
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct ByteLevelAlphabet {
  std::array<char32_t, 256> byte_to_char{};
  std::array<std::string, 256> byte_to_utf8;  // UTF-8 of byte_to_char[b]
  // Inverse map for code points below 0x144; -1 where no byte maps there.
  std::array<int16_t, 0x144> char_to_byte{};

  int byteOf(char32_t c) const { return c < char_to_byte.size() ? char_to_byte[c] : -1; }
};

const ByteLevelAlphabet& byteLevelAlphabet();

// Maps every byte of `s` to its character (the ByteLevel pre-tokenizer's transform).
std::string byteLevelEncode(std::string_view s);
// Maps the characters of `s` back to bytes; returns false (leaving `out`
// unchanged) when some character is outside the alphabet.
bool byteLevelDecode(std::string_view s, std::string& out);

}  // namespace llmrt::tok

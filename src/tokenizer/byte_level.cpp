#include "tokenizer/byte_level.h"

#include "tokenizer/unicode.h"

namespace llmrt::tok {

static ByteLevelAlphabet buildAlphabet() {
  ByteLevelAlphabet a;
  a.char_to_byte.fill(-1);
  auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    char32_t c = printable(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
    a.byte_to_char[b] = c;
    a.byte_to_utf8[b] = toUtf8(c);
    a.char_to_byte[c] = static_cast<int16_t>(b);
  }
  return a;
}

const ByteLevelAlphabet& byteLevelAlphabet() {
  static const ByteLevelAlphabet alphabet = buildAlphabet();
  return alphabet;
}

std::string byteLevelEncode(std::string_view s) {
  const auto& a = byteLevelAlphabet();
  std::string out;
  out.reserve(s.size() * 2);
  for (unsigned char b : s) out += a.byte_to_utf8[b];
  return out;
}

bool byteLevelDecode(std::string_view s, std::string& out) {
  const auto& a = byteLevelAlphabet();
  size_t mark = out.size();
  size_t i = 0;
  while (i < s.size()) {
    char32_t c = decodeUtf8(s, i);
    int b = a.byteOf(c);
    if (b < 0) {
      out.resize(mark);
      return false;
    }
    out.push_back(static_cast<char>(b));
  }
  return true;
}

}  // namespace llmrt::tok

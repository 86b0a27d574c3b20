// Tokenizer for jinja2 template source, as jinja2's lexer works with trim_blocks=True and
// lstrip_blocks=True (transformers' chat-template environment): template data, the
// delimiters of {{ }} and {% %} (comments are dropped, {% raw %} becomes data), and the
// names, literals and operators inside them. Whitespace control (-, +) is applied here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmrt::tmpl {

enum class Tok : uint8_t {
  kData,
  kVarBegin,
  kVarEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInt,
  kFloat,
  kOp,
  kEof,
};

struct Token {
  Tok type;
  std::string text;  // data, name, string value (unescaped) or operator
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
  int col = 1;
};

// A lexical error: what and where (1-based line and byte column).
struct LexError {
  std::string message;
  int line;
  int col;
};

// Tokenizes `source` (ending with a kEof token); returns false and fills `error` on a lexical error.
bool tokenize(std::string_view source, std::vector<Token>& tokens, LexError& error);

}  // namespace llmrt::tmpl

// jinja2's lexer rules (jinja2/lexer.py, 3.1) re-implemented without regular expressions.
#include "template/lexer.h"

#include <cstring>

#include "template/value.h"

namespace llmrt::tmpl {
namespace {

bool isWs(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool isNameChar(char c) { return isNameStart(c) || isDigit(c); }

class Lexer {
 public:
  Lexer(std::string source, std::vector<Token>& out) : src_(std::move(source)), out_(out) {}

  bool run(LexError& error) {
    try {
      root();
      Token eof{Tok::kEof, "", 0, 0, 0, 0};
      setPos(eof, src_.size());
      out_.push_back(std::move(eof));
      return true;
    } catch (const LexError& e) {
      error = e;
      return false;
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what, size_t at) {
    Token t;
    setPos(t, at);
    throw LexError{what, t.line, t.col};
  }

  // Line and column of byte offset `at` (offsets are visited in increasing order).
  void setPos(Token& t, size_t at) {
    if (at < line_pos_) line_pos_ = 0, line_ = 1, line_start_ = 0;
    for (; line_pos_ < at && line_pos_ < src_.size(); ++line_pos_) {
      if (src_[line_pos_] == '\n') {
        ++line_;
        line_start_ = line_pos_ + 1;
      }
    }
    t.line = line_;
    t.col = static_cast<int>(at - line_start_) + 1;
  }

  void emit(Tok type, std::string text, size_t at) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    setPos(t, at);
    out_.push_back(std::move(t));
  }

  // Text before a tag, with the tag's whitespace control: '-' strips all whitespace before
  // it, lstrip_blocks strips spaces between the line start and a {% or {# tag.
  void emitData(size_t begin, size_t end, char sign, bool is_var) {
    std::string_view text(src_.data() + begin, end - begin);
    if (sign == '-') {
      size_t n = text.size();
      while (n > 0 && isWs(text[n - 1])) --n;
      text = text.substr(0, n);
    } else if (sign != '+' && !is_var) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting_) {
        bool all_ws = l_pos < text.size();
        for (size_t i = l_pos; i < text.size(); ++i) all_ws = all_ws && isWs(text[i]);
        if (all_ws) text = text.substr(0, l_pos);
      }
    }
    if (!text.empty()) emit(Tok::kData, std::string(text), begin);
  }

  // Matches `{%(-|+|)\s*NAME\s*` at `at` and the end of that block tag; returns the position
  // after the whole tag (npos when it is not such a tag). `end_sign` gets the closing '-'/'+'.
  size_t matchNamedTag(size_t at, const char* name, bool allow_trim_newline, char* open_sign) {
    if (src_.compare(at, 2, "{%") != 0) return std::string::npos;
    size_t p = at + 2;
    char sign = 0;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
    while (p < src_.size() && isWs(src_[p])) ++p;
    size_t n = std::strlen(name);
    if (src_.compare(p, n, name) != 0) return std::string::npos;
    p += n;
    if (p < src_.size() && isNameChar(src_[p])) return std::string::npos;
    while (p < src_.size() && isWs(src_[p])) ++p;
    if (src_.compare(p, 3, "-%}") == 0) {
      p += 3;
      while (p < src_.size() && isWs(src_[p])) ++p;
    } else if (allow_trim_newline && src_.compare(p, 3, "+%}") == 0) {
      p += 3;
    } else if (src_.compare(p, 2, "%}") == 0) {
      p += 2;
      if (allow_trim_newline && p < src_.size() && src_[p] == '\n') ++p;
    } else {
      return std::string::npos;
    }
    if (open_sign) *open_sign = sign;
    return p;
  }

  void root() {
    size_t pos = 0;
    while (pos < src_.size()) {
      size_t tag = pos;
      for (;;) {
        tag = src_.find('{', tag);
        if (tag == std::string::npos || tag + 1 >= src_.size()) {
          tag = std::string::npos;
          break;
        }
        char c = src_[tag + 1];
        if (c == '{' || c == '%' || c == '#') break;
        ++tag;
      }
      if (tag == std::string::npos) {
        emit(Tok::kData, src_.substr(pos), pos);
        return;
      }
      char kind = src_[tag + 1];
      char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
      if (kind == '%') {
        char raw_sign = 0;
        size_t after = matchNamedTag(tag, "raw", false, &raw_sign);
        if (after != std::string::npos) {
          emitData(pos, tag, raw_sign, false);
          line_starting_ = src_[after - 1] == '\n';
          pos = raw(after);
          continue;
        }
      }
      emitData(pos, tag, sign, kind == '{');
      pos = tag + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        pos = comment(pos, tag);
      } else {
        pos = insideTag(pos, kind == '%', tag);
      }
    }
  }

  size_t raw(size_t begin) {
    for (size_t p = src_.find("{%", begin); p != std::string::npos; p = src_.find("{%", p + 1)) {
      char sign = 0;
      size_t after = matchNamedTag(p, "endraw", true, &sign);
      if (after == std::string::npos) continue;
      emitData(begin, p, sign, false);
      line_starting_ = src_[after - 1] == '\n';
      return after;
    }
    fail("Missing end of raw directive", begin);
  }

  size_t comment(size_t begin, size_t tag) {
    size_t j = src_.find("#}", begin);
    if (j == std::string::npos) fail("Missing end of comment tag", tag);
    size_t end = j + 2;
    if (j > begin && src_[j - 1] == '-') {
      while (end < src_.size() && isWs(src_[end])) ++end;
    } else if (j > begin && src_[j - 1] == '+') {
      // keep the newline
    } else if (end < src_.size() && src_[end] == '\n') {
      ++end;
    }
    line_starting_ = src_[end - 1] == '\n';
    return end;
  }

  size_t insideTag(size_t pos, bool block, size_t tag) {
    emit(block ? Tok::kBlockBegin : Tok::kVarBegin, "", tag);
    std::string balance;
    for (;;) {
      if (pos >= src_.size())
        fail(
            block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'",
            pos);
      if (balance.empty()) {
        size_t end = std::string::npos;
        if (block) {
          if (src_.compare(pos, 3, "+%}") == 0) {
            end = pos + 3;
          } else if (src_.compare(pos, 3, "-%}") == 0) {
            end = pos + 3;
            while (end < src_.size() && isWs(src_[end])) ++end;
          } else if (src_.compare(pos, 2, "%}") == 0) {
            end = pos + 2;
            if (end < src_.size() && src_[end] == '\n') ++end;
          }
        } else {
          if (src_.compare(pos, 3, "-}}") == 0) {
            end = pos + 3;
            while (end < src_.size() && isWs(src_[end])) ++end;
          } else if (src_.compare(pos, 2, "}}") == 0) {
            end = pos + 2;
          }
        }
        if (end != std::string::npos) {
          emit(block ? Tok::kBlockEnd : Tok::kVarEnd, "", pos);
          line_starting_ = src_[end - 1] == '\n';
          return end;
        }
      }
      char c = src_[pos];
      if (isWs(c)) {
        ++pos;
        continue;
      }
      if (isDigit(c)) {
        pos = number(pos);
        continue;
      }
      if (isNameStart(c)) {
        size_t e = pos;
        while (e < src_.size() && isNameChar(src_[e])) ++e;
        emit(Tok::kName, src_.substr(pos, e - pos), pos);
        pos = e;
        continue;
      }
      if (c == '\'' || c == '"') {
        pos = string(pos);
        continue;
      }
      static const char* kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                   "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};
      bool matched = false;
      for (const char* op : kOps) {
        size_t n = std::strlen(op);
        if (src_.compare(pos, n, op) != 0) continue;
        if (n == 1 && (c == '{' || c == '(' || c == '[')) balance += c == '{' ? '}' : c == '(' ? ')' : ']';
        if (n == 1 && (c == '}' || c == ')' || c == ']')) {
          if (balance.empty()) fail(std::string("unexpected '") + c + "'", pos);
          if (balance.back() != c)
            fail(std::string("unexpected '") + c + "', expected '" + balance.back() + "'", pos);
          balance.pop_back();
        }
        emit(Tok::kOp, op, pos);
        pos += n;
        matched = true;
        break;
      }
      if (!matched) {
        std::string shown;
        appendStrRepr(shown, std::string_view(src_.data() + pos, 1));
        fail("unexpected char " + shown + " at " + std::to_string(pos), pos);
      }
    }
  }

  // Digits with optional '_' separators starting at p; returns the end (p if none).
  size_t digits(size_t p, bool (*ok)(char)) {
    size_t e = p;
    while (e < src_.size() && ok(src_[e])) {
      ++e;
      if (e + 1 < src_.size() && src_[e] == '_' && ok(src_[e + 1])) ++e;
    }
    return e;
  }

  size_t number(size_t pos) {
    auto dec = [](char ch) { return ch >= '0' && ch <= '9'; };
    size_t int_end = digits(pos, dec);
    // float: digits ( (.digits)? e[+-]?digits | .digits ), not right after a '.'
    bool after_dot = pos > 0 && src_[pos - 1] == '.';
    if (!after_dot) {
      size_t p = int_end;
      bool frac = false;
      if (p + 1 < src_.size() && src_[p] == '.' && dec(src_[p + 1])) {
        p = digits(p + 1, dec);
        frac = true;
      }
      size_t q = p;
      bool expo = false;
      if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
        ++q;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        if (q < src_.size() && dec(src_[q])) {
          p = digits(q, dec);
          expo = true;
        }
      }
      if (frac || expo) {
        std::string text;
        for (size_t i = pos; i < p; ++i)
          if (src_[i] != '_') text += src_[i];
        Token t;
        t.type = Tok::kFloat;
        t.text = text;
        t.float_value = std::strtod(text.c_str(), nullptr);
        setPos(t, pos);
        out_.push_back(std::move(t));
        return p;
      }
    }
    int base = 10;
    size_t start = pos, end = int_end;
    if (src_[pos] == '0' && pos + 1 < src_.size()) {
      char b = static_cast<char>(src_[pos + 1] | 0x20);
      auto bin = [](char ch) { return ch == '0' || ch == '1'; };
      auto oct = [](char ch) { return ch >= '0' && ch <= '7'; };
      auto hex = [](char ch) {
        return (ch >= '0' && ch <= '9') || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f');
      };
      bool (*ok)(char) = b == 'b' ? +bin : b == 'o' ? +oct : b == 'x' ? +hex : nullptr;
      if (ok) {
        size_t p = pos + 2;
        if (p < src_.size() && src_[p] == '_') ++p;
        size_t e = digits(p, ok);
        if (e > p) {
          base = b == 'b' ? 2 : b == 'o' ? 8 : 16;
          start = p;
          end = e;
        }
      }
      if (base == 10) {  // "0(_?0)*": a leading zero only runs on over zeros
        auto zero = [](char ch) { return ch == '0'; };
        end = digits(pos, zero);
      }
    }
    uint64_t v = 0;
    bool overflow = false;
    for (size_t i = start; i < end; ++i) {
      char ch = src_[i];
      if (ch == '_') continue;
      int d = ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10;
      if (v > (static_cast<uint64_t>(INT64_MAX) - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base))
        overflow = true;
      v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    }
    if (overflow) fail("integer literal out of the 64-bit range", pos);
    Token t;
    t.type = Tok::kInt;
    t.int_value = static_cast<int64_t>(v);
    t.text = src_.substr(pos, end - pos);
    setPos(t, pos);
    out_.push_back(std::move(t));
    return end;
  }

  size_t string(size_t pos) {
    char q = src_[pos];
    std::string v;
    size_t p = pos + 1;
    for (;;) {
      if (p >= src_.size()) fail("unexpected char " + std::string(1, q) + " at " + std::to_string(pos), pos);
      char c = src_[p];
      if (c == q) break;
      if (c != '\\') {
        v += c;
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) fail("unterminated string", pos);
      char e = src_[p + 1];
      p += 2;
      auto hexval = [&](size_t n) -> uint32_t {
        uint32_t cp = 0;
        for (size_t i = 0; i < n; ++i) {
          char h = p + i < src_.size() ? src_[p + i] : 0;
          int d = h >= '0' && h <= '9'                     ? h - '0'
                  : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10
                                                           : -1;
          if (d < 0) fail("truncated \\" + std::string(1, e) + " escape in string", p);
          cp = cp * 16 + static_cast<uint32_t>(d);
        }
        p += n;
        return cp;
      };
      switch (e) {
        case '\n':
          break;
        case '\\':
          v += '\\';
          break;
        case '\'':
          v += '\'';
          break;
        case '"':
          v += '"';
          break;
        case 'a':
          v += '\a';
          break;
        case 'b':
          v += '\b';
          break;
        case 'f':
          v += '\f';
          break;
        case 'n':
          v += '\n';
          break;
        case 'r':
          v += '\r';
          break;
        case 't':
          v += '\t';
          break;
        case 'v':
          v += '\v';
          break;
        case 'x':
          appendUtf8(v, hexval(2));
          break;
        case 'u':
          appendUtf8(v, hexval(4));
          break;
        case 'U': {
          uint32_t cp = hexval(8);
          if (cp > 0x10ffff) fail("illegal Unicode character in string", pos);
          appendUtf8(v, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int i = 0; i < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++i, ++p)
              cp = cp * 8 + static_cast<uint32_t>(src_[p] - '0');
            appendUtf8(v, cp);
          } else {
            v += '\\';
            v += e;
          }
      }
    }
    emit(Tok::kString, std::move(v), pos);
    return p + 1;
  }

  std::string src_;
  std::vector<Token>& out_;
  bool line_starting_ = true;
  size_t line_pos_ = 0, line_start_ = 0;
  int line_ = 1;
};

// jinja2 joins the source's lines with "\n" (any of \r\n, \r, \n) and drops one trailing
// newline (keep_trailing_newline=False).
std::string normalizeNewlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

bool tokenize(std::string_view source, std::vector<Token>& tokens, LexError& error) {
  Lexer lexer(normalizeNewlines(source), tokens);
  return lexer.run(error);
}

}  // namespace llmrt::tmpl

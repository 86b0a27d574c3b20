// Python str semantics over UTF-8 (see strings.h). Case mapping and character classes use
// utf8proc's Unicode tables for non-ASCII text.
#include "template/strings.h"

#include <utf8proc.h>

#include <algorithm>

#include "template/value.h"

namespace llmrt::tmpl {
namespace {

uint32_t toUpper(uint32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c >= 0xd800 && c < 0xe000) return c;
  return static_cast<uint32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}
uint32_t toLower(uint32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c >= 0xd800 && c < 0xe000) return c;
  return static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}
uint32_t toTitle(uint32_t c) {
  if (c < 0x80) return toUpper(c);
  if (c >= 0xd800 && c < 0xe000) return c;
  return static_cast<uint32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c)));
}
utf8proc_category_t category(uint32_t c) {
  if (c > 0x10ffff) return UTF8PROC_CATEGORY_CN;
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}
bool isCased(uint32_t c) { return isPyLower(c) || isPyUpper(c) || category(c) == UTF8PROC_CATEGORY_LT; }

std::string mapCase(std::string_view s, uint32_t (*f)(uint32_t)) {
  std::string out;
  out.reserve(s.size());
  if (isAscii(s)) {
    for (char c : s) out += static_cast<char>(f(static_cast<unsigned char>(c)));
    return out;
  }
  for (uint32_t c : decodeUtf8(s)) appendUtf8(out, f(c));
  return out;
}

}  // namespace

bool isPyAlpha(uint32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  auto k = category(c);
  return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}
bool isPyDigit(uint32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return category(c) == UTF8PROC_CATEGORY_ND;
}
bool isPyAlnum(uint32_t c) {
  if (c < 0x80) return isPyAlpha(c) || isPyDigit(c);
  auto k = category(c);
  return isPyAlpha(c) || (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
}
bool isPyLower(uint32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z';
  return category(c) == UTF8PROC_CATEGORY_LL;
}
bool isPyUpper(uint32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  return category(c) == UTF8PROC_CATEGORY_LU;
}

std::string pyUpper(std::string_view s) { return mapCase(s, toUpper); }
std::string pyLower(std::string_view s) { return mapCase(s, toLower); }

std::string pyCapitalize(std::string_view s) {
  std::vector<uint32_t> cps = decodeUtf8(s);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) appendUtf8(out, i == 0 ? toTitle(cps[i]) : toLower(cps[i]));
  return out;
}

std::string pyTitle(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (uint32_t c : decodeUtf8(s)) {
    if (isCased(c)) {
      appendUtf8(out, prev_cased ? toLower(c) : toTitle(c));
      prev_cased = true;
    } else {
      appendUtf8(out, c);
      prev_cased = false;
    }
  }
  return out;
}

std::string pyStrip(std::string_view s, const std::optional<std::string>& chars, int which) {
  if (isAscii(s) && (!chars || isAscii(*chars))) {
    auto strip_me = [&](char c) {
      return chars ? chars->find(c) != std::string::npos : isPySpace(static_cast<unsigned char>(c));
    };
    size_t b = 0, e = s.size();
    if (which != 2)
      while (b < e && strip_me(s[b])) ++b;
    if (which != 1)
      while (e > b && strip_me(s[e - 1])) --e;
    return std::string(s.substr(b, e - b));
  }
  std::vector<uint32_t> cps = decodeUtf8(s);
  std::vector<uint32_t> set;
  if (chars) set = decodeUtf8(*chars);
  auto strip_me = [&](uint32_t c) {
    return chars ? std::find(set.begin(), set.end(), c) != set.end() : isPySpace(c);
  };
  size_t b = 0, e = cps.size();
  if (which != 2)
    while (b < e && strip_me(cps[b])) ++b;
  if (which != 1)
    while (e > b && strip_me(cps[e - 1])) --e;
  return encodeUtf8(cps, b, e);
}

std::vector<std::string> pySplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
                                 bool from_right) {
  std::vector<std::string> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    if (sep->empty()) throwError("ValueError", "empty separator");
    if (!from_right) {
      size_t pos = 0;
      int64_t n = 0;
      for (;;) {
        size_t f = n < maxsplit ? s.find(*sep, pos) : std::string_view::npos;
        if (f == std::string_view::npos) {
          out.emplace_back(s.substr(pos));
          return out;
        }
        out.emplace_back(s.substr(pos, f - pos));
        pos = f + sep->size();
        ++n;
      }
    }
    size_t end = s.size();
    int64_t n = 0;
    for (;;) {
      size_t f =
          (n < maxsplit && end >= sep->size()) ? s.rfind(*sep, end - sep->size()) : std::string_view::npos;
      if (f == std::string_view::npos) {
        out.emplace_back(s.substr(0, end));
        break;
      }
      out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
      end = f;
      ++n;
    }
    std::reverse(out.begin(), out.end());
    return out;
  }
  std::vector<uint32_t> cps = decodeUtf8(s);
  const size_t n = cps.size();
  int64_t splits = 0;
  if (!from_right) {
    size_t i = 0;
    for (;;) {
      while (i < n && isPySpace(cps[i])) ++i;
      if (i >= n) break;
      if (splits >= maxsplit) {
        out.push_back(encodeUtf8(cps, i, n));
        break;
      }
      size_t j = i;
      while (j < n && !isPySpace(cps[j])) ++j;
      out.push_back(encodeUtf8(cps, i, j));
      ++splits;
      i = j;
    }
    return out;
  }
  size_t i = n;
  for (;;) {
    while (i > 0 && isPySpace(cps[i - 1])) --i;
    if (i == 0) break;
    if (splits >= maxsplit) {
      out.push_back(encodeUtf8(cps, 0, i));
      break;
    }
    size_t j = i;
    while (j > 0 && !isPySpace(cps[j - 1])) --j;
    out.push_back(encodeUtf8(cps, j, i));
    ++splits;
    i = j;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> pySplitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  std::vector<uint32_t> cps = decodeUtf8(s);
  size_t start = 0, i = 0;
  while (i < cps.size()) {
    uint32_t c = cps[i];
    bool brk = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
               c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) {
      ++i;
      continue;
    }
    size_t eol = i + 1;
    if (c == '\r' && eol < cps.size() && cps[eol] == '\n') ++eol;
    out.push_back(encodeUtf8(cps, start, keepends ? eol : i));
    start = i = eol;
  }
  if (start < cps.size()) out.push_back(encodeUtf8(cps, start, cps.size()));
  return out;
}

std::string pyReplace(std::string_view s, std::string_view old, std::string_view repl, int64_t count,
                      size_t max_bytes) {
  std::string out;
  if (count < 0) count = INT64_MAX;
  auto check = [&] {
    if (out.size() > max_bytes)
      throwError("RuntimeError",
                 "replace() result exceeds the output limit of " + std::to_string(max_bytes) + " bytes");
  };
  if (old.empty()) {
    std::vector<uint32_t> cps = decodeUtf8(s);
    int64_t n = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (n < count) {
        out += repl;
        ++n;
      }
      if (i < cps.size()) appendUtf8(out, cps[i]);
      check();
    }
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (n < count) {
    size_t f = s.find(old, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out.append(repl);
    check();
    pos = f + old.size();
    ++n;
  }
  out.append(s.substr(pos));
  check();
  return out;
}

size_t byteOffset(std::string_view s, int64_t cp_index) {
  if (cp_index <= 0) return 0;
  if (isAscii(s)) return std::min(s.size(), static_cast<size_t>(cp_index));
  size_t b = 0;
  int64_t k = 0;
  std::vector<uint32_t> cps = decodeUtf8(s);
  for (size_t i = 0; i < cps.size() && k < cp_index; ++i, ++k) {
    std::string tmp;
    appendUtf8(tmp, cps[i]);
    b += tmp.size();
  }
  return b;
}

int64_t cpIndex(std::string_view s, size_t byte) {
  if (isAscii(s)) return static_cast<int64_t>(byte);
  return static_cast<int64_t>(codepointCount(s.substr(0, byte)));
}

}  // namespace llmrt::tmpl

#include "cli_common.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>

namespace llmrt::cli {

int fail(const Status& status) { return fail(status.message()); }

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "llmrt: error: %s\n", message.c_str());
  return code;
}

std::string readStdin() {
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

Result<std::vector<TokenId>> parseTokenIds(const std::string& text) {
  std::string cleaned = text;
  for (char& c : cleaned)
    if (c == ',' || c == '[' || c == ']' || c == '\n' || c == '\t' || c == '\r') c = ' ';
  std::istringstream in(cleaned);
  std::vector<TokenId> ids;
  std::string w;
  while (in >> w) {
    char* end = nullptr;
    const long long v = std::strtoll(w.c_str(), &end, 10);
    if (end == w.c_str() || *end != '\0' || v < 0 || v > INT32_MAX)
      return invalidArgument("not a token id: '" + w + "'");
    ids.push_back(static_cast<TokenId>(v));
  }
  return ids;
}

std::string jsonEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string defaultModelDir() {
  const std::string local = "models/llmrt-tiny";
  struct stat st {};
  if (::stat((local + "/config.json").c_str(), &st) == 0) return local;
  return LLMRT_DEFAULT_MODEL_DIR;
}

std::string jsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

}  // namespace llmrt::cli

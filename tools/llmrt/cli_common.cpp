#include "cli_common.h"

#include <sys/stat.h>
#include <unistd.h>

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

}  // namespace llmrt::cli

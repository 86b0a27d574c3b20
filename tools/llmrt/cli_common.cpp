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

std::string defaultModelDir() {
  struct stat st {};
  auto has = [&](const std::string& dir) { return ::stat((dir + "/config.json").c_str(), &st) == 0; };
  const std::string local = "models/llmrt-tiny";
  if (has(local)) return local;
  // An installed command (cmake --install): <prefix>/bin/llmrt beside <prefix>/share/llmrt/models.
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    std::string dir(exe, static_cast<size_t>(n));
    dir = dir.substr(0, dir.find_last_of('/'));
    const std::string installed = dir + "/../share/llmrt/models/llmrt-tiny";
    if (has(installed)) return installed;
  }
  return LLMRT_DEFAULT_MODEL_DIR;  // the source tree this binary was built from
}

}  // namespace llmrt::cli

// A tokenizer.json pattern: {"String": "..."} (a literal) or {"Regex": "..."}.
// Used by the Split pre-tokenizer and the Replace normalizer / decoder.
#pragma once

#include <string>
#include <string_view>

#include "llmrt/status.h"
#include "tokenizer/json_util.h"
#include "tokenizer/regex.h"

namespace llmrt::tok {

class Pattern {
 public:
  static Result<Pattern> fromJson(const Json& j, const JsonPath& at);
  static Pattern literal(std::string s);

  // Calls fn(start, end) for each non-overlapping match, left to right.
  template <typename F>
  void forEachMatch(std::string_view text, F&& fn) const {
    if (is_regex_) {
      regex_.forEachMatch(text, fn);
      return;
    }
    if (literal_.empty()) return;
    size_t pos = 0;
    while (true) {
      size_t hit = text.find(literal_, pos);
      if (hit == std::string_view::npos) break;
      fn(hit, hit + literal_.size());
      pos = hit + literal_.size();
    }
  }

  std::string replaceAll(std::string_view text, std::string_view content) const;

 private:
  bool is_regex_ = false;
  std::string literal_;
  Regex regex_;
};

}  // namespace llmrt::tok

// A tokenizer.json pattern: {"String": "..."} (a literal) or {"Regex": "..."}.
// Used by the Split pre-tokenizer and the Replace normalizer / decoder.
#pragma once

#include <string>
#include <string_view>

#include "llmrt/status.h"
#include "tokenizer/json_util.h"
#include "tokenizer/regex.h"

namespace llmrt::tok {

// The largest text a rewriting step (Replace, or a whole Sequence of
// normalizers / decoders) may make of an input of `input_bytes`. Replace puts
// its content at every match, so a small file can ask for a result thousands
// of times the input; past this bound (far above the growth of any real
// tokenizer: " " -> "\u2581" triples a text) it is an error instead of gigabytes.
inline size_t maxRewrittenSize(size_t input_bytes) { return 16 * input_bytes + 4096; }

class Pattern {
 public:
  static Result<Pattern> fromJson(const Json& j, const JsonPath& at);
  static Pattern literal(std::string s);

  // Calls fn(start, end) for each non-overlapping match, left to right. Fails
  // only when a regex gives up (see Regex::find).
  template <typename F>
  Status forEachMatch(std::string_view text, F&& fn) const {
    if (is_regex_) return regex_.forEachMatch(text, fn);
    if (literal_.empty()) return Status::ok();
    size_t pos = 0;
    while (true) {
      size_t hit = text.find(literal_, pos);
      if (hit == std::string_view::npos) break;
      fn(hit, hit + literal_.size());
      pos = hit + literal_.size();
    }
    return Status::ok();
  }

  // `text` with every match replaced by `content`. Fails when a regex gives up,
  // or when the result would exceed maxRewrittenSize(text.size()).
  Result<std::string> replaceAll(std::string_view text, std::string_view content) const;

 private:
  std::string where_;  // source and JSON path, for errors
  bool is_regex_ = false;
  std::string literal_;
  Regex regex_;
};

}  // namespace llmrt::tok

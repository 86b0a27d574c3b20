// Regular expressions for the tokenizer (PCRE2 with JIT, UTF + Unicode
// properties). Patterns come from tokenizer.json, written for Oniguruma (what
// HF `tokenizers` uses); the few classes whose Unicode meaning differs between
// the two engines (\s, \w, \d and their negations) are rewritten to explicit
// property sets so both engines agree. Safe to share between threads.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "llmrt/status.h"

namespace llmrt::tok {

class Regex {
 public:
  Regex() = default;

  // Compiles an Oniguruma-style pattern; `where` names it in errors (also in
  // the errors of matching).
  static Result<Regex> compile(std::string_view pattern, std::string_view where);
  // A pattern that matches `literal` exactly.
  static std::string escape(std::string_view literal);

  bool valid() const { return code_ != nullptr; }
  const std::string& pattern() const { return pattern_; }

  // Finds the next match at or after `start` in `text` (valid UTF-8). Returns
  // false when there is none; otherwise true and sets [mstart, mend). Fails
  // (kResourceExhausted, naming the pattern) when PCRE2 gives up - its match,
  // depth or heap limit, e.g. a backtracking pattern on a long text - rather
  // than pretending there is no match.
  Result<bool> find(std::string_view text, size_t start, size_t& mstart, size_t& mend) const;

  // Calls fn(start, end) for each match from left to right, as Oniguruma's
  // find_iter does (an empty match right after the previous match is skipped).
  // Stops at the first matching error and returns it.
  template <typename F>
  Status forEachMatch(std::string_view text, F&& fn) const {
    size_t pos = 0;
    size_t last_end = static_cast<size_t>(-1);
    while (pos <= text.size()) {
      size_t s, e;
      Result<bool> found = find(text, pos, s, e);
      if (!found.isOk()) return found.status();
      if (!*found) break;
      if (s == e) {
        if (e != last_end) fn(s, e);
        last_end = e;
        if (e >= text.size()) break;
        pos = e + nextCharLen(text, e);
        continue;
      }
      fn(s, e);
      last_end = e;
      pos = e;
    }
    return Status::ok();
  }

 private:
  static size_t nextCharLen(std::string_view text, size_t i);
  Status matchError(int rc, size_t text_size) const;

  std::string pattern_;
  std::string where_;
  std::shared_ptr<void> code_;  // pcre2_code_8
  bool jit_ = false;
};

// Rewrites an Oniguruma pattern into an equivalent PCRE2 one (exposed for tests).
std::string onigToPcre2(std::string_view pattern);

}  // namespace llmrt::tok

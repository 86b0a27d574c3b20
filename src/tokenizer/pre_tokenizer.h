// Pre-tokenizers of HF `tokenizers` (tokenizer.json "pre_tokenizer"):
// ByteLevel, Split, Metaspace, Punctuation, Digits, Whitespace,
// WhitespaceSplit, BertPreTokenizer, CharDelimiterSplit and Sequence. A
// pre-tokenizer turns one piece of text into pieces (words) with HF's split
// behaviours (Removed, Isolated, MergedWithPrevious, MergedWithNext,
// Contiguous); empty pieces are dropped.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "llmrt/status.h"
#include "tokenizer/json_util.h"

namespace llmrt::tok {

struct Piece {
  std::string_view text;
  bool at_origin;  // starts at offset 0 of the original input (Metaspace prepend_scheme "first")
};

// Owns the strings of pieces that a step rewrote (stable addresses).
class PieceArena {
 public:
  std::string_view keep(std::string s) {
    strings_.push_back(std::move(s));
    return strings_.back();
  }

 private:
  std::deque<std::string> strings_;
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// A span of a piece and whether the pattern matched it.
struct Span {
  size_t start, end;
  bool match;
};

// Cuts `in` by `spans` (which cover it in order) according to `behavior`,
// appending the non-empty pieces to `out`.
void splitBySpans(const Piece& in, const std::vector<Span>& spans, SplitBehavior behavior,
                  std::vector<Piece>& out);

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Appends the pieces `in` splits into to `out`. Fails only when a Split
  // regex gives up on the text (see Regex::find).
  virtual Status split(const Piece& in, std::vector<Piece>& out, PieceArena& arena) const = 0;
  // True for the step that maps bytes to the GPT-2 alphabet (ByteLevel).
  virtual bool isByteMapping() const { return false; }
};

// Parses a "pre_tokenizer" object into a flat list of steps (Sequences are
// flattened; ByteLevel becomes a split step and a byte-mapping step).
// `nesting` counts the enclosing Sequences (at most kMaxSequenceNesting).
Status parsePreTokenizer(const Json& j, const JsonPath& at, std::vector<std::unique_ptr<PreTokenizer>>& steps,
                         int nesting = 0);

}  // namespace llmrt::tok

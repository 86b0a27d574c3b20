// tiktoken BPE ranks: the file format (`qwen.tiktoken`, `cl100k_base.tiktoken`:
// one `base64(token bytes) <rank>` per line) and tiktoken's byte-pair merge,
// which works on bytes and ranks alone: a piece starts as single bytes and the
// adjacent pair whose concatenation has the lowest rank is merged (the leftmost
// on ties) until no adjacent pair has a rank; the ids are the ranks of the parts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "llmrt/status.h"
#include "llmrt/tokenizer.h"
#include "tokenizer/flat_map.h"

namespace llmrt::tok {

class TiktokenRanks {
 public:
  // Parses a .tiktoken file; `source` names it in errors. As tiktoken's
  // load_tiktoken_bpe: lines split at \n, \r\n or \r, blank lines skipped,
  // each line two fields separated by spaces or tabs. Stricter than Python:
  // the token must be standard base64 (A-Z a-z 0-9 + /, '=' padding, a length
  // that is a multiple of 4) of at least one byte, the rank a decimal number
  // below 2^31, and no token or rank may appear twice. Every single byte must
  // have a rank (a text containing a byte without one could not be encoded),
  // and the largest rank must stay below 4 * tokens + 4096 (the id table is
  // dense). Errors (kParseError) are one line naming the file, the line
  // number and the offending text.
  static Result<TiktokenRanks> parse(std::string_view contents, std::string_view source);

  size_t size() const { return count_; }
  // One past the largest rank.
  uint32_t rankLimit() const { return static_cast<uint32_t>(offsets_.size()); }

  // The rank of `bytes`, or -1.
  int32_t rank(std::string_view bytes) const { return encoder_.find(bytes); }
  // Whether some token has rank `r`; bytes(r) is that token (only valid when it has).
  bool hasRank(TokenId r) const {
    return r >= 0 && static_cast<size_t>(r) < offsets_.size() && offsets_[r].len > 0;
  }
  std::string_view bytes(TokenId r) const {
    return std::string_view(arena_).substr(offsets_[r].off, offsets_[r].len);
  }

  // Appends the ranks of one pre-tokenized piece (non-empty) to `out`: the
  // piece's own rank when it has one (tiktoken's shortcut), else the merge.
  void encodePiece(std::string_view piece, std::vector<TokenId>& out) const;

  // The merge itself, exposed for tests: the O(n^2) scan tiktoken runs (used
  // for short pieces) and the heap-based O(n log n) one used for long pieces.
  // Both append the parts' ranks and must agree on every input.
  void mergeByScan(std::string_view piece, std::vector<TokenId>& out) const;
  void mergeByHeap(std::string_view piece, std::vector<TokenId>& out) const;

 private:
  struct Span {
    uint32_t off = 0;
    uint32_t len = 0;  // 0: no token has this rank
  };
  static constexpr uint32_t kNoRank = UINT32_MAX;
  uint32_t pairRank(std::string_view piece, size_t begin, size_t end) const {
    int32_t r = encoder_.find(piece.substr(begin, end - begin));
    return r < 0 ? kNoRank : static_cast<uint32_t>(r);
  }

  StringIdMap encoder_;        // token bytes -> rank
  std::vector<Span> offsets_;  // rank -> bytes in arena_
  std::string arena_;
  size_t count_ = 0;
};

// Standard base64 (RFC 4648, with padding); false for anything else.
bool decodeBase64(std::string_view in, std::string& out);
std::string encodeBase64(std::string_view in);

}  // namespace llmrt::tok

// Added tokens (tokenizer.json "added_tokens"): special and user tokens that
// are found in the text before the model runs. As in HF `tokenizers`, tokens
// with normalized=false are matched on the raw text and tokens with
// normalized=true on each normalized segment, leftmost-longest, with the
// single_word / lstrip / rstrip rules applied to each match.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "llmrt/tokenizer.h"

namespace llmrt::tok {

struct AddedToken {
  TokenId id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// Leftmost-longest multi-pattern matcher over bytes (a trie walked from each
// position whose first byte can start a pattern).
class TokenTrie {
 public:
  void add(std::string_view pattern, int32_t value);
  bool empty() const { return nodes_.size() <= 1; }
  // Finds the leftmost position >= from where a pattern matches, taking the
  // longest pattern there. Returns false when none matches.
  bool find(std::string_view text, size_t from, size_t& start, size_t& end, int32_t& value) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> next;  // sorted by byte
    int32_t value = -1;
  };
  int32_t child(int32_t node, uint8_t b) const;
  std::vector<Node> nodes_{Node{}};
  int32_t root_[256];  // child of the root by byte, -1 when none
  bool root_ready_ = false;
};

// A piece of text after added-token extraction: an added token, or text.
struct Segment {
  size_t start, end;  // byte range in the text that was split
  TokenId id;         // >= 0 for an added token
};

class AddedVocabulary {
 public:
  // Appends the split of `text` by the matcher (the raw or the normalized one).
  void splitRaw(std::string_view text, std::vector<Segment>& out) const { split(raw_, text, out); }
  void splitNormalized(std::string_view text, std::vector<Segment>& out) const {
    split(normalized_, text, out);
  }
  bool hasNormalizedTokens() const { return !normalized_.empty(); }
  bool hasRawTokens() const { return !raw_.empty(); }

  // Registers `tok` (id already assigned); `matched_as` is the string the
  // matcher looks for (the content, normalized when tok.normalized).
  void add(const AddedToken& tok, const std::string& matched_as);

  const AddedToken* byId(TokenId id) const;
  const AddedToken* byContent(std::string_view content) const;
  bool isSpecialContent(std::string_view s) const { return special_contents_.count(std::string(s)) != 0; }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  void split(const TokenTrie& trie, std::string_view text, std::vector<Segment>& out) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<TokenId, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  std::unordered_set<std::string> special_contents_;
  TokenTrie raw_;
  TokenTrie normalized_;
};

}  // namespace llmrt::tok

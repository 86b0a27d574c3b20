#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace llmrt::tok {

int32_t TokenTrie::child(int32_t node, uint8_t b) const {
  const auto& next = nodes_[node].next;
  auto it = std::lower_bound(next.begin(), next.end(), b,
                             [](const std::pair<uint8_t, int32_t>& e, uint8_t v) { return e.first < v; });
  return it != next.end() && it->first == b ? it->second : -1;
}

void TokenTrie::add(std::string_view pattern, int32_t value) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (unsigned char b : pattern) {
    int32_t c = child(node, b);
    if (c < 0) {
      c = static_cast<int32_t>(nodes_.size());
      nodes_.push_back(Node{});
      auto& next = nodes_[node].next;
      auto it = std::lower_bound(next.begin(), next.end(), b,
                                 [](const std::pair<uint8_t, int32_t>& e, uint8_t v) { return e.first < v; });
      next.insert(it, {b, c});
    }
    node = c;
  }
  // With equal length at the same position the earlier pattern wins.
  if (nodes_[node].value < 0) nodes_[node].value = value;
  for (int b = 0; b < 256; ++b) root_[b] = child(0, static_cast<uint8_t>(b));
  root_ready_ = true;
}

bool TokenTrie::find(std::string_view text, size_t from, size_t& start, size_t& end, int32_t& value) const {
  const size_t n = text.size();
  if (!root_ready_) return false;
  for (size_t i = from; i < n; ++i) {
    int32_t node = root_[static_cast<uint8_t>(text[i])];
    if (node < 0) continue;
    size_t best_end = 0;
    int32_t best = -1;
    if (nodes_[node].value >= 0) {
      best = nodes_[node].value;
      best_end = i + 1;
    }
    for (size_t j = i + 1; j < n; ++j) {
      node = child(node, static_cast<uint8_t>(text[j]));
      if (node < 0) break;
      if (nodes_[node].value >= 0) {
        best = nodes_[node].value;
        best_end = j + 1;
      }
    }
    if (best >= 0) {
      start = i;
      end = best_end;
      value = best;
      return true;
    }
  }
  return false;
}

void AddedVocabulary::add(const AddedToken& tok, const std::string& matched_as) {
  size_t idx = tokens_.size();
  tokens_.push_back(tok);
  by_id_[tok.id] = idx;
  by_content_[tok.content] = idx;
  if (tok.special) special_contents_.insert(tok.content);
  (tok.normalized ? normalized_ : raw_).add(matched_as, static_cast<int32_t>(idx));
}

const AddedToken* AddedVocabulary::byId(TokenId id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::byContent(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

namespace {

bool endsWithWord(std::string_view s) { return !s.empty() && isWordChar(lastCodePoint(s)); }

bool startsWithWord(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  return isWordChar(decodeUtf8(s, i));
}

// Start of the whitespace run that ends `s`.
size_t trailingSpaceStart(std::string_view s) {
  size_t e = s.size();
  while (e > 0) {
    size_t i = e - 1;
    while (i > 0 && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) --i;
    size_t j = i;
    if (!isWhitespace(decodeUtf8(s, j))) break;
    e = i;
  }
  return e;
}

// Length of the whitespace run that starts `s`.
size_t leadingSpaceLen(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!isWhitespace(decodeUtf8(s, j))) break;
    i = j;
  }
  return i;
}

}  // namespace

void AddedVocabulary::split(const TokenTrie& trie, std::string_view text, std::vector<Segment>& out) const {
  if (text.empty()) return;
  size_t start_offset = 0;
  size_t pos = 0;
  size_t ms, me;
  int32_t idx;
  while (!trie.empty() && pos < text.size() && trie.find(text, pos, ms, me, idx)) {
    pos = me;  // the matcher resumes after the raw match, whatever the strip rules do
    const AddedToken& tok = tokens_[idx];
    if (tok.single_word) {
      bool start_space = ms == 0 || !endsWithWord(text.substr(0, ms));
      bool stop_space = me == text.size() || !startsWithWord(text.substr(me));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) ms = std::max(trailingSpaceStart(text.substr(0, ms)), start_offset);
    if (tok.rstrip) me += leadingSpaceLen(text.substr(me));
    if (start_offset < ms) out.push_back(Segment{start_offset, ms, -1});
    out.push_back(Segment{ms, me, tok.id});
    start_offset = me;
  }
  if (start_offset < text.size()) out.push_back(Segment{start_offset, text.size(), -1});
}

}  // namespace llmrt::tok

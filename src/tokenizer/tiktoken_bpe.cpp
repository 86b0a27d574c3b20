#include "tokenizer/tiktoken_bpe.h"

#include <algorithm>
#include <queue>

#include "tokenizer/json_util.h"

namespace llmrt::tok {
namespace {

// Pieces up to this many bytes use tiktoken's own O(n^2) scan (cheaper than a
// heap on short words); longer ones the heap, so a megabyte-long run of
// letters costs O(n log n).
constexpr size_t kScanMaxBytes = 64;
constexpr uint32_t kMaxRank = 0x7FFFFFFF;

int base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool isFieldSpace(char c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f'; }

std::string lineError(std::string_view source, size_t line, std::string_view what) {
  return std::string(source) + ": line " + std::to_string(line) + ": " + std::string(what);
}

}  // namespace

bool decodeBase64(std::string_view in, std::string& out) {
  out.clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  size_t pad = 0;
  if (in.back() == '=') pad = (in[in.size() - 2] == '=') ? 2 : 1;
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = in[i + k];
      int d;
      if (c == '=') {
        if (!last || k < 4 - pad) return false;
        d = 0;
      } else {
        d = base64Value(c);
        if (d < 0) return false;
      }
      v = (v << 6) | static_cast<uint32_t>(d);
    }
    out.push_back(static_cast<char>(v >> 16));
    if (!last || pad < 2) out.push_back(static_cast<char>((v >> 8) & 0xFF));
    if (!last || pad < 1) out.push_back(static_cast<char>(v & 0xFF));
    // Canonical padding: the bits the padding drops must be zero (Python accepts
    // either, but such a file is not what any tool writes).
    if (last && pad == 1 && (v & 0xFF) != 0) return false;
    if (last && pad == 2 && (v & 0xFFFF) != 0) return false;
  }
  return true;
}

std::string encodeBase64(std::string_view in) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    uint32_t v = (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8) |
                 static_cast<uint8_t>(in[i + 2]);
    for (int k = 3; k >= 0; --k) out.push_back(kAlphabet[(v >> (6 * k)) & 63]);
  }
  if (i < in.size()) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

Result<TiktokenRanks> TiktokenRanks::parse(std::string_view contents, std::string_view source) {
  struct Entry {
    uint32_t rank;
    uint32_t off;
    uint32_t len;
    uint32_t line;
  };
  TiktokenRanks t;
  std::vector<Entry> entries;
  entries.reserve(contents.size() / 12 + 16);
  t.encoder_.reserve(contents.size() / 12 + 16);
  std::string token;
  size_t pos = 0, line_no = 0;
  uint32_t max_rank = 0;
  while (pos < contents.size()) {
    ++line_no;
    size_t eol = contents.find_first_of("\r\n", pos);
    if (eol == std::string_view::npos) eol = contents.size();
    const std::string_view line = contents.substr(pos, eol - pos);
    pos = eol;
    if (pos < contents.size())
      pos += (contents[pos] == '\r' && pos + 1 < contents.size() && contents[pos + 1] == '\n') ? 2 : 1;
    if (line.empty()) continue;

    std::string_view fields[3];
    size_t n = 0, i = 0;
    while (i < line.size() && n < 3) {
      while (i < line.size() && isFieldSpace(line[i])) ++i;
      if (i == line.size()) break;
      size_t j = i;
      while (j < line.size() && !isFieldSpace(line[j])) ++j;
      fields[n++] = line.substr(i, j - i);
      i = j;
    }
    if (n != 2) {
      return parseError(
          lineError(source, line_no, "expected '<base64 token> <rank>', got '" + boundedText(line) + "'"));
    }
    if (!decodeBase64(fields[0], token)) {
      return parseError(lineError(source, line_no,
                                  "token '" + boundedText(fields[0]) +
                                      "' is not base64 of at least one byte (A-Z a-z 0-9 + /, '=' padding)"));
    }
    const std::string_view r = fields[1];
    uint64_t rank = 0;
    bool digits = !r.empty() && r.size() <= 10;
    for (char c : r) {
      digits = digits && c >= '0' && c <= '9';
      if (digits) rank = rank * 10 + static_cast<uint64_t>(c - '0');
    }
    if (!digits || rank > kMaxRank) {
      return parseError(
          lineError(source, line_no, "rank '" + boundedText(r) + "' is not a decimal number in [0, 2^31)"));
    }
    if (int32_t prev = t.encoder_.find(token); prev >= 0) {
      return parseError(lineError(source, line_no,
                                  "token '" + boundedText(token) + "' (base64 " + boundedText(fields[0]) +
                                      ") appears twice: ranks " + std::to_string(prev) + " and " +
                                      std::to_string(rank)));
    }
    if (t.arena_.size() + token.size() > UINT32_MAX) {
      return resourceExhausted(std::string(source) + ": tokens total more than 4 GiB");
    }
    t.encoder_.insert(token, static_cast<int32_t>(rank));
    entries.push_back(Entry{static_cast<uint32_t>(rank), static_cast<uint32_t>(t.arena_.size()),
                            static_cast<uint32_t>(token.size()), static_cast<uint32_t>(line_no)});
    t.arena_ += token;
    max_rank = std::max(max_rank, static_cast<uint32_t>(rank));
  }
  if (entries.empty())
    return parseError(std::string(source) + ": no tokens (expected '<base64 token> <rank>' lines)");
  if (static_cast<uint64_t>(max_rank) >= 4 * static_cast<uint64_t>(entries.size()) + 4096) {
    return parseError(std::string(source) + ": rank " + std::to_string(max_rank) + " is far beyond the " +
                      std::to_string(entries.size()) +
                      " tokens of the file (ranks must stay below 4 * tokens + 4096)");
  }
  t.offsets_.assign(static_cast<size_t>(max_rank) + 1, Span{});
  std::vector<uint32_t> line_of(static_cast<size_t>(max_rank) + 1, 0);
  for (const Entry& e : entries) {
    if (line_of[e.rank] != 0) {
      return parseError(lineError(source, e.line,
                                  "rank " + std::to_string(e.rank) +
                                      " already belongs to the token of line " +
                                      std::to_string(line_of[e.rank])));
    }
    line_of[e.rank] = e.line;
    t.offsets_[e.rank] = Span{e.off, e.len};
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    if (t.encoder_.find(std::string_view(&c, 1)) < 0) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      return parseError(std::string(source) + ": byte 0x" + kHex[b >> 4] + kHex[b & 15] +
                        " has no rank (base64 '" + encodeBase64(std::string_view(&c, 1)) +
                        "'); every single byte needs one, or texts containing it cannot be encoded");
    }
  }
  t.count_ = entries.size();
  return t;
}

void TiktokenRanks::encodePiece(std::string_view piece, std::vector<TokenId>& out) const {
  if (piece.empty()) return;
  if (int32_t r = encoder_.find(piece); r >= 0) {
    out.push_back(r);
    return;
  }
  if (piece.size() <= kScanMaxBytes)
    mergeByScan(piece, out);
  else
    mergeByHeap(piece, out);
}

// tiktoken's _byte_pair_merge, step for step: parts[i] = (start of part i,
// rank of part i joined with part i + 1), with two sentinels at the end.
void TiktokenRanks::mergeByScan(std::string_view piece, std::vector<TokenId>& out) const {
  const size_t n = piece.size();
  if (n == 0) return;
  std::vector<std::pair<size_t, uint32_t>> parts;
  parts.reserve(n + 1);
  std::pair<uint32_t, size_t> min_rank{kNoRank, SIZE_MAX};
  for (size_t i = 0; i + 1 < n; ++i) {
    const uint32_t r = pairRank(piece, i, i + 2);
    if (r < min_rank.first) min_rank = {r, i};
    parts.emplace_back(i, r);
  }
  parts.emplace_back(n - 1, kNoRank);
  parts.emplace_back(n, kNoRank);
  auto rankAt = [&](size_t i) {
    return i + 3 < parts.size() ? pairRank(piece, parts[i].first, parts[i + 3].first) : kNoRank;
  };
  while (min_rank.first != kNoRank) {
    const size_t i = min_rank.second;
    if (i > 0) parts[i - 1].second = rankAt(i - 1);
    parts[i].second = rankAt(i);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    min_rank = {kNoRank, SIZE_MAX};
    for (size_t k = 0; k + 1 < parts.size(); ++k)
      if (parts[k].second < min_rank.first) min_rank = {parts[k].second, k};
  }
  for (size_t k = 0; k + 1 < parts.size(); ++k) {
    const int32_t r = encoder_.find(piece.substr(parts[k].first, parts[k + 1].first - parts[k].first));
    if (r >= 0) out.push_back(r);  // always: single bytes have ranks, and only ranked pairs merge
  }
}

// The same merge over a linked list of parts with a min-heap of (pair rank,
// part start): the heap's least valid entry is tiktoken's choice (the lowest
// rank, then the leftmost part). An entry is stale once its part was merged
// away or its pair rank changed (the stamp moved on).
void TiktokenRanks::mergeByHeap(std::string_view piece, std::vector<TokenId>& out) const {
  const size_t n = piece.size();
  if (n == 0) return;
  if (n > UINT32_MAX - 1) return;  // a 4 GiB word: beyond any text encode() accepts
  struct Entry {
    uint32_t rank;
    uint32_t start;  // the part's index is its start offset
    uint32_t stamp;
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : start > o.start; }
  };
  constexpr uint32_t kNone = UINT32_MAX;
  // Parts are indexed by their start byte; next_[i] is the start of the next part.
  std::vector<uint32_t> next(n), prev(n), stamp(n, 0);
  for (uint32_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : kNone;
    prev[i] = i > 0 ? i - 1 : kNone;
  }
  auto endOf = [&](uint32_t i) { return next[i] == kNone ? static_cast<uint32_t>(n) : next[i]; };
  std::vector<Entry> storage;
  storage.reserve(n);
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap(std::greater<Entry>{},
                                                                           std::move(storage));
  auto pushPair = [&](uint32_t i) {
    ++stamp[i];
    if (next[i] == kNone) return;
    const uint32_t r = pairRank(piece, i, endOf(next[i]));
    if (r != kNoRank) heap.push(Entry{r, i, stamp[i]});
  };
  for (uint32_t i = 0; i + 1 < n; ++i) pushPair(i);
  while (!heap.empty()) {
    const Entry e = heap.top();
    heap.pop();
    if (e.stamp != stamp[e.start]) continue;
    const uint32_t i = e.start;
    const uint32_t j = next[i];
    // Merge part j into part i.
    ++stamp[j];
    next[i] = next[j];
    if (next[j] != kNone) prev[next[j]] = i;
    pushPair(i);
    if (prev[i] != kNone) pushPair(prev[i]);
  }
  for (uint32_t i = 0; i != kNone; i = next[i]) {
    const int32_t r = encoder_.find(piece.substr(i, endOf(i) - i));
    if (r >= 0) out.push_back(r);
    if (next[i] == kNone) break;
  }
}

}  // namespace llmrt::tok

#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/logging.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace llmrt::tok {

struct BpeModel::WordScratch {
  struct Item {
    uint32_t rank;
    int32_t pos;
    int32_t new_id;
  };
  std::vector<Symbol> syms;
  std::vector<Item> heap;
  std::vector<TokenId> ids;
};

namespace {

// Reads a merge entry: "a b" (exactly one space) or ["a", "b"]; false when it is neither.
bool readMerge(const Json& m, std::string& a, std::string& b) {
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    size_t sp = s.find(' ');
    if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) return false;
    a = s.substr(0, sp);
    b = s.substr(sp + 1);
    return true;
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    a = m[0].get<std::string>();
    b = m[1].get<std::string>();
    return true;
  }
  return false;
}

Status mergeError(const Json& m, const JsonPath& at) {
  if (m.is_string()) return jsonError(at, m, "a merge \"left right\" with exactly one space");
  return jsonError(at, m, "a merge \"left right\" or a pair [left, right] of strings");
}

constexpr int64_t kMaxTokenId = int64_t{1} << 28;

constexpr std::string_view kMeta = "\xE2\x96\x81";  // U+2581, SentencePiece's word boundary

// True when the boundary character at `p` directly follows another one.
bool followsMeta(std::string_view s, size_t p) {
  return p >= kMeta.size() && s.compare(p - kMeta.size(), kMeta.size(), kMeta) == 0;
}

bool lessPriority(const BpeModel* /*unused*/, uint32_t ra, int32_t pa, uint32_t rb, int32_t pb) {
  return ra != rb ? ra > rb : pa > pb;
}

}  // namespace

Result<std::unique_ptr<BpeModel>> BpeModel::fromJson(const Json& j, const JsonPath& at) {
  auto m = std::make_unique<BpeModel>();
  if (const Json* d = jsonFind(j, "dropout")) {
    if (!d->is_number()) return jsonError(at.key("dropout"), *d, "null or a number in [0, 1]");
    double p = d->get<double>();
    if (p < 0.0 || p > 1.0) return jsonError(at.key("dropout"), *d, "null or a number in [0, 1]");
    if (p > 0.0)
      LLMRT_LOG_WARNING("%s: BPE dropout %g ignored (encoding is deterministic)", at.source().c_str(), p);
  }
  LLMRT_ASSIGN_OR_RETURN(std::string unk, jsonString(j, "unk_token", at, std::string()));
  LLMRT_ASSIGN_OR_RETURN(m->prefix_, jsonString(j, "continuing_subword_prefix", at, std::string()));
  LLMRT_ASSIGN_OR_RETURN(m->suffix_, jsonString(j, "end_of_word_suffix", at, std::string()));
  LLMRT_ASSIGN_OR_RETURN(m->fuse_unk_, jsonBool(j, "fuse_unk", at, false));
  LLMRT_ASSIGN_OR_RETURN(m->byte_fallback_, jsonBool(j, "byte_fallback", at, false));
  LLMRT_ASSIGN_OR_RETURN(m->ignore_merges_, jsonBool(j, "ignore_merges", at, false));

  const JsonPath vocab_at = at.key("vocab");
  const Json* vocab = jsonFind(j, "vocab");
  if (vocab == nullptr) return jsonMissing(vocab_at, "an object mapping tokens to ids");
  if (!vocab->is_object()) return jsonError(vocab_at, *vocab, "an object mapping tokens to ids");
  m->vocab_.reserve(vocab->size());
  int64_t max_id = -1;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    const Json& v = it.value();
    const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(kMaxTokenId)
                                                 : v.is_number_integer() && v.get<int64_t>() >= 0 &&
                                                       v.get<int64_t>() <= kMaxTokenId;
    if (!in_range) return jsonError(vocab_at.key(it.key()), v, "a token id in [0, 2^28]");
    int64_t id = v.get<int64_t>();
    m->vocab_.insert(it.key(), static_cast<int32_t>(id));
    max_id = std::max(max_id, id);
  }
  // The id -> token table is dense when the ids nearly fill [0, max id], as in
  // every real vocabulary; otherwise sparse, so that memory follows the tokens
  // present and not the largest id (HF accepts gaps: its table is a hash map).
  const size_t count = m->vocab_.size();
  m->dense_ids_ = max_id < 0 || static_cast<uint64_t>(max_id) < 2 * static_cast<uint64_t>(count) + 1024;
  if (m->dense_ids_) {
    m->id_to_token_.resize(static_cast<size_t>(max_id + 1));
    m->has_id_.assign(static_cast<size_t>(max_id + 1), false);
  } else {
    m->sparse_id_to_token_.reserve(count);
  }
  m->vocab_.forEach([&](std::string_view tok, int32_t id) {
    if (m->dense_ids_) {
      m->id_to_token_[id] = std::string(tok);
      m->has_id_[id] = true;
    } else {
      m->sparse_id_to_token_[id] = std::string(tok);
    }
  });

  const Json* merges = jsonFind(j, "merges");
  if (merges != nullptr) {
    const JsonPath merges_at = at.key("merges");
    if (!merges->is_array()) return jsonError(merges_at, *merges, "an array of merges");
    m->merges_.reserve(merges->size());
    std::string a, b;
    uint32_t rank = 0;
    for (size_t i = 0; i < merges->size(); ++i) {
      const Json& e = (*merges)[i];
      if (e.is_string() && e.get_ref<const std::string&>().rfind("#version", 0) == 0) continue;
      // The path of an entry is only built for an error (there may be 300k merges).
      if (!readMerge(e, a, b)) return mergeError(e, merges_at.index(i));
      int32_t ia = m->vocab_.find(a), ib = m->vocab_.find(b);
      std::string merged = a + (b.size() >= m->prefix_.size() ? b.substr(m->prefix_.size()) : std::string());
      int32_t inew = m->vocab_.find(merged);
      if (ia < 0 || ib < 0 || inew < 0) {
        std::string missing = ia < 0 ? a : ib < 0 ? b : merged;
        return jsonError(merges_at.index(i), e,
                         "a merge of vocabulary tokens whose concatenation is in the vocabulary ('" +
                             boundedText(missing) + "' is not)");
      }
      m->merges_.insert(ia, ib, PairMap::Value{rank++, inew});
    }
  }

  if (!unk.empty()) {
    m->unk_id_ = m->vocab_.find(unk);
    if (m->unk_id_ < 0)
      LLMRT_LOG_WARNING("%s: unk_token '%s' is not in the vocabulary; unknown characters are dropped",
                        at.source().c_str(), boundedText(unk).c_str());
  }
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    m->byte_fallback_ids_[b] = m->vocab_.find(buf);
  }
  for (int c = 0; c < 128; ++c) {
    char ch = static_cast<char>(c);
    m->ascii_ids_[c] = m->vocab_.find(std::string_view(&ch, 1));
  }
  m->split_at_metaspace_ = m->prefix_.empty() && m->suffix_.empty() && m->vocab_.find(kMeta) >= 0;
  m->vocab_.forEach([&](std::string_view tok, int32_t) {
    // "x▁" inside a token would let a merge cross the cut.
    for (size_t p = tok.find(kMeta, 1); p != std::string_view::npos; p = tok.find(kMeta, p + 1)) {
      if (!followsMeta(tok, p)) m->split_at_metaspace_ = false;
    }
  });
  return m;
}

void BpeModel::enableRawByteInput() {
  if (raw_enabled_) return;
  const auto& alpha = byteLevelAlphabet();
  raw_vocab_.reserve(vocab_.size());
  std::string raw;
  vocab_.forEach([&](std::string_view tok, int32_t id) {
    raw.clear();
    if (byteLevelDecode(tok, raw)) raw_vocab_.insert(raw, id);
  });
  for (int b = 0; b < 256; ++b) byte_ids_[b] = vocab_.find(alpha.byte_to_utf8[b]);
  raw_enabled_ = true;
}

std::optional<TokenId> BpeModel::tokenToId(std::string_view token) const {
  int32_t id = vocab_.find(token);
  if (id < 0) return std::nullopt;
  return id;
}

const std::string* BpeModel::idToToken(TokenId id) const {
  if (!dense_ids_) {
    auto it = sparse_id_to_token_.find(id);
    return it == sparse_id_to_token_.end() ? nullptr : &it->second;
  }
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::addUnit(std::string_view unit, int32_t id, bool raw_bytes, std::vector<Symbol>& syms,
                       int32_t& unk_id, uint32_t& unk_len) const {
  auto push = [&](int32_t sid, uint32_t len) {
    int32_t n = static_cast<int32_t>(syms.size());
    if (n > 0) syms.back().next = n;
    syms.push_back(Symbol{sid, n - 1, -1, len});
  };
  uint32_t byte_len = raw_bytes ? 1 : static_cast<uint32_t>(unit.size());
  if (id >= 0) {
    if (unk_id >= 0) {
      push(unk_id, unk_len);
      unk_id = -1;
    }
    push(id, byte_len);
    return;
  }
  if (byte_fallback_) {
    // The bytes of the unit as the vocabulary spells it (its alphabet character for raw input).
    std::string_view spelled =
        raw_bytes ? std::string_view(byteLevelAlphabet().byte_to_utf8[static_cast<uint8_t>(unit[0])]) : unit;
    bool all = true;
    for (unsigned char b : spelled) all = all && byte_fallback_ids_[b] >= 0;
    if (all) {
      for (unsigned char b : spelled) push(byte_fallback_ids_[b], 1);
      return;
    }
  }
  if (unk_id_ >= 0) {
    if (unk_id >= 0 && fuse_unk_) {
      unk_len += byte_len;
    } else {
      if (unk_id >= 0) push(unk_id, unk_len);
      unk_id = unk_id_;
      unk_len = byte_len;
    }
  }
}

void BpeModel::buildSymbols(std::string_view w, bool raw_bytes, std::vector<Symbol>& syms) const {
  syms.clear();
  int32_t unk_id = -1;
  uint32_t unk_len = 0;
  if (raw_bytes) {
    for (size_t i = 0; i < w.size(); ++i)
      addUnit(w.substr(i, 1), byte_ids_[static_cast<uint8_t>(w[i])], true, syms, unk_id, unk_len);
  } else if (prefix_.empty() && suffix_.empty()) {
    size_t i = 0;
    while (i < w.size()) {
      uint8_t c = static_cast<uint8_t>(w[i]);
      size_t n = utf8SeqLen(c);
      std::string_view unit = w.substr(i, n);
      int32_t id = c < 0x80 ? ascii_ids_[c] : vocab_.find(unit);
      addUnit(unit, id, false, syms, unk_id, unk_len);
      i += n;
    }
  } else {
    std::string s;
    size_t i = 0;
    while (i < w.size()) {
      size_t n = utf8SeqLen(static_cast<uint8_t>(w[i]));
      s.clear();
      if (i > 0) s += prefix_;
      s.append(w.substr(i, n));
      if (i + n >= w.size()) s += suffix_;
      // Byte fallback and unknown handling see the decorated unit, as HF does.
      addUnit(s, vocab_.find(s), false, syms, unk_id, unk_len);
      i += n;
    }
  }
  if (unk_id >= 0) {
    int32_t n = static_cast<int32_t>(syms.size());
    if (n > 0) syms.back().next = n;
    syms.push_back(Symbol{unk_id, n - 1, -1, unk_len});
  }
}

void BpeModel::mergeSymbols(std::vector<Symbol>& syms, WordScratch& scratch) const {
  const int32_t n = static_cast<int32_t>(syms.size());
  if (n < 2) return;
  if (n <= kShortWord) {
    mergeShort(syms);
    return;
  }
  auto& heap = scratch.heap;
  heap.clear();
  auto cmp = [](const WordScratch::Item& a, const WordScratch::Item& b) {
    return lessPriority(nullptr, a.rank, a.pos, b.rank, b.pos);
  };
  for (int32_t i = 0; i + 1 < n; ++i) {
    if (const PairMap::Value* m = merges_.find(syms[i].id, syms[i + 1].id))
      heap.push_back({m->rank, i, m->id});
  }
  std::make_heap(heap.begin(), heap.end(), cmp);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    WordScratch::Item top = heap.back();
    heap.pop_back();
    Symbol& cur = syms[top.pos];
    if (cur.len == 0 || cur.next < 0) continue;
    const int32_t next_pos = cur.next;
    const Symbol right = syms[next_pos];
    const PairMap::Value* m = merges_.find(cur.id, right.id);
    if (m == nullptr || m->id != top.new_id) continue;  // stale entry
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    syms[next_pos].len = 0;
    if (right.next >= 0) syms[right.next].prev = top.pos;
    if (cur.prev >= 0) {
      if (const PairMap::Value* pm = merges_.find(syms[cur.prev].id, cur.id)) {
        heap.push_back({pm->rank, cur.prev, pm->id});
        std::push_heap(heap.begin(), heap.end(), cmp);
      }
    }
    if (cur.next >= 0) {
      if (const PairMap::Value* nm = merges_.find(cur.id, syms[cur.next].id)) {
        heap.push_back({nm->rank, top.pos, nm->id});
        std::push_heap(heap.begin(), heap.end(), cmp);
      }
    }
  }
}

// Short words: the pair ranks live in a small array and the best pair is
// found by a scan, which picks the same pair as the heap (lowest rank, then
// leftmost) without its bookkeeping.
void BpeModel::mergeShort(std::vector<Symbol>& syms) const {
  const int32_t n = static_cast<int32_t>(syms.size());
  constexpr uint32_t kNone = ~0u;
  uint32_t rank[kShortWord];
  int32_t merged[kShortWord];
  auto pairAt = [&](int32_t i) {
    rank[i] = kNone;
    if (syms[i].next < 0) return;
    if (const PairMap::Value* m = merges_.find(syms[i].id, syms[syms[i].next].id)) {
      rank[i] = m->rank;
      merged[i] = m->id;
    }
  };
  for (int32_t i = 0; i < n; ++i) pairAt(i);
  while (true) {
    int32_t best = -1;
    uint32_t best_rank = kNone;
    for (int32_t i = 0; i >= 0; i = syms[i].next) {
      if (rank[i] < best_rank) {
        best_rank = rank[i];
        best = i;
      }
    }
    if (best < 0) break;
    Symbol& cur = syms[best];
    const int32_t right = cur.next;
    cur.id = merged[best];
    cur.len += syms[right].len;
    cur.next = syms[right].next;
    syms[right].len = 0;
    if (cur.next >= 0) syms[cur.next].prev = best;
    pairAt(best);
    if (cur.prev >= 0) pairAt(cur.prev);
  }
}

void BpeModel::mergeWord(std::string_view word, bool raw_bytes, std::vector<TokenId>& out) const {
  thread_local WordScratch scratch;
  buildSymbols(word, raw_bytes, scratch.syms);
  mergeSymbols(scratch.syms, scratch);
  for (const Symbol& s : scratch.syms)
    if (s.len != 0) out.push_back(s.id);
}

void BpeModel::tokenizeCached(std::string_view word, bool raw_bytes, std::vector<TokenId>& out) const {
  if (word.size() > kCacheMaxWordBytes) {
    mergeWord(word, raw_bytes, out);
    return;
  }
  const uint64_t h = hashBytes(word);
  CacheShard& shard = cache_[h % kCacheShards];
  const size_t mask = kCacheShardSlots - 1;
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    if (!shard.slots.empty()) {
      for (size_t i = (h >> 8) & mask;; i = (i + 1) & mask) {
        const CacheSlot& s = shard.slots[i];
        if (!s.used) break;
        if (s.hash == h && s.key_len == word.size() &&
            std::memcmp(shard.keys.data() + s.key_off, word.data(), word.size()) == 0) {
          out.insert(out.end(), shard.ids.begin() + s.ids_off, shard.ids.begin() + s.ids_off + s.ids_len);
          return;
        }
      }
    }
  }
  const size_t start = out.size();
  mergeWord(word, raw_bytes, out);
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.slots.empty() || shard.used * 2 >= kCacheShardSlots) {
    shard.slots.assign(kCacheShardSlots, CacheSlot{});
    shard.keys.clear();
    shard.ids.clear();
    shard.used = 0;
  }
  size_t i = (h >> 8) & mask;
  while (shard.slots[i].used) {
    const CacheSlot& s = shard.slots[i];
    if (s.hash == h && s.key_len == word.size() &&
        std::memcmp(shard.keys.data() + s.key_off, word.data(), word.size()) == 0)
      return;  // another thread cached it meanwhile
    i = (i + 1) & mask;
  }
  CacheSlot& slot = shard.slots[i];
  slot.hash = h;
  slot.key_off = static_cast<uint32_t>(shard.keys.size());
  slot.key_len = static_cast<uint32_t>(word.size());
  slot.ids_off = static_cast<uint32_t>(shard.ids.size());
  slot.ids_len = static_cast<uint32_t>(out.size() - start);
  slot.used = true;
  shard.keys.append(word);
  shard.ids.insert(shard.ids.end(), out.begin() + static_cast<std::ptrdiff_t>(start), out.end());
  ++shard.used;
}

void BpeModel::tokenize(std::string_view word, bool raw_bytes, std::vector<TokenId>& out) const {
  if (word.empty()) return;
  raw_bytes = raw_bytes && raw_enabled_;
  if (ignore_merges_) {
    int32_t id = raw_bytes ? raw_vocab_.find(word) : vocab_.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (!split_at_metaspace_ || raw_bytes) {
    tokenizeCached(word, raw_bytes, out);
    return;
  }
  // Cut before each "▁" that follows another character.
  size_t start = 0;
  size_t p = word.find(kMeta, 1);
  while (p != std::string_view::npos) {
    if (!followsMeta(word, p)) {
      if (p > start) tokenizeCached(word.substr(start, p - start), false, out);
      start = p;
    }
    p = word.find(kMeta, p + kMeta.size());
  }
  tokenizeCached(word.substr(start), false, out);
}

}  // namespace llmrt::tok

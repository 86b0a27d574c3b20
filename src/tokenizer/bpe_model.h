// The BPE model of HF `tokenizers`: a vocabulary, ranked merges, optional
// unknown token (fused or not), byte fallback to <0xXX> tokens, continuing
// subword prefix / end-of-word suffix, and ignore_merges (whole-word vocab
// lookup first). Merging follows HF's order exactly: the lowest-ranked
// adjacent pair first, the leftmost on ties.
//
// Words are given either as text in the vocabulary's own alphabet, or - for
// byte-level tokenizers whose ByteLevel step is the last pre-tokenizer - as
// the raw bytes, which the model maps through the byte alphabet itself (no
// string is built per word). A bounded, sharded word cache makes repeated
// words cheap; tokenize() is thread-safe.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "llmrt/status.h"
#include "llmrt/tokenizer.h"
#include "tokenizer/flat_map.h"
#include "tokenizer/json_util.h"

namespace llmrt::tok {

class BpeModel {
 public:
  // Parses `model` (type "BPE"); `at` locates it for errors.
  static Result<std::unique_ptr<BpeModel>> fromJson(const Json& model, const JsonPath& at);

  // Lets tokenize() take raw bytes (`raw_bytes` = true) for a byte-level vocabulary.
  void enableRawByteInput();

  // Appends the ids of one pre-tokenized word to `out`.
  void tokenize(std::string_view word, bool raw_bytes, std::vector<TokenId>& out) const;

  std::optional<TokenId> tokenToId(std::string_view token) const;
  // The vocabulary string of `id`, or nullptr.
  const std::string* idToToken(TokenId id) const;
  size_t vocabSize() const { return vocab_.size(); }

 private:
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    uint32_t len;  // bytes covered; 0 once merged into its left neighbour
  };
  struct WordScratch;

  void buildSymbols(std::string_view word, bool raw_bytes, std::vector<Symbol>& syms) const;
  void addUnit(std::string_view unit, int32_t id, bool raw_bytes, std::vector<Symbol>& syms, int32_t& unk_id,
               uint32_t& unk_len) const;
  void mergeSymbols(std::vector<Symbol>& syms, WordScratch& scratch) const;
  void mergeShort(std::vector<Symbol>& syms) const;
  static constexpr int32_t kShortWord = 48;
  void mergeWord(std::string_view word, bool raw_bytes, std::vector<TokenId>& out) const;
  void tokenizeCached(std::string_view word, bool raw_bytes, std::vector<TokenId>& out) const;

  StringIdMap vocab_;  // token string -> id
  // id -> token: a table indexed by id when the ids are (nearly) contiguous,
  // else a hash map (memory follows the tokens present, not the largest id).
  bool dense_ids_ = true;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  std::unordered_map<int32_t, std::string> sparse_id_to_token_;
  PairMap merges_;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string prefix_;                            // continuing_subword_prefix
  std::string suffix_;                            // end_of_word_suffix
  std::array<int32_t, 256> byte_fallback_ids_{};  // <0xXX> ids, -1 when absent
  std::array<int32_t, 128> ascii_ids_{};          // single ASCII chars, -1 when absent
  // SentencePiece vocabularies have "▁" (the word boundary) only at the
  // start of tokens, so no merge joins a symbol to a following "▁" that
  // comes after another character: words are then cut there and merged (and
  // cached) piece by piece, with the same result as merging the whole word.
  bool split_at_metaspace_ = false;

  // Raw-byte input (byte-level vocabularies).
  bool raw_enabled_ = false;
  StringIdMap raw_vocab_;                // raw byte string -> id
  std::array<int32_t, 256> byte_ids_{};  // id of each byte's alphabet character

  // Word cache: sharded open-addressing tables (keys and ids in per-shard
  // arenas), each shard cleared when full; guarded by a mutex per shard.
  static constexpr size_t kCacheShards = 64;
  static constexpr size_t kCacheShardSlots = 4096;  // power of two; at most half used
  static constexpr size_t kCacheMaxWordBytes = 256;
  struct CacheSlot {
    uint64_t hash = 0;
    uint32_t key_off = 0, key_len = 0;
    uint32_t ids_off = 0, ids_len = 0;
    bool used = false;
  };
  struct CacheShard {
    std::mutex mu;
    std::vector<CacheSlot> slots;
    std::string keys;
    std::vector<TokenId> ids;
    size_t used = 0;
  };
  mutable std::array<CacheShard, kCacheShards> cache_;
};

}  // namespace llmrt::tok

// HfTokenizer: the Tokenizer implementation for HF tokenizer.json files. The
// encode pipeline is HF's: added tokens split the raw text; each remaining
// segment is normalized and split by the normalized added tokens; the
// pre-tokenizer steps cut it into words; the BPE model maps each word to ids;
// truncation, the post-processor and padding finish the sequence. decode maps
// ids to token strings (added tokens first) and runs the decoder chain.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "llmrt/tokenizer.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/json_util.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace llmrt::tok {

class HfTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<HfTokenizer>> fromJsonValue(const Json& root, std::string_view source);

  Result<std::vector<TokenId>> encode(std::string_view text, bool add_special_tokens = true) const override;
  std::string decode(const std::vector<TokenId>& ids, bool skip_special_tokens = false) const override;
  size_t vocabSize() const override { return vocab_size_; }
  std::optional<TokenId> tokenToId(std::string_view token) const override;
  std::optional<std::string> idToToken(TokenId id) const override;
  bool isSpecial(TokenId id) const override;
  std::vector<TokenId> specialPrefixIds() const override;
  std::vector<TokenId> specialSuffixIds() const override;
  std::vector<AddedTokenInfo> addedTokens() const override;

  // True when the model takes raw bytes (a byte-level tokenizer whose
  // ByteLevel step is the last pre-tokenizer); exposed for tests.

 private:
  struct Truncation {
    size_t max_length = 0;
    bool left = false;  // direction "Left": keep the end
  };
  struct Padding {
    bool fixed = false;
    size_t length = 0;
    size_t multiple_of = 0;
    bool left = false;
    TokenId pad_id = 0;
  };
  // The longest padded sequence a file may ask for: 2^20 tokens, far beyond
  // any model's context. Padding applies on every encode, so a larger Fixed
  // length or multiple would allocate gigabytes per call; it is a load error.
  static constexpr int64_t kMaxPaddedLength = int64_t{1} << 20;

  Status loadAddedTokens(const Json& list, const JsonPath& at);
  Status loadPadding(const Json& pd, const JsonPath& at);
  // Every id the post-processor and the padding can emit must be in the vocabulary.
  Status checkEmittedIds(const std::vector<EmittedId>& emitted) const;
  Status encodeSegment(std::string_view raw, bool at_origin, std::vector<TokenId>& ids) const;
  Status encodeWords(std::string_view text, bool at_origin, std::vector<TokenId>& ids) const;
  // The string decode() gives `id` (before the decoder), or nullptr.
  const std::string* decodeString(TokenId id, bool& special) const;

  std::string source_;
  std::unique_ptr<Normalizer> normalizer_;
  std::vector<std::unique_ptr<PreTokenizer>> pre_steps_;
  bool raw_byte_input_ = false;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PostProcessor> post_;
  std::unique_ptr<Decoder> decoder_;
  AddedVocabulary added_;
  // Per added token (by index in added_.tokens()): the string decode uses
  // (the normalized content for normalized tokens, as HF 0.23 does) and
  // whether skip_special_tokens drops it.
  std::vector<std::string> added_decode_;
  std::vector<bool> added_skip_;
  std::optional<Truncation> truncation_;
  std::optional<Padding> padding_;
  size_t vocab_size_ = 0;
};

}  // namespace llmrt::tok

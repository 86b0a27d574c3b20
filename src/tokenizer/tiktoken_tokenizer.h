// TiktokenTokenizer: the Tokenizer for tiktoken BPE files (Qwen v1's
// qwen.tiktoken). encode: invalid UTF-8 becomes U+FFFD, the text is NFC
// normalized (Qwen's tokenize does unicodedata.normalize("NFC")), special
// token strings in it become their ids (tiktoken's allowed_special="all", the
// Qwen default), and every other stretch is cut by the pre-tokenizer regex and
// each piece byte-pair merged by rank (tiktoken_bpe.h). id == rank. No BOS or
// EOS is added. decode: the tokens' bytes joined, invalid UTF-8 replaced
// (errors="replace"); skip_special_tokens drops the special tokens.
//
// Token strings (idToToken / tokenToId) spell a rank's bytes in GPT-2's
// byte-level alphabet ("Ġhello"), as the tokenizer.json of Qwen2 does;
// tokenToId also takes the raw bytes.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "llmrt/tokenizer.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/regex.h"
#include "tokenizer/tiktoken_bpe.h"

namespace llmrt::tok {

// Qwen v1's pre-tokenizer (tokenization_qwen.py PAT_STR): digits one by one.
inline constexpr std::string_view kQwenTiktokenPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// The first special id of Qwen v1 (SPECIAL_START_ID): 151643 ranks precede it.
inline constexpr TokenId kQwenSpecialStart = 151643;

struct TiktokenOptions {
  std::string pattern{kQwenTiktokenPattern};
  // (content, id) of the special tokens; the ids must not be ranks of the file.
  std::vector<std::pair<std::string, TokenId>> special_tokens;
  bool nfc = true;
};

// Qwen v1's setup for a file of `rank_limit` ranks: the pattern above and the
// 208 special tokens <|endoftext|>, <|im_start|>, <|im_end|>, <|extra_0|> ..
// <|extra_204|> from id 151643 (from rank_limit when a larger file reaches
// past 151643).
TiktokenOptions qwenTiktokenOptions(uint32_t rank_limit);

class TiktokenTokenizer final : public Tokenizer {
 public:
  // Builds from parsed ranks. Fails when the pattern does not compile or a
  // special token is empty, repeated, or has an id the file uses as a rank.
  static Result<std::unique_ptr<TiktokenTokenizer>> create(TiktokenRanks ranks, TiktokenOptions options,
                                                           std::string_view source);
  // Parses a .tiktoken file's contents with qwenTiktokenOptions.
  static Result<std::unique_ptr<TiktokenTokenizer>> fromContents(std::string_view contents,
                                                                 std::string_view source);

  Result<std::vector<TokenId>> encode(std::string_view text, bool add_special_tokens = true) const override;
  std::string decode(const std::vector<TokenId>& ids, bool skip_special_tokens = false) const override;
  size_t vocabSize() const override { return vocab_size_; }
  std::optional<TokenId> tokenToId(std::string_view token) const override;
  std::optional<std::string> idToToken(TokenId id) const override;
  bool isSpecial(TokenId id) const override { return specials_.byId(id) != nullptr; }
  std::vector<TokenId> specialPrefixIds() const override { return {}; }
  std::vector<TokenId> specialSuffixIds() const override { return {}; }
  std::vector<AddedTokenInfo> addedTokens() const override;

  const TiktokenRanks& ranks() const { return ranks_; }

 private:
  TiktokenTokenizer() = default;
  Status encodeOrdinary(std::string_view text, std::vector<TokenId>& ids) const;

  std::string source_;
  TiktokenRanks ranks_;
  Regex regex_;
  bool nfc_ = true;
  AddedVocabulary specials_;
  size_t vocab_size_ = 0;
};

}  // namespace llmrt::tok

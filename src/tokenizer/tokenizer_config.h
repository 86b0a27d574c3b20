// tokenizer_config.json: what the tokenizers without a tokenizer.json
// (SentencePiece tokenizer.model, tiktoken files) take from it — HF's
// add_bos_token / add_eos_token / legacy switches, the named special tokens
// (bos_token, eos_token, ..., as strings or AddedToken objects) and
// added_tokens_decoder (id -> AddedToken), and tokenizer_class.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "llmrt/status.h"
#include "llmrt/tokenizer.h"

namespace llmrt::tok {

struct TokenizerConfig {
  std::string source;  // the file, for messages
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  std::optional<bool> legacy;
  std::optional<std::string> bos_token, eos_token, unk_token, pad_token;
  std::vector<std::string> additional_special_tokens;
  std::vector<AddedTokenInfo> added_tokens;  // added_tokens_decoder, in id order
  std::string tokenizer_class;
};

// Parses tokenizer_config.json contents. Fields of the wrong type are errors
// (kParseError, naming the file, the field and the value): add_bos_token,
// add_eos_token and legacy must be booleans; the special tokens strings or
// objects with a string "content"; added_tokens_decoder an object of
// "<id>": {"content": ..., "special": ..., ...} with ids in [0, 2^31).
// Null reads as absent; other keys are ignored.
Result<TokenizerConfig> parseTokenizerConfig(std::string_view json, std::string_view source);

// Reads `dir`/tokenizer_config.json; nullopt when the directory has none.
Result<std::optional<TokenizerConfig>> loadTokenizerConfig(const std::string& dir);

}  // namespace llmrt::tok

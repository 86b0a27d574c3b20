// Tokenizer: loads a HuggingFace tokenizer.json and encodes/decodes exactly as
// HF `tokenizers` does. Thread-safe for concurrent encode/decode after load.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "llmrt/status.h"

namespace llmrt {

using TokenId = int32_t;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Loads tokenizer.json from a file path.
  static Result<std::unique_ptr<Tokenizer>> fromFile(const std::string& path);
  // Parses tokenizer.json contents; `source` names it in error messages.
  static Result<std::unique_ptr<Tokenizer>> fromJson(std::string_view json, std::string_view source);

  // encode(text, add_special_tokens): as HF Tokenizer.encode(text, add_special_tokens=...).
  // With add_special_tokens the post-processor adds BOS/EOS per its template.
  virtual std::vector<TokenId> encode(std::string_view text, bool add_special_tokens = true) const = 0;
  // decode(ids, skip_special_tokens): as HF Tokenizer.decode.
  virtual std::string decode(const std::vector<TokenId>& ids, bool skip_special_tokens = false) const = 0;

  virtual size_t vocabSize() const = 0;  // including added tokens
  virtual std::optional<TokenId> tokenToId(std::string_view token) const = 0;
  virtual std::optional<std::string> idToToken(TokenId id) const = 0;
  virtual bool isSpecial(TokenId id) const = 0;
};

// Incremental detokenizer for streaming. Feed ids as they are generated; each
// call returns the newly final text, never half a UTF-8 character, and the
// concatenation of all returned pieces equals tokenizer.decode(all ids).
class StreamDecoder {
 public:
  StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false,
                std::vector<TokenId> prompt_ids = {});
  std::string step(TokenId id);
  // Returns any text still held back (e.g. an incomplete trailing sequence).
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<TokenId> ids_;
  size_t prefix_offset_ = 0;  // start of the window decoded for context
  size_t read_offset_ = 0;    // ids before this are already emitted
  std::string emitted_prefix_text_;
};

}  // namespace llmrt

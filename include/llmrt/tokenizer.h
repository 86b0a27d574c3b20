// Tokenizer: loads a HuggingFace tokenizer.json and encodes/decodes exactly as
// HF `tokenizers` does (BPE models: byte-level and SentencePiece-style with
// byte fallback; the normalizers, pre-tokenizers, post-processors, decoders
// and added tokens those files use). Model directories without tokenizer.json
// are served from a SentencePiece tokenizer.model (libsentencepiece, with
// tokenizer_config.json's switches and added tokens, as HF's slow tokenizers)
// or a tiktoken BPE file (Qwen v1's qwen.tiktoken). Thread-safe for
// concurrent encode/decode after load.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "llmrt/status.h"

namespace llmrt {

using TokenId = int32_t;

// A token from tokenizer.json "added_tokens" (special tokens and user tokens
// that are matched in the text before the model runs).
struct AddedTokenInfo {
  TokenId id = -1;
  std::string content;
  bool special = false;
  bool normalized = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Loads a tokenizer file, its kind by name: *.tiktoken is a tiktoken BPE
  // file (with Qwen v1's pre-tokenizer, NFC and special tokens from id 151643);
  // *.model or *.model.* (tokenizer.model.v3) a SentencePiece model (alone: no
  // tokenizer_config.json; BOS added, as LlamaTokenizer); anything else
  // tokenizer.json. Fails with kIoError when the file cannot be read,
  // kParseError for malformed contents (one line naming the file and the JSON
  // field, line or byte offset and value), kUnimplemented for a component type
  // this build does not support (or a SentencePiece model in a build without
  // LLMRT_SENTENCEPIECE).
  static Result<std::unique_ptr<Tokenizer>> fromFile(const std::string& path);
  // The tokenizer of a model directory: tokenizer.json, else tokenizer.model
  // (with the directory's tokenizer_config.json: add_bos_token,
  // add_eos_token, legacy, the special tokens, added_tokens_decoder,
  // ChatGLMTokenizer's specials), else a *.tiktoken file (qwen.tiktoken
  // first). nullptr (not an error) when the directory has none of them;
  // errors as fromFile, and for a malformed tokenizer_config.json.
  static Result<std::unique_ptr<Tokenizer>> fromDirectory(const std::string& dir);
  // The file fromDirectory loads, or nullopt.
  static std::optional<std::string> findInDirectory(const std::string& dir);
  // Parses tokenizer.json contents; `source` names it in error messages.
  static Result<std::unique_ptr<Tokenizer>> fromJson(std::string_view json, std::string_view source);

  // encode(text, add_special_tokens): as HF Tokenizer.encode(text, add_special_tokens=...).
  // With add_special_tokens the post-processor adds BOS/EOS per its template.
  // Invalid UTF-8 in `text` is first replaced by U+FFFD (as Python's
  // errors="replace" would). Fails, naming the tokenizer.json field, when a
  // regex of the file gives up on the text (kResourceExhausted: PCRE2's match,
  // depth or heap limit, e.g. a backtracking Split pattern on a long run) or a
  // Replace normalizer would grow it beyond 16x + 4 KiB.
  virtual Result<std::vector<TokenId>> encode(std::string_view text,
                                              bool add_special_tokens = true) const = 0;
  // decode(ids, skip_special_tokens): as HF Tokenizer.decode. Unknown ids are skipped.
  virtual std::string decode(const std::vector<TokenId>& ids, bool skip_special_tokens = false) const = 0;

  virtual size_t vocabSize() const = 0;  // including added tokens
  virtual std::optional<TokenId> tokenToId(std::string_view token) const = 0;
  virtual std::optional<std::string> idToToken(TokenId id) const = 0;
  // True for an added token marked "special" (what skip_special_tokens drops).
  virtual bool isSpecial(TokenId id) const = 0;

  // Ids the post-processor puts before / after the text when
  // add_special_tokens is set (e.g. {BOS} for Llama-2, {} for Llama-3's
  // ByteLevel post-processor).
  virtual std::vector<TokenId> specialPrefixIds() const = 0;
  virtual std::vector<TokenId> specialSuffixIds() const = 0;
  // The first of specialPrefixIds(), if any.
  std::optional<TokenId> bosId() const {
    auto p = specialPrefixIds();
    if (p.empty()) return std::nullopt;
    return p.front();
  }
  virtual std::vector<AddedTokenInfo> addedTokens() const = 0;
};

// Incremental detokenizer for streaming. Feed ids as they are generated; each
// call returns the newly final text, never half a UTF-8 character, and the
// concatenation of all returned pieces (plus flush()) equals
// tokenizer.decode(all ids). With `prompt_ids`, the prompt is context only:
// the pieces are the text the generated ids add after decode(prompt) (which
// then equals decode(prompt + ids) minus decode(prompt) whenever the latter is
// a prefix of the former).
// Text that a later id can still change is held back: a trailing run of byte
// tokens (<0xXX>; HF's ByteFallback turns a whole run into U+FFFD when any of
// its bytes is invalid, so even valid characters of an open run may change),
// and text that ends in U+FFFD (an incomplete UTF-8 sequence). flush()
// releases it.
class StreamDecoder {
 public:
  StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false,
                std::vector<TokenId> prompt_ids = {});
  std::string step(TokenId id);
  // Returns any text still held back (e.g. an incomplete trailing sequence).
  std::string flush();

 private:
  // What an id contributes to decode(): visible text, a byte-fallback byte
  // (joins the run before it), or nothing (skipped, unknown, or empty).
  enum class Kind : uint8_t { kText, kByte, kHidden };
  Kind classify(TokenId id);
  std::string advance(bool final);

  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<TokenId> ids_;                      // the decode context, then the ids not yet emitted
  std::vector<Kind> kinds_;                       // classify() of each of ids_
  std::unordered_map<TokenId, Kind> kind_cache_;  // classify() by id, as ids repeat
  size_t read_offset_ = 0;                        // ids_ before this are already emitted (the context)
  size_t text_end_ = 0;      // ids_ up to this end with a text id (the most that may be emitted)
  std::string prefix_text_;  // decode(ids_[0, read_offset_))
};

}  // namespace llmrt

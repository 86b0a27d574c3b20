// Decoders of HF `tokenizers` (tokenizer.json "decoder"): ByteLevel,
// ByteFallback, Fuse, Strip, Replace, Metaspace, WordPiece, BPEDecoder and
// Sequence. Each maps the list of token strings to a new list (HF's
// decode_chain); the decoded text is the concatenation of the final list.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "llmrt/status.h"
#include "tokenizer/json_util.h"

namespace llmrt::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Maps the token strings in place. Fails only when a Replace regex gives up
  // (see Regex::find).
  virtual Status decodeChain(std::vector<std::string>& tokens) const = 0;
};

// Parses a "decoder" object; `nesting` counts the enclosing Sequences (at most
// kMaxSequenceNesting).
Result<std::unique_ptr<Decoder>> parseDecoder(const Json& j, const JsonPath& at, int nesting = 0);

}  // namespace llmrt::tok

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
  virtual void decodeChain(std::vector<std::string>& tokens) const = 0;
};

Result<std::unique_ptr<Decoder>> parseDecoder(const Json& j, const JsonPath& at);

}  // namespace llmrt::tok

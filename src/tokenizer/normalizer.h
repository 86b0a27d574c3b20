// Normalizers of HF `tokenizers` (tokenizer.json "normalizer"): Sequence,
// NFC/NFD/NFKC/NFKD, Lowercase, Prepend, Replace, Strip, StripAccents,
// BertNormalizer and ByteLevel. Each rewrites a text segment in place.
#pragma once

#include <memory>
#include <string>

#include "llmrt/status.h"
#include "tokenizer/json_util.h"

namespace llmrt::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites `s`. Fails only when a Replace regex gives up (see Regex::find).
  virtual Status normalize(std::string& s) const = 0;
};

// Parses a "normalizer" object; `at` locates it for errors. `nesting` counts
// the enclosing Sequences (at most kMaxSequenceNesting).
Result<std::unique_ptr<Normalizer>> parseNormalizer(const Json& j, const JsonPath& at, int nesting = 0);

}  // namespace llmrt::tok

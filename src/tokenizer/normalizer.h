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
  virtual void normalize(std::string& s) const = 0;
};

// Parses a "normalizer" object; `at` locates it for errors.
Result<std::unique_ptr<Normalizer>> parseNormalizer(const Json& j, const JsonPath& at);

}  // namespace llmrt::tok

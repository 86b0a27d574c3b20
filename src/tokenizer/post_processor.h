// Post-processors of HF `tokenizers` (tokenizer.json "post_processor") for a
// single sequence: TemplateProcessing, BertProcessing, RobertaProcessing,
// ByteLevel (ids unchanged) and Sequence. With add_special_tokens they add
// the template's special tokens (BOS/EOS) around the sequence.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "llmrt/status.h"
#include "llmrt/tokenizer.h"
#include "tokenizer/json_util.h"

namespace llmrt::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<TokenId>& ids, bool add_special_tokens) const = 0;
  // Ids placed before the sequence when special tokens are added.
  virtual std::vector<TokenId> prefixIds() const = 0;
  virtual std::vector<TokenId> suffixIds() const = 0;
};

// An id the post-processor can emit, with the field that names it and the
// token the file gives for it (empty when none): the loader checks each
// against the vocabulary once the added tokens are known.
struct EmittedId {
  TokenId id;
  JsonPath field;
  std::string token;
};

// Parses a "post_processor" object, appending every id it can emit to
// `emitted`. `nesting` counts the enclosing Sequences (at most
// kMaxSequenceNesting).
Result<std::unique_ptr<PostProcessor>> parsePostProcessor(const Json& j, const JsonPath& at,
                                                          std::vector<EmittedId>& emitted, int nesting = 0);

}  // namespace llmrt::tok

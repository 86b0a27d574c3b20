// Post-processors of HF `tokenizers` (tokenizer.json "post_processor") for a
// single sequence: TemplateProcessing, BertProcessing, RobertaProcessing,
// ByteLevel (ids unchanged) and Sequence. With add_special_tokens they add
// the template's special tokens (BOS/EOS) around the sequence.
#pragma once

#include <memory>
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

Result<std::unique_ptr<PostProcessor>> parsePostProcessor(const Json& j, const JsonPath& at);

}  // namespace llmrt::tok

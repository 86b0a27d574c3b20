// OutputTracker: one generated sequence's output as the client sees it — token
// ids, incrementally detokenized text, stop strings (matched on the text, the
// output trimmed there) and the finish reason. Streaming never shows text that
// a stop string might still swallow, nor half a UTF-8 character.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llmrt/finish_reason.h"
#include "llmrt/sampling_params.h"
#include "llmrt/tokenizer.h"

namespace llmrt {

class OutputTracker {
 public:
  // `tokenizer` may be null: then there is no text and stop strings never match.
  OutputTracker(const Tokenizer* tokenizer, const SamplingParams& params, std::vector<TokenId> prompt_ids);

  struct Update {
    std::string text_delta;  // newly final text (may be empty)
    FinishReason finish = FinishReason::kNone;
  };
  // Appends a sampled token. `token_finish` is the token-level verdict
  // (checkFinish: EOS / stop id / length); a stop string may end it earlier.
  Update onToken(TokenId token, FinishReason token_finish);
  // Ends the sequence for another reason (cancel, error); returns held text.
  Update finish(FinishReason reason);

  const std::vector<TokenId>& tokenIds() const { return ids_; }
  const std::string& text() const { return text_; }
  FinishReason finishReason() const { return finish_; }
  // The stop string that ended the sequence, if one did.

 private:
  std::string takeReleasable(bool all);

  const SamplingParams& params_;
  std::unique_ptr<StreamDecoder> decoder_;
  std::vector<TokenId> ids_;
  std::string text_;     // all text so far (trimmed at a stop string)
  size_t emitted_ = 0;   // bytes of text_ already returned
  size_t searched_ = 0;  // text_ before this has been searched for stop strings
  size_t max_stop_len_ = 0;
  FinishReason finish_ = FinishReason::kNone;
  std::optional<std::string> matched_stop_;
};

}  // namespace llmrt

#include "runtime/output_tracker.h"

#include <algorithm>

namespace llmrt {

OutputTracker::OutputTracker(const Tokenizer* tokenizer, const SamplingParams& params, std::vector<TokenId> prompt_ids)
    : params_(params) {
  if (tokenizer != nullptr)
    decoder_ = std::make_unique<StreamDecoder>(*tokenizer, params.skip_special_tokens, std::move(prompt_ids));
  for (const std::string& s : params.stop) max_stop_len_ = std::max(max_stop_len_, s.size());
}

std::string OutputTracker::takeReleasable(bool all) {
  size_t end = text_.size();
  if (!all && max_stop_len_ > 1) {
    // Hold back what could be the start of a stop string.
    end = end > max_stop_len_ - 1 ? end - (max_stop_len_ - 1) : 0;
    while (end > emitted_ && end < text_.size() && (static_cast<unsigned char>(text_[end]) & 0xC0) == 0x80) --end;
  }
  if (end <= emitted_) return {};
  std::string out = text_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

OutputTracker::Update OutputTracker::onToken(TokenId token, FinishReason token_finish) {
  Update u;
  if (finish_ != FinishReason::kNone) return u;
  ids_.push_back(token);
  if (decoder_) {
    text_ += decoder_->step(token);
    if (token_finish != FinishReason::kNone) text_ += decoder_->flush();
  }
  if (max_stop_len_ > 0 && text_.size() > searched_) {
    // A match may start up to max_stop_len - 1 bytes before the new text.
    const size_t from = searched_ > max_stop_len_ - 1 ? searched_ - (max_stop_len_ - 1) : 0;
    size_t best = std::string::npos;
    const std::string* best_stop = nullptr;
    for (const std::string& s : params_.stop) {
      const size_t at = text_.find(s, from);
      if (at != std::string::npos && at < best) {
        best = at;
        best_stop = &s;
      }
    }
    searched_ = text_.size();
    if (best_stop != nullptr) {
      text_.resize(params_.include_stop_str_in_output ? best + best_stop->size() : best);
      matched_stop_ = *best_stop;
      token_finish = FinishReason::kStop;
    }
  }
  finish_ = token_finish;
  u.finish = finish_;
  u.text_delta = takeReleasable(finish_ != FinishReason::kNone);
  return u;
}

OutputTracker::Update OutputTracker::finish(FinishReason reason) {
  Update u;
  if (finish_ != FinishReason::kNone) return u;
  finish_ = reason;
  if (decoder_) text_ += decoder_->flush();
  u.finish = reason;
  u.text_delta = takeReleasable(true);
  return u;
}

}  // namespace llmrt

// StreamDecoder: incremental detokenization as vLLM / TGI do it. The ids from
// prefix_offset_ are decoded together, so decoders that look at neighbours
// (Strip of the first space, Metaspace, ByteLevel / ByteFallback byte runs)
// see the same context as a full decode; the text beyond what the window's
// already-emitted part decodes to is new. Output is held while it ends in
// U+FFFD, the mark of an incomplete UTF-8 sequence.
#include <algorithm>

#include "llmrt/tokenizer.h"

namespace llmrt {
namespace {

constexpr size_t kPromptContext = 5;       // prompt ids decoded with the first new token
constexpr size_t kMaxContextBackoff = 12;  // how much further back to reach a character start

bool endsWithReplacementChar(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

}  // namespace

static bool startsWithReplacementChar(const std::string& s) { return s.compare(0, 3, "\xEF\xBF\xBD") == 0; }

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens,
                             std::vector<TokenId> prompt_ids)
    : tok_(tokenizer), skip_special_(skip_special_tokens), ids_(std::move(prompt_ids)) {
  read_offset_ = ids_.size();
  if (read_offset_ == 0) return;
  size_t start = read_offset_ > kPromptContext ? read_offset_ - kPromptContext : 0;
  prefix_text_ = tok_.decode(
      std::vector<TokenId>(ids_.begin() + static_cast<std::ptrdiff_t>(start), ids_.end()), skip_special_);
  // A window that starts inside a character split over byte tokens decodes
  // to U+FFFD there (and byte fallback spoils the whole byte run): widen it.
  while (start > 0 && read_offset_ - start < kPromptContext + kMaxContextBackoff &&
         startsWithReplacementChar(prefix_text_)) {
    --start;
    prefix_text_ = tok_.decode(
        std::vector<TokenId>(ids_.begin() + static_cast<std::ptrdiff_t>(start), ids_.end()), skip_special_);
  }
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(start));
  read_offset_ -= start;
  prefix_offset_ = 0;
}

std::string StreamDecoder::advance(bool final) {
  if (ids_.size() == read_offset_) return {};
  std::vector<TokenId> window(ids_.begin() + static_cast<std::ptrdiff_t>(prefix_offset_), ids_.end());
  std::string text = tok_.decode(window, skip_special_);
  size_t from;
  if (text.size() >= prefix_text_.size() && text.compare(0, prefix_text_.size(), prefix_text_) == 0) {
    if (text.size() == prefix_text_.size()) return {};       // nothing new yet
    if (!final && endsWithReplacementChar(text)) return {};  // maybe an incomplete character
    from = prefix_text_.size();
  } else {
    // The window's context decodes differently now. When what differs is a
    // tail of U+FFFD (bytes of a character the new ids complete, e.g. a prompt
    // that ends inside one), the completed text is new; otherwise wait, and at
    // the end emit past the common prefix.
    from = 0;
    while (from < text.size() && from < prefix_text_.size() && text[from] == prefix_text_[from]) ++from;
    while (from > 0 && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) --from;
    bool only_fffd_differs = true;
    for (size_t i = from; i < prefix_text_.size(); i += 3)
      only_fffd_differs = only_fffd_differs && prefix_text_.compare(i, 3, "\xEF\xBF\xBD") == 0;
    if (!final && (!only_fffd_differs || endsWithReplacementChar(text) || text.size() <= from)) return {};
  }
  std::string out = text.substr(from);
  // The ids just emitted become the context of the next window.
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(read_offset_));
  prefix_offset_ = 0;
  read_offset_ = ids_.size();
  prefix_text_ = tok_.decode(ids_, skip_special_);
  return out;
}

std::string StreamDecoder::step(TokenId id) {
  ids_.push_back(id);
  return advance(false);
}

std::string StreamDecoder::flush() { return advance(true); }

}  // namespace llmrt

// StreamDecoder: incremental detokenization as vLLM / TGI do it. The ids of
// the last emitted piece (the context) are decoded together with the new ids,
// so decoders that look at neighbours (Strip of the first space, Metaspace,
// ByteLevel / ByteFallback byte runs) see the same context as a full decode;
// the text beyond what the context decodes to is new.
//
// New text is emitted only up to the last id whose text no later id can
// change. ByteFallback decodes a run of <0xXX> tokens as a whole - valid UTF-8,
// or one U+FFFD per byte when any byte is off - so an open run at the end is
// held back until a token with text closes it (or flush()); output is also
// held while it ends in U+FFFD, the mark of an incomplete UTF-8 sequence
// (ByteLevel). Every emitted piece therefore ends right after a text token,
// so the next context never starts inside a byte run.
#include <algorithm>

#include "llmrt/tokenizer.h"

namespace llmrt {
namespace {

constexpr size_t kPromptContext = 5;       // prompt ids decoded with the first new token
constexpr size_t kMaxContextBackoff = 12;  // how much further back to reach a character start
constexpr size_t kMaxRunBackoff = 4096;    // how much further back to reach the start of a byte run
constexpr size_t kTailIds = 256;           // windows longer than this are first judged by their tail
constexpr size_t kMaxCachedKinds = 4096;   // classify() results kept per stream

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

bool endsWithReplacementChar(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, kReplacementChar) == 0;
}

bool startsWithReplacementChar(const std::string& s) { return s.compare(0, 3, kReplacementChar) == 0; }

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "<0xXX>", what HF's ByteFallback decoder reads as one byte.
bool isByteToken(const std::string& t) {
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hexDigit(t[3]) >= 0 &&
         hexDigit(t[4]) >= 0;
}

std::vector<TokenId> slice(const std::vector<TokenId>& ids, size_t begin, size_t end) {
  return std::vector<TokenId>(ids.begin() + static_cast<std::ptrdiff_t>(begin),
                              ids.begin() + static_cast<std::ptrdiff_t>(end));
}

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens,
                             std::vector<TokenId> prompt_ids)
    : tok_(tokenizer), skip_special_(skip_special_tokens), ids_(std::move(prompt_ids)) {
  read_offset_ = ids_.size();
  if (read_offset_ > 0) {
    size_t start = read_offset_ > kPromptContext ? read_offset_ - kPromptContext : 0;
    // The context must hold a text token (after hidden ids alone, the first
    // new token would decode as the first token of the text, which Strip and
    // Metaspace treat differently) and must not start inside a byte run (a
    // part of a run may decode differently from the whole: valid where the
    // whole is not). Reach back to a text token (for up to kMaxRunBackoff ids).
    const size_t floor = start > kMaxRunBackoff ? start - kMaxRunBackoff : 0;
    bool has_text = false;
    for (size_t i = start; i < read_offset_ && !has_text; ++i) has_text = classify(ids_[i]) == Kind::kText;
    while (start > floor) {
      const bool text_before = classify(ids_[start - 1]) == Kind::kText;
      if (has_text && text_before) break;
      --start;
      has_text = has_text || text_before;
    }
    prefix_text_ = tok_.decode(slice(ids_, start, ids_.size()), skip_special_);
    // A window that starts inside a character split over byte tokens decodes
    // to U+FFFD there (and byte fallback spoils the whole byte run): widen it.
    while (start > 0 && read_offset_ - start < kPromptContext + kMaxContextBackoff &&
           startsWithReplacementChar(prefix_text_)) {
      --start;
      prefix_text_ = tok_.decode(slice(ids_, start, ids_.size()), skip_special_);
    }
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(start));
    read_offset_ -= start;
  }
  kinds_.reserve(ids_.size());
  for (TokenId id : ids_) {
    kinds_.push_back(classify(id));
    if (kinds_.back() == Kind::kText) text_end_ = kinds_.size();
  }
}

StreamDecoder::Kind StreamDecoder::classify(TokenId id) {
  auto cached = kind_cache_.find(id);
  if (cached != kind_cache_.end()) return cached->second;
  Kind kind = Kind::kText;
  std::optional<std::string> t = tok_.idToToken(id);
  if (!t || (skip_special_ && tok_.isSpecial(id))) {
    kind = Kind::kHidden;
  } else if (isByteToken(*t)) {
    kind = Kind::kByte;
  } else if (tok_.decode({id}, skip_special_).empty()) {
    // A token that decodes to nothing on its own is treated as hidden: holding
    // text back a little longer is always safe, closing a byte run too early is not.
    kind = Kind::kHidden;
  }
  if (kind_cache_.size() >= kMaxCachedKinds) kind_cache_.clear();
  kind_cache_.emplace(id, kind);
  return kind;
}

std::string StreamDecoder::advance(bool final) {
  // Emit up to the last text token: what follows (an open byte run, hidden
  // ids) may still change.
  const size_t end = final ? ids_.size() : text_end_;
  if (end <= read_offset_) return {};
  if (!final && end > kTailIds) {
    // A long window is decoded only when its end is no longer an incomplete
    // character, judged on its last few visible ids: otherwise a stream of
    // invalid bytes would decode the whole growing window at every step.
    size_t begin = end, visible = 0;
    while (begin > 0 && end - begin < kTailIds && visible < 4) visible += kinds_[--begin] != Kind::kHidden;
    if (endsWithReplacementChar(tok_.decode(slice(ids_, begin, end), skip_special_))) return {};
  }
  std::string text = tok_.decode(slice(ids_, 0, end), skip_special_);
  size_t from;
  if (text.size() >= prefix_text_.size() && text.compare(0, prefix_text_.size(), prefix_text_) == 0) {
    if (text.size() == prefix_text_.size()) return {};       // nothing new yet
    if (!final && endsWithReplacementChar(text)) return {};  // maybe an incomplete character
    from = prefix_text_.size();
  } else {
    // The context decodes differently now. When what differs is a tail of
    // U+FFFD (bytes of a character the new ids complete, e.g. a prompt that
    // ends inside one), the completed text is new; otherwise wait, and at the
    // end emit past the common prefix.
    from = 0;
    while (from < text.size() && from < prefix_text_.size() && text[from] == prefix_text_[from]) ++from;
    while (from > 0 && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) --from;
    bool only_fffd_differs = true;
    for (size_t i = from; i < prefix_text_.size(); i += 3)
      only_fffd_differs = only_fffd_differs && prefix_text_.compare(i, 3, kReplacementChar) == 0;
    if (!final && (!only_fffd_differs || endsWithReplacementChar(text) || text.size() <= from)) return {};
  }
  std::string out = text.substr(from);
  // The ids just emitted become the context of the next window.
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(read_offset_));
  kinds_.erase(kinds_.begin(), kinds_.begin() + static_cast<std::ptrdiff_t>(read_offset_));
  text_end_ -= std::min(text_end_, read_offset_);
  read_offset_ = end - read_offset_;
  prefix_text_ = tok_.decode(slice(ids_, 0, read_offset_), skip_special_);
  return out;
}

std::string StreamDecoder::step(TokenId id) {
  ids_.push_back(id);
  kinds_.push_back(classify(id));
  if (kinds_.back() == Kind::kText) text_end_ = ids_.size();
  return advance(false);
}

std::string StreamDecoder::flush() { return advance(true); }

}  // namespace llmrt

#include "tokenizer/tiktoken_tokenizer.h"

#include <algorithm>
#include <unordered_set>

#include "core/logging.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_util.h"
#include "tokenizer/unicode.h"

namespace llmrt::tok {

TiktokenOptions qwenTiktokenOptions(uint32_t rank_limit) {
  TiktokenOptions o;
  TokenId id = std::max<TokenId>(kQwenSpecialStart, static_cast<TokenId>(rank_limit));
  for (const char* s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"})
    o.special_tokens.emplace_back(s, id++);
  for (int i = 0; i < 205; ++i) o.special_tokens.emplace_back("<|extra_" + std::to_string(i) + "|>", id++);
  return o;
}

Result<std::unique_ptr<TiktokenTokenizer>> TiktokenTokenizer::create(TiktokenRanks ranks,
                                                                     TiktokenOptions options,
                                                                     std::string_view source) {
  auto t = std::unique_ptr<TiktokenTokenizer>(new TiktokenTokenizer());
  t->source_ = std::string(source);
  LLMRT_ASSIGN_OR_RETURN(t->regex_,
                         Regex::compile(options.pattern, std::string(source) + ": pre-tokenizer pattern"));
  t->nfc_ = options.nfc;
  TokenId max_id = static_cast<TokenId>(ranks.rankLimit()) - 1;
  for (const auto& [content, id] : options.special_tokens) {
    if (content.empty() || id < 0) {
      return invalidArgument(std::string(source) + ": special token '" + boundedText(content) + "' with id " +
                             std::to_string(id) + ": expected a non-empty string and an id >= 0");
    }
    if (ranks.hasRank(id)) {
      return invalidArgument(std::string(source) + ": special token '" + boundedText(content) + "' has id " +
                             std::to_string(id) + ", which is the rank of token '" +
                             boundedText(ranks.bytes(id)) + "' of the file");
    }
    if (t->specials_.byContent(content) != nullptr || t->specials_.byId(id) != nullptr) {
      return invalidArgument(std::string(source) + ": special token '" + boundedText(content) + "' (id " +
                             std::to_string(id) + ") repeats an earlier special token or id");
    }
    AddedToken a;
    a.id = id;
    a.content = content;
    a.special = true;
    a.normalized = false;
    t->specials_.add(a, content);
    max_id = std::max(max_id, id);
  }
  t->ranks_ = std::move(ranks);
  t->vocab_size_ = static_cast<size_t>(max_id) + 1;
  return t;
}

Result<std::unique_ptr<TiktokenTokenizer>> TiktokenTokenizer::fromContents(std::string_view contents,
                                                                           std::string_view source) {
  LLMRT_ASSIGN_OR_RETURN(TiktokenRanks ranks, TiktokenRanks::parse(contents, source));
  if (ranks.rankLimit() > static_cast<uint32_t>(kQwenSpecialStart)) {
    LLMRT_LOG_WARNING(
        "%s: %u ranks reach past Qwen's first special id %d; the special tokens follow the last rank",
        std::string(source).c_str(), ranks.rankLimit(), kQwenSpecialStart);
  }
  TiktokenOptions options = qwenTiktokenOptions(ranks.rankLimit());
  return create(std::move(ranks), std::move(options), source);
}

Status TiktokenTokenizer::encodeOrdinary(std::string_view text, std::vector<TokenId>& ids) const {
  if (text.empty()) return Status::ok();
  return regex_.forEachMatch(text,
                             [&](size_t s, size_t e) { ranks_.encodePiece(text.substr(s, e - s), ids); });
}

Result<std::vector<TokenId>> TiktokenTokenizer::encode(std::string_view text,
                                                       bool /*add_special_tokens*/) const {
  std::string buffer;
  if (!isValidUtf8(text)) {
    buffer = utf8Lossy(text);
    text = buffer;
  }
  if (nfc_) {
    buffer = normalizeUnicode(text, NormForm::kNFC);
    text = buffer;
  }
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 8);
  if (specials_.hasRawTokens()) {
    std::vector<Segment> segs;
    specials_.splitRaw(text, segs);
    for (const Segment& s : segs) {
      if (s.id >= 0)
        ids.push_back(s.id);
      else
        LLMRT_RETURN_IF_ERROR(encodeOrdinary(text.substr(s.start, s.end - s.start), ids));
    }
  } else {
    LLMRT_RETURN_IF_ERROR(encodeOrdinary(text, ids));
  }
  return ids;
}

std::string TiktokenTokenizer::decode(const std::vector<TokenId>& ids, bool skip_special_tokens) const {
  std::string bytes;
  for (TokenId id : ids) {
    if (ranks_.hasRank(id)) {
      bytes += ranks_.bytes(id);
    } else if (const AddedToken* a = specials_.byId(id)) {
      if (!skip_special_tokens) bytes += a->content;
    }
  }
  return isValidUtf8(bytes) ? bytes : utf8Lossy(bytes);
}

std::optional<TokenId> TiktokenTokenizer::tokenToId(std::string_view token) const {
  if (const AddedToken* a = specials_.byContent(token)) return a->id;
  std::string raw;
  if (byteLevelDecode(token, raw)) {
    if (int32_t r = ranks_.rank(raw); r >= 0) return r;
  }
  if (int32_t r = ranks_.rank(token); r >= 0) return r;
  return std::nullopt;
}

std::optional<std::string> TiktokenTokenizer::idToToken(TokenId id) const {
  if (ranks_.hasRank(id)) return byteLevelEncode(ranks_.bytes(id));
  if (const AddedToken* a = specials_.byId(id)) return a->content;
  return std::nullopt;
}

std::vector<AddedTokenInfo> TiktokenTokenizer::addedTokens() const {
  std::vector<AddedTokenInfo> out;
  for (const AddedToken& a : specials_.tokens())
    out.push_back(AddedTokenInfo{a.id, a.content, true, false, false, false, false});
  return out;
}

}  // namespace llmrt::tok

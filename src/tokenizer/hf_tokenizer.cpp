#include "tokenizer/hf_tokenizer.h"

#include <algorithm>

#include "core/logging.h"
#include "tokenizer/unicode.h"

namespace llmrt {

using tok::HfTokenizer;
using tok::JsonPath;

namespace {

// tokenizer.json is shallow: root > pre_tokenizer > pretokenizers > [i] >
// pattern is 5 levels, a merge pair 4. 128 leaves ample headroom (more nested
// Sequences, two levels each, than tok::kMaxSequenceNesting allows) while
// rejecting before any walk of the value a file nested 75,000 deep.
constexpr int kMaxTokenizerJsonDepth = 128;
constexpr size_t kMaxParseMessageBytes = 1024;

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::fromJson(std::string_view json, std::string_view source) {
  Result<Json> parsed = parseJson(
      json, source, JsonParseLimits{.max_depth = kMaxTokenizerJsonDepth, .reject_duplicate_keys = true});
  if (!parsed.isOk()) {
    // One bounded line whatever the parser quotes (a megabyte-long token, a
    // key with a newline in its path).
    return Status(parsed.status().code(), tok::boundedText(parsed.status().message(), kMaxParseMessageBytes));
  }
  const Json root = std::move(parsed).value();
  try {
    LLMRT_ASSIGN_OR_RETURN(auto t, HfTokenizer::fromJsonValue(root, source));
    return std::unique_ptr<Tokenizer>(std::move(t));
  } catch (const Json::exception& e) {  // a field of an unexpected type that a check missed
    return parseError(std::string(source) + ": unexpected JSON content: " + e.what());
  } catch (const std::bad_alloc&) {
    return resourceExhausted(std::string(source) + ": out of memory while building the tokenizer");
  }
}

namespace tok {

Result<std::unique_ptr<HfTokenizer>> HfTokenizer::fromJsonValue(const Json& root, std::string_view source) {
  const JsonPath at{std::string(source)};
  if (!root.is_object()) return jsonError(at, root, "a tokenizer.json object");
  auto t = std::unique_ptr<HfTokenizer>(new HfTokenizer());
  t->source_ = std::string(source);
  if (const Json* v = jsonFind(root, "version")) {
    if (!v->is_string() || v->get<std::string>() != "1.0") return jsonError(at.key("version"), *v, "\"1.0\"");
  }

  const Json* model = jsonFind(root, "model");
  if (model == nullptr) return jsonMissing(at.key("model"), "a model object");
  if (!model->is_object()) return jsonError(at.key("model"), *model, "a model object");
  LLMRT_ASSIGN_OR_RETURN(std::string model_type,
                         jsonString(*model, "type", at.key("model"), std::string("BPE")));
  if (model_type != "BPE") {
    return Status(
        StatusCode::kUnimplemented,
        fieldError(at.source(), "model.type", jsonSnippet(Json(model_type)), "\"BPE\" (the supported model)")
            .message());
  }
  LLMRT_ASSIGN_OR_RETURN(t->model_, BpeModel::fromJson(*model, at.key("model")));

  if (const Json* n = jsonFind(root, "normalizer")) {
    LLMRT_ASSIGN_OR_RETURN(t->normalizer_, parseNormalizer(*n, at.key("normalizer")));
  }
  if (const Json* p = jsonFind(root, "pre_tokenizer")) {
    LLMRT_RETURN_IF_ERROR(parsePreTokenizer(*p, at.key("pre_tokenizer"), t->pre_steps_));
  }
  std::vector<EmittedId> emitted;  // ids the post-processor and padding can add
  if (const Json* p = jsonFind(root, "post_processor")) {
    LLMRT_ASSIGN_OR_RETURN(t->post_, parsePostProcessor(*p, at.key("post_processor"), emitted));
  }
  if (const Json* d = jsonFind(root, "decoder")) {
    LLMRT_ASSIGN_OR_RETURN(t->decoder_, parseDecoder(*d, at.key("decoder")));
  }
  if (const Json* tr = jsonFind(root, "truncation")) {
    const JsonPath tat = at.key("truncation");
    LLMRT_ASSIGN_OR_RETURN(int64_t max_len, jsonInt(*tr, "max_length", tat));
    if (max_len < 0) return jsonError(tat.key("max_length"), (*tr)["max_length"], "a length >= 0");
    LLMRT_ASSIGN_OR_RETURN(std::string dir, jsonString(*tr, "direction", tat, std::string("Right")));
    t->truncation_ = Truncation{static_cast<size_t>(max_len), dir == "Left"};
  }
  if (const Json* pd = jsonFind(root, "padding")) {
    LLMRT_RETURN_IF_ERROR(t->loadPadding(*pd, at.key("padding")));
    emitted.push_back(EmittedId{t->padding_->pad_id, at.key("padding").key("pad_id"), ""});
  }

  // A final ByteLevel mapping step is left to the model, which then reads raw bytes.
  if (!t->pre_steps_.empty() && t->pre_steps_.back()->isByteMapping()) {
    t->pre_steps_.pop_back();
    t->model_->enableRawByteInput();
    t->raw_byte_input_ = true;
  }

  if (const Json* list = jsonFind(root, "added_tokens")) {
    LLMRT_RETURN_IF_ERROR(t->loadAddedTokens(*list, at.key("added_tokens")));
  }

  size_t extra = 0;
  for (const AddedToken& a : t->added_.tokens())
    if (!t->model_->tokenToId(a.content)) ++extra;
  t->vocab_size_ = t->model_->vocabSize() + extra;
  LLMRT_RETURN_IF_ERROR(t->checkEmittedIds(emitted));
  return t;
}

Status HfTokenizer::loadPadding(const Json& pd, const JsonPath& at) {
  if (!pd.is_object()) return jsonError(at, pd, "null or a padding object");
  Padding p;
  const std::string kBound = std::to_string(kMaxPaddedLength);
  // "strategy": "BatchLongest" (a single encode pads to its own length) or {"Fixed": n}.
  if (const Json* s = jsonFind(pd, "strategy")) {
    const JsonPath sat = at.key("strategy");
    if (s->is_object()) {
      LLMRT_ASSIGN_OR_RETURN(int64_t n, jsonInt(*s, "Fixed", sat));
      if (n < 0 || n > kMaxPaddedLength)
        return jsonError(sat.key("Fixed"), (*s)["Fixed"], "a padded length in [0, " + kBound + "] (2^20)");
      p.fixed = true;
      p.length = static_cast<size_t>(n);
    } else if (!s->is_string() || s->get_ref<const std::string&>() != "BatchLongest") {
      return jsonError(sat, *s, "\"BatchLongest\" or {\"Fixed\": <length>}");
    }
  }
  LLMRT_ASSIGN_OR_RETURN(int64_t mult, jsonInt(pd, "pad_to_multiple_of", at, 0));
  if (mult < 0 || mult > kMaxPaddedLength)
    return jsonError(at.key("pad_to_multiple_of"), pd["pad_to_multiple_of"],
                     "null or a multiple in [0, " + kBound + "] (2^20)");
  p.multiple_of = static_cast<size_t>(mult);
  LLMRT_ASSIGN_OR_RETURN(std::string dir, jsonString(pd, "direction", at, std::string("Right")));
  if (dir != "Left" && dir != "Right")
    return jsonError(at.key("direction"), pd["direction"], "\"Left\" or \"Right\"");
  p.left = dir == "Left";
  LLMRT_ASSIGN_OR_RETURN(int64_t pad_id, jsonInt(pd, "pad_id", at, 0));
  if (pad_id < 0 || pad_id > INT32_MAX) return jsonError(at.key("pad_id"), pd["pad_id"], "a token id");
  p.pad_id = static_cast<TokenId>(pad_id);
  padding_ = p;
  return Status::ok();
}

Status HfTokenizer::checkEmittedIds(const std::vector<EmittedId>& emitted) const {
  int warnings = 0;
  for (const EmittedId& e : emitted) {
    std::optional<std::string> token = idToToken(e.id);
    if (!token) {
      return Status(StatusCode::kParseError,
                    fieldError(source_, e.field.path(), std::to_string(e.id),
                               "an id in the vocabulary (" + std::to_string(vocab_size_) +
                                   " tokens), since encode() adds it to the ids")
                        .message());
    }
    if (!e.token.empty() && *token != e.token && tokenToId(e.token) != e.id && ++warnings <= 3) {
      LLMRT_LOG_WARNING("%s: field '%s': id %d is token '%s' in the vocabulary, not '%s'", source_.c_str(),
                        e.field.path().c_str(), e.id, boundedText(*token).c_str(),
                        boundedText(e.token).c_str());
    }
  }
  return Status::ok();
}

Status HfTokenizer::loadAddedTokens(const Json& list, const JsonPath& at) {
  if (!list.is_array()) return jsonError(at, list, "an array of added tokens");
  TokenId max_added = -1;
  const TokenId model_size = static_cast<TokenId>(model_->vocabSize());
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& e = list[i];
    const JsonPath eat = at.index(i);
    if (!e.is_object()) return jsonError(eat, e, "an added token object");
    AddedToken a;
    LLMRT_ASSIGN_OR_RETURN(a.content, jsonString(e, "content", eat));
    LLMRT_ASSIGN_OR_RETURN(int64_t file_id, jsonInt(e, "id", eat));
    LLMRT_ASSIGN_OR_RETURN(a.single_word, jsonBool(e, "single_word", eat, false));
    LLMRT_ASSIGN_OR_RETURN(a.lstrip, jsonBool(e, "lstrip", eat, false));
    LLMRT_ASSIGN_OR_RETURN(a.rstrip, jsonBool(e, "rstrip", eat, false));
    LLMRT_ASSIGN_OR_RETURN(a.normalized, jsonBool(e, "normalized", eat, true));
    LLMRT_ASSIGN_OR_RETURN(a.special, jsonBool(e, "special", eat, false));
    if (a.content.empty()) continue;
    if (added_.byContent(a.content) != nullptr) {
      LLMRT_LOG_WARNING("%s: %s: duplicate added token '%s' ignored", source_.c_str(), eat.path().c_str(),
                        boundedText(a.content).c_str());
      continue;
    }
    // The id HF assigns: the model's id for a known token, else the next id
    // after the vocabulary and the added tokens so far.
    if (auto mid = model_->tokenToId(a.content)) {
      a.id = *mid;
    } else {
      a.id = (max_added >= model_size || model_size == 0) ? max_added + 1 : model_size;
    }
    max_added = std::max(max_added, a.id);
    if (a.id != file_id)
      LLMRT_LOG_WARNING("%s: added token '%s' has id %lld in the file but gets id %d (as in HF tokenizers)",
                        source_.c_str(), boundedText(a.content).c_str(), static_cast<long long>(file_id),
                        a.id);
    std::string normalized_content = a.content;
    if (a.normalized && normalizer_) LLMRT_RETURN_IF_ERROR(normalizer_->normalize(normalized_content));
    added_.add(a, a.normalized ? normalized_content : a.content);
    added_decode_.push_back(normalized_content);
  }
  added_skip_.clear();
  for (const std::string& s : added_decode_) added_skip_.push_back(added_.isSpecialContent(s));
  return Status::ok();
}

Status HfTokenizer::encodeWords(std::string_view text, bool at_origin, std::vector<TokenId>& ids) const {
  if (text.empty()) return Status::ok();
  if (pre_steps_.empty()) {
    model_->tokenize(text, raw_byte_input_, ids);
    return Status::ok();
  }
  PieceArena arena;
  std::vector<Piece> cur{Piece{text, at_origin}}, next;
  for (const auto& step : pre_steps_) {
    next.clear();
    for (const Piece& p : cur) LLMRT_RETURN_IF_ERROR(step->split(p, next, arena));
    cur.swap(next);
  }
  for (const Piece& p : cur) model_->tokenize(p.text, raw_byte_input_, ids);
  return Status::ok();
}

Status HfTokenizer::encodeSegment(std::string_view raw, bool at_origin, std::vector<TokenId>& ids) const {
  std::string normalized;
  std::string_view text = raw;
  if (normalizer_) {
    normalized.assign(raw);
    LLMRT_RETURN_IF_ERROR(normalizer_->normalize(normalized));
    text = normalized;
  }
  if (!added_.hasNormalizedTokens()) return encodeWords(text, at_origin, ids);
  std::vector<Segment> segs;
  added_.splitNormalized(text, segs);
  for (const Segment& s : segs) {
    if (s.id >= 0)
      ids.push_back(s.id);
    else
      LLMRT_RETURN_IF_ERROR(
          encodeWords(text.substr(s.start, s.end - s.start), at_origin && s.start == 0, ids));
  }
  return Status::ok();
}

Result<std::vector<TokenId>> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::string repaired;
  if (!isValidUtf8(text)) {
    repaired = utf8Lossy(text);
    text = repaired;
  }
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 8);
  if (added_.hasRawTokens()) {
    std::vector<Segment> segs;
    added_.splitRaw(text, segs);
    for (const Segment& s : segs) {
      if (s.id >= 0)
        ids.push_back(s.id);
      else
        LLMRT_RETURN_IF_ERROR(encodeSegment(text.substr(s.start, s.end - s.start), s.start == 0, ids));
    }
  } else if (!text.empty()) {
    LLMRT_RETURN_IF_ERROR(encodeSegment(text, true, ids));
  }

  if (truncation_) {
    size_t added = (add_special_tokens && post_) ? post_->prefixIds().size() + post_->suffixIds().size() : 0;
    size_t max_len = truncation_->max_length > added ? truncation_->max_length - added : 0;
    if (ids.size() > max_len) {
      if (truncation_->left)
        ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(max_len));
      else
        ids.resize(max_len);
    }
  }
  if (post_) post_->process(ids, add_special_tokens);
  if (padding_) {
    size_t target = padding_->fixed ? padding_->length : ids.size();
    if (padding_->multiple_of > 0 && target % padding_->multiple_of != 0)
      target += padding_->multiple_of - target % padding_->multiple_of;
    if (ids.size() < target) {
      size_t n = target - ids.size();
      ids.insert(padding_->left ? ids.begin() : ids.end(), n, padding_->pad_id);
    }
  }
  return ids;
}

const std::string* HfTokenizer::decodeString(TokenId id, bool& skip_if_special) const {
  if (const AddedToken* a = added_.byId(id)) {
    size_t idx = static_cast<size_t>(a - added_.tokens().data());
    skip_if_special = added_skip_[idx];
    return &added_decode_[idx];
  }
  skip_if_special = false;
  return model_->idToToken(id);
}

std::string HfTokenizer::decode(const std::vector<TokenId>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids) {
    bool special = false;
    const std::string* s = decodeString(id, special);
    if (s == nullptr || (skip_special_tokens && special)) continue;
    tokens.push_back(*s);
  }
  if (decoder_) {
    if (Status st = decoder_->decodeChain(tokens); !st.isOk()) {
      // decode() has no error channel: when a Replace decoder fails (its regex
      // gave up, or it would grow the text without bound) the token strings
      // are joined as they are, and the failure is logged.
      LLMRT_LOG_WARNING("%s: decoding %zu ids: %s", source_.c_str(), ids.size(), st.message().c_str());
      tokens.clear();
      for (TokenId id : ids) {
        bool special = false;
        const std::string* s = decodeString(id, special);
        if (s != nullptr && !(skip_special_tokens && special)) tokens.push_back(*s);
      }
    }
    std::string out;
    for (const std::string& t : tokens) out += t;
    return out;
  }
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i) out.push_back(' ');
    out += tokens[i];
  }
  return out;
}

std::optional<TokenId> HfTokenizer::tokenToId(std::string_view token) const {
  if (const AddedToken* a = added_.byContent(token)) return a->id;
  return model_->tokenToId(token);
}

std::optional<std::string> HfTokenizer::idToToken(TokenId id) const {
  bool special;
  const std::string* s = decodeString(id, special);
  if (s == nullptr) return std::nullopt;
  return *s;
}

bool HfTokenizer::isSpecial(TokenId id) const {
  const AddedToken* a = added_.byId(id);
  return a != nullptr && a->special;
}

std::vector<TokenId> HfTokenizer::specialPrefixIds() const {
  return post_ ? post_->prefixIds() : std::vector<TokenId>{};
}

std::vector<TokenId> HfTokenizer::specialSuffixIds() const {
  return post_ ? post_->suffixIds() : std::vector<TokenId>{};
}

std::vector<AddedTokenInfo> HfTokenizer::addedTokens() const {
  std::vector<AddedTokenInfo> out;
  for (const AddedToken& a : added_.tokens())
    out.push_back(
        AddedTokenInfo{a.id, a.content, a.special, a.normalized, a.lstrip, a.rstrip, a.single_word});
  return out;
}

}  // namespace tok
}  // namespace llmrt

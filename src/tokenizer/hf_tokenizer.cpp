#include "tokenizer/hf_tokenizer.h"

#include <algorithm>

#include "core/logging.h"
#include "core/mapped_file.h"
#include "tokenizer/unicode.h"

namespace llmrt {

using tok::HfTokenizer;
using tok::Json;
using tok::JsonPath;

Result<std::unique_ptr<Tokenizer>> Tokenizer::fromJson(std::string_view json, std::string_view source) {
  Json root;
  try {
    root = Json::parse(json.begin(), json.end());
  } catch (const Json::exception& e) {
    return parseError(std::string(source) + ": not valid JSON: " + e.what());
  }
  try {
    LLMRT_ASSIGN_OR_RETURN(auto t, HfTokenizer::fromJsonValue(root, source));
    return std::unique_ptr<Tokenizer>(std::move(t));
  } catch (const Json::exception& e) {  // a field of an unexpected type that a check missed
    return parseError(std::string(source) + ": unexpected JSON content: " + e.what());
  }
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::fromFile(const std::string& path) {
  LLMRT_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  return fromJson(text, path);
}

namespace tok {

Result<std::unique_ptr<HfTokenizer>> HfTokenizer::fromJsonValue(const Json& root, std::string_view source) {
  JsonPath at{std::string(source), ""};
  if (!root.is_object()) return jsonError(JsonPath{at.source, "<root>"}, root, "a tokenizer.json object");
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
    return Status(StatusCode::kUnimplemented, fieldError(at.source, "model.type", "\"" + model_type + "\"",
                                                         "\"BPE\" (the supported model)")
                                                  .message());
  }
  LLMRT_ASSIGN_OR_RETURN(t->model_, BpeModel::fromJson(*model, at.key("model")));

  if (const Json* n = jsonFind(root, "normalizer")) {
    LLMRT_ASSIGN_OR_RETURN(t->normalizer_, parseNormalizer(*n, at.key("normalizer")));
  }
  if (const Json* p = jsonFind(root, "pre_tokenizer")) {
    LLMRT_RETURN_IF_ERROR(parsePreTokenizer(*p, at.key("pre_tokenizer"), t->pre_steps_));
  }
  if (const Json* p = jsonFind(root, "post_processor")) {
    LLMRT_ASSIGN_OR_RETURN(t->post_, parsePostProcessor(*p, at.key("post_processor")));
  }
  if (const Json* d = jsonFind(root, "decoder")) {
    LLMRT_ASSIGN_OR_RETURN(t->decoder_, parseDecoder(*d, at.key("decoder")));
  }
  if (const Json* tr = jsonFind(root, "truncation")) {
    JsonPath tat = at.key("truncation");
    LLMRT_ASSIGN_OR_RETURN(int64_t max_len, jsonInt(*tr, "max_length", tat));
    if (max_len < 0) return jsonError(tat.key("max_length"), (*tr)["max_length"], "a length >= 0");
    LLMRT_ASSIGN_OR_RETURN(std::string dir, jsonString(*tr, "direction", tat, std::string("Right")));
    t->truncation_ = Truncation{static_cast<size_t>(max_len), dir == "Left"};
  }
  if (const Json* pd = jsonFind(root, "padding")) {
    JsonPath pat = at.key("padding");
    Padding p;
    if (const Json* s = jsonFind(*pd, "strategy"); s != nullptr && s->is_object()) {
      LLMRT_ASSIGN_OR_RETURN(int64_t n, jsonInt(*s, "Fixed", pat.key("strategy")));
      p.fixed = true;
      p.length = static_cast<size_t>(std::max<int64_t>(n, 0));
    }
    LLMRT_ASSIGN_OR_RETURN(int64_t mult, jsonInt(*pd, "pad_to_multiple_of", pat, 0));
    p.multiple_of = static_cast<size_t>(std::max<int64_t>(mult, 0));
    LLMRT_ASSIGN_OR_RETURN(std::string dir, jsonString(*pd, "direction", pat, std::string("Right")));
    p.left = dir == "Left";
    LLMRT_ASSIGN_OR_RETURN(int64_t pad_id, jsonInt(*pd, "pad_id", pat, 0));
    p.pad_id = static_cast<TokenId>(pad_id);
    t->padding_ = p;
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
  return t;
}

Status HfTokenizer::loadAddedTokens(const Json& list, const JsonPath& at) {
  if (!list.is_array()) return jsonError(at, list, "an array of added tokens");
  TokenId max_added = -1;
  const TokenId model_size = static_cast<TokenId>(model_->vocabSize());
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& e = list[i];
    JsonPath eat = at.index(i);
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
      LLMRT_LOG_WARNING("%s: %s: duplicate added token '%s' ignored", source_.c_str(), eat.path.c_str(),
                        a.content.c_str());
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
                        source_.c_str(), a.content.c_str(), static_cast<long long>(file_id), a.id);
    std::string normalized_content = a.content;
    if (a.normalized && normalizer_) normalizer_->normalize(normalized_content);
    added_.add(a, a.normalized ? normalized_content : a.content);
    added_decode_.push_back(normalized_content);
  }
  added_skip_.clear();
  for (const std::string& s : added_decode_) added_skip_.push_back(added_.isSpecialContent(s));
  return Status::ok();
}

void HfTokenizer::encodeWords(std::string_view text, bool at_origin, std::vector<TokenId>& ids) const {
  if (text.empty()) return;
  if (pre_steps_.empty()) {
    model_->tokenize(text, raw_byte_input_, ids);
    return;
  }
  PieceArena arena;
  std::vector<Piece> cur{Piece{text, at_origin}}, next;
  for (const auto& step : pre_steps_) {
    next.clear();
    for (const Piece& p : cur) step->split(p, next, arena);
    cur.swap(next);
  }
  for (const Piece& p : cur) model_->tokenize(p.text, raw_byte_input_, ids);
}

void HfTokenizer::encodeSegment(std::string_view raw, bool at_origin, std::vector<TokenId>& ids) const {
  std::string normalized;
  std::string_view text = raw;
  if (normalizer_) {
    normalized.assign(raw);
    normalizer_->normalize(normalized);
    text = normalized;
  }
  if (!added_.hasNormalizedTokens()) {
    encodeWords(text, at_origin, ids);
    return;
  }
  std::vector<Segment> segs;
  added_.splitNormalized(text, segs);
  for (const Segment& s : segs) {
    if (s.id >= 0)
      ids.push_back(s.id);
    else
      encodeWords(text.substr(s.start, s.end - s.start), at_origin && s.start == 0, ids);
  }
}

std::vector<TokenId> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
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
        encodeSegment(text.substr(s.start, s.end - s.start), s.start == 0, ids);
    }
  } else if (!text.empty()) {
    encodeSegment(text, true, ids);
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
    decoder_->decodeChain(tokens);
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

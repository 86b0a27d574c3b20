#include "tokenizer/post_processor.h"

#include <cstdint>
#include <map>
#include <sstream>

namespace llmrt::tok {
namespace {

// Wraps the sequence in fixed prefix / suffix ids (Template, Bert, Roberta).
class AffixProcessor : public PostProcessor {
 public:
  AffixProcessor(std::vector<TokenId> prefix, std::vector<TokenId> suffix)
      : prefix_(std::move(prefix)), suffix_(std::move(suffix)) {}
  void process(std::vector<TokenId>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    if (!prefix_.empty()) ids.insert(ids.begin(), prefix_.begin(), prefix_.end());
    ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  }
  std::vector<TokenId> prefixIds() const override { return prefix_; }
  std::vector<TokenId> suffixIds() const override { return suffix_; }

 private:
  std::vector<TokenId> prefix_, suffix_;
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  void process(std::vector<TokenId>& ids, bool add_special_tokens) const override {
    for (const auto& p : steps_) p->process(ids, add_special_tokens);
  }
  std::vector<TokenId> prefixIds() const override {
    std::vector<TokenId> out;
    for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
      auto p = (*it)->prefixIds();
      out.insert(out.begin(), p.begin(), p.end());
    }
    return out;
  }
  std::vector<TokenId> suffixIds() const override {
    std::vector<TokenId> out;
    for (const auto& s : steps_) {
      auto p = s->suffixIds();
      out.insert(out.end(), p.begin(), p.end());
    }
    return out;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

// One template item: the sequence ($A) or a special token name.
struct TemplateItem {
  bool is_sequence;
  std::string name;
};

Result<TemplateItem> parseItemString(const std::string& s, const JsonPath& at, const Json& j) {
  std::string id = s.substr(0, s.find(':'));
  if (id.empty()) return jsonError(at, j, "a template piece such as \"$A\" or \"<s>:0\"");
  if (id[0] == '$') {
    std::string rest = id.substr(1);
    bool digits = !rest.empty() && rest.find_first_not_of("0123456789") == std::string::npos;
    if (rest.empty() || rest == "A" || rest == "a" || digits) return TemplateItem{true, "A"};
    if (rest == "B" || rest == "b") return TemplateItem{true, "B"};
    return jsonError(at, j, "a sequence piece $A, $B or $<type_id>");
  }
  return TemplateItem{false, id};
}

Result<std::vector<TemplateItem>> parseTemplate(const Json& t, const JsonPath& at) {
  std::vector<TemplateItem> items;
  if (t.is_string()) {
    std::istringstream in(t.get<std::string>());
    std::string word;
    while (in >> word) {
      LLMRT_ASSIGN_OR_RETURN(TemplateItem it, parseItemString(word, at, t));
      items.push_back(it);
    }
    return items;
  }
  if (!t.is_array()) return jsonError(at, t, "a template (an array of pieces or a string)");
  for (size_t i = 0; i < t.size(); ++i) {
    const Json& p = t[i];
    JsonPath pat = at.index(i);
    if (p.is_string()) {
      LLMRT_ASSIGN_OR_RETURN(TemplateItem it, parseItemString(p.get<std::string>(), pat, p));
      items.push_back(it);
    } else if (const Json* seq = jsonFind(p, "Sequence")) {
      Result<std::string> id = jsonString(*seq, "id", pat.key("Sequence"));
      if (!id.isOk()) return id.status();
      if (*id != "A" && *id != "B")
        return jsonError(pat.key("Sequence").key("id"), (*seq)["id"], "\"A\" or \"B\"");
      items.push_back(TemplateItem{true, *id});
    } else if (const Json* sp = jsonFind(p, "SpecialToken")) {
      LLMRT_ASSIGN_OR_RETURN(std::string id, jsonString(*sp, "id", pat.key("SpecialToken")));
      items.push_back(TemplateItem{false, id});
    } else {
      return jsonError(pat, p, "{\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
  return items;
}

// A non-negative integer that fits a TokenId (checked before the narrowing cast).
bool isTokenId(const Json& x) {
  if (x.is_number_unsigned()) return x.get<uint64_t>() <= static_cast<uint64_t>(INT32_MAX);
  return x.is_number_integer() && x.get<int64_t>() >= 0 && x.get<int64_t>() <= INT32_MAX;
}

Result<std::unique_ptr<PostProcessor>> parseTemplateProcessing(const Json& j, const JsonPath& at,
                                                               std::vector<EmittedId>& emitted) {
  std::map<std::string, std::vector<TokenId>> specials;
  if (const Json* st = jsonFind(j, "special_tokens")) {
    const JsonPath st_at = at.key("special_tokens");
    if (!st->is_object()) return jsonError(st_at, *st, "an object");
    for (auto it = st->begin(); it != st->end(); ++it) {
      const JsonPath sat = st_at.key(it.key());
      const Json* ids = jsonFind(it.value(), "ids");
      if (ids == nullptr || !ids->is_array())
        return jsonError(sat, it.value(), "{\"id\": ..., \"ids\": [...]}");
      // HF requires one token string per id.
      const Json* tokens = jsonFind(it.value(), "tokens");
      if (tokens != nullptr && (!tokens->is_array() || tokens->size() != ids->size()))
        return jsonError(
            sat.key("tokens"), *tokens,
            "an array of " + std::to_string(ids->size()) + " token strings, one per id in 'ids'");
      std::vector<TokenId> v;
      const JsonPath ids_at = sat.key("ids");
      for (size_t k = 0; k < ids->size(); ++k) {
        const Json& x = (*ids)[k];
        if (!isTokenId(x)) return jsonError(ids_at.index(k), x, "a token id");
        v.push_back(static_cast<TokenId>(x.get<int64_t>()));
        std::string token;
        if (tokens != nullptr) {
          const Json& t = (*tokens)[k];
          if (!t.is_string()) return jsonError(sat.key("tokens").index(k), t, "a token string");
          token = t.get<std::string>();
        }
        emitted.push_back(EmittedId{v.back(), ids_at.index(k), std::move(token)});
      }
      std::string name = it.key();
      if (const Json* idj = jsonFind(it.value(), "id"); idj != nullptr && idj->is_string())
        name = idj->get<std::string>();
      specials[name] = std::move(v);
    }
  }
  const Json* single = jsonFind(j, "single");
  if (single == nullptr) return jsonMissing(at.key("single"), "a template");
  LLMRT_ASSIGN_OR_RETURN(auto items, parseTemplate(*single, at.key("single")));
  std::vector<TokenId> prefix, suffix;
  bool seen_sequence = false;
  for (const TemplateItem& it : items) {
    if (it.is_sequence) {
      seen_sequence = true;
      continue;
    }
    auto sp = specials.find(it.name);
    if (sp == specials.end())
      return jsonError(at.key("single"), *single,
                       "special tokens listed in special_tokens ('" + boundedText(it.name) + "' is not)");
    auto& dst = seen_sequence ? suffix : prefix;
    dst.insert(dst.end(), sp->second.begin(), sp->second.end());
  }
  return std::unique_ptr<PostProcessor>(new AffixProcessor(std::move(prefix), std::move(suffix)));
}

Result<TokenId> readIdPair(const Json& j, std::string_view key, const JsonPath& at,
                           std::vector<EmittedId>& emitted) {
  const Json* p = jsonFind(j, key);
  if (p == nullptr) return jsonMissing(at.key(key), "a [token, id] pair");
  if (!p->is_array() || p->size() != 2 || !(*p)[0].is_string() || !isTokenId((*p)[1]))
    return jsonError(at.key(key), *p, "a [token, id] pair");
  const auto id = static_cast<TokenId>((*p)[1].get<int64_t>());
  emitted.push_back(EmittedId{id, at.key(key).index(1), (*p)[0].get<std::string>()});
  return id;
}

}  // namespace

Result<std::unique_ptr<PostProcessor>> parsePostProcessor(const Json& j, const JsonPath& at,
                                                          std::vector<EmittedId>& emitted, int nesting) {
  if (!j.is_object()) return jsonError(at, j, "a post_processor object");
  LLMRT_ASSIGN_OR_RETURN(std::string type, jsonString(j, "type", at));
  if (type == "TemplateProcessing") return parseTemplateProcessing(j, at, emitted);
  if (type == "ByteLevel") return std::unique_ptr<PostProcessor>(new AffixProcessor({}, {}));
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    LLMRT_ASSIGN_OR_RETURN(TokenId cls, readIdPair(j, "cls", at, emitted));
    LLMRT_ASSIGN_OR_RETURN(TokenId sep, readIdPair(j, "sep", at, emitted));
    return std::unique_ptr<PostProcessor>(new AffixProcessor({cls}, {sep}));
  }
  if (type == "Sequence") {
    if (nesting >= kMaxSequenceNesting) return nestingError(at, "post-processors");
    const JsonPath list_at = at.key("processors");
    const Json* list = jsonFind(j, "processors");
    if (list == nullptr || !list->is_array())
      return list == nullptr ? jsonMissing(list_at, "an array of post-processors")
                             : jsonError(list_at, *list, "an array of post-processors");
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      LLMRT_ASSIGN_OR_RETURN(auto p, parsePostProcessor((*list)[i], list_at.index(i), emitted, nesting + 1));
      steps.push_back(std::move(p));
    }
    return std::unique_ptr<PostProcessor>(new SequenceProcessor(std::move(steps)));
  }
  return Status(StatusCode::kUnimplemented,
                fieldError(at.source(), at.key("type").path(), jsonSnippet(Json(type)),
                           "a supported post-processor (TemplateProcessing, ByteLevel, BertProcessing, "
                           "RobertaProcessing, Sequence)")
                    .message());
}

}  // namespace llmrt::tok

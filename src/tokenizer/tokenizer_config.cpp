#include "tokenizer/tokenizer_config.h"

#include <algorithm>

#include "core/mapped_file.h"
#include "tokenizer/json_util.h"

namespace llmrt::tok {
namespace {

constexpr int kMaxConfigDepth = 64;

Result<std::optional<bool>> optionalBool(const Json& root, std::string_view key, const JsonPath& at) {
  const Json* v = jsonFind(root, key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return jsonError(at.key(key), *v, "true or false");
  return std::optional<bool>(v->get<bool>());
}

// A special token: "<s>" or {"content": "<s>", ...} (AddedToken, with or without "__type").
Result<std::string> tokenContent(const Json& v, const JsonPath& at) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) return jsonString(v, "content", at);
  return jsonError(at, v, "a token string or an AddedToken object {\"content\": ...}");
}

}  // namespace

Result<TokenizerConfig> parseTokenizerConfig(std::string_view json, std::string_view source) {
  JsonParseLimits limits;
  limits.max_depth = kMaxConfigDepth;
  limits.reject_duplicate_keys = false;  // Python's json keeps the last; so do we
  LLMRT_ASSIGN_OR_RETURN(Json root, parseJson(json, source, limits));
  const JsonPath at{std::string(source)};
  if (!root.is_object()) return jsonError(at, root, "a tokenizer_config.json object");
  TokenizerConfig c;
  c.source = std::string(source);
  try {
    LLMRT_ASSIGN_OR_RETURN(c.add_bos_token, optionalBool(root, "add_bos_token", at));
    LLMRT_ASSIGN_OR_RETURN(c.add_eos_token, optionalBool(root, "add_eos_token", at));
    LLMRT_ASSIGN_OR_RETURN(c.legacy, optionalBool(root, "legacy", at));
    const std::pair<const char*, std::optional<std::string>*> named[] = {{"bos_token", &c.bos_token},
                                                                         {"eos_token", &c.eos_token},
                                                                         {"unk_token", &c.unk_token},
                                                                         {"pad_token", &c.pad_token}};
    for (const auto& [key, out] : named) {
      if (const Json* v = jsonFind(root, key)) {
        LLMRT_ASSIGN_OR_RETURN(std::string s, tokenContent(*v, at.key(key)));
        *out = std::move(s);
      }
    }
    if (const Json* list = jsonFind(root, "additional_special_tokens")) {
      const JsonPath lat = at.key("additional_special_tokens");
      if (!list->is_array()) return jsonError(lat, *list, "an array of tokens");
      for (size_t i = 0; i < list->size(); ++i) {
        LLMRT_ASSIGN_OR_RETURN(std::string s, tokenContent((*list)[i], lat.index(i)));
        c.additional_special_tokens.push_back(std::move(s));
      }
    }
    if (const Json* cls = jsonFind(root, "tokenizer_class")) {
      if (!cls->is_string()) return jsonError(at.key("tokenizer_class"), *cls, "a class name string");
      c.tokenizer_class = cls->get<std::string>();
    }
    if (const Json* dec = jsonFind(root, "added_tokens_decoder")) {
      const JsonPath dat = at.key("added_tokens_decoder");
      if (!dec->is_object()) return jsonError(dat, *dec, "an object of \"<id>\": {AddedToken}");
      for (const auto& [key, e] : dec->items()) {
        const JsonPath eat = dat.key(key);
        int64_t id = -1;
        bool digits = !key.empty() && key.size() <= 10;
        for (char ch : key) {
          digits = digits && ch >= '0' && ch <= '9';
          if (digits) id = (id < 0 ? 0 : id * 10) + (ch - '0');
        }
        if (!digits || id > INT32_MAX) return jsonFieldError(eat, "is not a token id in [0, 2^31)");
        if (!e.is_object()) return jsonError(eat, e, "an AddedToken object {\"content\": ...}");
        AddedTokenInfo a;
        a.id = static_cast<TokenId>(id);
        LLMRT_ASSIGN_OR_RETURN(a.content, jsonString(e, "content", eat));
        LLMRT_ASSIGN_OR_RETURN(a.special, jsonBool(e, "special", eat, false));
        LLMRT_ASSIGN_OR_RETURN(a.normalized, jsonBool(e, "normalized", eat, false));
        LLMRT_ASSIGN_OR_RETURN(a.lstrip, jsonBool(e, "lstrip", eat, false));
        LLMRT_ASSIGN_OR_RETURN(a.rstrip, jsonBool(e, "rstrip", eat, false));
        LLMRT_ASSIGN_OR_RETURN(a.single_word, jsonBool(e, "single_word", eat, false));
        if (a.content.empty())
          return jsonFieldError(eat.key("content"), "is empty; expected the token's text");
        c.added_tokens.push_back(std::move(a));
      }
      std::sort(c.added_tokens.begin(), c.added_tokens.end(),
                [](const AddedTokenInfo& x, const AddedTokenInfo& y) { return x.id < y.id; });
    }
  } catch (const Json::exception& e) {
    return parseError(std::string(source) + ": unexpected JSON content: " + e.what());
  }
  return c;
}

Result<std::optional<TokenizerConfig>> loadTokenizerConfig(const std::string& dir) {
  const std::string path = (!dir.empty() && dir.back() == '/' ? dir : dir + "/") + "tokenizer_config.json";
  if (!fileExists(path)) return std::optional<TokenizerConfig>();
  LLMRT_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  LLMRT_ASSIGN_OR_RETURN(TokenizerConfig c, parseTokenizerConfig(text, path));
  return std::optional<TokenizerConfig>(std::move(c));
}

}  // namespace llmrt::tok

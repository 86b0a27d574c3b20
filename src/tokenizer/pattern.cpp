#include "tokenizer/pattern.h"

namespace llmrt::tok {

Result<Pattern> Pattern::fromJson(const Json& j, const JsonPath& at) {
  Pattern p;
  if (const Json* s = jsonFind(j, "String")) {
    if (!s->is_string()) return jsonError(at.key("String"), *s, "a string");
    p.literal_ = s->get<std::string>();
    return p;
  }
  if (const Json* r = jsonFind(j, "Regex")) {
    if (!r->is_string()) return jsonError(at.key("Regex"), *r, "a regular expression string");
    LLMRT_ASSIGN_OR_RETURN(p.regex_,
                           Regex::compile(r->get<std::string>(), at.source + ": " + at.key("Regex").path));
    p.is_regex_ = true;
    return p;
  }
  return jsonError(at, j, "{\"String\": \"...\"} or {\"Regex\": \"...\"}");
}

Pattern Pattern::literal(std::string s) {
  Pattern p;
  p.literal_ = std::move(s);
  return p;
}

std::string Pattern::replaceAll(std::string_view text, std::string_view content) const {
  std::string out;
  size_t last = 0;
  forEachMatch(text, [&](size_t s, size_t e) {
    if (out.empty()) out.reserve(text.size() + 16);
    out.append(text.substr(last, s - last));
    out.append(content);
    last = e;
  });
  if (last == 0 && out.empty()) return std::string(text);
  out.append(text.substr(last));
  return out;
}

}  // namespace llmrt::tok

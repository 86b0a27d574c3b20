#include "tokenizer/pattern.h"

namespace llmrt::tok {

Result<Pattern> Pattern::fromJson(const Json& j, const JsonPath& at) {
  Pattern p;
  p.where_ = at.source() + ": " + at.path();
  if (const Json* s = jsonFind(j, "String")) {
    if (!s->is_string()) return jsonError(at.key("String"), *s, "a string");
    p.literal_ = s->get<std::string>();
    return p;
  }
  if (const Json* r = jsonFind(j, "Regex")) {
    if (!r->is_string()) return jsonError(at.key("Regex"), *r, "a regular expression string");
    LLMRT_ASSIGN_OR_RETURN(
        p.regex_, Regex::compile(r->get<std::string>(), at.source() + ": " + at.key("Regex").path()));
    p.is_regex_ = true;
    return p;
  }
  return jsonError(at, j, "{\"String\": \"...\"} or {\"Regex\": \"...\"}");
}

Pattern Pattern::literal(std::string s) {
  Pattern p;
  p.where_ = "literal pattern";
  p.literal_ = std::move(s);
  return p;
}

Result<std::string> Pattern::replaceAll(std::string_view text, std::string_view content) const {
  std::string out;
  size_t last = 0;
  const size_t max_size = maxRewrittenSize(text.size());
  bool too_big = false;
  auto replace = [&](size_t s, size_t e) {
    if (too_big) return;
    if (out.empty()) out.reserve(text.size() + 16);
    out.append(text.substr(last, s - last));
    out.append(content);
    last = e;
    too_big = out.size() > max_size;
  };
  LLMRT_RETURN_IF_ERROR(forEachMatch(text, replace));
  if (too_big || out.size() + (text.size() - last) > max_size) {
    return Status(StatusCode::kResourceExhausted,
                  where_ + ": replacing every match in a " + std::to_string(text.size()) + "-byte text by " +
                      std::to_string(content.size()) + " bytes grows it past " + std::to_string(max_size) +
                      " bytes (16x + 4 KiB, the bound on a rewrite)");
  }
  if (last == 0 && out.empty()) return std::string(text);
  out.append(text.substr(last));
  return out;
}

}  // namespace llmrt::tok

// The public ChatTemplate API: parsing, rendering (exceptions of the engine become a Status
// here), JSON context conversion, and finding a model directory's chat template.
#include "llmrt/chat_template.h"

#include <new>

#include "core/json.h"
#include "core/mapped_file.h"
#include "llmrt/util.h"
#include "template/compiled.h"
#include "template/parser.h"

namespace llmrt {
namespace tmpl {

namespace {

template <typename J>
Value convert(const J& j, int depth) {
  if (depth > kMaxValueDepth)
    throwError("ValueError", "context JSON nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  switch (j.type()) {
    case J::value_t::null:
      return Value::none();
    case J::value_t::boolean:
      return Value(j.template get<bool>());
    case J::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case J::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case J::value_t::number_float:
      return Value(j.template get<double>());
    case J::value_t::string:
      return Value(j.template get_ref<const std::string&>());
    case J::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(convert(x, depth + 1));
      return Value::list(std::move(items));
    }
    case J::value_t::object: {
      auto d = std::make_shared<DictObj>();
      d->entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) d->set(Value(it.key()), convert(it.value(), depth + 1));
      return Value(std::shared_ptr<const DictObj>(std::move(d)));
    }
    default:
      return Value::none();  // binary / discarded: not produced by JSON text
  }
}

}  // namespace

Value fromJson(const nlohmann::json& j, int depth) { return convert(j, depth); }
Value fromJson(const nlohmann::ordered_json& j, int depth) { return convert(j, depth); }

Result<std::string> renderCompiled(const CompiledTemplate& t, const Value& context, const std::tm* clock) {
  if (!context.isDict())
    return invalidArgument(t.name + ": the render context must be a JSON object, not " + typeName(context));
  Interpreter in(t.limits);
  in.setClock(clock);
  try {
    return in.render(t.body, context);
  } catch (const TemplateError& e) {
    std::string where = t.name + ":" + std::to_string(e.line) + ": ";
    if (e.verbatim) return invalidArgument(where + "raise_exception: " + e.what());
    std::string msg = where + e.kind + ": " + printableText(e.what(), 1000);
    bool limit = e.kind == "RuntimeError" || e.kind == "RecursionError";
    return limit ? resourceExhausted(std::move(msg)) : invalidArgument(std::move(msg));
  } catch (const std::bad_alloc&) {
    return resourceExhausted(t.name + ": out of memory while rendering the template");
  }
}

const CompiledTemplate& compiledTemplate(const ChatTemplate& t) { return *t.impl_; }

}  // namespace tmpl

ChatTemplate::ChatTemplate(std::shared_ptr<const tmpl::CompiledTemplate> impl) : impl_(std::move(impl)) {}
ChatTemplate::~ChatTemplate() = default;

const std::string& ChatTemplate::name() const { return impl_->name; }

Result<ChatTemplate> ChatTemplate::parse(std::string_view source, std::string_view name,
                                         ChatTemplateLimits limits) {
  auto t = std::make_shared<tmpl::CompiledTemplate>();
  t->name = std::string(name);
  t->limits.max_output_bytes = limits.max_output_bytes;
  t->limits.max_depth = std::max(limits.max_depth, 1);
  t->limits.max_steps = limits.max_steps;
  tmpl::SyntaxError error;
  try {
    if (!tmpl::parseTemplate(source, t->limits.max_depth, t->body, error))
      return invalidArgument(t->name + ":" + std::to_string(error.line) + ":" + std::to_string(error.col) +
                             ": " + printableText(error.message, 1000));
  } catch (const std::bad_alloc&) {
    return resourceExhausted(t->name + ": out of memory while parsing the template");
  } catch (const tmpl::TemplateError& e) {
    return invalidArgument(t->name + ": " + printableText(e.what(), 1000));
  }
  return ChatTemplate(std::move(t));
}

Result<std::string> ChatTemplate::render(const nlohmann::json& context) const {
  try {
    return tmpl::renderCompiled(*impl_, tmpl::fromJson(context));
  } catch (const tmpl::TemplateError& e) {
    return invalidArgument(impl_->name + ": " + e.what());
  }
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& context) const {
  try {
    return tmpl::renderCompiled(*impl_, tmpl::fromJson(context));
  } catch (const tmpl::TemplateError& e) {
    return invalidArgument(impl_->name + ": " + e.what());
  }
}

// ---- loading a model directory's template ----

namespace {

// A special token in tokenizer_config.json: a string or an AddedToken object {"content": ...}.
std::optional<std::string> tokenText(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) {
    const Json* c = jsonMember(v, "content");
    if (c && c->is_string()) return c->get<std::string>();
  }
  return std::nullopt;
}

}  // namespace

Result<std::optional<ChatTemplateSource>> loadChatTemplate(const std::string& model_dir,
                                                           std::optional<std::string> name) {
  const std::string jinja_path = model_dir + "/chat_template.jinja";
  const std::string config_path = model_dir + "/tokenizer_config.json";
  ChatTemplateSource out;
  std::optional<Json> config;
  if (fileExists(config_path)) {
    LLMRT_ASSIGN_OR_RETURN(std::string text, readTextFile(config_path));
    JsonParseLimits limits;
    limits.reject_duplicate_keys = false;
    LLMRT_ASSIGN_OR_RETURN(Json parsed, parseJson(text, config_path, limits));
    if (!parsed.is_object())
      return jsonValueError(config_path, "<root>", parsed, "a JSON object", StatusCode::kParseError);
    for (const char* key :
         {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
      const Json* v = jsonMemberNonNull(parsed, key);
      if (!v) continue;
      if (auto s = tokenText(*v)) out.special_tokens[key] = *s;
    }
    if (const Json* extra = jsonMemberNonNull(parsed, "additional_special_tokens");
        extra && extra->is_array()) {
      Json list = Json::array();
      for (const Json& t : *extra)
        if (auto s = tokenText(t)) list.push_back(*s);
      out.special_tokens["additional_special_tokens"] = std::move(list);
    }
    config = std::move(parsed);
  }
  if (fileExists(jinja_path)) {
    if (name && *name != "default")
      return notFound(jinja_path + ": the model has one chat template; no template named '" + *name + "'");
    LLMRT_ASSIGN_OR_RETURN(out.source, readTextFile(jinja_path));
    out.origin = jinja_path;
    return std::optional<ChatTemplateSource>(std::move(out));
  }
  if (!config) return std::optional<ChatTemplateSource>();
  const Json* ct = jsonMemberNonNull(*config, "chat_template");
  if (!ct) return std::optional<ChatTemplateSource>();
  if (ct->is_string()) {
    if (name && *name != "default")
      return notFound(config_path + ": the model has one chat template; no template named '" + *name + "'");
    out.source = ct->get<std::string>();
    out.origin = config_path;
    return std::optional<ChatTemplateSource>(std::move(out));
  }
  if (!ct->is_array())
    return jsonValueError(config_path, "chat_template", *ct, "a string or a list of {\"name\", \"template\"}",
                          StatusCode::kParseError);
  const std::string want = name.value_or("default");
  std::string names;
  for (const Json& entry : *ct) {
    const Json* n = jsonMember(entry, "name");
    const Json* t = jsonMember(entry, "template");
    if (!n || !n->is_string() || !t || !t->is_string())
      return jsonValueError(config_path, "chat_template[]", entry,
                            "an object with string \"name\" and \"template\"", StatusCode::kParseError);
    if (n->get<std::string>() == want) {
      out.source = t->get<std::string>();
      out.origin = config_path + " (chat_template '" + want + "')";
      return std::optional<ChatTemplateSource>(std::move(out));
    }
    names += (names.empty() ? "'" : ", '") + printableText(n->get<std::string>(), 100) + "'";
  }
  return notFound(config_path + ": no chat template named '" + printableText(want, 100) +
                  "'; the model has " + names);
}

}  // namespace llmrt

// Chat templates: renders a model's Jinja `chat_template` exactly as HuggingFace transformers'
// apply_chat_template does with Python jinja2 (ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks and loop controls; transformers' tojson, raise_exception and
// strftime_now; jinja2's default Undefined). The engine implements the subset of Jinja that
// chat templates use: if/for/set/macro/filter/with/generation statements, the whole
// expression syntax, jinja2's common filters and tests, and Python's str/dict/list methods.
// Bad templates or data give an error, never a crash or a hang (see ChatTemplateLimits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "llmrt/status.h"

namespace llmrt {

struct ChatTemplateLimits {
  // Largest rendered text (and largest string a template builds), in bytes.
  size_t max_output_bytes = 16u << 20;
  // Deepest nesting of statements / expressions in the source, and of macro calls at run time.
  int max_depth = 256;
  // Most evaluation steps one render may take (nodes evaluated, loop iterations, copied items).
  uint64_t max_steps = 50'000'000;
};

class ChatTemplate;
namespace tmpl {
struct CompiledTemplate;
const CompiledTemplate& compiledTemplate(const ChatTemplate& t);  // internal (tests)
}  // namespace tmpl

class ChatTemplate {
 public:
  // Parses Jinja source. A syntax error is InvalidArgument "<name>:<line>:<col>: <what>".
  static Result<ChatTemplate> parse(std::string_view source, std::string_view name = "chat_template",
                                    ChatTemplateLimits limits = {});

  // Renders with `context` (a JSON object: messages, add_generation_prompt, bos_token,
  // eos_token, tools, any extra kwargs) as the top-level variables. Errors are
  // InvalidArgument "<name>:<line>: <PythonErrorClass>: <what>" (e.g. UndefinedError,
  // TypeError); raise_exception(msg) gives "<name>:<line>: raise_exception: <msg>" with msg
  // verbatim; the limits give ResourceExhausted. Dict order is the JSON object's order:
  // nlohmann::json sorts keys, so pass an ordered_json where `tojson` output must keep the
  // caller's key order (tools schemas), as Python does.
  Result<std::string> render(const nlohmann::json& context) const;
  Result<std::string> render(const nlohmann::ordered_json& context) const;

  const std::string& name() const;

  ChatTemplate(const ChatTemplate&) = default;
  ChatTemplate(ChatTemplate&&) noexcept = default;
  ChatTemplate& operator=(const ChatTemplate&) = default;
  ChatTemplate& operator=(ChatTemplate&&) noexcept = default;
  ~ChatTemplate();

 private:
  explicit ChatTemplate(std::shared_ptr<const tmpl::CompiledTemplate> impl);
  friend const tmpl::CompiledTemplate& tmpl::compiledTemplate(const ChatTemplate& t);
  std::shared_ptr<const tmpl::CompiledTemplate> impl_;  // immutable, shared by copies
};

// The chat template of a model directory as transformers finds it: the
// `chat_template.jinja` file if present, else tokenizer_config.json's "chat_template" (a
// string, or a list of {"name", "template"} where `name` picks one, default "default").
struct ChatTemplateSource {
  std::string source;
  std::string origin;  // the file it came from (and the template's name in a list)
  // The special-token strings transformers passes to the template (bos_token, eos_token,
  // unk_token, pad_token, sep_token, cls_token, mask_token when set in
  // tokenizer_config.json, as a string or an AddedToken object {"content": ...}).
  nlohmann::json special_tokens = nlohmann::json::object();
};
// nullopt when the model has no chat template. Errors: unreadable or malformed files, a
// chat_template of the wrong type, or `name` not among the named templates (NotFound).
Result<std::optional<ChatTemplateSource>> loadChatTemplate(const std::string& model_dir,
                                                           std::optional<std::string> name = std::nullopt);

}  // namespace llmrt

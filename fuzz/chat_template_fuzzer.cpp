// libFuzzer target: the input bytes are a Jinja chat template, optionally followed by a NUL
// byte and a JSON render context (without one, or when it is not a JSON object, a small chat
// with tools is used). The template is parsed (ChatTemplate::parse) and rendered. Any result is
// fine; a crash, sanitizer report or hang is a bug, as is output beyond the output limit, a
// render that differs when repeated, and an error message that is empty, does not name the
// template, or (except raise_exception's verbatim message) spans lines or runs past 4 KB.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "llmrt/chat_template.h"

namespace {

constexpr size_t kMaxOutput = 1u << 20;

void checkMessage(const llmrt::Status& s) {
  const std::string& m = s.message();
  if (m.rfind("fuzz:", 0) != 0) std::abort();
  if (m.find(": raise_exception: ") != std::string::npos) return;  // the template's own text, verbatim
  llmrt::fuzz::checkMessage(s);
}

const nlohmann::ordered_json& defaultContext() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Hi \u00e9 \ud83d\ude00"},
      {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function":
        {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}]},
      {"role": "tool", "content": "{\"temp\": 21.5}"},
      {"role": "user", "content": [{"type": "text", "text": "and now?"}, {"type": "image"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"
  })");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  llmrt::fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view source = input.substr(0, nul);
  llmrt::ChatTemplateLimits limits;
  limits.max_output_bytes = kMaxOutput;
  limits.max_steps = 2'000'000;
  auto t = llmrt::ChatTemplate::parse(source, "fuzz", limits);
  if (!t.isOk()) {
    checkMessage(t.status());
    return 0;
  }
  // The context: key order kept (ordered_json) for small ones; nlohmann's ordered_json inserts
  // in linear time per key, so megabyte contexts use the sorted json instead.
  std::string_view json_text = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  llmrt::Result<std::string> out = llmrt::internalError("unset");
  bool repeatable = source.find("strftime_now") == std::string_view::npos;
  auto renderWith = [&](const auto& context) {
    out = t->render(context);
    // Rendering is a pure function of the template and the context (except the clock).
    if (out.isOk() && repeatable && out->size() < 65536) {
      auto again = t->render(context);
      if (!again.isOk() || *again != *out) std::abort();
    }
  };
  try {
    if (json_text.size() > 65536) {
      auto parsed = nlohmann::json::parse(json_text);
      if (parsed.is_object()) renderWith(parsed);
    } else if (!json_text.empty()) {
      auto parsed = nlohmann::ordered_json::parse(json_text);
      if (parsed.is_object()) renderWith(parsed);
    }
  } catch (const nlohmann::json::exception&) {
  }
  if (!out.isOk() && out.status().code() == llmrt::StatusCode::kInternal) renderWith(defaultContext());
  if (!out.isOk()) {
    checkMessage(out.status());
    return 0;
  }
  if (out->size() > kMaxOutput) std::abort();
  return 0;
}

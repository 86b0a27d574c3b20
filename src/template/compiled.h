// A parsed chat template (the immutable tree every render of a ChatTemplate shares) and the
// render entry point with the options tests need (a fixed clock for strftime_now).
#pragma once

#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "llmrt/chat_template.h"
#include "llmrt/status.h"
#include "template/ast.h"
#include "template/interpreter.h"

namespace llmrt::tmpl {

struct CompiledTemplate {
  std::string name;
  Limits limits;
  Body body;
};

// The JSON value as a template value (objects keep their key order); throws TemplateError
// for nesting deeper than kMaxValueDepth.
Value fromJson(const nlohmann::json& j, int depth = 0);
Value fromJson(const nlohmann::ordered_json& j, int depth = 0);

// Renders `context` (a dict value); `clock` fixes strftime_now's time (local time when null).
Result<std::string> renderCompiled(const CompiledTemplate& t, const Value& context,
                                   const std::tm* clock = nullptr);

}  // namespace llmrt::tmpl

// Parser for the jinja2 subset of chat templates: the grammar of jinja2/parser.py (3.1) for
// the statements chat templates use (if, for, set, macro, filter, with, break/continue,
// generation) and the whole expression syntax (without *args / **kwargs).
#pragma once

#include <string>
#include <string_view>

#include "template/ast.h"

namespace llmrt::tmpl {

struct SyntaxError {
  std::string message;
  int line = 0;
  int col = 0;
};

// Parses `source` into `body`; returns false and fills `error` on a syntax error. `max_depth`
// bounds the nesting of statements and expressions.
bool parseTemplate(std::string_view source, int max_depth, Body& body, SyntaxError& error);

}  // namespace llmrt::tmpl

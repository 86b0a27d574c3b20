// ChatTemplate unit tests. The Jinja2Parity table's expected strings come from Python jinja2 3.1.2
// in transformers' environment (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
// loopcontrols, transformers' tojson / raise_exception, a {% generation %} tag), produced by
// running each template through /usr/bin/python3's jinja2; `error` is the Python exception
// class jinja2 raised where it failed.
#include "llmrt/chat_template.h"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace llmrt {
namespace {

using OJson = nlohmann::ordered_json;

struct Case {
  const char* name;
  const char* source;
  const char* context;   // JSON
  const char* expected;  // null when jinja2 raised
  const char* error;     // the Python exception class jinja2 raised
};

const Case kCases[] = {
#include "jinja2_cases.inc"
};

class Jinja2Parity : public testing::TestWithParam<Case> {};

TEST_P(Jinja2Parity, RendersAsJinja2) {
  const Case& c = GetParam();
  auto t = ChatTemplate::parse(c.source, c.name);
  if (!t.isOk()) {
    // jinja2 reports an unknown filter when compiling; llmrt when the filter runs. Both fail.
    ASSERT_EQ(c.expected, nullptr) << t.status().toString();
    return;
  }
  auto out = t->render(OJson::parse(c.context));
  if (c.expected) {
    ASSERT_TRUE(out.isOk()) << out.status().toString();
    EXPECT_EQ(*out, c.expected);
  } else {
    ASSERT_FALSE(out.isOk()) << "jinja2 raised " << c.error << "; llmrt rendered: " << *out;
    EXPECT_EQ(out.status().message().rfind(std::string(c.name) + ":1: ", 0), 0u) << out.status().message();
    const std::string kind = c.error;
    const std::string& msg = out.status().message();
    if (kind == "TemplateError") {
      EXPECT_NE(msg.find("raise_exception: "), std::string::npos) << msg;
    } else if (kind != "TemplateAssertionError" && kind != "TemplateRuntimeError") {
      EXPECT_NE(msg.find(kind), std::string::npos) << msg;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Table, Jinja2Parity, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

std::string render(std::string_view source, const OJson& ctx = OJson::object(),
                   ChatTemplateLimits limits = {}) {
  auto t = ChatTemplate::parse(source, "t", limits);
  if (!t.isOk()) return "PARSE ERROR " + t.status().toString();
  auto out = t->render(ctx);
  if (!out.isOk()) return "ERROR " + out.status().toString();
  return *out;
}

TEST(ChatTemplate, SyntaxErrorsNameLineAndColumn) {
  auto t = ChatTemplate::parse("line one\n{% if x %}\n  {{ x + }}\n{% endif %}", "my_tmpl");
  ASSERT_FALSE(t.isOk());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message().rfind("my_tmpl:3:10: ", 0), 0u) << t.status().message();

  auto unclosed = ChatTemplate::parse("a\n{% for x in y %}\nbody", "u");
  ASSERT_FALSE(unclosed.isOk());
  EXPECT_NE(unclosed.status().message().find("'endfor' or 'else'"), std::string::npos)
      << unclosed.status().message();

  for (const char* bad : {"{{ x", "{% if %}", "{{ 'unterminated }}", "{# no end", "{% endif %}", "{% foo %}",
                          "{{ (1 }}", "{{ x | }}", "{% set %}", "{% macro m(a=1, b) %}{% endmacro %}",
                          "{% break %}", "{{ 1 2 }}", "{% for in x %}{% endfor %}", "{{ a.1b }}",
                          "{% raw %}never closed", "{{ x is y is z }}", "{% include 'x' %}"}) {
    auto r = ChatTemplate::parse(bad, "bad");
    EXPECT_FALSE(r.isOk()) << bad;
    if (!r.isOk()) {
      EXPECT_EQ(r.status().message().rfind("bad:", 0), 0u) << r.status().message();
      EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
    }
  }
}

TEST(ChatTemplate, RuntimeErrorsNameTheLine) {
  auto t = ChatTemplate::parse("ok\n{% for m in messages %}\n{{ m.content.upper() }}\n{% endfor %}", "chat");
  ASSERT_TRUE(t.isOk());
  auto out = t->render(OJson{{"messages", {{{"role", "user"}}}}});
  ASSERT_FALSE(out.isOk());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "chat:3: UndefinedError: 'dict object' has no attribute 'content'");
}

TEST(ChatTemplate, RaiseExceptionMessageIsVerbatim) {
  auto out = ChatTemplate::parse("\n\n{{ raise_exception('Roles must alternate\\nuser/assistant: ' ~ n) }}")
                 ->render(OJson{{"n", 3}});
  ASSERT_FALSE(out.isOk());
  EXPECT_EQ(out.status().message(),
            "chat_template:3: raise_exception: Roles must alternate\nuser/assistant: 3");
}

TEST(ChatTemplate, ContextMustBeAnObject) {
  auto t = ChatTemplate::parse("x");
  ASSERT_TRUE(t.isOk());
  EXPECT_FALSE(t->render(OJson::array()).isOk());
  EXPECT_FALSE(t->render(nlohmann::json("s")).isOk());
}

TEST(ChatTemplate, UnorderedJsonContextRenders) {
  // nlohmann::json keeps keys sorted; ordered_json keeps the caller's order (as Python does).
  nlohmann::json sorted = {{"d", {{"z", 1}, {"a", 2}}}};
  OJson ordered = {{"d", {{"z", 1}, {"a", 2}}}};
  EXPECT_EQ(*ChatTemplate::parse("{{ d|tojson }}")->render(sorted), "{\"a\": 2, \"z\": 1}");
  EXPECT_EQ(*ChatTemplate::parse("{{ d|tojson }}")->render(ordered), "{\"z\": 1, \"a\": 2}");
}

TEST(ChatTemplate, StrftimeNowUsesTheClock) {
  std::string year = render("{{ strftime_now('%Y') }}");
  ASSERT_EQ(year.size(), 4u) << year;
  EXPECT_GE(std::stoi(year), 2024);
  EXPECT_EQ(render("{{ strftime_now('') }}|"), "|");
}

TEST(ChatTemplate, CopiesShareTheParsedTemplate) {
  auto t = ChatTemplate::parse("{{ a }}-{{ b|default('B') }}", "shared");
  ASSERT_TRUE(t.isOk());
  ChatTemplate copy = *t;
  ChatTemplate moved = std::move(copy);
  EXPECT_EQ(moved.name(), "shared");
  EXPECT_EQ(*moved.render(OJson{{"a", 1}}), "1-B");
  EXPECT_EQ(*t->render(OJson{{"a", "x"}, {"b", "y"}}), "x-y");
  // Renders from several threads share the immutable tree.
  std::vector<std::thread> threads;
  std::vector<std::string> outs(4);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k) outs[static_cast<size_t>(i)] = *t->render(OJson{{"a", i}});
    });
  for (auto& th : threads) th.join();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(outs[static_cast<size_t>(i)], std::to_string(i) + "-B");
}

// ---- limits: every runaway is an error, never a crash or a hang ----

TEST(ChatTemplateLimits, DeepNestingIsASyntaxError) {
  for (const std::string& src :
       {std::string(100000, '(') + "1" + std::string(100000, ')'), "{{ " + std::string(100000, '(') + " }}",
        "{{ " + std::string(100000, '[') + " }}", "{{ " + std::string(50000, '-') + "1 }}",
        "{{ " + std::string(60000, '{') + " }}"}) {
    auto t = ChatTemplate::parse("{{ " + src + " }}");
    ASSERT_FALSE(t.isOk());
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  }
  std::string nots = "{{ ";
  for (int i = 0; i < 100000; ++i) nots += "not ";
  EXPECT_FALSE(ChatTemplate::parse(nots + "1 }}").isOk());
  std::string ifs;
  for (int i = 0; i < 20000; ++i) ifs += "{% if true %}";
  EXPECT_FALSE(ChatTemplate::parse(ifs).isOk());
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  EXPECT_FALSE(ChatTemplate::parse(chain + " }}").isOk());
  std::string filters = "{{ 'x'";
  for (int i = 0; i < 100000; ++i) filters += "|trim";
  EXPECT_FALSE(ChatTemplate::parse(filters + " }}").isOk());
  // Within the limit: fine.
  EXPECT_EQ(render("{{ " + std::string(50, '(') + "7" + std::string(50, ')') + " }}"), "7");
  std::string elifs = "{% if x == 0 %}0";
  for (int i = 1; i < 3000; ++i) elifs += "{% elif x == " + std::to_string(i) + " %}" + std::to_string(i);
  EXPECT_EQ(render(elifs + "{% endif %}", OJson{{"x", 2999}}), "2999");
}

TEST(ChatTemplateLimits, RunawayRecursionIsAnError) {
  auto out = render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(out.rfind("ERROR ResourceExhausted: t:1: RecursionError: ", 0), 0u) << out;
  auto mutual =
      render("{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}x{{ a() }}{% endmacro %}{{ a() }}");
  EXPECT_EQ(mutual.rfind("ERROR ResourceExhausted", 0), 0u) << mutual;
}

TEST(ChatTemplateLimits, OutputCap) {
  ChatTemplateLimits small;
  small.max_output_bytes = 1000;
  EXPECT_EQ(render("{% for i in range(99) %}0123456789{% endfor %}", OJson::object(), small).size(), 990u);
  auto over = render("{% for i in range(101) %}0123456789{% endfor %}", OJson::object(), small);
  EXPECT_EQ(over.rfind("ERROR ResourceExhausted: t:1: RuntimeError: template output", 0), 0u) << over;
  EXPECT_EQ(render("{{ 'x' * 100000 }}", OJson::object(), small).rfind("ERROR ResourceExhausted", 0), 0u);
  EXPECT_EQ(render("{{ 'x' * 9000000000000000000 }}").rfind("ERROR ResourceExhausted", 0), 0u);
  EXPECT_EQ(
      render(
          "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
          .rfind("ERROR ResourceExhausted", 0),
      0u);
  EXPECT_EQ(render("{{ ('ab' * 10000)|replace('a', 'x' * 10000) }}").rfind("ERROR ResourceExhausted", 0), 0u);
}

TEST(ChatTemplateLimits, StepCap) {
  ChatTemplateLimits few;
  few.max_steps = 100000;
  auto loops = render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                      OJson::object(), few);
  EXPECT_EQ(
      loops.rfind("ERROR ResourceExhausted: t:1: RuntimeError: template ran for more than 100000 steps", 0),
      0u)
      << loops;
  // The default limit stops a quadratic list build in well under a minute.
  auto start = std::chrono::steady_clock::now();
  auto quad = render(
      "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% for j in range(100000) %}"
      "{% set ns.l = ns.l + [j] %}{% endfor %}{% endfor %}");
  EXPECT_EQ(quad.rfind("ERROR ResourceExhausted", 0), 0u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST(ChatTemplateLimits, DeepValuesAndCyclesAreBounded) {
  // Nesting a list in itself 100k times, and a namespace that holds itself.
  auto deep =
      render("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}");
  EXPECT_EQ(deep.rfind("ERROR", 0), 0u);
  auto cycle =
      render("{% set ns = namespace() %}{% set ns.me = ns %}{% set ns.l = [ns] %}{{ ns.l|length }}{{ ns }}");
  EXPECT_EQ(cycle.rfind("ERROR", 0), 0u) << cycle;
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me.me is defined }}"), "True");
  nlohmann::json deep_json = nlohmann::json::array();
  for (int i = 0; i < 5000; ++i) deep_json = nlohmann::json::array({deep_json});
  auto t = ChatTemplate::parse("{{ x|length }}");
  EXPECT_FALSE(t->render(nlohmann::json{{"x", deep_json}}).isOk());
}

TEST(ChatTemplate, RendersFiftyMessagesQuickly) {
  auto t = ChatTemplate::parse(
      "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] | "
      "trim + "
      "'<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- "
      "endif %}");
  ASSERT_TRUE(t.isOk());
  OJson ctx = {{"add_generation_prompt", true}, {"messages", OJson::array()}};
  for (int i = 0; i < 50; ++i)
    ctx["messages"].push_back(
        {{"role", i % 2 ? "assistant" : "user"}, {"content", "message number " + std::to_string(i)}});
  auto out = t->render(ctx);
  ASSERT_TRUE(out.isOk());
  EXPECT_EQ(out->rfind("<|im_start|>user\nmessage number 0<|im_end|>\n", 0), 0u);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(t->render(ctx).isOk());
  auto per_render = (std::chrono::steady_clock::now() - start) / 100;
  EXPECT_LT(per_render, std::chrono::milliseconds(5));  // typically ~50 us
}

}  // namespace
}  // namespace llmrt

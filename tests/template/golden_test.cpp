// Real model chat templates rendered against jinja2's own output: tests/data/chat_templates
// (cases.json, made by scripts/golden/make_chat_template_cases.py with Python jinja2 in
// transformers' environment), and loadChatTemplate on the shared tokenizer fixtures.
#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "llmrt/chat_template.h"
#include "template/compiled.h"

namespace llmrt {
namespace {

namespace fs = std::filesystem;
using OJson = nlohmann::ordered_json;

std::string readFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const fs::path kData = fs::path(LLMRT_TEST_DATA) / "chat_templates";
const fs::path kShared = fs::path(LLMRT_SHARED_TESTDATA);

// The template source of a case, or "" when it lives in absent shared data.
std::string caseSource(const OJson& c, std::map<std::string, std::string>& cache, bool& skipped) {
  const std::string name = c.at("template").get<std::string>();
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  std::string source;
  if (c.contains("template_from")) {
    std::string from = c.at("template_from").get<std::string>();
    const std::string prefix = "shared:";
    fs::path p = kShared / from.substr(from.rfind(prefix, 0) == 0 ? prefix.size() : 0);
    if (!fs::exists(p)) {
      skipped = true;
      return "";
    }
    source = OJson::parse(readFile(p)).at("chat_template").get<std::string>();
  } else {
    source = readFile(kData / "templates" / (name + ".jinja"));
  }
  cache[name] = source;
  return source;
}

TEST(ChatTemplateGolden, MatchesJinja2) {
  const fs::path cases_path = kData / "cases.json";
  if (!fs::exists(cases_path)) GTEST_SKIP() << cases_path << " is absent";
  OJson cases = OJson::parse(readFile(cases_path));
  ASSERT_TRUE(cases.is_array());
  ASSERT_GT(cases.size(), 0u);
  std::map<std::string, std::string> sources;
  std::map<std::string, std::optional<ChatTemplate>> compiled;
  int passed = 0, failed = 0, skipped = 0, errors_expected = 0;
  for (const OJson& c : cases) {
    const std::string case_name = c.value("name", c.at("template").get<std::string>());
    SCOPED_TRACE(case_name);
    bool skip = false;
    std::string source = caseSource(c, sources, skip);
    if (skip) {
      ++skipped;
      continue;
    }
    const std::string tname = c.at("template").get<std::string>();
    if (!compiled.count(tname)) {
      auto t = ChatTemplate::parse(source, tname);
      EXPECT_TRUE(t.isOk()) << t.status().toString();
      compiled[tname] = t.isOk() ? std::optional<ChatTemplate>(*t) : std::nullopt;
    }
    const auto& t = compiled[tname];
    if (!t) {
      ++failed;
      continue;
    }
    std::tm clock{};
    bool fixed = c.contains("fixed_clock");
    if (fixed) {
      std::string s = c.at("fixed_clock").get<std::string>();
      ASSERT_EQ(std::sscanf(s.c_str(), "%d-%d-%dT%d:%d:%d", &clock.tm_year, &clock.tm_mon, &clock.tm_mday,
                            &clock.tm_hour, &clock.tm_min, &clock.tm_sec),
                6);
      clock.tm_year -= 1900;
      clock.tm_mon -= 1;
      clock.tm_isdst = -1;
      std::mktime(&clock);  // fills tm_wday / tm_yday for %a, %j, ...
    }
    auto out = tmpl::renderCompiled(tmpl::compiledTemplate(*t), tmpl::fromJson(c.at("context")),
                                    fixed ? &clock : nullptr);
    bool ok;
    if (c.contains("expected_error")) {
      ++errors_expected;
      ok = !out.isOk();
      EXPECT_FALSE(out.isOk()) << "expected " << c.at("expected_error") << ", rendered: " << *out;
      if (!out.isOk() && c.at("expected_error") == "TemplateError" && c.contains("message")) {
        const std::string want = "raise_exception: " + c.at("message").get<std::string>();
        EXPECT_NE(out.status().message().find(want), std::string::npos) << out.status().message();
        ok = ok && out.status().message().find(want) != std::string::npos;
      }
    } else {
      const std::string expected = c.at("expected").get<std::string>();
      ok = out.isOk() && *out == expected;
      if (out.isOk()) {
        EXPECT_EQ(*out, expected);
      } else {
        ADD_FAILURE() << out.status().toString();
      }
    }
    ok ? ++passed : ++failed;
  }
  std::printf(
      "chat template goldens: %d passed, %d failed, %d skipped (shared data absent); %d expect errors\n",
      passed, failed, skipped, errors_expected);
  EXPECT_EQ(failed, 0);
}

struct SharedModel {
  const char* dir;
  const char* bos;
  const char* eos;
  const char* snippet;  // a piece of the template source
};

TEST(ChatTemplateGolden, LoadsSharedTokenizerTemplates) {
  const fs::path dir = kShared / "tokenizers";
  if (!fs::exists(dir / "llama3")) GTEST_SKIP() << dir << " is absent";
  const SharedModel models[] = {
      {"llama3", "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>"},
      {"phi-3", "<s>", "<|endoftext|>", "<|assistant|>"},
      {"qwen2-family", nullptr, "<|im_end|>", "<|im_start|>"},
  };
  for (const SharedModel& m : models) {
    SCOPED_TRACE(m.dir);
    auto src = loadChatTemplate((dir / m.dir).string());
    ASSERT_TRUE(src.isOk()) << src.status().toString();
    ASSERT_TRUE(src->has_value());
    const ChatTemplateSource& s = **src;
    EXPECT_NE(s.source.find(m.snippet), std::string::npos);
    EXPECT_NE(s.origin.find("tokenizer_config.json"), std::string::npos);
    if (m.bos) {
      EXPECT_EQ(s.special_tokens.value("bos_token", ""), m.bos);
    } else {
      EXPECT_FALSE(s.special_tokens.contains("bos_token"));  // null in the file: not passed
    }
    EXPECT_EQ(s.special_tokens.value("eos_token", ""), m.eos);
    auto t = ChatTemplate::parse(s.source, s.origin);
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    nlohmann::ordered_json ctx = s.special_tokens;
    ctx["messages"] = {{{"role", "user"}, {"content", "Hi"}}};
    ctx["add_generation_prompt"] = true;
    auto out = t->render(ctx);
    ASSERT_TRUE(out.isOk()) << out.status().toString();
    EXPECT_NE(out->find("Hi"), std::string::npos);
  }
  // A named template that is not there, and a model without a template.
  auto missing = loadChatTemplate((dir / "llama3").string(), "tool_use");
  EXPECT_FALSE(missing.isOk());
  if (fs::exists(dir / "llama2")) {
    auto none = loadChatTemplate((dir / "llama2").string());
    ASSERT_TRUE(none.isOk()) << none.status().toString();
    EXPECT_FALSE(none->has_value());
  }
}

}  // namespace
}  // namespace llmrt

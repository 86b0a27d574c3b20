// The wire format without a server: chat rendering keeps the client's key order when given the
// ordered body (tool schemas through `tojson`, as transformers renders them).
#include <gtest/gtest.h>

#include "openai_api.h"

namespace llmrt::serve {
namespace {

TEST(OpenAiApi, ChatTemplatesSeeTheClientsKeyOrder) {
  auto t = ChatTemplate::parse("{{ tools | tojson }}|{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  ModelContext ctx;
  ctx.chat_template = &*t;
  const std::string text =
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],)"
      R"( "tools": [{"type": "function", "function": {"name": "f", "parameters": {"zeta": 1, "alpha": 2}}}]})";
  const Json body = Json::parse(text);
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
  auto in_order = renderChat(body, ctx, true, &ordered);
  ASSERT_TRUE(std::holds_alternative<std::string>(in_order));
  EXPECT_EQ(std::get<std::string>(in_order),
            R"([{"type": "function", "function": {"name": "f", "parameters": {"zeta": 1, "alpha": 2}}}]|user:a)" "\n" "b;");
  auto sorted = renderChat(body, ctx, true);
  ASSERT_TRUE(std::holds_alternative<std::string>(sorted));
  EXPECT_EQ(std::get<std::string>(sorted),
            R"([{"function": {"name": "f", "parameters": {"alpha": 2, "zeta": 1}}, "type": "function"}]|user:a)" "\n" "b;");
}

TEST(OpenAiApi, TemplateErrorsAre400s) {
  auto t = ChatTemplate::parse("{{ raise_exception('Conversation roles must alternate') }}");
  ASSERT_TRUE(t.isOk());
  ModelContext ctx;
  ctx.chat_template = &*t;
  auto r = renderChat(Json::parse(R"({"messages": [{"role": "user", "content": "x"}]})"), ctx, true);
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).status, 400);
  EXPECT_NE(std::get<ApiError>(r).message.find("Conversation roles must alternate"), std::string::npos);
  ModelContext none;
  auto no_template = renderChat(Json::parse(R"({"messages": [{"role": "user", "content": "x"}]})"), none, true);
  ASSERT_TRUE(std::holds_alternative<ApiError>(no_template));
  EXPECT_NE(std::get<ApiError>(no_template).message.find("--chat-template"), std::string::npos);
}

}  // namespace
}  // namespace llmrt::serve

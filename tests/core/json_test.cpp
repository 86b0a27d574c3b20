#include "core/json.h"

#include <gtest/gtest.h>

#include <chrono>

namespace llmrt {
namespace {

TEST(ParseJson, ParsesOrdinaryDocuments) {
  auto j = parseJson(R"({"a": [1, 2, {"b": "c"}], "d": null})", "x.json");
  ASSERT_TRUE(j.isOk()) << j.status().toString();
  EXPECT_EQ((*j)["a"][2]["b"], "c");
}

TEST(ParseJson, MalformedNamesTheSource) {
  auto j = parseJson("{\"a\": ", "conf.json");
  ASSERT_FALSE(j.isOk());
  EXPECT_EQ(j.status().code(), StatusCode::kParseError);
  EXPECT_NE(j.status().message().find("conf.json: invalid JSON"), std::string::npos) << j.status().message();
}

TEST(ParseJson, DeepNestingIsAnErrorNotACrash) {
  // 75,000 levels: nlohmann parses this, but printing it recursively overflows the stack.
  const std::string deep = std::string(75000, '[') + std::string(75000, ']');
  auto j = parseJson(deep, "deep.json");
  ASSERT_FALSE(j.isOk());
  EXPECT_NE(j.status().message().find("nesting deeper than 128 levels"), std::string::npos) << j.status().message();
  const std::string deep_obj = [] {
    std::string s;
    for (int i = 0; i < 300; ++i) s += "{\"k\":";
    s += "1";
    for (int i = 0; i < 300; ++i) s += "}";
    return s;
  }();
  auto o = parseJson(deep_obj, "deep.json", {.max_depth = 299});
  EXPECT_FALSE(o.isOk());
  auto ok = parseJson(deep_obj, "deep.json", {.max_depth = 300});
  EXPECT_TRUE(ok.isOk()) << ok.status().toString();
  EXPECT_TRUE(parseJson("[[[1]]]", "x", {.max_depth = 3}).isOk());
  EXPECT_FALSE(parseJson("[[[1]]]", "x", {.max_depth = 2}).isOk());
}

TEST(ParseJson, DuplicateKeysAreNamedWithTheirPath) {
  auto j = parseJson(R"({"model": {"vocab": {"a": 1, "b": 2}}, "list": [{}, {"x": 1, "x": 2}]})", "t.json");
  ASSERT_FALSE(j.isOk());
  EXPECT_NE(j.status().message().find("duplicate key 'list[1].x'"), std::string::npos) << j.status().message();
  auto top = parseJson(R"({"model": 1, "model": 2})", "t.json");
  ASSERT_FALSE(top.isOk());
  EXPECT_NE(top.status().message().find("duplicate key 'model'"), std::string::npos) << top.status().message();
  auto allowed = parseJson(R"({"model": 1, "model": 2})", "t.json", {.reject_duplicate_keys = false});
  ASSERT_TRUE(allowed.isOk());
  EXPECT_EQ((*allowed)["model"], 2);
  // The same key in sibling objects is not a duplicate.
  EXPECT_TRUE(parseJson(R"([{"a": 1}, {"a": 2}])", "t.json").isOk());
}

TEST(ParseJson, ManyContainersAreLinearNotQuadratic) {
  // 20,000 objects in one object (a safetensors header) and 200,000 pairs in one array
  // (tokenizer.json merges): the callback parser rescans the parent on every close.
  std::string header = "{";
  for (int i = 0; i < 20000; ++i) header += "\"t" + std::to_string(i) + "\":{\"shape\":[1,2]},";
  header.back() = '}';
  std::string merges = "[";
  for (int i = 0; i < 200000; ++i) merges += "[\"a\",\"b\"],";
  merges.back() = ']';
  const auto start = std::chrono::steady_clock::now();
  auto h = parseJson(header, "h.json");
  auto m = parseJson(merges, "m.json");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(h.isOk() && m.isOk());
  EXPECT_EQ(h->size(), 20000u);
  EXPECT_EQ(m->size(), 200000u);
  EXPECT_LT(s, 5.0);
}

TEST(ParseJson, MessagesAreOneShortLine) {
  // A key with a newline in a duplicate / too-deep path, and a megabyte-long bad token.
  auto dup = parseJson("{\"a\\nb\": 1, \"a\\nb\": 2}", "d.json");
  ASSERT_FALSE(dup.isOk());
  EXPECT_EQ(dup.status().message().find('\n'), std::string::npos) << dup.status().message();
  auto deep = parseJson("{\"" + std::string(1 << 20, 'k') + "\":" + std::string(200, '[') + "}", "k.json");
  ASSERT_FALSE(deep.isOk());
  EXPECT_LT(deep.status().message().size(), 1000u);
  auto token = parseJson("\"" + std::string(1 << 20, 'x') + "\x01\"", "t.json");
  ASSERT_FALSE(token.isOk());
  EXPECT_LT(token.status().message().size(), 1000u);
}

TEST(JsonSnippet, IsBoundedInDepthAndLength) {
  EXPECT_EQ(jsonSnippet(Json::parse(R"({"a":[1,"x"]})")), R"({"a":[1,"x"]})");
  // A value nested far deeper than any snippet shows (built without recursion).
  Json deep = Json::array();
  Json* cur = &deep;
  for (int i = 0; i < 100000; ++i) {
    cur->push_back(Json::array());
    cur = &(*cur)[0];
  }
  const std::string s = jsonSnippet(deep);
  EXPECT_EQ(s, std::string(8, '[') + "[...]" + std::string(8, ']'));
  const std::string long_string(1 << 20, 'z');
  const std::string ls = jsonSnippet(Json(long_string), 50);
  EXPECT_LE(ls.size(), 53u);
  EXPECT_EQ(ls.substr(ls.size() - 3), "...");
  Json big = Json::array();
  for (int i = 0; i < 100000; ++i) big.push_back(i);
  EXPECT_LE(jsonSnippet(big, 80).size(), 83u);
  // Invalid UTF-8 is replaced, not thrown on.
  EXPECT_NO_THROW(jsonSnippet(Json(std::string("\xff\xfe"))));
}

}  // namespace
}  // namespace llmrt

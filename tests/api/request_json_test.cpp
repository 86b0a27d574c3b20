// JSON requests (llmrt/request_json.h): every field read with its exact type
// and range, unknown keys named, never a silent truncation or wrap-around.
#include "llmrt/request_json.h"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>

namespace llmrt {
namespace {

using nlohmann::json;

Result<JsonRequest> parse(const std::string& text, const SamplingParams& defaults = {}) {
  return parseJsonRequest(text, defaults, "req.jsonl:7");
}

// The error of `text`, asserting that it is one and is on one line.
std::string errorOf(const std::string& text, StatusCode code = StatusCode::kInvalidArgument) {
  auto r = parse(text);
  EXPECT_FALSE(r.isOk()) << text;
  if (r.isOk()) return "";
  EXPECT_EQ(r.status().code(), code) << r.status().toString();
  const std::string& m = r.status().message();
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_EQ(m.rfind("req.jsonl:7: ", 0), 0u) << m;
  return m;
}

#define EXPECT_HAS(haystack, needle)                               \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "'" << (needle) << "' not in: " << (haystack)

TEST(RequestJson, ReadsEveryField) {
  auto r = parse(R"({"prompt": "Once", "max_tokens": 8, "min_tokens": 2, "temperature": 0.5, "top_k": 40,
      "top_p": 0.9, "min_p": 0.05, "repetition_penalty": 1.1, "presence_penalty": -0.5, "frequency_penalty": 2,
      "seed": 18446744073709551615, "ignore_eos": true, "stop": ["a", "bc"], "stop_token_ids": [2, 13], "n": 3,
      "logprobs": 20, "kv_cache_retention_config": {"token_range_retention_configs": [
        {"token_start": 0, "token_end": 4, "priority": 100, "duration_ms": 9007199254740991},
        {"token_start": 4, "priority": 1}], "decode_retention_priority": 20, "decode_duration_ms": 1}})");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->prompt.text, std::optional<std::string>("Once"));
  const SamplingParams& p = r->sampling_params;
  EXPECT_EQ(p.max_tokens, 8);
  EXPECT_EQ(p.min_tokens, 2);
  EXPECT_FLOAT_EQ(p.temperature, 0.5f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(p.presence_penalty, -0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, 2.0f);
  EXPECT_EQ(p.seed, std::optional<uint64_t>(UINT64_MAX));
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{2, 13}));
  EXPECT_EQ(p.n, 3);
  EXPECT_EQ(p.logprobs, std::optional<int>(20));
  ASSERT_TRUE(r->options.kv_cache_retention_config.has_value());
  const KvCacheRetentionConfig& rc = *r->options.kv_cache_retention_config;
  ASSERT_EQ(rc.token_range_retention_configs.size(), 2u);
  EXPECT_EQ(rc.token_range_retention_configs[0].token_end, std::optional<int32_t>(4));
  EXPECT_EQ(rc.token_range_retention_configs[0].priority, 100);
  EXPECT_EQ(rc.token_range_retention_configs[0].duration_ms, std::optional<int64_t>(kMaxRetentionDurationMs));
  EXPECT_EQ(rc.token_range_retention_configs[1].token_start, 4);
  EXPECT_FALSE(rc.token_range_retention_configs[1].token_end.has_value());
  EXPECT_EQ(rc.token_range_retention_configs[1].priority, 1);
  EXPECT_EQ(rc.decode_retention_priority, 20);
  EXPECT_EQ(rc.decode_duration_ms, std::optional<int64_t>(1));
}

TEST(RequestJson, FieldsLeftOutKeepTheDefaults) {
  SamplingParams d;
  d.max_tokens = 77;
  d.temperature = 0.3f;
  d.seed = 5;
  d.stop = {"x"};
  auto r = parse(R"({"input_ids": [1, 2147483647], "top_k": -1})", d);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->prompt.token_ids, (std::vector<TokenId>{1, 2147483647}));
  EXPECT_FALSE(r->prompt.text.has_value());
  EXPECT_EQ(r->sampling_params.max_tokens, 77);
  EXPECT_FLOAT_EQ(r->sampling_params.temperature, 0.3f);
  EXPECT_EQ(r->sampling_params.seed, std::optional<uint64_t>(5));
  EXPECT_EQ(r->sampling_params.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r->sampling_params.top_k, 0);  // vLLM's -1 = disabled
  EXPECT_FALSE(r->options.kv_cache_retention_config.has_value());
  // A single stop string, as OpenAI's API allows; [] clears the default.
  auto s = parse(R"({"prompt": "", "stop": "\n\n"})", d);
  ASSERT_TRUE(s.isOk()) << s.status().toString();
  EXPECT_EQ(s->sampling_params.stop, std::vector<std::string>{"\n\n"});
  auto c = parse(R"({"prompt": "", "stop": []})", d);
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_TRUE(c->sampling_params.stop.empty());
}

// Item 4: unknown keys inside kv_cache_retention_config and its ranges were ignored.
TEST(RequestJson, UnknownRetentionKeysAreNamed) {
  std::string m =
      errorOf(R"({"prompt": "a", "kv_cache_retention_config": {"decode_retention_priorty": 90}})");
  EXPECT_HAS(m, "unknown field 'kv_cache_retention_config.decode_retention_priorty'");
  EXPECT_HAS(m, "decode_retention_priority");  // the known keys are listed
  m = errorOf(R"({"prompt": "a", "kv_cache_retention_config": {"token_range_retention_configs":
      [{"token_start": 0, "priority": 50}, {"token_start": 8, "prioirty": 90}]}})");
  EXPECT_HAS(m, "unknown field 'kv_cache_retention_config.token_range_retention_configs[1].prioirty'");
  m = errorOf(R"({"prompt": "a", "bogus": 1})");
  EXPECT_HAS(m, "unknown field 'bogus'");
  // A key that would break the line is shown escaped.
  m = errorOf("{\"prompt\": \"a\", \"bo\\ngus\": 1}");
  EXPECT_HAS(m, "unknown field 'bo\\ngus'");
}

// Item 4: priority 100.7 was truncated to 100, token_end 99999999999 accepted,
// duration_ms 1e30 reported as -9223372036854775808.
TEST(RequestJson, RetentionFieldsAreExactIntegersInRange) {
  const std::string pre =
      R"({"prompt": "a", "kv_cache_retention_config": {"token_range_retention_configs": [)";
  std::string m = errorOf(pre + R"({"token_start": 0, "priority": 100.7}]}})");
  EXPECT_HAS(m,
             "field 'kv_cache_retention_config.token_range_retention_configs[0].priority' has value 100.7; "
             "expected an integer in [1, 100]");
  m = errorOf(pre + R"({"token_start": 0, "priority": 101}]}})");
  EXPECT_HAS(m, "priority' has value 101");
  m = errorOf(pre + R"({"token_start": 0, "token_end": 99999999999}]}})");
  EXPECT_HAS(m,
             "token_range_retention_configs[0].token_end' has value 99999999999; expected an integer in [1, "
             "2147483647]");
  m = errorOf(pre + R"({"token_start": -1}]}})");
  EXPECT_HAS(m, "token_start' has value -1");
  m = errorOf(pre + R"({"token_start": 0, "duration_ms": 1e30}]}})");
  EXPECT_HAS(m, "duration_ms' has value 1e+30; expected an integer in [1, 9007199254740991]");
  EXPECT_EQ(m.find("-9223372036854775808"), std::string::npos) << m;
  m = errorOf(pre + R"({"token_start": 0, "duration_ms": 9007199254740992}]}})");
  EXPECT_HAS(m, "duration_ms' has value 9007199254740992");
  m = errorOf(pre + R"({"token_start": 0, "duration_ms": 0}]}})");
  EXPECT_HAS(m, "duration_ms' has value 0");
  m = errorOf(R"({"prompt": "a", "kv_cache_retention_config": {"decode_duration_ms": 1.5}})");
  EXPECT_HAS(m, "field 'kv_cache_retention_config.decode_duration_ms' has value 1.5");
  m = errorOf(R"({"prompt": "a", "kv_cache_retention_config": {"decode_retention_priority": "high"}})");
  EXPECT_HAS(m, "decode_retention_priority' has value \"high\"; expected an integer in [1, 100]");
  m = errorOf(R"({"prompt": "a", "kv_cache_retention_config": {"token_range_retention_configs": {}}})");
  EXPECT_HAS(m, "token_range_retention_configs' has value {}; expected an array");
  m = errorOf(R"({"prompt": "a", "kv_cache_retention_config": {"token_range_retention_configs": [3]}})");
  EXPECT_HAS(m, "token_range_retention_configs[0]' has value 3; expected a token range object");
  m = errorOf(R"({"prompt": "a", "kv_cache_retention_config": []})");
  EXPECT_HAS(m, "field 'kv_cache_retention_config' has value []; expected an object");
  // Ranges that are each fine but do not fit together are KvCacheRetentionConfig::validate's
  // (the executor runs it on every request).
  auto overlap = parse(pre + R"({"token_start": 0, "token_end": 8}, {"token_start": 4}]}})");
  ASSERT_TRUE(overlap.isOk()) << overlap.status().toString();
  const Status v = overlap->options.kv_cache_retention_config->validate();
  EXPECT_HAS(v.message(), "overlap");
}

// Item 13: get<int> wrapped, truncated and overflowed.
TEST(RequestJson, IntegersAreIntegersInRange) {
  std::string m = errorOf(R"({"prompt": "a", "max_tokens": 4294967297})");
  EXPECT_HAS(m, "field 'max_tokens' has value 4294967297; expected an integer in [1, 2147483647]");
  m = errorOf(R"({"prompt": "a", "top_k": 4294967296})");
  EXPECT_HAS(m, "field 'top_k' has value 4294967296; expected an integer in [-1, 2147483647]");
  m = errorOf(R"({"prompt": "a", "max_tokens": 3.9})");
  EXPECT_HAS(m, "field 'max_tokens' has value 3.9");
  m = errorOf(R"({"prompt": "a", "max_tokens": 3.0})");  // a fraction says "real number": rejected too
  EXPECT_HAS(m, "field 'max_tokens' has value 3.0");
  m = errorOf(R"({"prompt": "a", "max_tokens": 3e0})");
  EXPECT_HAS(m, "field 'max_tokens'");
  m = errorOf(R"({"prompt": "a", "max_tokens": 1e30})");  // was undefined behaviour (UBSan)
  EXPECT_HAS(m, "field 'max_tokens' has value 1e+30");
  m = errorOf(R"({"prompt": "a", "max_tokens": 0})");
  EXPECT_HAS(m, "field 'max_tokens' has value 0");
  m = errorOf(R"({"prompt": "a", "min_tokens": -1})");
  EXPECT_HAS(m, "field 'min_tokens' has value -1");
  m = errorOf(R"({"input_ids": [1, 5.7]})");
  EXPECT_HAS(m, "field 'input_ids[1]' has value 5.7; expected an integer in [0, 2147483647]");
  m = errorOf(R"({"input_ids": [2147483648]})");
  EXPECT_HAS(m, "field 'input_ids[0]' has value 2147483648");
  m = errorOf(R"({"input_ids": [-1]})");
  EXPECT_HAS(m, "field 'input_ids[0]' has value -1");
  m = errorOf(R"({"input_ids": []})");
  EXPECT_HAS(m, "field 'input_ids' has value []; expected a non-empty array of integers");
  m = errorOf(R"({"input_ids": "1 2 3"})");
  EXPECT_HAS(m, "field 'input_ids' has value \"1 2 3\"");
  m = errorOf(R"({"prompt": "a", "seed": -1})");  // was 2^64 - 1
  EXPECT_HAS(m, "field 'seed' has value -1; expected an integer in [0, 18446744073709551615]");
  m = errorOf(R"({"prompt": "a", "seed": 18446744073709551616})");
  EXPECT_HAS(m, "field 'seed'");
  m = errorOf(R"({"prompt": "a", "n": 0})");
  EXPECT_HAS(m, "field 'n' has value 0; expected an integer in [1, 128]");
  m = errorOf(R"({"prompt": "a", "logprobs": 21})");
  EXPECT_HAS(m, "field 'logprobs' has value 21; expected an integer in [0, 20]");
  m = errorOf(R"({"prompt": "a", "logprobs": true})");
  EXPECT_HAS(m, "field 'logprobs' has value true");
  m = errorOf(R"({"prompt": "a", "stop_token_ids": [1, -2]})");
  EXPECT_HAS(m, "field 'stop_token_ids[1]' has value -2");
  m = errorOf(R"({"prompt": "a", "top_k": -2})");
  EXPECT_HAS(m, "field 'top_k' has value -2");
}

TEST(RequestJson, NumbersAreFiniteAndInRange) {
  std::string m = errorOf(R"({"prompt": "a", "temperature": -0.5})");
  EXPECT_HAS(m, "field 'temperature' has value -0.5; expected a finite number >= 0");
  m = errorOf(R"({"prompt": "a", "temperature": 1e39})");  // finite as a double, not as a float
  EXPECT_HAS(m, "field 'temperature' has value 1e+39");
  m = errorOf(R"({"prompt": "a", "temperature": "hot"})");
  EXPECT_HAS(m, "field 'temperature' has value \"hot\"");
  m = errorOf(R"({"prompt": "a", "top_p": 0})");
  EXPECT_HAS(m, "field 'top_p' has value 0; expected a number in (0, 1]");
  m = errorOf(R"({"prompt": "a", "top_p": 1.5})");
  EXPECT_HAS(m, "field 'top_p' has value 1.5");
  m = errorOf(R"({"prompt": "a", "min_p": -0.1})");
  EXPECT_HAS(m, "field 'min_p' has value -0.1; expected a number in [0, 1]");
  m = errorOf(R"({"prompt": "a", "repetition_penalty": 0})");
  EXPECT_HAS(m, "field 'repetition_penalty' has value 0; expected a finite number > 0");
  m = errorOf(R"({"prompt": "a", "presence_penalty": 2.5})");
  EXPECT_HAS(m, "field 'presence_penalty' has value 2.5; expected a number in [-2, 2]");
  m = errorOf(R"({"prompt": "a", "frequency_penalty": -3})");
  EXPECT_HAS(m, "field 'frequency_penalty' has value -3");
  auto ok = parse(R"({"prompt": "a", "temperature": 1, "top_p": 1, "min_p": 0})");
  ASSERT_TRUE(ok.isOk()) << ok.status().toString();
  EXPECT_FLOAT_EQ(ok->sampling_params.temperature, 1.0f);
}

TEST(RequestJson, BooleansStringsAndNullsAreExact) {
  std::string m = errorOf(R"({"prompt": "a", "ignore_eos": 1})");
  EXPECT_HAS(m, "field 'ignore_eos' has value 1; expected true or false");
  m = errorOf(R"({"prompt": "a", "ignore_eos": "true"})");
  EXPECT_HAS(m, "field 'ignore_eos' has value \"true\"");
  m = errorOf(R"({"prompt": null})");  // generated from BOS before
  EXPECT_HAS(m, "field 'prompt' has value null; expected a string");
  m = errorOf(R"({"prompt": ["a"]})");
  EXPECT_HAS(m, "field 'prompt' has value [\"a\"]; expected a string");
  m = errorOf(R"({"prompt": "a", "stop": ["a", ""]})");
  EXPECT_HAS(m, "field 'stop[1]' has value \"\"; expected a non-empty string");
  m = errorOf(R"({"prompt": "a", "stop": [1]})");
  EXPECT_HAS(m, "field 'stop[0]' has value 1");
  m = errorOf(R"({"prompt": "a", "stop": ""})");
  EXPECT_HAS(m, "field 'stop' has value \"\"");
  // null is a wrong type for every field: leave a field out for its default.
  for (const char* field :
       {"max_tokens", "min_tokens", "temperature", "top_k", "top_p", "min_p", "repetition_penalty",
        "presence_penalty", "frequency_penalty", "seed", "ignore_eos", "stop", "stop_token_ids", "n",
        "logprobs", "kv_cache_retention_config"}) {
    json j = {{"prompt", "a"}, {field, nullptr}};
    m = errorOf(j.dump());
    EXPECT_HAS(m, std::string("field '") + field + "' has value null");
  }
  m = errorOf(R"({"input_ids": null})");
  EXPECT_HAS(m, "field 'input_ids' has value null");
}

TEST(RequestJson, PromptChoiceAndShape) {
  EXPECT_HAS(errorOf(R"({"max_tokens": 3})"), "exactly one of 'prompt' or 'input_ids' is required");
  EXPECT_HAS(errorOf(R"({"prompt": "a", "input_ids": [1]})"), "exactly one of 'prompt' or 'input_ids'");
  // Not a request object at all: ParseError, which the batch tells apart from a bad field.
  EXPECT_HAS(errorOf(R"([{"prompt": "a"}])", StatusCode::kParseError), "expected a JSON object");
  EXPECT_HAS(errorOf(R"("prompt")", StatusCode::kParseError), "expected a JSON object");
  EXPECT_HAS(errorOf(R"({"prompt": )", StatusCode::kParseError), "invalid JSON");
  EXPECT_HAS(errorOf(R"({"prompt": "a", "max_tokens": 1, "max_tokens": 100})", StatusCode::kParseError),
             "duplicate key 'max_tokens'");
  EXPECT_HAS(
      errorOf(
          R"({"prompt": "a", "kv_cache_retention_config": {"decode_duration_ms": 5, "decode_duration_ms": 6}})",
          StatusCode::kParseError),
      "duplicate key 'kv_cache_retention_config.decode_duration_ms'");
  // A parser message quoting a key with a newline stays on one line (errorOf checks).
  EXPECT_HAS(errorOf("{\"a\\nb\": 1, \"a\\nb\": 2}", StatusCode::kParseError), "duplicate key 'a\\");
  // Deep nesting stops at the limit, without recursion.
  const std::string deep = "{\"prompt\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_HAS(errorOf(deep, StatusCode::kParseError), "nesting deeper than 16 levels");
  // Long values are cut short in messages.
  const std::string long_text = std::string(100000, 'x');
  const std::string m =
      errorOf(R"({"prompt": ")" + long_text + R"(", "max_tokens": ")" + long_text + R"("})");
  EXPECT_LT(m.size(), 400u) << m.size();
}

TEST(RequestJson, ReadsAnAlreadyParsedValue) {
  // Values built in code store non-negative integers as signed: still accepted.
  json j = {{"input_ids", {1, 2}}, {"max_tokens", 4}, {"seed", 9}};
  auto r = readJsonRequest(j, {}, "server");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->sampling_params.max_tokens, 4);
  EXPECT_EQ(r->sampling_params.seed, std::optional<uint64_t>(9));
  auto bad = readJsonRequest(json{{"input_ids", {1}}, {"seed", -3}}, {}, "server");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(),
            "server: field 'seed' has value -3; expected an integer in [0, 18446744073709551615]");
}

// Item 13: a bad line aborted the whole batch; now it is that request's error.
TEST(JsonLinesRequests, BadLinesAreTheirOwnErrors) {
  const std::string text =
      "{\"prompt\": \"a\", \"max_tokens\": 2}\r\n"
      "\n"
      "   \t\n"
      "{\"prompt\": \"b\", \"max_tokens\": 3.9}\n"
      "{\"prompt\": \n"
      "[1, 2]\n"
      "{\"input_ids\": [5]}";  // no final newline
  auto r = parseJsonLinesRequests(text, {}, "b.jsonl");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  ASSERT_EQ(r->size(), 5u);  // blank lines are not requests
  const auto& l = *r;
  EXPECT_EQ(l[0].line, 1);
  ASSERT_TRUE(l[0].request.has_value());
  EXPECT_EQ(l[0].request->sampling_params.max_tokens, 2);
  EXPECT_EQ(l[1].line, 4);
  EXPECT_FALSE(l[1].request.has_value());
  EXPECT_EQ(l[1].error.message(),
            "b.jsonl:4: field 'max_tokens' has value 3.9; expected an integer in [1, 2147483647]");
  EXPECT_EQ(l[2].line, 5);
  EXPECT_EQ(l[2].error.code(), StatusCode::kParseError);
  EXPECT_HAS(l[2].error.message(), "b.jsonl:5: invalid JSON");
  EXPECT_EQ(l[3].line, 6);
  EXPECT_HAS(l[3].error.message(), "b.jsonl:6: expected a JSON object");
  EXPECT_EQ(l[4].line, 7);
  ASSERT_TRUE(l[4].request.has_value());
  EXPECT_EQ(l[4].request->prompt.token_ids, std::vector<TokenId>{5});
}

TEST(JsonLinesRequests, WholeFileErrors) {
  auto empty = parseJsonLinesRequests(" \n\n\t\r\n", {}, "e.jsonl");
  ASSERT_FALSE(empty.isOk());
  EXPECT_EQ(empty.status().message(), "e.jsonl: no requests; expected one JSON object per line");
  EXPECT_FALSE(parseJsonLinesRequests("", {}, "e.jsonl").isOk());
  // A pretty-printed JSON document: no line is an object on its own.
  auto pretty = parseJsonLinesRequests("{\n  \"prompt\": \"a\"\n}\n", {}, "p.json");
  ASSERT_FALSE(pretty.isOk());
  EXPECT_HAS(pretty.status().message(),
             "p.json: not JSON lines: no line is a JSON object (one request per line); "
             "p.json:1: invalid JSON");
  auto binary = parseJsonLinesRequests(std::string("{\"prompt\": \"a\"}\n\0\0\0", 20), {}, "z.bin");
  ASSERT_FALSE(binary.isOk());
  EXPECT_EQ(binary.status().message(), "z.bin: NUL byte at offset 16; expected JSON lines (UTF-8 text)");
  // Objects with bad fields are still JSON lines: each is an error row, not a whole-run error.
  auto bad = parseJsonLinesRequests("{\"bogus\": 1}\n", {}, "x.jsonl");
  ASSERT_TRUE(bad.isOk());
  EXPECT_HAS((*bad)[0].error.message(), "x.jsonl:1: unknown field 'bogus'");
}

TEST(JsonLinesRequests, ManyObjectsParseInLinearTime) {
  // nlohmann's callback parser rescanned the enclosing array after every {}: minutes for this.
  std::string many = "{\"prompt\": \"a\", \"stop\": [";
  for (int i = 0; i < 300000; ++i) many += i ? ",{}" : "{}";
  many += "]}";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_HAS(errorOf(many), "field 'stop[0]' has value {}; expected a non-empty string");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(JsonLinesRequests, ParseErrorsAreBounded) {
  // nlohmann quotes the whole token it stopped in: a megabyte of it here.
  const std::string huge = "{\"prompt\": \"" + std::string(1 << 20, 'x');
  auto r = parse(huge);
  ASSERT_FALSE(r.isOk());
  EXPECT_LE(r.status().message().size(), kMaxRequestErrorChars + 3);
  EXPECT_HAS(r.status().message(), "req.jsonl:7: invalid JSON");
  const std::string digits = "{\"max_tokens\": 1" + std::string(1 << 20, '2') + "x}";
  auto d = parse(digits);
  ASSERT_FALSE(d.isOk());
  EXPECT_LE(d.status().message().size(), kMaxRequestErrorChars + 3);
}

TEST(JsonFieldReader, IntegerBoundsOfEveryWidth) {
  json j = json::parse(R"({"a": -9223372036854775808, "b": 9223372036854775807, "c": 18446744073709551615,
                           "d": 255, "e": 256, "f": -1, "g": 2.0})");
  JsonFieldReader r(j, "t");
  int64_t a = 0, b = 0;
  ASSERT_TRUE(r.readInt("a", a).isOk());
  ASSERT_TRUE(r.readInt("b", b).isOk());
  EXPECT_EQ(a, INT64_MIN);
  EXPECT_EQ(b, INT64_MAX);
  int64_t c = 0;
  EXPECT_FALSE(r.readInt("c", c).isOk());  // beyond int64
  uint64_t cu = 0;
  ASSERT_TRUE(r.readInt("c", cu).isOk());
  EXPECT_EQ(cu, UINT64_MAX);
  uint8_t d = 0, e = 7;
  ASSERT_TRUE(r.readInt("d", d).isOk());
  EXPECT_EQ(d, 255);
  EXPECT_FALSE(r.readInt("e", e).isOk());
  EXPECT_EQ(e, 7);  // unchanged on error
  uint32_t f = 3;
  EXPECT_FALSE(r.readInt("f", f).isOk());
  int g = 1;
  Status s = r.readInt("g", g);
  EXPECT_EQ(s.message(), "t: field 'g' has value 2.0; expected an integer in [-2147483648, 2147483647]");
  int absent = 42;
  EXPECT_TRUE(r.readInt("zzz", absent).isOk());
  EXPECT_EQ(absent, 42);
  JsonFieldReader nested(j, "t", "outer[2]");
  EXPECT_EQ(nested.fieldPath("x"), "outer[2].x");
  EXPECT_FALSE(nested.checkKeys({"a", "b"}).isOk());
}

}  // namespace
}  // namespace llmrt

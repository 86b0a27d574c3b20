// The server end to end on the bundled model (CPU): started in process on an ephemeral loopback
// port, spoken to over real sockets. Completions and chat against the offline LLM API's output,
// streaming, errors, auth, limits, disconnects, metrics, KV events and retention.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "http_client.h"
#include "llmrt/llm.h"
#include "server.h"
#include "test_models.h"

namespace llmrt::serve {
namespace {

using nlohmann::json;
using llmrt::testing::connectLoopback;
using llmrt::testing::httpRequest;
using llmrt::testing::HttpReply;
using llmrt::testing::readAll;
using llmrt::testing::readSome;
using llmrt::testing::sendAll;
using llmrt::testing::sseData;

const char* kChatMl =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

EngineConfig engineConfig() {
  EngineConfig c;
  c.model = testmodels::bundledDir();
  c.backend = BackendKind::kCpu;
  c.num_threads = 2;
  c.kv_cache_config.enable_block_reuse = true;
  c.kv_cache_config.event_buffer_max_size = 10000;
  c.kv_cache_config.tokens_per_block = 16;
  return c;
}

std::string tmpPath(const std::string& name) {
  const char* d = std::getenv("LLMRT_TEST_TMP");
  std::string dir = d ? d : "/tmp";
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

class ServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::ofstream(tmpPath("chatml.jinja")) << kChatMl;
    ServeOptions o;
    o.port = 0;
    o.chat_template_file = tmpPath("chatml.jinja");
    o.served_model_name = "tiny";
    o.http.max_body_bytes = 1 << 20;
    o.http.header_timeout = std::chrono::milliseconds(1500);
    auto s = Server::start(engineConfig(), o);
    ASSERT_TRUE(s.isOk()) << s.status().toString();
    server_ = s->release();
    ASSERT_TRUE(server_->waitReady().isOk());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static uint16_t port() { return server_->port(); }
  static HttpReply post(const std::string& path, const json& body) { return httpRequest(port(), "POST", path, body.dump()); }
  static json metricsValue(const std::string& name) {
    HttpReply m = httpRequest(port(), "GET", "/metrics");
    size_t p = m.body.find("\n" + name);
    if (p == std::string::npos) return json();
    size_t sp = m.body.find(' ', p + 1);
    size_t eol = m.body.find('\n', sp);
    return std::stod(m.body.substr(sp + 1, eol - sp - 1));
  }
  // Waits until no request runs and no KV block is used.
  static bool waitIdle() {
    for (int i = 0; i < 400; ++i) {
      json running = metricsValue("llmrt:num_requests_running{");
      json usage = metricsValue("llmrt:kv_cache_usage_perc{");
      if (running.is_number() && running.get<double>() == 0 && usage.is_number() && usage.get<double>() == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return false;
  }
  static Server* server_;
};
Server* ServeTest::server_ = nullptr;

// The offline API's greedy text for a prompt (the reference for the server's answers).
std::string offlineGreedy(const std::string& prompt, int max_tokens, bool add_special = true) {
  static std::unique_ptr<LLM> llm = [] {
    auto l = LLM::create(engineConfig());
    EXPECT_TRUE(l.isOk());
    return std::move(*l);
  }();
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  Prompt pr = Prompt::fromText(prompt);
  if (!add_special) pr = Prompt::fromIds(*llm->tokenizer()->encode(prompt, false));
  auto outs = llm->generate({pr}, {p});
  EXPECT_TRUE(outs.isOk());
  return (*outs)[0].outputs[0].text;
}

TEST_F(ServeTest, HealthModelsVersion) {
  EXPECT_EQ(httpRequest(port(), "GET", "/health").status, 200);
  HttpReply m = httpRequest(port(), "GET", "/v1/models");
  ASSERT_EQ(m.status, 200);
  json j = json::parse(m.body);
  EXPECT_EQ(j["data"][0]["id"], "tiny");
  EXPECT_EQ(j["data"][0]["max_model_len"], 512);
  HttpReply v = httpRequest(port(), "GET", "/version");
  ASSERT_EQ(v.status, 200);
  EXPECT_TRUE(json::parse(v.body)["version"].is_string());
}

TEST_F(ServeTest, CompletionEqualsOfflineGreedy) {
  HttpReply r = post("/v1/completions", {{"model", "tiny"}, {"prompt", "Once upon a time"}, {"max_tokens", 12},
                                         {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], offlineGreedy("Once upon a time", 12));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 3);
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"].get<int>() + 12);
}

TEST_F(ServeTest, PromptListsTokenIdsAndN) {
  HttpReply r = post("/v1/completions", {{"prompt", {"The cat", "A dog"}}, {"max_tokens", 5}, {"n", 2}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  ASSERT_EQ(j["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(j["choices"][i]["index"], i);
  EXPECT_EQ(j["choices"][0]["text"], offlineGreedy("The cat", 5));
  EXPECT_EQ(j["choices"][1]["text"], j["choices"][0]["text"]);  // greedy: both samples agree
  EXPECT_EQ(j["choices"][2]["text"], offlineGreedy("A dog", 5));
  // Token ids, and a list of token-id lists.
  HttpReply t = post("/tokenize", {{"prompt", "The cat"}});
  ASSERT_EQ(t.status, 200);
  json ids = json::parse(t.body)["tokens"];
  HttpReply r2 = post("/v1/completions", {{"prompt", ids}, {"max_tokens", 5}, {"temperature", 0}});
  ASSERT_EQ(r2.status, 200);
  EXPECT_EQ(json::parse(r2.body)["choices"][0]["text"], j["choices"][0]["text"]);
  HttpReply r3 = post("/v1/completions", {{"prompt", {ids, ids}}, {"max_tokens", 5}, {"temperature", 0}});
  ASSERT_EQ(r3.status, 200);
  EXPECT_EQ(json::parse(r3.body)["choices"].size(), 2u);
  HttpReply d = post("/detokenize", {{"tokens", ids}});
  ASSERT_EQ(d.status, 200);
  EXPECT_EQ(json::parse(d.body)["prompt"], "<|begin_of_text|>The cat");
}

TEST_F(ServeTest, StreamingChunksAddUpToTheCompletion) {
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 10}, {"temperature", 0}, {"stream", true},
                     {"stream_options", {{"include_usage", true}}}};
  HttpReply r = post("/v1/completions", body);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  auto events = sseData(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  json finish;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    json c = json::parse(events[i]);
    EXPECT_EQ(c["object"], "text_completion");
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  json usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 10);
  EXPECT_EQ(text, offlineGreedy("Once upon a time", 10));
  EXPECT_EQ(finish, "length");
}

TEST_F(ServeTest, ChatRendersTheTemplateAndStreams) {
  const json messages = {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}};
  HttpReply r = post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  const std::string rendered =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(j["choices"][0]["message"]["content"], offlineGreedy(rendered, 8, /*add_special=*/false));
  // /tokenize renders the same prompt.
  HttpReply t = post("/tokenize", {{"messages", messages}});
  ASSERT_EQ(t.status, 200);
  EXPECT_EQ(json::parse(t.body)["count"], j["usage"]["prompt_tokens"]);
  // Streamed: a role chunk first, then content deltas, then [DONE].
  HttpReply s = post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}, {"stream", true}});
  auto ev = sseData(s.body);
  ASSERT_GE(ev.size(), 3u);
  json first = json::parse(ev[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 1; i + 1 < ev.size(); ++i) {
    json d = json::parse(ev[i])["choices"][0]["delta"];
    if (d.contains("content")) text += d["content"].get<std::string>();
  }
  EXPECT_EQ(text, j["choices"][0]["message"]["content"]);
  EXPECT_EQ(ev.back(), "[DONE]");
}

TEST_F(ServeTest, LogprobsInBothFormats) {
  HttpReply r = post("/v1/completions", {{"prompt", "The cat"}, {"max_tokens", 3}, {"temperature", 0}, {"logprobs", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  json lp = json::parse(r.body)["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 3u);
  ASSERT_EQ(lp["token_logprobs"].size(), 3u);
  EXPECT_LE(lp["token_logprobs"][0].get<double>(), 0.0);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(lp["text_offset"][0], 0);
  HttpReply c = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2},
                                              {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 3}});
  ASSERT_EQ(c.status, 200) << c.body;
  json content = json::parse(c.body)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["top_logprobs"].size(), 3u);
  EXPECT_TRUE(content[0]["bytes"].is_array());
}

TEST_F(ServeTest, LogitBiasForcesAndBans) {
  HttpReply r = post("/v1/completions", {{"prompt", "The cat"}, {"max_tokens", 4}, {"temperature", 0},
                                         {"logit_bias", {{"300", 100}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  HttpReply d = post("/detokenize", {{"tokens", {300, 300, 300, 300}}});
  EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], json::parse(d.body)["prompt"]);
  // Banning the greedy answer's first token changes the answer.
  HttpReply plain = post("/v1/completions", {{"prompt", "The cat"}, {"max_tokens", 1}, {"temperature", 0}, {"logprobs", 0}});
  const std::string first = json::parse(plain.body)["choices"][0]["text"];
  HttpReply ids = post("/tokenize", {{"prompt", first}, {"add_special_tokens", false}});
  const int banned = json::parse(ids.body)["tokens"][0];
  HttpReply b = post("/v1/completions", {{"prompt", "The cat"}, {"max_tokens", 1}, {"temperature", 0},
                                         {"logit_bias", {{std::to_string(banned), -100}}}});
  ASSERT_EQ(b.status, 200);
  EXPECT_NE(json::parse(b.body)["choices"][0]["text"], first);
  for (const json& bad : {json{{"abc", 1}}, json{{"5", 101}}, json{{"5", "x"}}, json{{"99999999", 1}}}) {
    HttpReply e = post("/v1/completions", {{"prompt", "x"}, {"logit_bias", bad}});
    EXPECT_EQ(e.status, 400) << bad.dump();
    EXPECT_EQ(json::parse(e.body)["error"]["param"].get<std::string>().rfind("logit_bias", 0), 0u) << e.body;
  }
}

TEST_F(ServeTest, BadRequestsGetOpenAiErrors) {
  auto expectError = [](const HttpReply& r, int status, const std::string& param, const std::string& words) {
    ASSERT_EQ(r.status, status) << r.body;
    json e = json::parse(r.body)["error"];
    EXPECT_EQ(e["code"], status);
    EXPECT_TRUE(e["type"].is_string());
    if (!param.empty()) EXPECT_EQ(e["param"], param) << e.dump();
    EXPECT_NE(e["message"].get<std::string>().find(words), std::string::npos) << e.dump();
  };
  expectError(httpRequest(port(), "POST", "/v1/completions", "{not json"), 400, "", "request body");
  expectError(httpRequest(port(), "POST", "/v1/completions", "[1,2]"), 400, "", "JSON object");
  expectError(post("/v1/completions", {{"prompt", "x"}, {"top_p", 1.5}}), 400, "top_p", "1.5");
  expectError(post("/v1/completions", {{"prompt", "x"}, {"max_tokens", "ten"}}), 400, "max_tokens", "integer");
  expectError(post("/v1/completions", {{"max_tokens", 3}}), 400, "prompt", "required");
  expectError(post("/v1/completions", {{"prompt", "x"}, {"model", "gpt-4"}}), 404, "model", "does not exist");
  expectError(post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 600}}), 400, "max_tokens", "maximum context length is 512");
  expectError(post("/v1/completions", {{"prompt", json::array({5, 999999})}}), 400, "prompt", "token id");
  std::string long_prompt;
  for (int i = 0; i < 700; ++i) long_prompt += " cat";
  expectError(post("/v1/completions", {{"prompt", long_prompt}}), 400, "prompt", "max_input_len 511");
  expectError(post("/v1/completions", {{"prompt", "x"}, {"priority", 5}}), 400, "priority", "priority");
  expectError(post("/v1/chat/completions", {{"messages", "hi"}}), 400, "messages", "list");
  expectError(post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}), 400,
              "messages[0].content", "text parts");
  expectError(httpRequest(port(), "GET", "/v1/completions"), 405, "", "POST");
  expectError(httpRequest(port(), "GET", "/nope"), 404, "", "no route");
  // Deeply nested JSON is a 400, not a crash.
  std::string deep(100000, '[');
  expectError(httpRequest(port(), "POST", "/v1/completions", "{\"prompt\":" + deep), 400, "", "");
  // Invalid UTF-8 in a string.
  expectError(httpRequest(port(), "POST", "/v1/completions", "{\"prompt\":\"\xff\xfe\"}"), 400, "", "");
  // Nulls read as "not given".
  EXPECT_EQ(post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"stop", nullptr}, {"logprobs", nullptr}}).status, 200);
  EXPECT_EQ(httpRequest(port(), "GET", "/health").status, 200);  // still serving
}

TEST_F(ServeTest, MalformedHttpAndLimits) {
  auto raw = [](const std::string& bytes) {
    int fd = connectLoopback(port());
    sendAll(fd, bytes);
    std::string out = readAll(fd, 5000);
    ::close(fd);
    return llmrt::testing::parseReply(out);
  };
  EXPECT_EQ(raw("GARBAGE\r\n\r\n").status, 400);
  EXPECT_EQ(raw("GET / HTTP/9.9\r\n\r\n").status, 400);
  EXPECT_EQ(raw("GET /health HTTP/1.1\r\nX-Big: " + std::string(100000, 'a') + "\r\n\r\n").status, 431);
  // A body over --max-request-bytes (1 MiB here): 413 from the Content-Length alone.
  EXPECT_EQ(raw("POST /v1/completions HTTP/1.1\r\nContent-Length: 104857600\r\n\r\n{").status, 413);
  // Chunked abuse: a chunk size that is not hex, and chunks past the limit.
  EXPECT_EQ(raw("POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").status, 400);
  std::string big = "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 20; ++i) big += "10000\r\n" + std::string(0x10000, 'a') + "\r\n";
  EXPECT_EQ(raw(big).status, 413);
  // A client that sends half a header and stalls is cut off by the header timeout (1.5 s here).
  int fd = connectLoopback(port());
  sendAll(fd, "GET /health HTTP/1.1\r\nHost: x\r\n");
  auto t0 = std::chrono::steady_clock::now();
  bool eof = false;
  while (!eof && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) readSome(fd, 200, &eof);
  ::close(fd);
  EXPECT_TRUE(eof);
  EXPECT_EQ(httpRequest(port(), "GET", "/health").status, 200);
}

TEST_F(ServeTest, KeepAliveAndPipelining) {
  int fd = connectLoopback(port());
  const std::string one = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  sendAll(fd, one + one + "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string all = readAll(fd, 5000);
  ::close(fd);
  size_t n = 0;
  for (size_t p = 0; (p = all.find("HTTP/1.1 200", p)) != std::string::npos; ++p) ++n;
  EXPECT_EQ(n, 3u);
}

TEST_F(ServeTest, DisconnectCancelsAndFreesTheCache) {
  ASSERT_TRUE(waitIdle());
  const double aborted = metricsValue("llmrt:request_success_total{model_name=\"tiny\",finished_reason=\"abort\"}").get<double>();
  int fd = connectLoopback(port());
  const std::string body = json{{"prompt", "Once upon a time"}, {"max_tokens", 400}, {"stream", true}, {"ignore_eos", true}}.dump();
  sendAll(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body);
  std::string got;
  for (int i = 0; i < 100 && got.find("\"text\"") == std::string::npos; ++i) got += readSome(fd, 100);
  ASSERT_NE(got.find("\"text\""), std::string::npos);
  ::close(fd);  // gone mid-stream
  ASSERT_TRUE(waitIdle());
  EXPECT_EQ(metricsValue("llmrt:request_success_total{model_name=\"tiny\",finished_reason=\"abort\"}").get<double>(),
            aborted + 1);
}

TEST_F(ServeTest, RetentionAndCachedTokens) {
  std::string prompt;
  for (int i = 0; i < 40; ++i) prompt += " the cat sat";
  const json body = {{"prompt", prompt},
                     {"max_tokens", 2},
                     {"kv_cache_retention_config",
                      {{"token_range_retention_configs", {{{"token_start", 0}, {"priority", 90}}}},
                       {"decode_retention_priority", 10}}}};
  HttpReply a = post("/v1/completions", body);
  ASSERT_EQ(a.status, 200) << a.body;
  HttpReply b = post("/v1/completions", body);
  ASSERT_EQ(b.status, 200);
  const int prompt_tokens = json::parse(b.body)["usage"]["prompt_tokens"];
  const int cached = json::parse(b.body)["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GE(cached, prompt_tokens - 16);  // every full block of the prompt
  // The KV events name the blocks stored with the requested priority.
  HttpReply ev = httpRequest(port(), "GET", "/kv_cache_events");
  ASSERT_EQ(ev.status, 200);
  json events = json::parse(ev.body);
  bool stored90 = false;
  for (const json& e : events)
    if (e["data"]["type"] == "stored")
      for (const json& blk : e["data"]["blocks"]) stored90 |= blk["priority"] == 90;
  bool updated90 = false;
  for (const json& e : events)
    if (e["data"]["type"] == "updated" && e["data"]["priority"].is_object()) updated90 |= e["data"]["priority"]["new_value"] == 90;
  EXPECT_TRUE(stored90 || updated90) << ev.body.substr(0, 2000);
  // Drained: a second read has none of them.
  EXPECT_LT(json::parse(httpRequest(port(), "GET", "/kv_cache_events").body).size(), events.size());
  // A bad retention config is a 400 naming it.
  HttpReply bad = post("/v1/completions", {{"prompt", "x"}, {"kv_cache_retention_config", {{"decode_retention_priority", 500}}}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("decode_retention_priority"), std::string::npos);
}

TEST_F(ServeTest, MetricsExposition) {
  post("/v1/completions", {{"prompt", "The cat"}, {"max_tokens", 3}});
  HttpReply m = httpRequest(port(), "GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  for (const char* name : {"llmrt:num_requests_running", "llmrt:num_requests_waiting", "llmrt:kv_cache_usage_perc",
                           "llmrt:prompt_tokens_total", "llmrt:generation_tokens_total", "llmrt:prefix_cache_hits_total",
                           "llmrt:time_to_first_token_seconds_bucket", "llmrt:e2e_request_latency_seconds_count",
                           "llmrt:time_per_output_token_seconds_sum", "llmrt:request_queue_time_seconds_bucket",
                           "llmrt:iteration_tokens_total_bucket", "llmrt:kv_cache_offloaded_blocks_total",
                           "llmrt:request_success_total"})
    EXPECT_NE(m.body.find(name), std::string::npos) << name;
  EXPECT_GE(metricsValue("llmrt:generation_tokens_total{").get<double>(), 3.0);
}

// Servers of their own: auth, a full queue, draining.
TEST(ServeOptionsTest, ApiKeyQueueLimitAndDrain) {
  ServeOptions o;
  o.port = 0;
  o.api_key = "s3cret";
  o.max_queued_requests = 0;  // every generation request finds the queue full
  auto s = Server::start(engineConfig(), o);
  ASSERT_TRUE(s.isOk());
  ASSERT_TRUE((*s)->waitReady().isOk());
  const uint16_t p = (*s)->port();
  EXPECT_EQ(httpRequest(p, "GET", "/health").status, 200);  // no key needed
  EXPECT_EQ(httpRequest(p, "GET", "/v1/models").status, 401);
  EXPECT_EQ(httpRequest(p, "GET", "/v1/models", "", {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(httpRequest(p, "GET", "/v1/models", "", {{"Authorization", "Bearer s3cret"}}).status, 200);
  HttpReply q = httpRequest(p, "POST", "/v1/completions", R"({"prompt":"x"})", {{"Authorization", "Bearer s3cret"}});
  EXPECT_EQ(q.status, 429);
  EXPECT_EQ(q.headers["retry-after"], "1");

  // Draining: a long request in flight finishes; /health turns 503 meanwhile.
  ServeOptions o2;
  o2.port = 0;
  o2.shutdown_timeout_s = 60;
  auto s2 = Server::start(engineConfig(), o2);
  ASSERT_TRUE(s2.isOk());
  ASSERT_TRUE((*s2)->waitReady().isOk());
  const uint16_t p2 = (*s2)->port();
  HttpReply long_reply;
  std::thread client([&] {
    long_reply = httpRequest(p2, "POST", "/v1/completions",
                             json{{"prompt", "Once"}, {"max_tokens", 60}, {"ignore_eos", true}}.dump());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  (*s2)->drainAndStop();
  client.join();
  ASSERT_EQ(long_reply.status, 200) << long_reply.body;
  EXPECT_EQ(json::parse(long_reply.body)["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(json::parse(long_reply.body)["usage"]["completion_tokens"], 60);
}

TEST(ServeOptionsTest, ShutdownTimeoutCancelsWhatIsLeft) {
  ServeOptions o;
  o.port = 0;
  o.shutdown_timeout_s = 0.2;
  auto s = Server::start(engineConfig(), o);
  ASSERT_TRUE(s.isOk());
  ASSERT_TRUE((*s)->waitReady().isOk());
  const uint16_t p = (*s)->port();
  HttpReply reply;
  std::thread client([&] {
    reply = httpRequest(p, "POST", "/v1/completions",
                        json{{"prompt", "Once"}, {"max_tokens", 500}, {"ignore_eos", true}}.dump());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto t0 = std::chrono::steady_clock::now();
  (*s)->drainAndStop();
  client.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(json::parse(reply.body)["choices"][0]["finish_reason"], "abort");
}

// A streaming client that never reads: its unsent answer hits the write deadline (1 s here), the
// connection is closed and its request cancelled; the engine and other clients carry on.
TEST(ServeOptionsTest, ClientThatNeverReadsIsCutOff) {
  ServeOptions o;
  o.port = 0;
  o.http.write_timeout = std::chrono::milliseconds(1000);
  o.http.max_pending_write_bytes = 256 * 1024;
  o.http.socket_send_buffer_bytes = 8192;  // so the kernel cannot absorb the whole answer
  auto s = Server::start(engineConfig(), o);
  ASSERT_TRUE(s.isOk());
  ASSERT_TRUE((*s)->waitReady().isOk());
  const uint16_t p = (*s)->port();
  auto aborted = [&] {
    HttpReply m = httpRequest(p, "GET", "/metrics");
    const std::string key = "finished_reason=\"abort\"} ";
    size_t at = m.body.find(key);
    return at == std::string::npos ? -1.0 : std::stod(m.body.substr(at + key.size()));
  };
  const double before = aborted();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(p);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const std::string body =
      json{{"prompt", "Once"}, {"max_tokens", 500}, {"ignore_eos", true}, {"stream", true}, {"logprobs", 20}}.dump();
  sendAll(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body);
  double after = before;
  for (int i = 0; i < 300 && after <= before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    after = aborted();
  }
  EXPECT_EQ(after, before + 1);
  EXPECT_EQ(httpRequest(p, "GET", "/health").status, 200);
  ::close(fd);
}

// Listening comes before loading: a model that fails to load leaves /health at 503 and waitReady
// says why.
TEST(ServeOptionsTest, HealthIs503UntilTheModelLoads) {
  EngineConfig c = engineConfig();
  c.model = tmpPath("no-such-model");
  ServeOptions o;
  o.port = 0;
  auto s = Server::start(c, o);
  ASSERT_TRUE(s.isOk());
  const Status st = (*s)->waitReady();
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("no-such-model"), std::string::npos) << st.toString();
  const uint16_t p = (*s)->port();
  EXPECT_EQ(httpRequest(p, "GET", "/health").status, 503);
  HttpReply m = httpRequest(p, "GET", "/v1/models");
  EXPECT_EQ(m.status, 503);
  EXPECT_EQ(m.headers["retry-after"], "1");
}

TEST(ServeOptionsTest, BindFailureIsAnError) {
  ServeOptions o;
  o.port = 0;
  auto a = Server::start(engineConfig(), o);
  ASSERT_TRUE(a.isOk());
  o.port = (*a)->port();
  auto b = Server::start(engineConfig(), o);
  ASSERT_FALSE(b.isOk());
  EXPECT_NE(b.status().message().find("cannot listen"), std::string::npos);
  o.host = "not-an-ip";
  o.port = 0;
  EXPECT_FALSE(Server::start(engineConfig(), o).isOk());
}

}  // namespace
}  // namespace llmrt::serve

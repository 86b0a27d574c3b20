#include "server.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "llmrt/chat_template.h"
#include "llmrt/executor.h"
#include "llmrt/file_io.h"
#include "llmrt/request_json.h"
#include "llmrt/util.h"
#include "metrics.h"
#include "openai_api.h"

#ifndef LLMRT_VERSION
#define LLMRT_VERSION "unknown"
#endif

namespace llmrt::serve {
namespace {

using Clock = std::chrono::steady_clock;

int64_t unixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Compares without an early exit, so the time taken does not tell how much of a key was right.
bool constantTimeEquals(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

int httpStatusOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kResourceExhausted:
      return 400;
    case StatusCode::kFailedPrecondition:
      return 503;
    default:
      return 500;
  }
}

}  // namespace

struct Job;

struct Server::Impl {
  EngineConfig config;
  ServeOptions options;
  std::unique_ptr<HttpServer> http;
  std::unique_ptr<Executor> executor;  // set once loaded
  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};
  std::mutex load_mu;
  std::condition_variable load_cv;
  bool load_done = false;
  Status load_status;
  std::thread loader;
  std::thread poller;
  std::atomic<bool> stop_poller{false};

  std::optional<ChatTemplate> chat_template;
  std::string chat_template_error;
  ModelContext ctx;
  Metrics metrics;
  std::atomic<int64_t> active_jobs{0};
  std::mutex jobs_mu;
  std::condition_variable jobs_cv;

  void load();
  void handle(HttpRequest req, std::shared_ptr<Responder> out);
  void reply(const std::shared_ptr<Responder>& out, int status, const Json& body, HttpHeaders extra = {});
  void replyError(const std::shared_ptr<Responder>& out, const ApiError& e, HttpHeaders extra = {});
  void completions(const HttpRequest& req, const std::shared_ptr<Responder>& out, bool chat);
  void tokenize(const HttpRequest& req, const std::shared_ptr<Responder>& out);
  void detokenize(const HttpRequest& req, const std::shared_ptr<Responder>& out);
  void jobDone();
  std::optional<Json> parseBody(const HttpRequest& req, const std::shared_ptr<Responder>& out);
};

// One /v1 request in flight: its engine requests, what has been sent, what to send at the end.
struct Job : std::enable_shared_from_this<Job> {
  Server::Impl* srv = nullptr;
  CompletionJob spec;
  std::shared_ptr<Responder> out;
  std::string id;
  int64_t created = 0;

  std::mutex mu;
  std::vector<RequestId> ids;
  bool cancelled = false;
  bool finished = false;
  int remaining = 0;  // engine requests without their final response
  struct Choice {
    std::string text;
    std::vector<TokenId> tokens;
    Json logprobs;
    size_t text_offset = 0;
    FinishReason finish = FinishReason::kNone;
    bool first_sent = false;  // chat: role chunk; completions: echo
  };
  std::vector<Choice> choices;
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  std::optional<ApiError> error;

  Json usage() const {
    return Json{{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", prompt_tokens + completion_tokens},
                {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
  }

  Json chunk(Json choices_json) const {
    return Json{{"id", id},
                {"object", spec.chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", spec.model},
                {"choices", std::move(choices_json)}};
  }

  void sendEvent(const Json& j) { out->write("data: " + dump(j) + "\n\n"); }

  void cancel() {
    std::vector<RequestId> to_cancel;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (cancelled) return;
      cancelled = true;
      to_cancel = ids;
    }
    if (srv->executor)
      for (RequestId rid : to_cancel) srv->executor->cancelRequest(rid);
  }

  void onResponse(size_t prompt, const Response& r) {
    std::lock_guard<std::mutex> lock(mu);
    if (finished) return;
    const Tokenizer* tok = srv->ctx.tokenizer;
    if (!r.status.isOk()) {
      if (!error) error = ApiError{httpStatusOf(r.status), r.status.message(), "", ""};
    } else {
      const size_t idx = prompt * static_cast<size_t>(spec.params.n) + static_cast<size_t>(r.sequence_index);
      if (idx < choices.size()) handleSequence(prompt, idx, r, tok);
    }
    if (r.is_final) {
      if (r.stats) {
        prompt_tokens += r.stats->num_prompt_tokens;
        cached_tokens += r.stats->num_cached_tokens;
        RequestRecord rec;
        rec.finish = r.status.isOk() ? FinishReason::kStop : FinishReason::kError;
        for (size_t s = 0; s < static_cast<size_t>(spec.params.n); ++s) {
          const size_t idx = prompt * static_cast<size_t>(spec.params.n) + s;
          if (idx < choices.size() && choices[idx].finish != FinishReason::kStop && rec.finish != FinishReason::kError)
            rec.finish = choices[idx].finish;
        }
        rec.prompt_tokens = r.stats->num_prompt_tokens;
        rec.cached_tokens = r.stats->num_cached_tokens;
        rec.generated_tokens = r.stats->num_generated_tokens;
        rec.queue_s = r.stats->queue_time_s;
        rec.ttft_s = r.stats->num_generated_tokens > 0 ? r.stats->time_to_first_token_s : -1.0;
        rec.e2e_s = r.stats->total_time_s;
        srv->metrics.recordRequest(rec);
      }
      if (--remaining == 0) finish();
    }
  }

  void handleSequence(size_t prompt, size_t idx, const Response& r, const Tokenizer* tok) {
    Choice& c = choices[idx];
    completion_tokens += static_cast<int64_t>(r.new_tokens.size());
    if (r.finish_reason != FinishReason::kNone) c.finish = r.finish_reason;
    if (!spec.stream) {
      c.tokens.insert(c.tokens.end(), r.new_tokens.begin(), r.new_tokens.end());
      c.text += r.text;
      if (spec.params.logprobs && tok) {
        if (spec.chat) appendChatLogprobs(c.logprobs, *tok, r.new_tokens, r.logprobs, spec.top_logprobs);
        else appendCompletionLogprobs(c.logprobs, *tok, r.new_tokens, r.logprobs, c.text_offset);
      }
      return;
    }
    if (out->disconnected() || cancelled) return;
    Json choice = {{"index", idx}};
    std::string text = r.text;
    if (!c.first_sent) {
      c.first_sent = true;
      if (spec.chat) {
        sendEvent(chunk(Json::array(
            {{{"index", idx}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}}})));
      } else if (spec.echo) {
        text = spec.prompt_texts[prompt] + text;
      }
    }
    if (text.empty() && r.finish_reason == FinishReason::kNone && r.new_tokens.empty()) return;
    Json lp;
    if (spec.params.logprobs && tok) {
      if (spec.chat) appendChatLogprobs(lp, *tok, r.new_tokens, r.logprobs, spec.top_logprobs);
      else appendCompletionLogprobs(lp, *tok, r.new_tokens, r.logprobs, c.text_offset);
    }
    if (spec.chat) {
      choice["delta"] = text.empty() && r.finish_reason != FinishReason::kNone ? Json::object() : Json{{"content", text}};
    } else {
      choice["text"] = text;
    }
    choice["logprobs"] = lp.is_null() ? Json() : lp;
    choice["finish_reason"] = finishReasonJson(r.finish_reason);
    Json ch = chunk(Json::array({std::move(choice)}));
    if (spec.continuous_usage) ch["usage"] = usage();
    sendEvent(ch);
  }

  void finish() {
    finished = true;
    const bool gone = out->disconnected();
    if (spec.stream) {
      if (!gone) {
        if (error) {
          sendEvent(errorBody(*error));
        } else if (spec.include_usage) {
          Json ch = chunk(Json::array());
          ch["usage"] = usage();
          sendEvent(ch);
        }
        out->write("data: [DONE]\n\n");
        out->end();
      }
    } else if (!gone) {
      if (error) {
        srv->replyError(out, *error);
      } else {
        Json cs = Json::array();
        for (size_t i = 0; i < choices.size(); ++i) {
          Choice& c = choices[i];
          Json choice = {{"index", i}};
          if (spec.chat) {
            choice["message"] = {{"role", "assistant"}, {"content", c.text}};
          } else {
            const size_t prompt = i / static_cast<size_t>(spec.params.n);
            choice["text"] = spec.echo ? spec.prompt_texts[prompt] + c.text : c.text;
          }
          choice["logprobs"] = c.logprobs.is_null() ? Json() : c.logprobs;
          choice["finish_reason"] = finishReasonJson(c.finish);
          cs.push_back(std::move(choice));
        }
        Json body = {{"id", id},
                     {"object", spec.chat ? "chat.completion" : "text_completion"},
                     {"created", created},
                     {"model", spec.model},
                     {"choices", std::move(cs)},
                     {"usage", usage()}};
        srv->reply(out, 200, body);
      }
    }
    srv->jobDone();
  }
};

void Server::Impl::jobDone() {
  {
    std::lock_guard<std::mutex> lock(jobs_mu);
    --active_jobs;
  }
  jobs_cv.notify_all();
}

void Server::Impl::reply(const std::shared_ptr<Responder>& out, int status, const Json& body, HttpHeaders extra) {
  metrics.recordHttp(status);
  out->send(status, "application/json", dump(body), std::move(extra));
}

void Server::Impl::replyError(const std::shared_ptr<Responder>& out, const ApiError& e, HttpHeaders extra) {
  reply(out, e.status, errorBody(e), std::move(extra));
}

std::optional<Json> Server::Impl::parseBody(const HttpRequest& req, const std::shared_ptr<Responder>& out) {
  auto parsed = parseJsonObject(req.body, "request body");
  if (!parsed.isOk()) {
    replyError(out, ApiError{400, parsed.status().message(), "", ""});
    return std::nullopt;
  }
  return std::move(*parsed);
}

void Server::Impl::load() {
  Status st;
  auto ex = Executor::create(config);
  if (!ex.isOk()) {
    st = ex.status();
  } else {
    executor = std::move(*ex);
    const EngineConfig& rc = executor->config();
    ctx.model_name = options.served_model_name.empty()
                         ? std::filesystem::path(config.model).filename().string()
                         : options.served_model_name;
    if (ctx.model_name.empty()) ctx.model_name = std::filesystem::path(config.model).parent_path().filename().string();
    ctx.tokenizer = executor->tokenizer();
    ctx.vocab_size = executor->modelConfig().vocab_size;
    ctx.max_seq_len = executor->maxSeqLen();
    ctx.max_input_len = rc.max_input_len > 0 ? rc.max_input_len : ctx.max_seq_len - 1;
    ctx.max_output_len = options.max_output_len;
    ctx.defaults = executor->defaultSamplingParams();
    // The chat template: --chat-template, else the model's own.
    std::optional<ChatTemplateSource> source;
    auto found = loadChatTemplate(config.model);
    if (found.isOk() && *found) source = std::move(**found);
    if (!found.isOk()) chat_template_error = found.status().message();
    if (!options.chat_template_file.empty()) {
      auto text = readRegularFile(options.chat_template_file, 4u << 20);
      if (!text.isOk()) {
        st = text.status();
      } else {
        ChatTemplateSource s;
        s.source = std::move(*text);
        s.origin = options.chat_template_file;
        if (source) s.special_tokens = source->special_tokens;
        source = std::move(s);
      }
    }
    if (st.isOk() && source) {
      auto t = ChatTemplate::parse(source->source, source->origin);
      if (t.isOk()) {
        chat_template = std::move(*t);
        ctx.chat_template = &*chat_template;
        ctx.special_tokens = source->special_tokens.is_object() ? source->special_tokens : Json::object();
      } else if (!options.chat_template_file.empty()) {
        st = t.status();  // the user's own template must work
      } else {
        chat_template_error = t.status().message();
        std::fprintf(stderr, "llmrt serve: warning: the model's chat template cannot be used: %s\n",
                     chat_template_error.c_str());
      }
    }
  }
  if (st.isOk()) {
    ready = true;
    poller = std::thread([this] {
      while (!stop_poller) {
        metrics.recordIterations(executor->getLatestIterationStats());
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  {
    std::lock_guard<std::mutex> lock(load_mu);
    load_done = true;
    load_status = st;
  }
  load_cv.notify_all();
}

void Server::Impl::handle(HttpRequest req, std::shared_ptr<Responder> out) {
  const std::string& p = req.path;
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  if (p == "/health") {
    if (draining) return replyError(out, ApiError{503, "the server is shutting down", "", ""});
    if (!ready) return replyError(out, ApiError{503, "the model is loading", "", ""});
    metrics.recordHttp(200);
    return out->send(200, "application/json", "{}");
  }
  if (!options.api_key.empty()) {
    const std::string auth = req.header("authorization");
    if (!constantTimeEquals(auth, "Bearer " + options.api_key))
      return replyError(out, ApiError{401, "missing or wrong API key: send 'Authorization: Bearer <key>'", "", ""},
                        {{"WWW-Authenticate", "Bearer"}});
  }
  if (p == "/version" && get) return reply(out, 200, Json{{"version", LLMRT_VERSION}});
  const bool known = p == "/v1/models" || p == "/metrics" || p == "/kv_cache_events" || p == "/tokenize" ||
                     p == "/detokenize" || p == "/v1/completions" || p == "/v1/chat/completions";
  if (!known) return replyError(out, ApiError{404, "no route " + printableText(p, 100), "", "NotFoundError"});
  if (!ready) return replyError(out, ApiError{503, "the model is loading", "", ""}, {{"Retry-After", "1"}});
  if (p == "/v1/models" && get) {
    Json model = {{"id", ctx.model_name},        {"object", "model"},
                  {"created", unixNow()},        {"owned_by", "llmrt"},
                  {"root", config.model},        {"parent", nullptr},
                  {"max_model_len", ctx.max_seq_len}};
    return reply(out, 200, Json{{"object", "list"}, {"data", Json::array({model})}});
  }
  if (p == "/metrics" && get) {
    metrics.recordHttp(200);
    return out->send(200, "text/plain; version=0.0.4; charset=utf-8", metrics.render(executor->stats(), ctx.model_name));
  }
  if (p == "/kv_cache_events" && (get || post)) {
    Json events = Json::array();
    for (const KvCacheEvent& e : executor->getKvCacheEvents(std::chrono::milliseconds(0))) events.push_back(kvCacheEventJson(e));
    return reply(out, 200, events);
  }
  if (!post) return replyError(out, ApiError{405, req.method + " is not allowed on " + p + "; use POST", "", ""});
  if (p == "/tokenize") return tokenize(req, out);
  if (p == "/detokenize") return detokenize(req, out);
  if (draining) return replyError(out, ApiError{503, "the server is shutting down", "", ""});
  completions(req, out, p == "/v1/chat/completions");
}

void Server::Impl::completions(const HttpRequest& req, const std::shared_ptr<Responder>& out, bool chat) {
  auto body = parseBody(req, out);
  if (!body) return;
  std::optional<nlohmann::ordered_json> ordered;
  if (chat && req.body.size() <= kMaxOrderedBodyBytes) {  // depth already bounded by parseBody
    auto o = nlohmann::ordered_json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (!o.is_discarded()) ordered = std::move(o);
  }
  auto parsed = readCompletionRequest(*body, ctx, chat, ordered ? &*ordered : nullptr);
  if (auto* e = std::get_if<ApiError>(&parsed)) return replyError(out, *e);
  CompletionJob& spec = std::get<CompletionJob>(parsed);
  const ExecutorStats st = executor->stats();
  if (st.num_waiting_requests + static_cast<int64_t>(spec.prompts.size()) > options.max_queued_requests)
    return replyError(out,
                      ApiError{429,
                               "the server's queue is full (" + std::to_string(st.num_waiting_requests) +
                                   " requests waiting, --max-queued-requests " +
                                   std::to_string(options.max_queued_requests) + "); retry later",
                               "", ""},
                      {{"Retry-After", "1"}});
  auto job = std::make_shared<Job>();
  job->srv = this;
  job->out = out;
  job->id = randomId(chat ? "chatcmpl-" : "cmpl-");
  job->created = unixNow();
  job->spec = std::move(spec);
  job->choices.resize(job->spec.prompts.size() * static_cast<size_t>(job->spec.params.n));
  job->remaining = static_cast<int>(job->spec.prompts.size());
  {
    std::lock_guard<std::mutex> lock(jobs_mu);
    ++active_jobs;
  }
  if (job->spec.stream) {
    metrics.recordHttp(200);
    out->startStream(200, "text/event-stream");
  }
  out->onDisconnect([w = std::weak_ptr<Job>(job)] {
    if (auto j = w.lock()) j->cancel();
  });
  for (size_t i = 0; i < job->spec.prompts.size(); ++i) {
    Request r;
    r.input_token_ids = job->spec.prompts[i];
    r.sampling_params = job->spec.params;
    r.sampling_params.max_tokens = job->spec.max_tokens[i];
    r.streaming = job->spec.stream;
    r.kv_cache_retention_config = job->spec.retention;
    r.callback = [job, i](const Response& resp) { job->onResponse(i, resp); };
    if (r.sampling_params.max_tokens == 0) {  // echo only
      Response resp;
      resp.is_final = true;
      resp.finish_reason = FinishReason::kLength;
      for (int s = 0; s < job->spec.params.n; ++s) {
        resp.sequence_index = s;
        resp.is_final = s + 1 == job->spec.params.n;
        if (resp.is_final) resp.stats = RequestStats{.num_prompt_tokens = static_cast<int32_t>(r.input_token_ids.size())};
        job->onResponse(i, resp);
      }
      continue;
    }
    auto id = executor->enqueueRequest(std::move(r));
    if (!id.isOk()) {
      Response resp;
      resp.status = failedPrecondition("the engine has stopped");
      resp.is_final = true;
      job->onResponse(i, resp);
      continue;
    }
    bool cancel_now = false;
    {
      std::lock_guard<std::mutex> lock(job->mu);
      job->ids.push_back(*id);
      cancel_now = job->cancelled;
    }
    if (cancel_now) executor->cancelRequest(*id);
  }
}

void Server::Impl::tokenize(const HttpRequest& req, const std::shared_ptr<Responder>& out) {
  auto body = parseBody(req, out);
  if (!body) return;
  if (!ctx.tokenizer) return replyError(out, ApiError{400, "this model has no tokenizer", "", ""});
  Json b = *body;
  bool add_special = !b.contains("messages");
  if (b.contains("add_special_tokens")) {
    if (!b["add_special_tokens"].is_boolean())
      return replyError(out, ApiError{400, "field 'add_special_tokens' must be true or false", "add_special_tokens", ""});
    add_special = b["add_special_tokens"].get<bool>();
  }
  std::string text;
  if (b.contains("messages")) {
    std::optional<nlohmann::ordered_json> ordered;
    if (req.body.size() <= kMaxOrderedBodyBytes) {
      auto o = nlohmann::ordered_json::parse(req.body, nullptr, false);
      if (!o.is_discarded()) ordered = std::move(o);
    }
    auto rendered = renderChat(b, ctx, true, ordered ? &*ordered : nullptr);
    if (auto* e = std::get_if<ApiError>(&rendered)) return replyError(out, *e);
    text = std::get<std::string>(rendered);
  } else if (b.contains("prompt") && b["prompt"].is_string()) {
    text = b["prompt"].get<std::string>();
  } else {
    return replyError(out, ApiError{400, "send 'prompt' (a string) or 'messages'", "prompt", ""});
  }
  auto ids = ctx.tokenizer->encode(text, add_special);
  if (!ids.isOk()) return replyError(out, ApiError{400, ids.status().message(), "prompt", ""});
  Json res = {{"count", ids->size()}, {"max_model_len", ctx.max_seq_len}, {"tokens", *ids}};
  if (b.contains("return_token_strs") && b["return_token_strs"].is_boolean() && b["return_token_strs"].get<bool>()) {
    Json strs = Json::array();
    for (TokenId t : *ids) strs.push_back(tokenText(*ctx.tokenizer, t));
    res["token_strs"] = std::move(strs);
  }
  reply(out, 200, res);
}

void Server::Impl::detokenize(const HttpRequest& req, const std::shared_ptr<Responder>& out) {
  auto body = parseBody(req, out);
  if (!body) return;
  if (!ctx.tokenizer) return replyError(out, ApiError{400, "this model has no tokenizer", "", ""});
  const Json& t = (*body).contains("tokens") ? (*body)["tokens"] : Json();
  if (!t.is_array()) return replyError(out, ApiError{400, "field 'tokens' must be a list of token ids", "tokens", ""});
  std::vector<TokenId> ids;
  for (size_t i = 0; i < t.size(); ++i) {
    if (!t[i].is_number_integer() || t[i].get<int64_t>() < 0 || t[i].get<int64_t>() >= ctx.vocab_size)
      return replyError(out, ApiError{400,
                                      "field 'tokens[" + std::to_string(i) + "]' is not a token id in [0, " +
                                          std::to_string(ctx.vocab_size) + ")",
                                      "tokens", ""});
    ids.push_back(static_cast<TokenId>(t[i].get<int64_t>()));
  }
  reply(out, 200, Json{{"prompt", ctx.tokenizer->decode(ids, false)}});
}

Result<std::unique_ptr<Server>> Server::start(EngineConfig config, ServeOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->config = std::move(config);
  impl->options = std::move(options);
  Impl* p = impl.get();
  LLMRT_ASSIGN_OR_RETURN(impl->http,
                         HttpServer::start(impl->options.host, impl->options.port, impl->options.io_threads,
                                           impl->options.http,
                                           [p](HttpRequest req, std::shared_ptr<Responder> out) {
                                             try {
                                               p->handle(std::move(req), std::move(out));
                                             } catch (const std::exception& e) {
                                               p->replyError(out, ApiError{500, std::string("internal error: ") + e.what(), "", ""});
                                             }
                                           }));
  impl->loader = std::thread([p] { p->load(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { drainAndStop(); }

Status Server::waitReady() {
  std::unique_lock<std::mutex> lock(impl_->load_mu);
  impl_->load_cv.wait(lock, [&] { return impl_->load_done; });
  return impl_->load_status;
}

uint16_t Server::port() const { return impl_->http->port(); }

void Server::drainAndStop() {
  Impl& im = *impl_;
  if (im.draining.exchange(true)) return;
  im.http->stopAccepting();
  if (im.loader.joinable()) im.loader.join();
  {
    std::unique_lock<std::mutex> lock(im.jobs_mu);
    im.jobs_cv.wait_for(lock, std::chrono::duration<double>(im.options.shutdown_timeout_s),
                        [&] { return im.active_jobs == 0; });
  }
  if (im.executor) im.executor->shutdown();  // cancels what is left; its callbacks answer the clients
  {
    std::unique_lock<std::mutex> lock(im.jobs_mu);
    im.jobs_cv.wait_for(lock, std::chrono::seconds(5), [&] { return im.active_jobs == 0; });
  }
  // Let the last responses reach their sockets.
  for (int i = 0; i < 100 && im.http->numConnections() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  im.http->stop();
  im.stop_poller = true;
  if (im.poller.joinable()) im.poller.join();
}

}  // namespace llmrt::serve

#include "openai_api.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "llmrt/request_json.h"
#include "llmrt/util.h"

namespace llmrt::serve {
namespace {

constexpr int32_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr size_t kMaxLogitBiasEntries = 1024;

std::string defaultType(int status) {
  switch (status) {
    case 400: return "BadRequestError";
    case 401: return "AuthenticationError";
    case 404: return "NotFoundError";
    case 405: return "MethodNotAllowed";
    case 413: return "RequestTooLargeError";
    case 429: return "RateLimitError";
    case 503: return "ServiceUnavailableError";
    default: return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

// A JsonFieldReader error ("request: field 'top_p' has value 2; expected ...") as a 400 naming the field.
ApiError fieldError(const Status& s) {
  ApiError e{400, s.message(), "", ""};
  const std::string& m = e.message;
  if (size_t p = m.find("field '"); p != std::string::npos) {
    size_t end = m.find('\'', p + 7);
    if (end != std::string::npos) e.param = m.substr(p + 7, end - p - 7);
  }
  return e;
}

#define LLMRT_READ(expr) \
  if (Status st_ = (expr); !st_.isOk()) return fieldError(st_)

ApiError badField(std::string param, std::string message) { return ApiError{400, std::move(message), std::move(param), ""}; }

// The body without null members: null means "not given", as OpenAI's and vLLM's schemas read it.
Json withoutNulls(const Json& body) {
  Json out = Json::object();
  for (auto it = body.begin(); it != body.end(); ++it)
    if (!it->is_null()) out[it.key()] = *it;
  return out;
}

std::optional<ApiError> readSampling(const JsonFieldReader& r, SamplingParams& p) {
  const JsonNumberRange non_negative{.min = 0.0};
  const JsonNumberRange penalty{.min = -SamplingParams::kMaxAbsPenalty, .max = SamplingParams::kMaxAbsPenalty};
  LLMRT_READ(r.readNumber("temperature", p.temperature, non_negative));
  LLMRT_READ(r.readNumber("top_p", p.top_p, {.min = 0.0, .max = 1.0, .min_exclusive = true}));
  std::optional<int32_t> top_k;
  LLMRT_READ(r.readInt("top_k", top_k, -1, kMaxInt32));
  if (top_k) p.top_k = std::max(*top_k, 0);
  LLMRT_READ(r.readNumber("min_p", p.min_p, {.min = 0.0, .max = 1.0}));
  LLMRT_READ(r.readNumber("repetition_penalty", p.repetition_penalty, {.min = 0.0, .min_exclusive = true}));
  LLMRT_READ(r.readNumber("presence_penalty", p.presence_penalty, penalty));
  LLMRT_READ(r.readNumber("frequency_penalty", p.frequency_penalty, penalty));
  std::optional<int64_t> seed;
  LLMRT_READ(r.readInt("seed", seed));
  if (seed) p.seed = static_cast<uint64_t>(*seed);
  LLMRT_READ(r.readInt("n", p.n, 1, SamplingParams::kMaxN));
  LLMRT_READ(r.readStrings("stop", p.stop, /*non_empty_strings=*/true));
  LLMRT_READ(r.readIntArray<int32_t>("stop_token_ids", p.stop_token_ids, 0, kMaxInt32));
  LLMRT_READ(r.readInt("min_tokens", p.min_tokens, 0, kMaxInt32));
  LLMRT_READ(r.readBool("ignore_eos", p.ignore_eos));
  LLMRT_READ(r.readBool("skip_special_tokens", p.skip_special_tokens));
  LLMRT_READ(r.readBool("include_stop_str_in_output", p.include_stop_str_in_output));
  bool spaces = true;
  LLMRT_READ(r.readBool("spaces_between_special_tokens", spaces));
  std::string user;
  LLMRT_READ(r.readString("user", user));
  int64_t priority = 0;
  LLMRT_READ(r.readInt("priority", priority));
  if (priority != 0)
    return badField("priority", "priority " + std::to_string(priority) +
                                    " needs priority scheduling, which this server does not run (its policy is "
                                    "first come, first served); send 0 or leave it out");
  if (const Json* lb = r.find("logit_bias")) {
    if (!lb->is_object()) return badField("logit_bias", "field 'logit_bias' must be an object {\"token id\": bias}");
    if (lb->size() > kMaxLogitBiasEntries)
      return badField("logit_bias", "logit_bias has " + std::to_string(lb->size()) + " entries; at most " +
                                        std::to_string(kMaxLogitBiasEntries) + " are accepted");
    p.logit_bias.clear();
    for (auto it = lb->begin(); it != lb->end(); ++it) {
      const std::string& k = it.key();
      const bool digits = !k.empty() && k.size() <= 10 && k.find_first_not_of("0123456789") == std::string::npos;
      const int64_t id = digits ? std::stoll(k) : -1;
      if (!digits || id > kMaxInt32)
        return badField("logit_bias", "logit_bias key '" + printableText(k, 40) + "' is not a token id");
      if (!it->is_number() || !std::isfinite(it->get<double>()) || std::fabs(it->get<double>()) > SamplingParams::kMaxLogitBias)
        return badField("logit_bias", "logit_bias['" + k + "'] must be a number in [-100, 100]");
      p.logit_bias.emplace_back(static_cast<int32_t>(id), it->get<float>());
    }
  }
  if (const Json* b = r.find("use_beam_search"); b && b->is_boolean() && b->get<bool>())
    return badField("use_beam_search", "beam search is not supported; sample with n instead");
  if (r.has("best_of")) {
    int32_t best_of = 1;
    LLMRT_READ(r.readInt("best_of", best_of, 1, SamplingParams::kMaxN));
    if (best_of != p.n)
      return badField("best_of", "best_of " + std::to_string(best_of) + " differs from n " + std::to_string(p.n) +
                                     "; this server returns every sample (set best_of = n or leave it out)");
  }
  return std::nullopt;
}

std::optional<ApiError> readStreamOptions(const JsonFieldReader& r, CompletionJob& job) {
  LLMRT_READ(r.readBool("stream", job.stream));
  if (const Json* so = r.find("stream_options")) {
    if (!job.stream)
      return badField("stream_options", "stream_options is only allowed with \"stream\": true");
    JsonFieldReader s(*so, "request", "stream_options");
    LLMRT_READ(s.checkIsObject("an object"));
    LLMRT_READ(s.checkKeys({"include_usage", "continuous_usage_stats"}));
    LLMRT_READ(s.readBool("include_usage", job.include_usage));
    LLMRT_READ(s.readBool("continuous_usage_stats", job.continuous_usage));
  }
  return std::nullopt;
}

// Token ids of a prompt given as ids, checked against the vocabulary.
std::optional<ApiError> checkIds(const Json& v, const ModelContext& ctx, std::vector<TokenId>& out, const std::string& where) {
  out.clear();
  if (v.empty()) return badField("prompt", where + " is empty; a prompt needs at least one token");
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& x = v[i];
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= ctx.vocab_size)
      return badField("prompt", where + "[" + std::to_string(i) + "] is not a token id in [0, " +
                                    std::to_string(ctx.vocab_size) + ")");
    out.push_back(static_cast<TokenId>(x.get<int64_t>()));
  }
  return std::nullopt;
}

std::optional<ApiError> readPrompts(const Json& prompt, const ModelContext& ctx, bool add_special, CompletionJob& job) {
  auto addText = [&](const std::string& text) -> std::optional<ApiError> {
    if (!ctx.tokenizer) return badField("prompt", "this model has no tokenizer; send token ids");
    auto ids = ctx.tokenizer->encode(text, add_special);
    if (!ids.isOk()) return badField("prompt", "the prompt cannot be tokenized: " + ids.status().message());
    if (ids->empty()) return badField("prompt", "the prompt is empty; a prompt needs at least one token");
    job.prompts.push_back(std::move(*ids));
    job.prompt_texts.push_back(text);
    return std::nullopt;
  };
  auto addIds = [&](const Json& v, const std::string& where) -> std::optional<ApiError> {
    std::vector<TokenId> ids;
    if (auto e = checkIds(v, ctx, ids, where)) return e;
    job.prompt_texts.push_back(ctx.tokenizer ? ctx.tokenizer->decode(ids) : std::string());
    job.prompts.push_back(std::move(ids));
    return std::nullopt;
  };
  const std::string expected =
      "field 'prompt' must be a string, a list of strings, a list of token ids or a list of token-id lists";
  if (prompt.is_string()) return addText(prompt.get<std::string>());
  if (!prompt.is_array() || prompt.empty()) return badField("prompt", expected);
  if (prompt[0].is_number_integer()) return addIds(prompt, "prompt");
  for (size_t i = 0; i < prompt.size(); ++i) {
    const Json& p = prompt[i];
    std::optional<ApiError> e;
    if (p.is_string()) e = addText(p.get<std::string>());
    else if (p.is_array()) e = addIds(p, "prompt[" + std::to_string(i) + "]");
    else e = badField("prompt", expected);
    if (e) return e;
  }
  return std::nullopt;
}

// Content of a message as the template sees it: a string (text parts joined by "\n", as
// vLLM's "string" content format), or null.
std::variant<Json, ApiError> messageContent(const Json& content, size_t index) {
  const std::string field = "messages[" + std::to_string(index) + "].content";
  if (content.is_string() || content.is_null()) return content;
  if (!content.is_array()) return badField(field, "field '" + field + "' must be a string or a list of text parts");
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const Json& part = content[j];
    const Json* type = part.is_object() ? &part["type"] : nullptr;
    if (!type || !type->is_string())
      return badField(field, "field '" + field + "[" + std::to_string(j) + "]' must be an object with a \"type\"");
    if (*type != "text" && *type != "input_text")
      return badField(field, "content part type '" + printableText(type->get<std::string>(), 40) +
                                 "' is not supported; this server takes text parts only");
    const Json& t = part.contains("text") ? part["text"] : Json();
    if (!t.is_string())
      return badField(field, "field '" + field + "[" + std::to_string(j) + "].text' must be a string");
    if (j > 0) text += "\n";
    text += t.get<std::string>();
  }
  return Json(text);
}

}  // namespace

Json errorBody(const ApiError& e) {
  Json err = {{"message", e.message},
              {"type", e.type.empty() ? defaultType(e.status) : e.type},
              {"param", e.param.empty() ? Json() : Json(e.param)},
              {"code", e.status}};
  return Json{{"error", std::move(err)}};
}

std::variant<std::string, ApiError> renderChat(const Json& body, const ModelContext& ctx,
                                               bool default_add_generation_prompt, const nlohmann::ordered_json* ordered) {
  if (!ctx.chat_template)
    return ApiError{400,
                    "this model has no chat template (tokenizer_config.json's chat_template or chat_template.jinja); "
                    "start the server with --chat-template FILE or use /v1/completions",
                    "", ""};
  const Json& messages = body["messages"];
  if (!messages.is_array() || messages.empty())
    return badField("messages", "field 'messages' must be a non-empty list of message objects");
  Json msgs = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return badField(at, "field '" + at + "' must be an object with \"role\" and \"content\"");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return badField(at + ".role", "field '" + at + ".role' must be a string (system, user, assistant, tool)");
    Json msg = m;
    auto content = messageContent(m.contains("content") ? m["content"] : Json(), i);
    if (auto* e = std::get_if<ApiError>(&content)) return *e;
    msg["content"] = std::get<Json>(content);
    msgs.push_back(std::move(msg));
  }
  Json context = ctx.special_tokens.is_object() ? ctx.special_tokens : Json::object();
  if (const Json* kw = body.contains("chat_template_kwargs") ? &body["chat_template_kwargs"] : nullptr) {
    if (!kw->is_null() && !kw->is_object())
      return badField("chat_template_kwargs", "field 'chat_template_kwargs' must be an object");
    if (kw->is_object())
      for (auto it = kw->begin(); it != kw->end(); ++it) context[it.key()] = *it;
  }
  bool add_generation_prompt = default_add_generation_prompt;
  if (body.contains("add_generation_prompt") && !body["add_generation_prompt"].is_null()) {
    if (!body["add_generation_prompt"].is_boolean())
      return badField("add_generation_prompt", "field 'add_generation_prompt' must be true or false");
    add_generation_prompt = body["add_generation_prompt"].get<bool>();
  }
  context["messages"] = std::move(msgs);
  context["add_generation_prompt"] = add_generation_prompt;
  for (const char* key : {"tools", "documents"})
    if (body.contains(key) && !body[key].is_null()) context[key] = body[key];
  Result<std::string> text = std::string();
  if (ordered && ordered->is_object() && ordered->contains("messages") && (*ordered)["messages"].size() == messages.size()) {
    // The same values in the client's key order.
    using OJson = nlohmann::ordered_json;
    OJson octx = OJson::parse(ctx.special_tokens.is_object() ? ctx.special_tokens.dump() : std::string("{}"));
    if (auto kw = ordered->find("chat_template_kwargs"); kw != ordered->end() && kw->is_object())
      for (auto it = kw->begin(); it != kw->end(); ++it) octx[it.key()] = it.value();
    OJson omsgs = (*ordered)["messages"];
    for (size_t i = 0; i < omsgs.size(); ++i) omsgs[i]["content"] = OJson::parse(context["messages"][i]["content"].dump());
    octx["messages"] = std::move(omsgs);
    octx["add_generation_prompt"] = add_generation_prompt;
    for (const char* key : {"tools", "documents"})
      if (auto it = ordered->find(key); it != ordered->end() && !it->is_null()) octx[key] = *it;
    text = ctx.chat_template->render(octx);
  } else {
    text = ctx.chat_template->render(context);
  }
  if (!text.isOk()) return ApiError{400, "the chat template failed: " + text.status().message(), "messages", ""};
  return std::move(*text);
}

std::variant<CompletionJob, ApiError> readCompletionRequest(const Json& raw, const ModelContext& ctx, bool chat,
                                                            const nlohmann::ordered_json* ordered) {
  if (!raw.is_object()) return ApiError{400, "the request body must be a JSON object", "", ""};
  const Json body = withoutNulls(raw);
  JsonFieldReader r(body, "request");
  CompletionJob job;
  job.chat = chat;
  job.params = ctx.defaults;
  job.model = ctx.model_name;
  if (const Json* m = r.find("model")) {
    if (!m->is_string()) return badField("model", "field 'model' must be a string");
    if (m->get<std::string>() != ctx.model_name)
      return ApiError{404, "the model '" + printableText(m->get<std::string>(), 100) + "' does not exist; this server serves '" +
                               ctx.model_name + "'",
                      "model", "NotFoundError"};
  }
  if (auto e = readSampling(r, job.params)) return *e;
  if (auto e = readStreamOptions(r, job)) return *e;
  if (const Json* rc = r.find("kv_cache_retention_config")) {
    auto cfg = readKvCacheRetentionConfig(*rc, "request");
    if (!cfg.isOk()) return fieldError(cfg.status());
    job.retention = std::move(*cfg);
  }
  std::optional<int32_t> max_tokens;
  if (chat) {
    if (!r.has("messages")) return badField("messages", "field 'messages' is required");
    if (const Json* tc = r.find("tool_choice")) {
      if (!(tc->is_string() && (*tc == "none" || *tc == "auto")))
        return badField("tool_choice", "tool_choice must be \"none\" or \"auto\"; this server does not force tool calls");
    }
    if (const Json* rf = r.find("response_format")) {
      if (!rf->is_object() || !rf->contains("type") || (*rf)["type"] != "text")
        return badField("response_format", "only {\"type\": \"text\"} is supported (no guided decoding)");
    }
    LLMRT_READ(r.readBool("logprobs", job.chat_logprobs));
    std::optional<int32_t> top;
    LLMRT_READ(r.readInt("top_logprobs", top, 0, SamplingParams::kMaxLogprobs));
    if (top && !job.chat_logprobs) return badField("top_logprobs", "top_logprobs needs \"logprobs\": true");
    job.top_logprobs = top.value_or(0);
    if (job.chat_logprobs) job.params.logprobs = job.top_logprobs;
    LLMRT_READ(r.readInt("max_tokens", max_tokens, 1, kMaxInt32));
    std::optional<int32_t> mct;
    LLMRT_READ(r.readInt("max_completion_tokens", mct, 1, kMaxInt32));
    if (mct) max_tokens = mct;
    auto rendered = renderChat(body, ctx, true, ordered);
    if (auto* e = std::get_if<ApiError>(&rendered)) return *e;
    std::string text = std::move(std::get<std::string>(rendered));
    bool add_special = false;  // the template writes BOS itself (vLLM's default for chat)
    LLMRT_READ(r.readBool("add_special_tokens", add_special));
    if (!ctx.tokenizer) return ApiError{400, "this model has no tokenizer", "", ""};
    auto ids = ctx.tokenizer->encode(text, add_special);
    if (!ids.isOk()) return badField("messages", "the rendered prompt cannot be tokenized: " + ids.status().message());
    if (ids->empty()) return badField("messages", "the rendered prompt is empty");
    job.prompts.push_back(std::move(*ids));
    job.prompt_texts.push_back(std::move(text));
  } else {
    if (!r.has("prompt")) return badField("prompt", "field 'prompt' is required");
    if (const Json* s = r.find("suffix"); s && !(s->is_string() && s->get<std::string>().empty()))
      return badField("suffix", "suffix (fill-in-the-middle) is not supported");
    LLMRT_READ(r.readBool("echo", job.echo));
    std::optional<int32_t> logprobs;
    LLMRT_READ(r.readInt("logprobs", logprobs, 0, SamplingParams::kMaxLogprobs));
    job.params.logprobs = logprobs;
    if (job.echo && logprobs)
      return badField("logprobs", "echo with logprobs (prompt logprobs) is not supported; drop one of them");
    LLMRT_READ(r.readInt("max_tokens", max_tokens, 0, kMaxInt32));
    bool add_special = true;
    LLMRT_READ(r.readBool("add_special_tokens", add_special));
    if (auto e = readPrompts(body["prompt"], ctx, add_special, job)) return *e;
  }
  // Lengths: each prompt within max_input_len, and prompt + max_tokens within the context.
  for (size_t i = 0; i < job.prompts.size(); ++i) {
    const int64_t len = static_cast<int64_t>(job.prompts[i].size());
    const std::string which = job.prompts.size() > 1 ? "prompt " + std::to_string(i) : "the prompt";
    const std::string field = chat ? "messages" : "prompt";
    if (len > ctx.max_input_len)
      return badField(field, which + " has " + std::to_string(len) + " tokens, more than max_input_len " +
                                 std::to_string(ctx.max_input_len) + " of this server");
    const int64_t room = ctx.max_seq_len - len;
    if (room < 1)
      return badField(field, "This model's maximum context length is " + std::to_string(ctx.max_seq_len) +
                                 " tokens; " + which + " has " + std::to_string(len) + ", which leaves no room to generate");
    int64_t mt;
    if (max_tokens && *max_tokens > 0) {
      mt = *max_tokens;
      if (ctx.max_output_len > 0 && mt > ctx.max_output_len)
        return badField("max_tokens", "max_tokens " + std::to_string(mt) + " is more than max_output_len " +
                                          std::to_string(ctx.max_output_len) + " of this server");
      if (mt > room)
        return badField("max_tokens", "This model's maximum context length is " + std::to_string(ctx.max_seq_len) +
                                          " tokens. However, you requested " + std::to_string(len + mt) + " tokens (" +
                                          std::to_string(len) + " in the " + (chat ? "messages" : "prompt") + ", " +
                                          std::to_string(mt) + " in the completion)");
    } else if (max_tokens && *max_tokens == 0) {
      if (!job.echo) return badField("max_tokens", "max_tokens 0 is only allowed with echo");
      mt = 0;
    } else {
      // OpenAI's default for completions is 16; chat may use the rest of the context (vLLM).
      mt = chat ? room : std::min<int64_t>(ctx.defaults.max_tokens, room);
      if (ctx.max_output_len > 0) mt = std::min<int64_t>(mt, ctx.max_output_len);
    }
    job.max_tokens.push_back(static_cast<int32_t>(std::min<int64_t>(mt, kMaxInt32)));
  }
  if (Status st = job.params.validate(ctx.vocab_size); !st.isOk()) return fieldError(st);
  if (job.retention) {
    if (Status st = job.retention->validate(); !st.isOk())
      return badField("kv_cache_retention_config", st.message());
  }
  return job;
#undef LLMRT_READ
}

Json finishReasonJson(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return Json();
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "abort";
    case FinishReason::kError: return "error";
  }
  return Json();
}

std::string tokenText(const Tokenizer& tok, TokenId id) { return tok.decode({id}, false); }

namespace {
Json bytesOf(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}
// nlohmann refuses invalid UTF-8 when dumping; a lone byte-fallback token is shown as OpenAI does
// ("bytes:\xNN") with its bytes in "bytes".
std::string safeToken(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok) {
      out.append(s, i, n);
      i += n;
    } else {
      char buf[16];
      std::snprintf(buf, sizeof buf, "bytes:\\x%02x", c);
      out += buf;
      ++i;
    }
  }
  return out;
}
}  // namespace

void appendCompletionLogprobs(Json& lp, const Tokenizer& tok, const std::vector<TokenId>& tokens,
                              const std::vector<TokenLogprobs>& logprobs, size_t& offset) {
  if (!lp.is_object() || lp.empty())
    lp = Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
              {"text_offset", Json::array()}};
  for (size_t i = 0; i < tokens.size() && i < logprobs.size(); ++i) {
    const std::string text = tokenText(tok, tokens[i]);
    lp["tokens"].push_back(safeToken(text));
    lp["token_logprobs"].push_back(logprobs[i].chosen.logprob);
    Json top = Json::object();
    for (const TokenLogprob& t : logprobs[i].top) top[safeToken(tokenText(tok, t.token))] = t.logprob;
    lp["top_logprobs"].push_back(std::move(top));
    lp["text_offset"].push_back(offset);
    offset += text.size();
  }
}

void appendChatLogprobs(Json& lp, const Tokenizer& tok, const std::vector<TokenId>& tokens,
                        const std::vector<TokenLogprobs>& logprobs, int top_logprobs) {
  if (!lp.is_object() || !lp.contains("content")) lp = Json{{"content", Json::array()}};
  for (size_t i = 0; i < tokens.size() && i < logprobs.size(); ++i) {
    const std::string text = tokenText(tok, tokens[i]);
    Json top = Json::array();
    for (size_t k = 0; k < logprobs[i].top.size() && static_cast<int>(k) < top_logprobs; ++k) {
      const std::string t = tokenText(tok, logprobs[i].top[k].token);
      top.push_back({{"token", safeToken(t)}, {"logprob", logprobs[i].top[k].logprob}, {"bytes", bytesOf(t)}});
    }
    lp["content"].push_back({{"token", safeToken(text)},
                             {"logprob", logprobs[i].chosen.logprob},
                             {"bytes", bytesOf(text)},
                             {"top_logprobs", std::move(top)}});
  }
}

std::string randomId(std::string_view prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return std::string(prefix) + buf;
}

Json kvCacheEventJson(const KvCacheEvent& e) {
  auto diff = [](const std::optional<KvCacheEventDiff<int32_t>>& d) -> Json {
    if (!d) return Json();
    return Json{{"type", "event_diff"}, {"old_value", d->old_value}, {"new_value", d->new_value}};
  };
  Json data = std::visit(
      [&](const auto& d) -> Json {
        using T = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<T, KvCacheCreatedData>) {
          return {{"type", "created"}, {"num_blocks_per_cache_level", d.num_blocks_per_cache_level}};
        } else if constexpr (std::is_same_v<T, KvCacheStoredData>) {
          Json blocks = Json::array();
          for (const KvCacheStoredBlockData& b : d.blocks) {
            Json tokens = Json::array();
            for (TokenId t : b.tokens) tokens.push_back({{"type", "unique_token"}, {"token_id", t}, {"token_extra_id", 0}});
            blocks.push_back({{"type", "stored_block"},
                              {"block_hash", b.block_hash},
                              {"tokens", std::move(tokens)},
                              {"lora_id", b.lora_id ? Json(*b.lora_id) : Json()},
                              {"cache_level", b.cache_level},
                              {"priority", b.priority}});
          }
          return {{"type", "stored"},
                  {"parent_hash", d.parent_hash ? Json(*d.parent_hash) : Json()},
                  {"blocks", std::move(blocks)}};
        } else if constexpr (std::is_same_v<T, KvCacheRemovedData>) {
          return {{"type", "removed"}, {"block_hashes", d.block_hashes}};
        } else {
          return {{"type", "updated"},
                  {"block_hash", d.block_hash},
                  {"cache_level", diff(d.cache_level)},
                  {"priority", diff(d.priority)}};
        }
      },
      e.data);
  return Json{{"event_id", e.event_id}, {"data", std::move(data)}, {"window_size", e.window_size}};
}

}  // namespace llmrt::serve

// OpenAI's request and response shapes (as vLLM's OpenAI server speaks them): reading a
// /v1/completions or /v1/chat/completions body into engine requests, and writing responses,
// stream chunks and errors. No transport and no engine state: the server (server.cpp) runs them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "llmrt/chat_template.h"
#include "llmrt/executor.h"
#include "llmrt/finish_reason.h"
#include "llmrt/kv_cache_retention.h"
#include "llmrt/logprobs.h"
#include "llmrt/sampling_params.h"
#include "llmrt/tokenizer.h"

namespace llmrt::serve {

using Json = nlohmann::json;

// OpenAI's error object: {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // the request field at fault ("" = none)
  std::string type;   // "" = from the status: BadRequestError, NotFoundError, ...
};
Json errorBody(const ApiError& e);

// What reading a request needs to know of the model and the server's limits.
struct ModelContext {
  std::string model_name;  // the served name (requests' "model" must match it)
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat_template = nullptr;  // null: chat requests are refused
  Json special_tokens = Json::object();           // bos_token, eos_token, ... for the template
  int64_t vocab_size = 0;
  int64_t max_seq_len = 0;    // prompt + generated tokens
  int64_t max_input_len = 0;  // longest prompt
  int32_t max_output_len = 0;  // most generated tokens (LMI's max_output_len; 0: no limit but the context)
  SamplingParams defaults;     // generation_config.json's values over the library's
};

// One /v1/completions or /v1/chat/completions request, ready for the executor.
struct CompletionJob {
  bool chat = false;
  std::vector<std::vector<TokenId>> prompts;  // one engine request each (chat: one)
  std::vector<std::string> prompt_texts;      // their text (echo; chat: the rendered prompt)
  SamplingParams params;                      // n, max_tokens, ... (max_tokens per prompt below)
  std::vector<int32_t> max_tokens;            // per prompt, after defaults and context limits
  std::optional<KvCacheRetentionConfig> retention;
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  bool continuous_usage = false;      // stream_options.continuous_usage_stats (vLLM)
  bool echo = false;                  // completions: prompt text before the completion
  bool chat_logprobs = false;         // chat: logprobs: true
  int top_logprobs = 0;               // chat: alternatives per token
  std::string model;
};

// Reads a request body (already parsed JSON). Errors are 400s naming the field and the limit.
// `ordered`: the same body parsed keeping its key order (nlohmann::ordered_json), when the server
// could afford it: templates see the client's key order (tojson of tool schemas), as in
// transformers. Without it keys reach the template sorted.
std::variant<CompletionJob, ApiError> readCompletionRequest(const Json& body, const ModelContext& ctx, bool chat,
                                                            const nlohmann::ordered_json* ordered = nullptr);

// Renders a chat request's messages (+ tools, add_generation_prompt, chat_template_kwargs) to
// the prompt text. `body` must hold "messages".
std::variant<std::string, ApiError> renderChat(const Json& body, const ModelContext& ctx, bool default_add_generation_prompt,
                                               const nlohmann::ordered_json* ordered = nullptr);

// Largest body the server also parses keeping key order (ordered_json's inserts are linear in the
// object's size, so its parse is quadratic in the keys of one object).
inline constexpr size_t kMaxOrderedBodyBytes = 64 * 1024;

// "stop", "length", "abort" (cancelled), "error", or null while running.
Json finishReasonJson(FinishReason r);

// The text of one token as OpenAI reports it in logprobs.
std::string tokenText(const Tokenizer& tok, TokenId id);

// Per token logprobs in the completions format, appended to `lp` ({"tokens", "token_logprobs",
// "top_logprobs", "text_offset"}); `offset` is the text offset of the first token.
void appendCompletionLogprobs(Json& lp, const Tokenizer& tok, const std::vector<TokenId>& tokens,
                              const std::vector<TokenLogprobs>& logprobs, size_t& offset);
// Per token logprobs in the chat format ({"content": [{"token", "logprob", "bytes", "top_logprobs"}]}).
void appendChatLogprobs(Json& lp, const Tokenizer& tok, const std::vector<TokenId>& tokens,
                        const std::vector<TokenLogprobs>& logprobs, int top_logprobs);

// A random id with a prefix ("cmpl-", "chatcmpl-").
std::string randomId(std::string_view prefix);

// The server's JSON-text of a KV cache event, as TensorRT-LLM's KVCacheEventSerializer writes it.
Json kvCacheEventJson(const KvCacheEvent& e);

}  // namespace llmrt::serve

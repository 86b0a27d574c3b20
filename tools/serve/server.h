// `llmrt serve`: the OpenAI-compatible model server (docs/serving.md) on the public API — an
// Executor for the engine, HttpServer for the transport, openai_api for the wire format.
//
// Life of the server:
//  1. start(): listen on host:port at once (/health answers 503 while loading), then load the
//     model on a thread of its own; waitReady() returns when it is loaded (or why it failed).
//  2. Requests: each /v1 request becomes one engine request per prompt whose callback turns
//     responses into JSON or SSE chunks; a client that disconnects cancels them.
//  3. drainAndStop(): stop accepting, let in-flight requests finish up to shutdown_timeout,
//     cancel the rest, close. Returns when everything is answered and closed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "http_server.h"
#include "llmrt/engine_config.h"
#include "llmrt/status.h"

namespace llmrt::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string api_key;            // non-empty: every endpoint but /health needs "Authorization: Bearer <key>"
  std::string served_model_name;  // "" = the model directory's name
  std::string chat_template_file;  // "" = the model's own template
  int32_t max_queued_requests = 1000;  // waiting requests before 429 (LMI's job_queue_size)
  int32_t max_output_len = 0;          // most tokens a request may generate (0: the context's room)
  double shutdown_timeout_s = 30.0;
  int io_threads = 2;
  HttpLimits http;
};

class Server {
 public:
  static Result<std::unique_ptr<Server>> start(EngineConfig config, ServeOptions options);
  ~Server();
  // Blocks until the model is loaded (OK) or failed to load (the error).
  Status waitReady();
  uint16_t port() const;
  void drainAndStop();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmrt::serve

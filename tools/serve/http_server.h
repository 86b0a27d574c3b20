// The server's HTTP/1.1 transport on Boost.Beast / Asio: keep-alive connections, bounded
// headers and bodies, timeouts for slow clients, chunked responses for server-sent events, and
// disconnect detection while a response is pending. Transport only: it knows nothing of
// models or OpenAI; a Handler gets each request and answers through its Responder from any
// thread (the engine's callbacks included).
//
// Per connection (a Session, on its own strand):
//  1. Read one request: the headers within `header_timeout` (slow-header clients are cut off),
//     the body within `body_timeout`, at most `max_header_bytes` / `max_body_bytes` (431 / 413).
//     Malformed HTTP is answered 400 and the connection closed.
//  2. Hand it to the handler, then watch the socket: a client that closes (or resets) before
//     the response has ended fires the responder's disconnect callback once.
//  3. Write the response (whole, or a stream of chunks). Each write must finish within
//     `write_timeout`, and at most `max_pending_write_bytes` may wait unsent: a client that stops
//     reading is disconnected (its callback fires) instead of holding memory or anyone else.
//  4. Keep-alive: back to 1, waiting at most `idle_timeout` for the next request.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "llmrt/status.h"

namespace llmrt::serve {

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 8 * 1024 * 1024;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{30'000};
  std::chrono::milliseconds idle_timeout{60'000};
  std::chrono::milliseconds write_timeout{30'000};
  size_t max_pending_write_bytes = 8 * 1024 * 1024;
  int socket_send_buffer_bytes = 0;  // SO_SNDBUF of accepted connections (0: the kernel's default)
};

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query as sent
  std::string path;    // target without the query
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// Answers one request. Thread-safe; every call after the connection is gone is ignored.
class Responder {
 public:
  virtual ~Responder() = default;
  // A whole response.
  virtual void send(int status, std::string content_type, std::string body, HttpHeaders extra = {}) = 0;
  // A streamed response (chunked transfer encoding): the header now, then write() pieces, then end().
  virtual void startStream(int status, std::string content_type, HttpHeaders extra = {}) = 0;
  virtual void write(std::string data) = 0;
  virtual void end() = 0;
  // Called once, on an I/O thread, when the client goes away (or is cut off for not reading)
  // before the response has ended. Set it before the response can end; must not block.
  virtual void onDisconnect(std::function<void()> callback) = 0;
  // Whether the connection is gone.
  virtual bool disconnected() const = 0;
};

using HttpHandler = std::function<void(HttpRequest, std::shared_ptr<Responder>)>;

class HttpServer {
 public:
  // Binds host:port (port 0: an ephemeral port) and starts `threads` I/O threads. Fails when
  // the address cannot be bound.
  static Result<std::unique_ptr<HttpServer>> start(const std::string& host, uint16_t port, int threads,
                                                  HttpLimits limits, HttpHandler handler);
  ~HttpServer();
  uint16_t port() const;
  // Stops accepting new connections (open ones carry on).
  void stopAccepting();
  // Closes every connection and joins the I/O threads. Idempotent.
  void stop();
  // Open connections (for tests and the shutdown path).
  size_t numConnections() const;

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The reason phrase of a status code ("Not Found").
std::string_view httpReason(int status);

}  // namespace llmrt::serve

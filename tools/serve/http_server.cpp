#include "http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace llmrt::serve {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using beast::error_code;

// Bytes a client may send while its response is pending (a pipelined next request) before
// the connection is treated as abusive and closed.
constexpr size_t kMaxPipelinedBytes = 1 << 20;
constexpr size_t kMaxConnections = 8192;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string statusLine(int status) {
  std::string s = "HTTP/1.1 " + std::to_string(status) + " ";
  s += httpReason(status);
  s += "\r\n";
  return s;
}

void appendHeaders(std::string& out, const HttpHeaders& headers) {
  for (const auto& [k, v] : headers) {
    out += k;
    out += ": ";
    out += v;
    out += "\r\n";
  }
}

}  // namespace

std::string_view httpReason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

class Session;

struct HttpServer::Impl {
  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  HttpLimits limits;
  HttpHandler handler;
  uint16_t port = 0;
  mutable std::mutex mu;
  std::set<std::shared_ptr<Session>> sessions;  // open connections (a session removes itself when it closes)
  std::atomic<bool> stopped{false};

  void accept();
  void remove(const std::shared_ptr<Session>& s) {
    std::lock_guard<std::mutex> lock(mu);
    sessions.erase(s);
  }
};

class ResponderImpl;

// One connection. Every member function runs on the session's strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& server)
      : stream_(std::move(socket)), server_(server), limits_(server.limits) {}

  void start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->readRequest(true); });
  }

  // ---- called by the responder (posted to the strand) ----
  void sendWhole(const std::shared_ptr<ResponderImpl>& r, int status, const std::string& type, std::string body,
                 const HttpHeaders& extra);
  void startStream(const std::shared_ptr<ResponderImpl>& r, int status, const std::string& type,
                   const HttpHeaders& extra);
  void writeChunk(const std::shared_ptr<ResponderImpl>& r, std::string data);
  void endStream(const std::shared_ptr<ResponderImpl>& r);
  void close() { disconnect(); }
  asio::any_io_executor executor() { return stream_.get_executor(); }

 private:
  void readRequest(bool first);
  void readFailed(error_code ec, const char* what);
  void onHeader(error_code ec);
  void onBody(error_code ec);
  void dispatchRequest();
  void watch();
  void respondAndClose(int status, std::string message);
  void enqueue(std::string bytes);
  void doWrite();
  void onWrite(error_code ec);
  void responseEnded();
  void disconnect();
  bool current(const std::shared_ptr<ResponderImpl>& r) const { return r && r == responder_ && !closed_; }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpServer::Impl& server_;
  HttpLimits limits_;

  std::shared_ptr<ResponderImpl> responder_;  // the response in progress
  bool keep_alive_ = false;
  bool started_ = false;  // a header has been queued for the current response
  bool chunked_ = false;
  bool ended_ = false;  // the current response is complete (queued)
  bool watching_ = false;
  bool closed_ = false;
  bool close_after_ = false;  // close once the queue is written
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  std::string writing_buf_;
  bool writing_ = false;
};

class ResponderImpl : public Responder, public std::enable_shared_from_this<ResponderImpl> {
 public:
  ResponderImpl(std::weak_ptr<Session> session, asio::any_io_executor strand)
      : session_(std::move(session)), strand_(std::move(strand)) {}

  void send(int status, std::string content_type, std::string body, HttpHeaders extra) override {
    post([status, type = std::move(content_type), body = std::move(body), extra = std::move(extra)](
             Session& s, const std::shared_ptr<ResponderImpl>& self) mutable {
      s.sendWhole(self, status, type, std::move(body), extra);
    });
  }
  void startStream(int status, std::string content_type, HttpHeaders extra) override {
    post([status, type = std::move(content_type), extra = std::move(extra)](
             Session& s, const std::shared_ptr<ResponderImpl>& self) { s.startStream(self, status, type, extra); });
  }
  void write(std::string data) override {
    post([data = std::move(data)](Session& s, const std::shared_ptr<ResponderImpl>& self) mutable {
      s.writeChunk(self, std::move(data));
    });
  }
  void end() override {
    post([](Session& s, const std::shared_ptr<ResponderImpl>& self) { s.endStream(self); });
  }
  void onDisconnect(std::function<void()> callback) override {
    bool fire = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (gone_) fire = true;
      else on_disconnect_ = std::move(callback);
    }
    if (fire && callback) callback();
  }
  bool disconnected() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return gone_;
  }
  // The connection went away before the response ended.
  void fireDisconnect() {
    std::function<void()> cb;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (gone_) return;
      gone_ = true;
      cb = std::move(on_disconnect_);
    }
    if (cb) cb();
  }
  void markDone() {
    std::lock_guard<std::mutex> lock(mu_);
    gone_ = true;
    on_disconnect_ = nullptr;
  }

 private:
  template <typename F>
  void post(F&& f) {
    if (disconnected()) return;
    asio::post(strand_, [w = session_, self = shared_from_this(), f = std::forward<F>(f)]() mutable {
      if (auto s = w.lock()) f(*s, self);
    });
  }
  std::weak_ptr<Session> session_;
  asio::any_io_executor strand_;
  mutable std::mutex mu_;
  bool gone_ = false;
  std::function<void()> on_disconnect_;
};

void Session::readRequest(bool first) {
  if (closed_) return;
  responder_.reset();
  started_ = chunked_ = ended_ = false;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
  parser_->body_limit(limits_.max_body_bytes);
  stream_.expires_after(first ? limits_.header_timeout : limits_.idle_timeout);
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](error_code ec, size_t) { self->onHeader(ec); });
}

// A failed read of a request: the answer it deserves (431, 413, 400), or a quiet close when the
// client went away or ran out of time.
void Session::readFailed(error_code ec, const char* what) {
  if (ec == http::error::header_limit) return respondAndClose(431, "request headers too large");
  if (ec == http::error::body_limit)
    return respondAndClose(413, "request body is over the limit of " + std::to_string(limits_.max_body_bytes) +
                                    " bytes (--max-request-bytes)");
  if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == beast::error::timeout ||
      ec == asio::error::operation_aborted || ec == asio::error::connection_reset)
    return disconnect();
  respondAndClose(400, std::string("malformed HTTP request") + what + ": " + ec.message());
}

void Session::onHeader(error_code ec) {
  if (ec) return readFailed(ec, "");
  auto& req = parser_->get();
  if (auto len = parser_->content_length(); len && *len > limits_.max_body_bytes)
    return respondAndClose(413, "request body of " + std::to_string(*len) + " bytes is over the limit of " +
                                    std::to_string(limits_.max_body_bytes) + " (--max-request-bytes)");
  if (beast::iequals(req[http::field::expect], "100-continue")) enqueue(statusLine(100) + "\r\n");
  stream_.expires_after(limits_.body_timeout);
  http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](error_code e, size_t) { self->onBody(e); });
}

void Session::onBody(error_code ec) {
  if (ec) return readFailed(ec, " body");
  dispatchRequest();
}

void Session::dispatchRequest() {
  http::request<http::string_body> msg = parser_->release();
  parser_.reset();
  keep_alive_ = msg.keep_alive();
  HttpRequest req;
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  req.path = req.target.substr(0, req.target.find('?'));
  for (const auto& f : msg) req.headers[lower(std::string(f.name_string()))] = std::string(f.value());
  req.body = std::move(msg.body());
  responder_ = std::make_shared<ResponderImpl>(weak_from_this(), stream_.get_executor());
  stream_.expires_never();
  watch();
  server_.handler(std::move(req), responder_);
}

// Reads while a response is pending: an error means the client is gone; bytes are kept for the
// next request (pipelining).
void Session::watch() {
  if (watching_ || closed_) return;
  watching_ = true;
  auto space = buffer_.prepare(4096);
  stream_.socket().async_read_some(space, [self = shared_from_this()](error_code ec, size_t n) {
    self->watching_ = false;
    if (ec == asio::error::operation_aborted && !self->closed_ && self->ended_ && !self->writing_) {
      // cancelled by responseEnded(): read the next request
      if (self->queue_.empty()) self->readRequest(false);
      return;
    }
    if (ec) return self->disconnect();
    self->buffer_.commit(n);
    if (self->buffer_.size() > kMaxPipelinedBytes) return self->disconnect();
    if (self->ended_ && !self->writing_ && self->queue_.empty()) return self->readRequest(false);
    self->watch();
  });
}

void Session::respondAndClose(int status, std::string message) {
  std::string body = "{\"error\":{\"message\":\"";
  for (char c : message) {
    if (c == '"' || c == '\\') body += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) body += c;
  }
  body += "\",\"type\":\"BadRequestError\",\"param\":null,\"code\":" + std::to_string(status) + "}}";
  std::string out = statusLine(status);
  out += "Content-Type: application/json\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
  close_after_ = true;
  ended_ = true;
  enqueue(std::move(out));
}

void Session::sendWhole(const std::shared_ptr<ResponderImpl>& r, int status, const std::string& type, std::string body,
                        const HttpHeaders& extra) {
  if (!current(r) || started_) return;
  started_ = true;
  std::string out = statusLine(status);
  out += "Content-Type: " + type + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  if (!keep_alive_) out += "Connection: close\r\n";
  appendHeaders(out, extra);
  out += "\r\n";
  out += body;
  enqueue(std::move(out));
  responseEnded();
}

void Session::startStream(const std::shared_ptr<ResponderImpl>& r, int status, const std::string& type,
                          const HttpHeaders& extra) {
  if (!current(r) || started_) return;
  started_ = chunked_ = true;
  std::string out = statusLine(status);
  out += "Content-Type: " + type + "\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n";
  if (!keep_alive_) out += "Connection: close\r\n";
  appendHeaders(out, extra);
  out += "\r\n";
  enqueue(std::move(out));
}

void Session::writeChunk(const std::shared_ptr<ResponderImpl>& r, std::string data) {
  if (!current(r) || !chunked_ || ended_ || data.empty()) return;
  char len[32];
  std::snprintf(len, sizeof len, "%zx\r\n", data.size());
  data.insert(0, len);
  data += "\r\n";
  enqueue(std::move(data));
}

void Session::endStream(const std::shared_ptr<ResponderImpl>& r) {
  if (!current(r) || !chunked_ || ended_) return;
  enqueue("0\r\n\r\n");
  responseEnded();
}

void Session::responseEnded() {
  ended_ = true;
  if (responder_) responder_->markDone();
  if (!keep_alive_) close_after_ = true;
}

void Session::enqueue(std::string bytes) {
  if (closed_) return;
  queued_bytes_ += bytes.size();
  queue_.push_back(std::move(bytes));
  if (queued_bytes_ > limits_.max_pending_write_bytes) return disconnect();  // a client that does not read
  doWrite();
}

void Session::doWrite() {
  if (writing_ || queue_.empty() || closed_) return;
  writing_buf_.clear();
  for (auto& s : queue_) writing_buf_ += s;
  queue_.clear();
  writing_ = true;
  stream_.expires_after(limits_.write_timeout);
  asio::async_write(stream_, asio::buffer(writing_buf_),
                    [self = shared_from_this()](error_code ec, size_t) { self->onWrite(ec); });
}

void Session::onWrite(error_code ec) {
  writing_ = false;
  queued_bytes_ -= std::min(queued_bytes_, writing_buf_.size());
  if (ec) return disconnect();
  stream_.expires_never();
  if (!queue_.empty()) return doWrite();
  if (!ended_) return;
  if (close_after_) {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    return disconnect();
  }
  // Keep-alive: stop watching, then read the next request (the watch's completion does it).
  if (watching_) {
    error_code ignored;
    stream_.socket().cancel(ignored);
  } else {
    readRequest(false);
  }
}

void Session::disconnect() {
  if (closed_) return;
  closed_ = true;
  error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
  queue_.clear();
  if (responder_ && !ended_) responder_->fireDisconnect();
  responder_.reset();
  server_.remove(shared_from_this());
}

void HttpServer::Impl::accept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec) {
      std::shared_ptr<Session> s;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (sessions.size() < kMaxConnections) {
          if (limits.socket_send_buffer_bytes > 0) {
            error_code ignored;
            socket.set_option(asio::socket_base::send_buffer_size(limits.socket_send_buffer_bytes), ignored);
          }
          s = std::make_shared<Session>(std::move(socket), *this);
          sessions.insert(s);
        }
      }
      if (s) s->start();
    }
    accept();
  });
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(const std::string& host, uint16_t port, int threads,
                                                     HttpLimits limits, HttpHandler handler) {
  auto impl = std::make_unique<Impl>();
  impl->limits = limits;
  impl->handler = std::move(handler);
  error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) return invalidArgument("--host '" + host + "' is not an IP address (" + ec.message() + ")");
  tcp::endpoint ep(address, port);
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return ioError("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message() +
                       " (choose another --port or --host)");
  impl->port = impl->acceptor.local_endpoint().port();
  impl->work.emplace(impl->ioc.get_executor());
  impl->accept();
  for (int i = 0; i < std::max(1, threads); ++i) impl->threads.emplace_back([p = impl.get()] { p->ioc.run(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() { stop(); }

uint16_t HttpServer::port() const { return impl_->port; }

void HttpServer::stopAccepting() {
  asio::post(impl_->acceptor.get_executor(), [p = impl_.get()] {
    error_code ignored;
    p->acceptor.close(ignored);
  });
}

void HttpServer::stop() {
  if (impl_->stopped.exchange(true)) return;
  stopAccepting();
  std::set<std::shared_ptr<Session>> open;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    open = impl_->sessions;
  }
  for (const auto& s : open) asio::post(s->executor(), [s] { s->close(); });
  impl_->work.reset();
  // Give the closes a moment to run, then stop whatever is left (a stuck write).
  for (int i = 0; i < 200 && numConnections() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  impl_->ioc.stop();
  for (auto& t : impl_->threads)
    if (t.joinable()) t.join();
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->sessions.clear();
}

size_t HttpServer::numConnections() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->sessions.size();
}

}  // namespace llmrt::serve

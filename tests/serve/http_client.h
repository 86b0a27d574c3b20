// A small blocking HTTP/1.1 client on POSIX sockets for the server's tests: whole requests,
// raw bytes (malformed HTTP), and reading a chunked SSE stream piece by piece.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace llmrt::testing {

struct HttpReply {
  int status = 0;  // 0: no reply (connection closed or timed out)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
};

inline int connectLoopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool sendAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads what arrives within `timeout_ms`; returns "" on EOF or timeout, sets `eof`.
inline std::string readSome(int fd, int timeout_ms, bool* eof = nullptr) {
  pollfd p{fd, POLLIN, 0};
  if (eof) *eof = false;
  if (::poll(&p, 1, timeout_ms) <= 0) return "";
  char buf[65536];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  if (n <= 0) {
    if (eof) *eof = true;
    return "";
  }
  return std::string(buf, static_cast<size_t>(n));
}

// Reads until the peer closes (or `timeout_ms` passes without data).
inline std::string readAll(int fd, int timeout_ms = 30000) {
  std::string out;
  bool eof = false;
  while (!eof) {
    std::string s = readSome(fd, timeout_ms, &eof);
    if (s.empty() && !eof) break;
    out += s;
  }
  return out;
}

inline std::string dechunk(const std::string& b) {
  std::string out;
  size_t p = 0;
  while (p < b.size()) {
    size_t eol = b.find("\r\n", p);
    if (eol == std::string::npos) break;
    size_t len = std::stoul(b.substr(p, eol - p), nullptr, 16);
    if (len == 0) break;
    out += b.substr(eol + 2, len);
    p = eol + 2 + len + 2;
  }
  return out;
}

inline HttpReply parseReply(const std::string& raw) {
  HttpReply r;
  size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) return r;
  r.status = std::stoi(raw.substr(9, 3));
  size_t p = raw.find("\r\n") + 2;
  while (p < end) {
    size_t eol = raw.find("\r\n", p);
    std::string line = raw.substr(p, eol - p);
    size_t colon = line.find(':');
    std::string k = line.substr(0, colon);
    for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t v = colon + 1;
    while (v < line.size() && line[v] == ' ') ++v;
    r.headers[k] = line.substr(v);
    p = eol + 2;
  }
  r.body = raw.substr(end + 4);
  if (r.headers["transfer-encoding"] == "chunked") r.body = dechunk(r.body);
  return r;
}

// One request on a fresh connection (Connection: close).
inline HttpReply httpRequest(uint16_t port, const std::string& method, const std::string& path,
                             const std::string& body = "", const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  int fd = connectLoopback(port);
  if (fd < 0) return {};
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
  for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
  if (!body.empty() || method == "POST")
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  sendAll(fd, req);
  std::string raw = readAll(fd);
  ::close(fd);
  return parseReply(raw);
}

// The JSON objects of an SSE body's "data: " lines, "[DONE]" kept as the string.
inline std::vector<std::string> sseData(const std::string& body) {
  std::vector<std::string> out;
  size_t p = 0;
  while ((p = body.find("data: ", p)) != std::string::npos) {
    size_t end = body.find("\n\n", p);
    out.push_back(body.substr(p + 6, end - p - 6));
    p = end;
  }
  return out;
}

}  // namespace llmrt::testing

#include "serve_bench.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "bench_common.h"
#include "llmrt/file_io.h"

namespace llmrt::bench {
namespace {

struct Target {
  std::string host;
  std::string port = "80";
};

Result<Target> parseUrl(const std::string& url) {
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  else if (rest.find("://") != std::string::npos) return invalidArgument("--base-url: only http:// is supported: " + url);
  if (size_t slash = rest.find('/'); slash != std::string::npos) rest = rest.substr(0, slash);
  Target t;
  size_t colon = rest.rfind(':');
  t.host = colon == std::string::npos ? rest : rest.substr(0, colon);
  if (colon != std::string::npos) t.port = rest.substr(colon + 1);
  if (t.host.empty()) return invalidArgument("--base-url: no host in '" + url + "'");
  return t;
}

int connectTo(const Target& t) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(t.host.c_str(), t.port.c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = res; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}

struct Sample {
  bool ok = false;
  std::string error;
  double start_s = 0.0;  // since the run began
  double ttft_ms = 0.0, e2e_ms = 0.0;
  std::vector<double> itl_ms;  // between successive chunks that carried text
  int64_t prompt_tokens = 0, output_tokens = 0;
};

// One streamed request; the SSE events are timed as they arrive.
Sample runOne(const Target& t, const ServeBenchFlags& f, const std::string& body, Clock::time_point t0) {
  Sample s;
  const auto begin = Clock::now();
  s.start_s = std::chrono::duration<double>(begin - t0).count();
  int fd = connectTo(t);
  if (fd < 0) {
    s.error = "cannot connect";
    return s;
  }
  std::string req = "POST " + f.endpoint + " HTTP/1.1\r\nHost: " + t.host + "\r\nConnection: close\r\n" +
                    "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  if (!f.api_key.empty()) req += "Authorization: Bearer " + f.api_key + "\r\n";
  req += "\r\n" + body;
  for (size_t off = 0; off < req.size();) {
    ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      ::close(fd);
      s.error = "send failed";
      return s;
    }
    off += static_cast<size_t>(n);
  }
  std::string raw, data;  // raw bytes; de-chunked body
  size_t header_end = std::string::npos, parsed = 0, scanned = 0;
  bool chunked = false, done = false;
  int status = 0;
  std::optional<Clock::time_point> last;
  char buf[65536];
  const auto deadline = begin + std::chrono::duration<double>(f.timeout_s);
  while (!done) {
    const int wait_ms = static_cast<int>(std::chrono::duration<double, std::milli>(deadline - Clock::now()).count());
    pollfd p{fd, POLLIN, 0};
    if (wait_ms <= 0 || ::poll(&p, 1, wait_ms) <= 0) {
      s.error = "timed out";
      break;
    }
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    const auto now = Clock::now();
    raw.append(buf, static_cast<size_t>(n));
    if (header_end == std::string::npos) {
      header_end = raw.find("\r\n\r\n");
      if (header_end == std::string::npos) continue;
      status = raw.size() > 12 ? std::atoi(raw.c_str() + 9) : 0;
      std::string head = raw.substr(0, header_end);
      for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      chunked = head.find("transfer-encoding: chunked") != std::string::npos;
      parsed = header_end + 4;
    }
    // De-chunk what is complete.
    while (parsed < raw.size()) {
      if (!chunked) {
        data += raw.substr(parsed);
        parsed = raw.size();
        break;
      }
      size_t eol = raw.find("\r\n", parsed);
      if (eol == std::string::npos) break;
      const size_t len = std::strtoul(raw.c_str() + parsed, nullptr, 16);
      if (len == 0) {
        done = true;
        break;
      }
      if (raw.size() < eol + 2 + len + 2) break;
      data += raw.substr(eol + 2, len);
      parsed = eol + 2 + len + 2;
    }
    if (status != 200) continue;
    // SSE events.
    size_t end;
    while ((end = data.find("\n\n", scanned)) != std::string::npos) {
      const std::string ev = data.substr(scanned, end - scanned);
      scanned = end + 2;
      if (ev.rfind("data: ", 0) != 0) continue;
      const std::string payload = ev.substr(6);
      if (payload == "[DONE]") {
        done = true;
        break;
      }
      json j = json::parse(payload, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("error")) {
        s.error = j["error"].value("message", "error event");
        done = true;
        break;
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        s.prompt_tokens = j["usage"].value("prompt_tokens", int64_t{0});
        s.output_tokens = j["usage"].value("completion_tokens", int64_t{0});
      }
      bool text = false;
      if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
        const json& c = j["choices"][0];
        if (c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty()) text = true;
        if (c.contains("delta") && c["delta"].contains("content") && c["delta"]["content"].is_string() &&
            !c["delta"]["content"].get<std::string>().empty())
          text = true;
      }
      if (!text) continue;
      if (!last) s.ttft_ms = std::chrono::duration<double, std::milli>(now - begin).count();
      else s.itl_ms.push_back(std::chrono::duration<double, std::milli>(now - *last).count());
      last = now;
    }
  }
  ::close(fd);
  s.e2e_ms = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
  if (status != 200 && s.error.empty()) {
    s.error = "HTTP " + std::to_string(status) + ": " + data.substr(0, 200);
  } else if (s.error.empty() && !done) {
    s.error = "the stream ended without [DONE]";
  }
  s.ok = s.error.empty() && last.has_value();
  if (s.error.empty() && !last) s.error = "no token came";
  return s;
}

struct Workload {
  std::vector<std::string> bodies;
};

Result<Workload> buildWorkload(const ServeBenchFlags& f, const std::string& model) {
  Workload w;
  std::mt19937_64 rng(f.seed);
  auto lengthAround = [&](int64_t mean) {
    const double lo = std::max(1.0, static_cast<double>(mean) * (1.0 - f.range_ratio));
    const double hi = std::max(lo, static_cast<double>(mean) * (1.0 + f.range_ratio));
    return static_cast<int64_t>(std::llround(std::uniform_real_distribution<double>(lo, hi)(rng)));
  };
  const bool chat = f.endpoint.find("chat") != std::string::npos;
  if (!f.dataset.empty()) {
    LLMRT_ASSIGN_OR_RETURN(std::string text, readRegularFile(f.dataset, uint64_t{1} << 32));
    size_t pos = 0;
    int line = 0;
    while (pos < text.size() && static_cast<int64_t>(w.bodies.size()) < f.num_prompts) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      const std::string l = text.substr(pos, end - pos);
      pos = end + 1;
      ++line;
      if (l.find_first_not_of(" \t\r") == std::string::npos) continue;
      json item = json::parse(l, nullptr, false);
      if (item.is_discarded() || !item.is_object())
        return invalidArgument(f.dataset + ":" + std::to_string(line) + ": not a JSON object");
      json body = {{"model", model}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
      if (item.contains("messages")) {
        if (!chat) return invalidArgument(f.dataset + ":" + std::to_string(line) + ": messages need --endpoint /v1/chat/completions");
        body["messages"] = item["messages"];
      } else if (item.contains("prompt")) {
        if (chat) body["messages"] = json::array({{{"role", "user"}, {"content", item["prompt"]}}});
        else body["prompt"] = item["prompt"];
      } else {
        return invalidArgument(f.dataset + ":" + std::to_string(line) + ": needs \"prompt\" or \"messages\"");
      }
      body["max_tokens"] = item.value("max_tokens", item.value("output_len", lengthAround(f.output_len)));
      if (item.contains("ignore_eos")) body["ignore_eos"] = item["ignore_eos"];
      w.bodies.push_back(body.dump());
    }
    if (w.bodies.empty()) return invalidArgument(f.dataset + ": no requests");
    return w;
  }
  if (chat) return invalidArgument("synthetic prompts are token ids: use --endpoint /v1/completions or --dataset");
  std::uniform_int_distribution<int64_t> tok(10, std::max<int64_t>(11, f.vocab_size) - 1);
  for (int64_t i = 0; i < f.num_prompts; ++i) {
    json ids = json::array();
    const int64_t n = lengthAround(f.input_len);
    for (int64_t k = 0; k < n; ++k) ids.push_back(tok(rng));
    json body = {{"model", model},
                 {"prompt", std::move(ids)},
                 {"max_tokens", lengthAround(f.output_len)},
                 {"ignore_eos", true},
                 {"temperature", 0},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}}};
    w.bodies.push_back(body.dump());
  }
  return w;
}

json distribution(const std::vector<double>& v) {
  return {{"mean", mean(v)}, {"median", percentile(v, 50)}, {"p90", percentile(v, 90)}, {"p99", percentile(v, 99)},
          {"min", minOf(v)}, {"max", maxOf(v)}};
}

json runLevel(const Target& t, const ServeBenchFlags& f, const Workload& w, int64_t concurrency) {
  std::vector<Sample> samples(w.bodies.size());
  std::vector<double> arrival(w.bodies.size(), 0.0);
  if (f.request_rate > 0) {
    std::mt19937_64 rng(f.seed + 1);
    std::exponential_distribution<double> gap(f.request_rate);
    double at = 0.0;
    for (double& a : arrival) {
      a = at;
      at += gap(rng);
    }
  }
  std::atomic<size_t> next{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> workers;
  const int64_t n_workers = std::min<int64_t>(concurrency, static_cast<int64_t>(w.bodies.size()));
  for (int64_t k = 0; k < n_workers; ++k)
    workers.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < w.bodies.size();) {
        std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrival[i])));
        samples[i] = runOne(t, f, w.bodies[i], t0);
      }
    });
  for (auto& th : workers) th.join();
  const double duration = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> ttft, tpot, itl, e2e;
  int64_t ok = 0, good = 0, in_tokens = 0, out_tokens = 0;
  std::vector<std::string> errors;
  for (const Sample& s : samples) {
    if (!s.ok) {
      if (errors.size() < 5) errors.push_back(s.error);
      continue;
    }
    ++ok;
    in_tokens += s.prompt_tokens;
    out_tokens += s.output_tokens;
    ttft.push_back(s.ttft_ms);
    e2e.push_back(s.e2e_ms);
    itl.insert(itl.end(), s.itl_ms.begin(), s.itl_ms.end());
    const double tp = s.output_tokens > 1 ? (s.e2e_ms - s.ttft_ms) / static_cast<double>(s.output_tokens - 1) : 0.0;
    if (s.output_tokens > 1) tpot.push_back(tp);
    if ((f.slo_ttft_ms <= 0 || s.ttft_ms <= f.slo_ttft_ms) && (f.slo_tpot_ms <= 0 || tp <= f.slo_tpot_ms) &&
        (f.slo_e2e_ms <= 0 || s.e2e_ms <= f.slo_e2e_ms))
      ++good;
  }
  const int64_t failed = static_cast<int64_t>(samples.size()) - ok;
  return {{"concurrency", concurrency},
          {"request_rate", f.request_rate > 0 ? json(f.request_rate) : json("inf")},
          {"duration_s", duration},
          {"completed", ok},
          {"failed", failed},
          {"errors", errors},
          {"input_tokens", in_tokens},
          {"output_tokens", out_tokens},
          {"request_throughput", ok / duration},
          {"output_throughput", static_cast<double>(out_tokens) / duration},
          {"total_token_throughput", static_cast<double>(in_tokens + out_tokens) / duration},
          {"goodput", static_cast<double>(good) / duration},
          {"ttft_ms", distribution(ttft)},
          {"tpot_ms", distribution(tpot)},
          {"itl_ms", distribution(itl)},
          {"e2el_ms", distribution(e2e)}};
}

void printLevel(const json& r) {
  std::fprintf(stderr,
               "concurrency %lld%s: %lld ok, %lld failed in %.2f s | %.2f req/s, %.1f output tok/s, %.1f total tok/s, "
               "goodput %.2f req/s\n"
               "  TTFT ms  mean %.2f median %.2f p90 %.2f p99 %.2f\n"
               "  TPOT ms  mean %.2f median %.2f p90 %.2f p99 %.2f\n"
               "  ITL ms   mean %.2f median %.2f p90 %.2f p99 %.2f\n"
               "  E2E ms   mean %.2f median %.2f p90 %.2f p99 %.2f\n",
               static_cast<long long>(r["concurrency"].get<int64_t>()),
               r["request_rate"].is_number() ? (", rate " + formatNumber(r["request_rate"].get<double>()) + "/s").c_str() : "",
               static_cast<long long>(r["completed"].get<int64_t>()), static_cast<long long>(r["failed"].get<int64_t>()),
               r["duration_s"].get<double>(), r["request_throughput"].get<double>(), r["output_throughput"].get<double>(),
               r["total_token_throughput"].get<double>(), r["goodput"].get<double>(),
               r["ttft_ms"]["mean"].get<double>(), r["ttft_ms"]["median"].get<double>(), r["ttft_ms"]["p90"].get<double>(),
               r["ttft_ms"]["p99"].get<double>(), r["tpot_ms"]["mean"].get<double>(), r["tpot_ms"]["median"].get<double>(),
               r["tpot_ms"]["p90"].get<double>(), r["tpot_ms"]["p99"].get<double>(), r["itl_ms"]["mean"].get<double>(),
               r["itl_ms"]["median"].get<double>(), r["itl_ms"]["p90"].get<double>(), r["itl_ms"]["p99"].get<double>(),
               r["e2el_ms"]["mean"].get<double>(), r["e2el_ms"]["median"].get<double>(), r["e2el_ms"]["p90"].get<double>(),
               r["e2el_ms"]["p99"].get<double>());
  for (const auto& e : r["errors"]) std::fprintf(stderr, "  error: %s\n", e.get<std::string>().c_str());
}

// The sweep's chart points: median TTFT and TPOT against output throughput.
std::vector<SweepPoint> sweepPoints(const std::vector<json>& levels) {
  std::vector<SweepPoint> points;
  for (const json& r : levels)
    points.push_back({r["concurrency"].get<int64_t>(), r["output_throughput"].get<double>(),
                      {r["ttft_ms"]["median"].get<double>(), r["tpot_ms"]["median"].get<double>()}});
  return points;
}

}  // namespace

void addServeBenchFlags(CLI::App* cmd, ServeBenchFlags& f) {
  cmd->add_option("--base-url", f.base_url, "Server address (default http://127.0.0.1:8000)");
  cmd->add_option("--endpoint", f.endpoint, "/v1/completions (default) or /v1/chat/completions");
  cmd->add_option("--served-model", f.model, "The model name to send (default: the server's first)");
  cmd->add_option("--api-key", f.api_key, "Bearer token");
  cmd->add_option("--dataset", f.dataset, "JSONL file: {\"prompt\": ...} or {\"messages\": [...]} per line (default: synthetic)");
  cmd->add_option("--num-prompts", f.num_prompts, "Requests per run (default 200)")->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--input-len", f.input_len, "Synthetic: mean prompt tokens (default 128)")->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--output-len", f.output_len, "Mean generated tokens (default 128)")->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--range-ratio", f.range_ratio, "Lengths uniform in len*(1 +- r) (default 0)")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--vocab-size", f.vocab_size, "Synthetic token ids from [10, N) (default 1000)")->check(CLI::Range(int64_t{11}, int64_t{1} << 31));
  cmd->add_option("--concurrency", f.concurrency, "Requests in flight at most; several values run a sweep (default 16)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  cmd->add_option("--request-rate", f.request_rate, "Poisson arrivals per second (default: all at once)")->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--seed", f.seed, "Workload seed (default 0)");
  cmd->add_option("--slo-ttft-ms", f.slo_ttft_ms, "Goodput: TTFT at most this")->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--slo-tpot-ms", f.slo_tpot_ms, "Goodput: TPOT at most this")->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--slo-e2el-ms", f.slo_e2e_ms, "Goodput: end-to-end latency at most this")->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--json-out", f.json_out, "Also write the results here");
  cmd->add_option("--plot", f.plot, "PNG of median TTFT / TPOT against output throughput over the sweep (gnuplot)");
  cmd->add_option("--warmup", f.warmup, "Unmeasured requests first (default 2)")->check(CLI::Range(int64_t{0}, int64_t{1000}));
  cmd->add_option("--request-timeout", f.timeout_s, "Seconds per request (default 600)")->check(CLI::Range(0.1, 1e6));
}

int runServeBench(const ServeBenchFlags& f) {
  auto target = parseUrl(f.base_url);
  if (!target.isOk()) return fail(target.status().message(), kExitUsage);
  if (f.endpoint != "/v1/completions" && f.endpoint != "/v1/chat/completions")
    return fail("--endpoint must be /v1/completions or /v1/chat/completions", kExitUsage);
  std::string model = f.model;
  if (model.empty()) {
    // GET /v1/models
    int fd = connectTo(*target);
    if (fd < 0) return fail("cannot connect to " + f.base_url);
    std::string req = "GET /v1/models HTTP/1.1\r\nHost: " + target->host + "\r\nConnection: close\r\n";
    if (!f.api_key.empty()) req += "Authorization: Bearer " + f.api_key + "\r\n";
    req += "\r\n";
    (void)!::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    std::string raw;
    char buf[8192];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) raw.append(buf, static_cast<size_t>(n));
    ::close(fd);
    size_t b = raw.find("\r\n\r\n");
    json j = b == std::string::npos ? json() : json::parse(raw.substr(b + 4), nullptr, false);
    if (!j.is_object() || !j.contains("data") || j["data"].empty())
      return fail("GET /v1/models on " + f.base_url + " gave no model; pass --served-model");
    model = j["data"][0]["id"].get<std::string>();
  }
  auto w = buildWorkload(f, model);
  if (!w.isOk()) return fail(w.status().message(), kExitUsage);
  if (f.warmup > 0) {
    Workload warm;
    for (int64_t i = 0; i < f.warmup; ++i) warm.bodies.push_back(w->bodies[static_cast<size_t>(i) % w->bodies.size()]);
    ServeBenchFlags wf = f;
    wf.request_rate = 0;
    runLevel(*target, wf, warm, f.warmup);
  }
  std::vector<json> levels;
  for (int64_t c : f.concurrency) {
    json r = runLevel(*target, f, *w, c);
    printLevel(r);
    levels.push_back(std::move(r));
  }
  json out = {{"mode", "serve"},
              {"config",
               {{"base_url", f.base_url}, {"endpoint", f.endpoint}, {"model", model}, {"dataset", f.dataset},
                {"num_prompts", w->bodies.size()}, {"input_len", f.input_len}, {"output_len", f.output_len},
                {"range_ratio", f.range_ratio}, {"request_rate", f.request_rate}, {"seed", f.seed},
                {"slo_ttft_ms", f.slo_ttft_ms}, {"slo_tpot_ms", f.slo_tpot_ms}, {"slo_e2el_ms", f.slo_e2e_ms}}},
              {"results", levels.size() == 1 ? levels[0] : json(levels)}};
  printJsonLine(out);
  if (!f.json_out.empty()) {
    std::ofstream o(f.json_out);
    o << out.dump(2) << "\n";
    if (!o) return fail("cannot write " + f.json_out);
  }
  if (!f.plot.empty()) {
    if (Status s = plotSweep(sweepPoints(levels), {"TTFT", "TPOT"}, f.plot); !s.isOk()) return fail(s.message());
  }
  int64_t failed = 0;
  for (const json& r : levels) failed += r["failed"].get<int64_t>();
  return failed == 0 ? 0 : kExitFailure;
}

}  // namespace llmrt::bench

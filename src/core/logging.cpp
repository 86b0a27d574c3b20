#include "core/logging.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace llmrt {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarning)};
std::mutex g_sink_mutex;
LogSink g_sink;
}  // namespace

void setLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel logLevel() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

std::optional<LogLevel> parseLogLevel(std::string_view n) {
  if (n == "trace") return LogLevel::kTrace;
  if (n == "debug") return LogLevel::kDebug;
  if (n == "info") return LogLevel::kInfo;
  if (n == "warning" || n == "warn") return LogLevel::kWarning;
  if (n == "error") return LogLevel::kError;
  if (n == "off") return LogLevel::kOff;
  return std::nullopt;
}

std::string_view logLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return "TRACE";
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarning: return "WARNING";
    case LogLevel::kError: return "ERROR";
    case LogLevel::kOff: return "OFF";
  }
  return "?";
}

LogSink setLogSink(LogSink sink) {
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  LogSink old = std::move(g_sink);
  g_sink = std::move(sink);
  return old;
}

void logMessage(LogLevel level, std::string_view message) {
  if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed)) return;
  std::string line = "[llmrt][";
  line += logLevelName(level);
  line += "] ";
  line += message;
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  if (g_sink) {
    g_sink(level, line);
  } else {
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
}

std::string vstrprintf(const char* fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  char buf[512];
  int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  std::string out;
  if (n < 0) {
    out = fmt;
  } else if (static_cast<size_t>(n) < sizeof(buf)) {
    out.assign(buf, static_cast<size_t>(n));
  } else {
    out.resize(static_cast<size_t>(n));
    std::vsnprintf(out.data(), out.size() + 1, fmt, ap2);
  }
  va_end(ap2);
  return out;
}

std::string strprintf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vstrprintf(fmt, ap);
  va_end(ap);
  return s;
}

void logf(LogLevel level, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vstrprintf(fmt, ap);
  va_end(ap);
  logMessage(level, s);
}

std::string formatBytes(uint64_t bytes) {
  constexpr double kKiB = 1024.0, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
  const double b = static_cast<double>(bytes);
  if (b >= kGiB) return strprintf("%.2f GiB", b / kGiB);
  if (b >= kMiB) return strprintf("%.2f MiB", b / kMiB);
  if (b >= kKiB) return strprintf("%.2f KiB", b / kKiB);
  return strprintf("%llu B", static_cast<unsigned long long>(bytes));
}

}  // namespace llmrt

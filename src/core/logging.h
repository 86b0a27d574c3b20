// Levelled logging. Lines look like "[llmrt][INFO] message" and go to stderr
// unless a sink is installed (tests capture lines that way).
#pragma once

#include <cstdarg>
#include <functional>
#include <string>
#include <string_view>
#include <optional>

namespace llmrt {

enum class LogLevel : int { kTrace = 0, kDebug, kInfo, kWarning, kError, kOff };

void setLogLevel(LogLevel level);
LogLevel logLevel();
std::optional<LogLevel> parseLogLevel(std::string_view name);  // "trace".."error", "off"
std::string_view logLevelName(LogLevel level);

using LogSink = std::function<void(LogLevel, std::string_view line)>;
// Replaces the output sink; an empty function restores stderr. Returns the previous sink.
LogSink setLogSink(LogSink sink);

void logMessage(LogLevel level, std::string_view message);
void logf(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Formats like printf into a std::string.
std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vstrprintf(const char* fmt, va_list ap);

// "1.50 GiB", "12.00 MiB", "512 B"
std::string formatBytes(uint64_t bytes);

}  // namespace llmrt

#define LLMRT_LOG(level, ...)                                            \
  do {                                                                   \
    if (static_cast<int>(level) >= static_cast<int>(::llmrt::logLevel())) \
      ::llmrt::logf(level, __VA_ARGS__);                                 \
  } while (0)
#define LLMRT_LOG_DEBUG(...) LLMRT_LOG(::llmrt::LogLevel::kDebug, __VA_ARGS__)
#define LLMRT_LOG_INFO(...) LLMRT_LOG(::llmrt::LogLevel::kInfo, __VA_ARGS__)
#define LLMRT_LOG_WARNING(...) LLMRT_LOG(::llmrt::LogLevel::kWarning, __VA_ARGS__)
#define LLMRT_LOG_ERROR(...) LLMRT_LOG(::llmrt::LogLevel::kError, __VA_ARGS__)

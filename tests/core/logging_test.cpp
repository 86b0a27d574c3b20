#include <gtest/gtest.h>

#include <vector>

#include "core/logging.h"

namespace llmrt {
namespace {

TEST(Logging, LevelsFilterAndFormat) {
  std::vector<std::string> lines;
  LogSink old = setLogSink([&](LogLevel, std::string_view l) { lines.emplace_back(l); });
  LogLevel old_level = logLevel();
  setLogLevel(LogLevel::kInfo);
  LLMRT_LOG_DEBUG("hidden %d", 1);
  LLMRT_LOG_INFO("[MemUsageChange] Allocated %s for max tokens in paged KV cache (%d)",
                 formatBytes(68117741158ull).c_str(), 259840);
  LLMRT_LOG_ERROR("bad");
  setLogLevel(old_level);
  setLogSink(old);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "[llmrt][INFO] [MemUsageChange] Allocated 63.44 GiB for max tokens in paged KV cache (259840)");
  EXPECT_EQ(lines[1], "[llmrt][ERROR] bad");
  EXPECT_EQ(parseLogLevel("warning"), LogLevel::kWarning);
  EXPECT_FALSE(parseLogLevel("loud").has_value());
  EXPECT_EQ(formatBytes(512), "512 B");
  std::string big(2000, 'x');
  EXPECT_EQ(strprintf("%s!", big.c_str()).size(), 2001u);
}

}  // namespace
}  // namespace llmrt

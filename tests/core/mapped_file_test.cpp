#include "core/mapped_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace llmrt {
namespace {

// A FIFO named as a model file (config.json, tokenizer.json) is refused at once: open() used to
// block until a writer came.
TEST(MappedFile, AFifoIsRefusedWithoutBlocking) {
  char dir[] = "/tmp/llmrt-fifo-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/config.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  auto f = MappedFile::open(fifo);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(f.isOk());
  EXPECT_NE(f.status().message().find("not a regular file"), std::string::npos) << f.status().message();
  EXPECT_LT(s, 5.0);
  auto d = MappedFile::open(dir);
  EXPECT_FALSE(d.isOk());
  unlink(fifo.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace llmrt

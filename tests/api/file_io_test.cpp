// Front-end files (llmrt/file_io.h): inputs are examined before they are
// opened and read with a limit; outputs are replaced atomically.
#include "llmrt/file_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

namespace llmrt {
namespace {

namespace fs = std::filesystem;

#define EXPECT_HAS(haystack, needle)                               \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "'" << (needle) << "' not in: " << (haystack)

class FileIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("LLMRT_TEST_TMP");
    fs::path root = base != nullptr ? fs::path(base) : fs::temp_directory_path();
    fs::create_directories(root);
    std::string tmpl = (root / "file_io_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (fs::path(dir_) / name).string(); }
  void writeFile(const std::string& p, const std::string& text) const {
    std::ofstream(p, std::ios::binary) << text;
  }
  std::string readFile(const std::string& p) const {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  size_t entries() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }

  std::string dir_;
};

TEST_F(FileIoTest, ReadsARegularFileWithinTheLimit) {
  writeFile(path("a.txt"), std::string("hello\0world", 11));
  auto r = readRegularFile(path("a.txt"), 11);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(*r, std::string("hello\0world", 11));
  auto big = readRegularFile(path("a.txt"), 10);
  ASSERT_FALSE(big.isOk());
  EXPECT_EQ(big.status().message(), path("a.txt") + ": 11 bytes exceeds the limit of 10 bytes");
  EXPECT_EQ(checkRegularFile(path("a.txt"), kMaxTextFileBytes).code(), StatusCode::kOk);
  writeFile(path("empty"), "");
  auto e = readRegularFile(path("empty"), 0);
  ASSERT_TRUE(e.isOk());
  EXPECT_TRUE(e->empty());
}

TEST_F(FileIoTest, MissingFileIsNotFound) {
  auto r = readRegularFile(path("nope"), 100);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_HAS(r.status().message(), path("nope") + ": cannot open: No such file or directory");
}

// Item 14: a directory read as "no requests"; /dev/zero grew without limit.
TEST_F(FileIoTest, DirectoriesAndDevicesAreNamed) {
  auto d = readRegularFile(dir_, kMaxTextFileBytes);
  ASSERT_FALSE(d.isOk());
  EXPECT_EQ(d.status().message(), dir_ + ": is a directory; expected a regular file");
  const auto start = std::chrono::steady_clock::now();
  auto z = readRegularFile("/dev/zero", kMaxTextFileBytes);
  ASSERT_FALSE(z.isOk());
  EXPECT_EQ(z.status().message(), "/dev/zero: is a character device; expected a regular file");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_FALSE(checkRegularFile("/dev/null", 10).isOk());
}

// Item 14: open() before the type check blocked forever on a FIFO with no writer.
TEST_F(FileIoTest, FifoIsRefusedWithoutBlocking) {
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto fut = std::async(std::launch::async, [&] { return readRegularFile(fifo, 100); });
  if (fut.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    // Unblock the reader so the test can end, then fail.
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    FAIL() << "readRegularFile blocked on a FIFO";
  }
  auto r = fut.get();
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().message(), fifo + ": is a FIFO; expected a regular file");
  EXPECT_FALSE(checkRegularFile(fifo, 100).isOk());
}

TEST_F(FileIoTest, StandardInputIsBounded) {
  std::signal(SIGPIPE, SIG_IGN);  // the writer below ends on EPIPE
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const int saved = ::dup(STDIN_FILENO);
  ASSERT_GE(saved, 0);
  ASSERT_EQ(::dup2(fds[0], STDIN_FILENO), STDIN_FILENO);
  ::close(fds[0]);
  // A writer that would never stop: the reader must give up at the limit.
  std::thread writer([w = fds[1]] {
    const std::string chunk(4096, 'x');
    while (::write(w, chunk.data(), chunk.size()) > 0) {
    }
    ::close(w);
  });
  auto r = readStandardInput(100000);
  ::dup2(saved, STDIN_FILENO);  // closes the pipe's read end: the writer gets EPIPE
  ::close(saved);
  writer.join();
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().message(), "standard input: more than 100000 bytes (the limit)");
}

TEST_F(FileIoTest, SameFileByInodeNotByName) {
  writeFile(path("in.jsonl"), "x");
  writeFile(path("other"), "x");
  ASSERT_EQ(::link(path("in.jsonl").c_str(), path("hard").c_str()), 0);
  ASSERT_EQ(::symlink(path("in.jsonl").c_str(), path("soft").c_str()), 0);
  fs::create_directories(path("sub"));
  EXPECT_TRUE(isSameFile(path("in.jsonl"), path("in.jsonl")));
  EXPECT_TRUE(isSameFile(path("in.jsonl"), path("hard")));
  EXPECT_TRUE(isSameFile(path("soft"), path("in.jsonl")));
  EXPECT_TRUE(isSameFile(path("sub/../in.jsonl"), path("in.jsonl")));
  EXPECT_FALSE(isSameFile(path("other"), path("in.jsonl")));
  EXPECT_FALSE(isSameFile(path("new"), path("in.jsonl")));
  // Neither exists yet: the same once the directory part is resolved.
  EXPECT_TRUE(isSameFile(path("new"), path("sub/../new")));
  EXPECT_FALSE(isSameFile(path("new"), path("new2")));
}

// Item 9: the output file is replaced whole or not at all.
TEST_F(FileIoTest, AtomicWriterReplacesOnlyOnCommit) {
  const std::string out = path("out.jsonl");
  writeFile(out, "old\n");
  ASSERT_EQ(::chmod(out.c_str(), 0640), 0);
  {
    auto w = AtomicFileWriter::open(out);
    ASSERT_TRUE(w.isOk()) << w.status().toString();
    ASSERT_TRUE(w->write("row 1\n").isOk());
    EXPECT_EQ(readFile(out), "old\n");  // nothing visible before commit
    EXPECT_EQ(entries(), 2u);           // out.jsonl and the temporary file
    ASSERT_TRUE(w->write("row 2\n").isOk());
    ASSERT_TRUE(w->commit().isOk());
    EXPECT_FALSE(w->write("late").isOk());
  }
  EXPECT_EQ(readFile(out), "row 1\nrow 2\n");
  EXPECT_EQ(entries(), 1u);
  struct stat st {};
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);  // the replaced file's permissions
  {
    auto w = AtomicFileWriter::open(out);
    ASSERT_TRUE(w.isOk());
    ASSERT_TRUE(w->write("half a ro").isOk());
    // Destroyed without commit (an error, a killed run): the old file stays, no temporary is left.
  }
  EXPECT_EQ(readFile(out), "row 1\nrow 2\n");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(FileIoTest, AtomicWriterLargeOutputAndNewFile) {
  const std::string out = path("new.jsonl");
  auto w = AtomicFileWriter::open(out);
  ASSERT_TRUE(w.isOk());
  std::string expect;
  for (int i = 0; i < 50000; ++i) {
    const std::string row =
        "{\"index\":" + std::to_string(i) + ",\"text\":\"" + std::string(40, 'a') + "\"}\n";
    expect += row;
    ASSERT_TRUE(w->write(row).isOk());
  }
  EXPECT_FALSE(fs::exists(out));
  ASSERT_TRUE(w->commit().isOk());
  EXPECT_EQ(readFile(out), expect);
  struct stat st {};
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0666u & ~mask);
}

TEST_F(FileIoTest, AtomicWriterFollowsSymlinksAndWritesDevicesInPlace) {
  writeFile(path("target"), "old");
  ASSERT_EQ(::symlink("target", path("link").c_str()), 0);
  {
    auto w = AtomicFileWriter::open(path("link"));
    ASSERT_TRUE(w.isOk()) << w.status().toString();
    ASSERT_TRUE(w->write("new").isOk());
    ASSERT_TRUE(w->commit().isOk());
  }
  EXPECT_TRUE(fs::is_symlink(path("link")));
  EXPECT_EQ(readFile(path("target")), "new");
  auto null = AtomicFileWriter::open("/dev/null");
  ASSERT_TRUE(null.isOk()) << null.status().toString();
  ASSERT_TRUE(null->write("discarded").isOk());
  ASSERT_TRUE(null->commit().isOk());
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST_F(FileIoTest, AtomicWriterErrorsNameThePath) {
  auto d = AtomicFileWriter::open(dir_);
  ASSERT_FALSE(d.isOk());
  EXPECT_EQ(d.status().message(), dir_ + ": is a directory; expected a file to write");
  auto m = AtomicFileWriter::open(path("missing/out.jsonl"));
  ASSERT_FALSE(m.isOk());
  EXPECT_HAS(m.status().message(), path("missing/out.jsonl") + ": cannot create a temporary file in " +
                                       path("missing") + ": No such file or directory");
}

}  // namespace
}  // namespace llmrt

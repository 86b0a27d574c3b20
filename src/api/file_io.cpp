// Bounded input-file reads and atomic output files for front ends (llmrt/file_io.h).
#include "llmrt/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace llmrt {
namespace {

std::string errnoText(int err) { return std::strerror(err); }

// "1 GiB" for the limits we document; the byte count otherwise.
std::string bytesText(uint64_t n) {
  if (n >= (uint64_t{1} << 30) && n % (uint64_t{1} << 30) == 0) return std::to_string(n >> 30) + " GiB";
  if (n >= (uint64_t{1} << 20) && n % (uint64_t{1} << 20) == 0) return std::to_string(n >> 20) + " MiB";
  return std::to_string(n) + " bytes";
}

const char* fileTypeText(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

Status checkStat(const std::string& path, const struct stat& st, uint64_t max_bytes) {
  if (!S_ISREG(st.st_mode))
    return invalidArgument(path + ": is " + fileTypeText(st.st_mode) + "; expected a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return invalidArgument(path + ": " + std::to_string(st.st_size) + " bytes exceeds the limit of " +
                           bytesText(max_bytes));
  return Status::ok();
}

Status statError(const std::string& path, int err) {
  const std::string msg = path + ": cannot open: " + errnoText(err);
  return err == ENOENT || err == ENOTDIR ? notFound(msg) : ioError(msg);
}

// Reads `fd` to its end, failing once more than `max_bytes` arrive.
Status readAll(int fd, const std::string& what, uint64_t max_bytes, std::string& out) {
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof(buf));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ioError(what + ": read failed: " + errnoText(errno));
    }
    if (got == 0) return Status::ok();
    if (out.size() + static_cast<uint64_t>(got) > max_bytes)
      return invalidArgument(what + ": more than " + bytesText(max_bytes) + " (the limit)");
    out.append(buf, static_cast<size_t>(got));
  }
}

std::string dirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string baseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The absolute path `path` would have: realpath when it exists, else the
// resolved directory plus the last component; "" when neither resolves.
std::string resolvedPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) != nullptr) return buf;
  if (::realpath(dirName(path).c_str(), buf) != nullptr) return std::string(buf) + "/" + baseName(path);
  return "";
}

mode_t currentUmask() {
  const mode_t m = ::umask(022);
  ::umask(m);
  return m;
}

Status writeFd(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ioError(path + ": write failed: " + errnoText(errno));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::ok();
}

}  // namespace

Status checkRegularFile(const std::string& path, uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return statError(path, errno);
  return checkStat(path, st, max_bytes);
}

Result<std::string> readRegularFile(const std::string& path, uint64_t max_bytes) {
  LLMRT_RETURN_IF_ERROR(checkRegularFile(path, max_bytes));
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return statError(path, errno);
  struct stat st {};
  Status s = ::fstat(fd, &st) == 0 ? checkStat(path, st, max_bytes)
                                   : ioError(path + ": cannot stat: " + errnoText(errno));
  std::string text;
  if (s.isOk()) {
    text.reserve(static_cast<size_t>(st.st_size));
    s = readAll(fd, path, max_bytes, text);
  }
  ::close(fd);
  if (!s.isOk()) return s;
  return text;
}

Result<std::string> readStandardInput(uint64_t max_bytes) {
  std::string text;
  LLMRT_RETURN_IF_ERROR(readAll(STDIN_FILENO, "standard input", max_bytes, text));
  return text;
}

bool isSameFile(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  const bool ea = ::stat(a.c_str(), &sa) == 0, eb = ::stat(b.c_str(), &sb) == 0;
  if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (ea != eb) return false;
  const std::string ra = resolvedPath(a), rb = resolvedPath(b);
  return !ra.empty() && ra == rb;
}

// ---- AtomicFileWriter ------------------------------------------------------

Result<AtomicFileWriter> AtomicFileWriter::open(const std::string& path) {
  if (path.empty()) return invalidArgument("output file: empty path");
  AtomicFileWriter w;
  w.path_ = path;
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    return invalidArgument(path + ": is a directory; expected a file to write");
  const bool special_tree = path.rfind("/dev/", 0) == 0 || path.rfind("/proc/", 0) == 0;
  if ((exists && !S_ISREG(st.st_mode)) || special_tree) {
    w.in_place_ = true;
    w.fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (w.fd_ < 0) return ioError(path + ": cannot open for writing: " + errnoText(errno));
    return w;
  }
  // Replace what a symlink points at, not the link.
  char buf[PATH_MAX];
  w.target_ = exists && ::realpath(path.c_str(), buf) != nullptr ? std::string(buf) : path;
  std::string tmpl = dirName(w.target_) + "/." + baseName(w.target_) + ".tmp-XXXXXX";
  w.fd_ = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (w.fd_ < 0)
    return ioError(path + ": cannot create a temporary file in " + dirName(w.target_) + ": " +
                   errnoText(errno));
  w.temp_ = tmpl;
  const mode_t mode = exists ? (st.st_mode & 07777) : (0666 & ~currentUmask());
  if (::fchmod(w.fd_, mode) != 0) {
    const int err = errno;
    w.discard();
    return ioError(path + ": cannot set permissions: " + errnoText(err));
  }
  return w;
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& o) noexcept
    : fd_(o.fd_),
      in_place_(o.in_place_),
      path_(std::move(o.path_)),
      target_(std::move(o.target_)),
      temp_(std::move(o.temp_)),
      buffer_(std::move(o.buffer_)),
      error_(std::move(o.error_)) {
  o.fd_ = -1;
  o.temp_.clear();
}

AtomicFileWriter& AtomicFileWriter::operator=(AtomicFileWriter&& o) noexcept {
  if (this != &o) {
    discard();
    fd_ = o.fd_;
    in_place_ = o.in_place_;
    path_ = std::move(o.path_);
    target_ = std::move(o.target_);
    temp_ = std::move(o.temp_);
    buffer_ = std::move(o.buffer_);
    error_ = std::move(o.error_);
    o.fd_ = -1;
    o.temp_.clear();
  }
  return *this;
}

AtomicFileWriter::~AtomicFileWriter() { discard(); }

void AtomicFileWriter::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
  buffer_.clear();
}

Status AtomicFileWriter::flushBuffer() {
  if (!error_.isOk()) return error_;
  if (fd_ < 0) return error_ = failedPrecondition(path_ + ": written after commit or discard");
  error_ = writeFd(fd_, buffer_, path_);
  buffer_.clear();
  return error_;
}

Status AtomicFileWriter::write(std::string_view data) {
  if (!error_.isOk()) return error_;
  buffer_.append(data);
  if (buffer_.size() >= (size_t{1} << 20)) return flushBuffer();
  return Status::ok();
}

Status AtomicFileWriter::commit() {
  Status s = flushBuffer();
  if (s.isOk() && !in_place_ && ::fsync(fd_) != 0) s = ioError(path_ + ": fsync failed: " + errnoText(errno));
  if (fd_ >= 0) {
    if (::close(fd_) != 0 && s.isOk()) s = ioError(path_ + ": close failed: " + errnoText(errno));
    fd_ = -1;
  }
  if (s.isOk() && !in_place_ && ::rename(temp_.c_str(), target_.c_str()) != 0)
    s = ioError(path_ + ": cannot rename " + temp_ + " over it: " + errnoText(errno));
  if (!s.isOk()) {
    discard();
    return error_ = s;
  }
  temp_.clear();
  if (!in_place_) {
    // Make the rename itself durable; best effort (some file systems refuse).
    const int dir = ::open(dirName(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      (void)::fsync(dir);
      ::close(dir);
    }
  }
  error_ = failedPrecondition(path_ + ": already committed");
  return Status::ok();
}

}  // namespace llmrt

// Files that front ends (the llmrt command, servers) read and write on a
// user's behalf: bounded whole-file reads that look at the file's type before
// opening it (a FIFO never blocks, /dev/zero never grows a buffer without
// limit, a directory is named as one), and output files replaced atomically
// (a killed run never leaves a truncated file where a complete one belongs).
// Every error is one line that starts with the path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "llmrt/status.h"

namespace llmrt {

// The documented limit on text the front ends read whole: JSON-lines request
// files (`generate --input-file`), perplexity texts (`perplexity --file`),
// tokenizer files named on the command line and standard input. 1 GiB.
inline constexpr uint64_t kMaxTextFileBytes = uint64_t{1} << 30;

// Checks, without opening it, that `path` (symlinks followed) is a regular
// file of at most `max_bytes`. Fails with NotFound when it does not exist,
// InvalidArgument when it is a directory, FIFO, device or socket or is larger
// than `max_bytes`, and IoError when it cannot be examined, e.g.
//   "in.jsonl: is a directory; expected a regular file".
// For files that a library loader opens afterwards (Tokenizer::fromFile).
Status checkRegularFile(const std::string& path, uint64_t max_bytes);

// The whole contents of a regular file of at most `max_bytes`: checkRegularFile,
// then a non-blocking open (a path swapped for a FIFO since the check does not
// block either), the same check on the opened file, and a read that stops
// after `max_bytes` (a file that grows while it is read fails rather than
// growing the result). Errors as checkRegularFile, IoError for read failures.
Result<std::string> readRegularFile(const std::string& path, uint64_t max_bytes);

// Standard input to its end, at most `max_bytes` (more is InvalidArgument
// naming the limit, without reading further).
Result<std::string> readStandardInput(uint64_t max_bytes);

// True when `a` and `b` would name the same file: the same device and inode
// when both exist (symlinks and hard links included), else the same absolute
// path once the existing directory part is resolved. Lets a front end refuse
// to write its output over its input.
bool isSameFile(const std::string& a, const std::string& b);

// Writes a file whole or not at all. Data goes to a temporary file
// ".<name>.tmp-XXXXXX" in the destination's directory; commit() flushes it to
// disk and renames it over the destination, so readers see the old file or
// the complete new one. A writer destroyed before commit() removes the
// temporary file (a killed process leaves only that hidden temporary file).
// The new file gets the replaced file's permissions, or 0666 less the umask.
// A symlink to a regular file has its target replaced. A destination that
// exists and is not a regular file (/dev/null, a FIFO), or lies under /dev/
// or /proc/ (/dev/stdout), is written in place: there is nothing to rename over.
class AtomicFileWriter {
 public:
  // Creates the temporary file (or opens the destination in place). Fails
  // when the destination is a directory or its directory is not writable.
  static Result<AtomicFileWriter> open(const std::string& path);

  AtomicFileWriter(AtomicFileWriter&& o) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&& o) noexcept;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  // Appends `data` (buffered). IoError on a failed write; later calls fail too.
  Status write(std::string_view data);
  // Flushes, syncs and renames over the destination. After a failure the
  // destination is unchanged and the temporary file is removed.
  Status commit();
  // Removes the temporary file now (no-op after commit()).
  void discard();

  const std::string& path() const { return path_; }

 private:
  AtomicFileWriter() = default;
  Status flushBuffer();

  int fd_ = -1;
  bool in_place_ = false;
  std::string path_;    // as given (for messages)
  std::string target_;  // what commit() renames over (symlinks resolved)
  std::string temp_;    // the temporary file; empty when in place or committed
  std::string buffer_;
  Status error_;
};

}  // namespace llmrt

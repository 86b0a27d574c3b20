// Read-only memory-mapped files (RAII) and small whole-file reads.
//
// A mapping reads the file as it is now, page by page, not as it was when it
// was opened: if the file is truncated while mapped (a checkpoint overwritten
// in place, a download restarted into the same path, `truncate`, a network
// filesystem losing the file), touching a page past the new end of the file
// raises SIGBUS and the process dies. Nothing inside the process can validate
// against that in advance. What the loader does: sizes and every tensor's byte
// range are checked against the file size when it is opened (safetensors.h),
// so a file that is already short is an error, never a fault; weights are read
// from the mapping only while loading (the CPU backend keeps float32 weights
// in place, zero-copy, for the engine's life). Replacing a file by renaming a
// new one over it is safe: the mapping keeps the old inode. Do not rewrite a
// model's files in place while a process runs it (docs/user-guide.md, "Model
// files are memory-mapped").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "llmrt/status.h"

namespace llmrt {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Maps `path` read-only. An empty file maps to size 0 with a null data().
  static Result<MappedFile> open(const std::string& path);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void reset();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole (small) file into a string; errors name the path and errno text.
Result<std::string> readTextFile(const std::string& path);
bool fileExists(const std::string& path);
bool isDirectory(const std::string& path);

}  // namespace llmrt

// Read-only memory-mapped files (RAII) and small whole-file reads.
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

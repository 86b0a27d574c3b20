// safetensors: parsing and validating the header of a .safetensors file, and
// memory-mapped, zero-copy access to its tensors.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON header
//   {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"<str>": "<str>"}  (optional)}
// then the data buffer. Offsets are relative to the start of the data buffer.
//
// Alignment: the format does not align tensors; a tensor's bytes may start at
// any address (the data buffer begins at 8 + N). Consumers must not assume the
// pointer is aligned for its dtype: CPU code copies or converts through
// memcpy-style loads, and device uploads copy anyway.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/tensor.h"
#include "llmrt/status.h"

namespace llmrt {

// Headers larger than this are rejected as corrupt (the reference implementation's limit).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
// Headers nested deeper than this are rejected (the format needs 3 levels).
constexpr int kMaxSafetensorsHeaderDepth = 16;

struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t begin = 0;  // byte offsets relative to the data buffer
  uint64_t end = 0;
  uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
  uint64_t header_bytes = 0;                    // N
  uint64_t data_offset = 0;                     // 8 + N: where the data buffer starts in the file
  uint64_t data_bytes = 0;                      // size of the data buffer
  std::vector<SafetensorsTensorInfo> tensors;   // in data order (by begin offset, then name)
  std::map<std::string, std::string> metadata;  // "__metadata__"
  // Non-fatal findings: unused bytes between or after tensors.
  std::vector<std::string> warnings;
};

// Parses and validates a whole safetensors file held in memory. `where` names
// the file in error messages. Checks: the 8-byte length is present, N <= file
// size - 8 and N <= kMaxSafetensorsHeaderBytes; the header is a JSON object;
// each entry has dtype (a known name), shape (non-negative integers, rank <=
// kMaxTensorRank) and data_offsets ([begin, end], begin <= end <= data size:
// every tensor's bytes lie inside the file, so a file cut short is an error
// here, never a read past the mapping); end - begin == numel * dtype size
// (overflow-checked); no duplicate names (nor keys in an entry); nesting at most
// kMaxSafetensorsHeaderDepth; no two tensors overlap. Gaps between tensors are
// reported in `warnings`.
// Errors: ParseError for a malformed header, OutOfRange for offsets beyond the
// data buffer, InvalidArgument for inconsistent sizes or overlaps.
Result<SafetensorsHeader> parseSafetensors(std::span<const uint8_t> file_bytes, std::string_view where);

// A memory-mapped safetensors file. Tensor views point into the read-only
// mapping (zero-copy); they stay valid while the SafetensorsFile (or whatever
// it was moved into) lives. Never write through them.
class SafetensorsFile {
 public:
  SafetensorsFile() = default;
  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;

  // Maps and validates `path`. Errors name the path (NotFound if it is missing).
  static Result<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const SafetensorsHeader& header() const { return header_; }
  const std::vector<SafetensorsTensorInfo>& tensors() const { return header_.tensors; }
  // Start of the whole mapped file (tensor data lies at data_offset + begin).
  const uint8_t* mappedData() const { return file_.data(); }

  // Pointer to the first byte of `info`'s data (possibly unaligned, see above).
  const uint8_t* dataOf(const SafetensorsTensorInfo& info) const {
    return file_.data() + header_.data_offset + info.begin;
  }
  // The tensor's info, or nullptr.
  const SafetensorsTensorInfo* find(std::string_view name) const;
  // A CPU TensorView over the mapping; NotFound naming the file if absent.
  Result<TensorView> tensor(std::string_view name) const;

 private:
  MappedFile file_;
  SafetensorsHeader header_;
  std::map<std::string, size_t, std::less<>> index_;
};

}  // namespace llmrt

// Writing a safetensors file: the header (nlohmann-json; names, dtypes, shapes, data offsets,
// padded with spaces to a multiple of 8 bytes), then each tensor's bytes as its producer gives
// them, streamed, so a file larger than memory can be written.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "llmrt/status.h"

namespace llmrt {

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  Shape shape;
  // Appends exactly numel * dtypeSize bytes of the tensor to `out` (called once, in order).
  std::function<Status(std::vector<char>& out)> bytes;
};

// Writes `path` (through `path`.tmp, renamed at the end; removed on failure).
Status writeSafetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                        const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace llmrt

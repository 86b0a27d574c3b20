// NumPy .npy files (format 1.0/2.0/3.0, C order, little-endian): written for
// --output-logits-npy, read for golden fixtures.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "llmrt/status.h"

namespace llmrt {

// Writes float32 data of the given shape as '<f4'.
Status writeNpyF32(const std::string& path, const float* data, const Shape& shape);

struct NpyArray {
  Shape shape;
  std::vector<float> data;  // converted to float32 from <f4, <f8, <f2, <i4, <i8
};
Result<NpyArray> readNpy(const std::string& path);
// Parses .npy bytes already in memory; `source` names them in errors.
Result<NpyArray> parseNpy(const uint8_t* bytes, size_t size, const std::string& source);

}  // namespace llmrt

// Shared by every backend's loadWeight: checks that the parts of a fused weight
// (e.g. q/k/v projections) can be concatenated along dim 0 and returns the
// fused shape.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "llmrt/status.h"

namespace llmrt {

inline Result<Shape> fusedWeightShape(std::span<const TensorView> parts, const std::string& name) {
  if (parts.empty()) return invalidArgument("loadWeight(" + name + "): no parts");
  const Shape& first = parts[0].shape;
  int64_t rows = 0;
  for (const TensorView& p : parts) {
    if (p.shape.rank() != first.rank() || p.shape.rank() < 1)
      return invalidArgument("loadWeight(" + name + "): parts of different rank");
    for (int d = 1; d < first.rank(); ++d)
      if (p.shape[d] != first[d])
        return invalidArgument("loadWeight(" + name + "): part shape " + p.shape.toString() + " does not match " +
                               first.toString());
    if (!isFloatingPoint(p.dtype))
      return invalidArgument("loadWeight(" + name + "): dtype " + std::string(dtypeName(p.dtype)) +
                             " is not a floating type");
    if (p.device != Device::kCpu) return invalidArgument("loadWeight(" + name + "): parts must be in host memory");
    rows += p.shape[0];
  }
  Shape shape = first;
  shape[0] = rows;
  return shape;
}

// Checks loadQuantizedWeight's arguments: codes [out, in] F8_E4M3 or I8 and scales [out] F32,
// contiguous, in host memory.
inline Status checkQuantizedWeightParts(const TensorView& codes, const TensorView& scales, const std::string& name) {
  if ((codes.dtype != DType::kF8E4M3 && codes.dtype != DType::kI8) || codes.shape.rank() != 2 ||
      !codes.isContiguous() || codes.device != Device::kCpu)
    return invalidArgument("loadQuantizedWeight(" + name + "): codes are " + std::string(dtypeName(codes.dtype)) +
                           " " + codes.shape.toString() +
                           "; expected a contiguous F8_E4M3 or I8 [out, in] matrix in host memory");
  if (scales.dtype != DType::kF32 || scales.numel() != codes.shape[0] || !scales.isContiguous() ||
      scales.device != Device::kCpu)
    return invalidArgument("loadQuantizedWeight(" + name + "): scales are " + std::string(dtypeName(scales.dtype)) +
                           " " + scales.shape.toString() + "; expected " + std::to_string(codes.shape[0]) +
                           " contiguous F32 values (one per row) in host memory");
  return Status::ok();
}

}  // namespace llmrt

namespace llmrt {

// Checks loadInt4Weight's arguments (backend.h): codes U8 [out, in] of 0..15, scales F32 and zeros
// U8 (0..15) [out, in / group], contiguous, in host memory, group dividing in.
Status checkInt4WeightParts(const TensorView& codes, const TensorView& scales, const TensorView& zeros, int64_t group,
                            const std::string& name);
// W[i][j] = float(code - zero) * scale as float32 [out * in] (the arguments checked).
std::vector<float> dequantizeInt4(const TensorView& codes, const TensorView& scales, const TensorView& zeros,
                                  int64_t group);

}  // namespace llmrt

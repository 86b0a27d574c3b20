// Shared by every backend's loadWeight: checks that the parts of a fused weight
// (e.g. q/k/v projections) can be concatenated along dim 0 and returns the
// fused shape.
#pragma once

#include <span>
#include <string>

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

}  // namespace llmrt

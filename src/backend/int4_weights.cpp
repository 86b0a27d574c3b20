// Backend::loadInt4Weight's default body (the weights dequantized into loadWeight) and the
// checks every backend's version runs (weight_parts.h).
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/weight_parts.h"

namespace llmrt {

Status checkInt4WeightParts(const TensorView& codes, const TensorView& scales, const TensorView& zeros, int64_t group,
                            const std::string& name) {
  const std::string where = "loadInt4Weight(" + name + "): ";
  if (codes.dtype != DType::kU8 || codes.shape.rank() != 2 || !codes.isContiguous() || codes.device != Device::kCpu)
    return invalidArgument(where + "codes are " + std::string(dtypeName(codes.dtype)) + " " + codes.shape.toString() +
                           "; expected a contiguous U8 [out, in] matrix in host memory");
  const int64_t out = codes.shape[0], in = codes.shape[1];
  if (group < 1 || in % group != 0)
    return invalidArgument(where + "group " + std::to_string(group) + " does not divide in_features " +
                           std::to_string(in));
  const Shape g{out, in / group};
  if (scales.dtype != DType::kF32 || scales.shape != g || !scales.isContiguous() || scales.device != Device::kCpu)
    return invalidArgument(where + "scales are " + std::string(dtypeName(scales.dtype)) + " " +
                           scales.shape.toString() + "; expected contiguous F32 " + g.toString() + " in host memory");
  if (zeros.dtype != DType::kU8 || zeros.shape != g || !zeros.isContiguous() || zeros.device != Device::kCpu)
    return invalidArgument(where + "zeros are " + std::string(dtypeName(zeros.dtype)) + " " + zeros.shape.toString() +
                           "; expected contiguous U8 " + g.toString() + " in host memory");
  const auto* c = static_cast<const uint8_t*>(codes.data);
  const auto* z = static_cast<const uint8_t*>(zeros.data);
  for (int64_t i = 0; i < codes.numel(); ++i)
    if (c[i] > 15) return invalidArgument(where + "code " + std::to_string(c[i]) + " at " + std::to_string(i) + " is not 4-bit");
  for (int64_t i = 0; i < zeros.numel(); ++i)
    if (z[i] > 15) return invalidArgument(where + "zero point " + std::to_string(z[i]) + " is not 4-bit");
  return Status::ok();
}

std::vector<float> dequantizeInt4(const TensorView& codes, const TensorView& scales, const TensorView& zeros,
                                  int64_t group) {
  const int64_t out = codes.shape[0], in = codes.shape[1], groups = in / group;
  const auto* c = static_cast<const uint8_t*>(codes.data);
  const auto* z = static_cast<const uint8_t*>(zeros.data);
  const auto* s = static_cast<const float*>(scales.data);
  std::vector<float> w(static_cast<size_t>(out * in));
  for (int64_t i = 0; i < out; ++i)
    for (int64_t j = 0; j < in; ++j) {
      const int64_t g = i * groups + j / group;
      w[static_cast<size_t>(i * in + j)] =
          static_cast<float>(static_cast<int32_t>(c[i * in + j]) - static_cast<int32_t>(z[g])) * s[g];
    }
  return w;
}

Result<TensorView> Backend::loadInt4Weight(const TensorView& codes, const TensorView& scales, const TensorView& zeros,
                                           int64_t group, const std::string& name) {
  LLMRT_RETURN_IF_ERROR(checkInt4WeightParts(codes, scales, zeros, group, name));
  std::vector<float> w = dequantizeInt4(codes, scales, zeros, group);
  const TensorView part(w.data(), DType::kF32, codes.shape);
  return loadWeight(std::span<const TensorView>(&part, 1), name, /*borrowable=*/false);
}

}  // namespace llmrt

// AutoAWQ's 4-bit weight quantization and its GEMM checkpoint packing (what `llmrt quantize
// --method awq` writes and DecoderWeightReader reads back).
//
// A matrix W [out, in] in groups of `group` inputs per row: per (row, group) max and min,
// scale = max(max - min, 1e-5) / 15 rounded to fp16 (as stored), zero = clamp(-round(min / scale),
// 0, 15), code = clamp(round(w / scale) + zero, 0, 15) (round half to even, as torch.round);
// the weight is then float(code - zero) * scale.
#pragma once

#include <cstdint>
#include <vector>

namespace llmrt {

// AutoAWQ's packing order: output column c of a packed int32 sits in nibble kAwqNibble[c % 8]
// (columns 0 2 4 6 1 3 5 7 in nibbles 0..7).
inline constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

struct AwqPacked {
  std::vector<uint32_t> qweight;  // [in, out / 8]: output column c of a word in nibble {0,4,1,5,2,6,3,7}[c % 8]
  std::vector<uint32_t> qzeros;   // [in / group, out / 8], packed the same way
  std::vector<uint16_t> scales;   // [in / group, out], fp16 bits
};

// w [out, in] row-major float32; out % 8 == 0 and in % group == 0 (the caller checks).
AwqPacked packAwq(const float* w, int64_t out, int64_t in, int64_t group);

// The quantized-then-dequantized weight (float(code - zero) * scale) into deq [out, in].
void awqRoundTrip(const float* w, int64_t out, int64_t in, int64_t group, float* deq);

}  // namespace llmrt

// What the stand-alone CUDA benchmarks of scripts/bench share (gemm_algos.cu, fp8_gemm_modes.cu):
// a check that exits on the first failing CUDA / cuBLAS call, and random bf16 operands.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                   \
  do {                                                                          \
    auto e_ = (x);                                                              \
    if (static_cast<int>(e_) != 0) {                                            \
      std::fprintf(stderr, "%s:%d %s = %d\n", __FILE__, __LINE__, #x, (int)e_); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

// A value in [-1, 1) from a hash of the index: random operands draw more power than constant ones,
// so the clocks and the times are the model's.
__device__ inline float hashValue(size_t i, uint32_t seed) {
  uint32_t h = uint32_t(i) * 2654435761u ^ seed;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return float(h & 0xffff) / 32768.0f - 1.0f;
}

__global__ void fillBf16(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16(hashValue(i, seed));
}

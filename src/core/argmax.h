// The greedy token of a logits row, the one rule shared by the CPU backend's argmaxRows and the
// host Sampler (and reproduced by the CUDA argmax kernel).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace llmrt {

// The index of the largest of x[0..n), ties to the lowest index; -1 when a value is NaN or +inf,
// or when none is finite (n == 0 or all -inf): such a row has no greedy token.
inline int64_t argmaxFinite(const float* x, int64_t n) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i]) || x[i] == std::numeric_limits<float>::infinity()) return -1;
    if (x[i] != -std::numeric_limits<float>::infinity() && (best < 0 || x[i] > x[best])) best = i;
  }
  return best;
}

}  // namespace llmrt

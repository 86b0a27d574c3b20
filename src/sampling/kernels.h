// Vocabulary-wide loops of the sampler (vectorized with GCC / Clang vector
// extensions; expStore / expSum also in an AVX2 version chosen at run time,
// bit-identical to the baseline one) and the sampler's exponential.
// Internal to src/sampling.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace llmrt::detail {

// a if c else b, without a branch: GCC does not if-convert float selects that
// guard trapping arithmetic, which would keep loops calling fastExp scalar.
inline float selectFloat(bool c, float a, float b) {
  const int32_t m = -static_cast<int32_t>(c);
  return std::bit_cast<float>((std::bit_cast<int32_t>(a) & m) | (std::bit_cast<int32_t>(b) & ~m));
}

// exp(x) for x <= 0 (Cephes expf: Cody-Waite reduction, degree-6 polynomial),
// relative error below 2e-7; 0 for x < -87 (no denormals) and for -inf. The
// sampler's probabilities are defined with this function (a CUDA port must
// use the same operations, without FMA contraction, to match bit for bit).
inline float fastExp(float x) {
  const float xc = selectFloat(x > -88.0f, x, -88.0f);                      // also maps -inf
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x / ln 2)
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * (r * r) + r + 1.0f;
  const int32_t e = (static_cast<int32_t>(n) + 127) << 23;
  const float v = y * std::bit_cast<float>(e);
  return selectFloat(x >= -87.0f, v, 0.0f);
}

// Whether this CPU runs the AVX2 versions of expStore / expSum (x86-64 only).
bool avx2Available();
// Tests: turns the AVX2 versions off or back on; returns the previous setting.
bool setAvx2Enabled(bool enabled);

struct MaxScan {
  float max;
  bool invalid;  // some value is NaN or +inf
};
MaxScan maxScan(const float* x, size_t n);

// Smallest value above -inf (+inf when there is none).
float minFinite(const float* x, size_t n);

// out[i] = fastExp((x[i] - shift) * scale); returns the sum of out.
double expStore(const float* x, size_t n, float shift, float scale, float* out);

// Sum of fastExp(x[i] - shift).
double expSum(const float* x, size_t n, float shift);

// Sum of p[i].
double sum(const float* p, size_t n);

// p[i] = 0 unless x[i] at or before the cut in (logit desc, id asc) order
// (when has_cut) and p[i] >= min_p; returns the sum of the new p.
double maskProbs(const float* x, float* p, size_t n, bool has_cut, float cut_logit, int32_t cut_id,
                 float min_p);

// out[i] = bucket of x[i]: floor((max - x[i]) * scale), capped at last (-inf and NaN go to last).
void bucketize(const float* x, size_t n, float max, float scale, int32_t last, uint16_t* out);

// The first i in [begin, n) with x[i] > threshold, or n. Checks 16 values per
// step, so scans where hits are rare cost little more than reading the data.
size_t firstAbove(const float* x, size_t begin, size_t n, float threshold);

// The first i in [begin, n) with x[i] == value, or n (16 values per step).
size_t firstEqual(const uint16_t* x, size_t begin, size_t n, uint16_t value);

// Number of x[i] > v.
size_t countGreater(const float* x, size_t n, float v);

// The first i whose cumulative sum p[0] + ... + p[i] exceeds `target`, scanning
// in blocks; when rounding leaves the total short, the last i with p[i] > 0.
// -1 when every p is 0.
int64_t inverseCdf(const float* p, size_t n, double target);

}  // namespace llmrt::detail

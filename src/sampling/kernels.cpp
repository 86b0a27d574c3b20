// The loops use GCC / Clang vector extensions (4 x float: plain SSE2 / NEON;
// 8 x float in functions compiled for AVX2 and picked at run time): GCC does
// not auto-vectorize float max / select loops without -ffast-math, and
// -ffast-math would change results. Every lane performs exactly the scalar
// operations of fastExp, and sums are associated the same way at every vector
// width, so all paths give bit-identical results.
#include "sampling/kernels.h"

#include <atomic>
#include <cstring>
#include <limits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define LLMRT_SAMPLING_AVX2 1
#endif

// 8-float vectors passed between always-inline helpers never cross an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace llmrt::detail {
namespace {

using F4 = float __attribute__((vector_size(16)));
using I4 = int32_t __attribute__((vector_size(16)));
using F8 = float __attribute__((vector_size(32)));
using I8 = int32_t __attribute__((vector_size(32)));

#define LLMRT_ALWAYS_INLINE inline __attribute__((always_inline))

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr size_t kStep = 16;    // floats per loop iteration
constexpr size_t kBlock = 256;  // floats summed in float before moving to double

template <typename V>
struct VecTraits;
template <>
struct VecTraits<F4> {
  using I = I4;
  static constexpr size_t kWidth = 4;
};
template <>
struct VecTraits<F8> {
  using I = I8;
  static constexpr size_t kWidth = 8;
};

template <typename V>
LLMRT_ALWAYS_INLINE V bcast(float x) {
  V r;
  for (size_t j = 0; j < VecTraits<V>::kWidth; ++j) r[j] = x;
  return r;
}
template <typename V>
LLMRT_ALWAYS_INLINE V loadV(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename V>
LLMRT_ALWAYS_INLINE void storeV(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}
template <typename V>
LLMRT_ALWAYS_INLINE V selectV(const typename VecTraits<V>::I& mask, const V& a, const V& b) {
  using I = typename VecTraits<V>::I;
  return (V)(((I)a & mask) | ((I)b & ~mask));
}

// fastExp, lane-wise, operation for operation.
template <typename V>
LLMRT_ALWAYS_INLINE V fastExpV(const V& x) {
  using I = typename VecTraits<V>::I;
  const V xc = selectV<V>(x > bcast<V>(-88.0f), x, bcast<V>(-88.0f));
  const V n = (xc * bcast<V>(1.44269504088896341f) + bcast<V>(12582912.0f)) - bcast<V>(12582912.0f);
  V r = xc - n * bcast<V>(0.693359375f);
  r = r - n * bcast<V>(-2.12194440e-4f);
  V p = bcast<V>(1.9875691500e-4f);
  p = p * r + bcast<V>(1.3981999507e-3f);
  p = p * r + bcast<V>(8.3334519073e-3f);
  p = p * r + bcast<V>(4.1665795894e-2f);
  p = p * r + bcast<V>(1.6666665459e-1f);
  p = p * r + bcast<V>(5.0000001201e-1f);
  const V y = p * (r * r) + r + bcast<V>(1.0f);
  I bias;
  for (size_t j = 0; j < VecTraits<V>::kWidth; ++j) bias[j] = 127;
  const I e = (__builtin_convertvector(n, I) + bias) << 23;
  const V v = y * (V)e;
  return selectV<V>(x >= bcast<V>(-87.0f), v, bcast<V>(0.0f));
}

inline double hsum(F4 v) {
  return static_cast<double>(v[0]) + static_cast<double>(v[1]) + static_cast<double>(v[2]) +
         static_cast<double>(v[3]);
}

// Sum over [0, n) of fv(i) (the vector of values at i) / f1(i) (the tail): 16
// partial float sums (by offset mod 16) within blocks of kBlock, blocks added in
// double, so long sums of equal terms keep their precision and every vector
// width associates the sum identically.
template <typename V, typename VFn, typename F1Fn>
LLMRT_ALWAYS_INLINE double blockedSumV(size_t n, VFn&& fv, F1Fn&& f1) {
  constexpr size_t kWidth = VecTraits<V>::kWidth;
  constexpr size_t kPer = kStep / kWidth;
  double total = 0.0;
  size_t i = 0;
  while (i + kStep <= n) {
    const size_t end = n - i >= kBlock ? i + kBlock : i + (n - i) / kStep * kStep;
    V acc[kPer];
    for (size_t k = 0; k < kPer; ++k) acc[k] = bcast<V>(0.0f);
    for (; i < end; i += kStep) {
      for (size_t k = 0; k < kPer; ++k) acc[k] += fv(i + k * kWidth);
    }
    F4 part[4];
    static_assert(sizeof part == sizeof acc);
    std::memcpy(part, acc, sizeof part);
    total += hsum((part[0] + part[1]) + (part[2] + part[3]));
  }
  for (; i < n; ++i) total += f1(i);
  return total;
}

template <typename VFn, typename F1Fn>
inline double blockedSum(size_t n, VFn&& fv, F1Fn&& f1) {
  return blockedSumV<F4>(n, fv, f1);
}

inline F4 load(const float* p) { return loadV<F4>(p); }
inline void store(float* p, F4 v) { storeV<F4>(p, v); }
inline F4 splat(float x) { return F4{x, x, x, x}; }
inline I4 splatI(int32_t x) { return I4{x, x, x, x}; }
inline F4 select(I4 mask, F4 a, F4 b) { return selectV<F4>(mask, a, b); }
inline F4 vmax(F4 a, F4 b) { return select(a > b, a, b); }
inline F4 vmin(F4 a, F4 b) { return select(a < b, a, b); }

// out[i] = fastExp((x[i] - shift) * scale) (when kStore) and their sum, associated as blockedSumV.
template <typename V, bool kStore>
LLMRT_ALWAYS_INLINE double expKernelV(const float* x, size_t n, float shift, float scale, float* out) {
  constexpr size_t kWidth = VecTraits<V>::kWidth;
  constexpr size_t kPer = kStep / kWidth;
  const V vs = bcast<V>(shift), vk = bcast<V>(scale);
  double total = 0.0;
  size_t i = 0;
  while (i + kStep <= n) {
    const size_t end = n - i >= kBlock ? i + kBlock : i + (n - i) / kStep * kStep;
    V acc[kPer];
    for (size_t k = 0; k < kPer; ++k) acc[k] = bcast<V>(0.0f);
    for (; i < end; i += kStep) {
      for (size_t k = 0; k < kPer; ++k) {
        const V e = fastExpV<V>((loadV<V>(x + i + k * kWidth) - vs) * vk);
        if constexpr (kStore) storeV<V>(out + i + k * kWidth, e);
        acc[k] += e;
      }
    }
    F4 part[4];
    static_assert(sizeof part == sizeof acc);
    std::memcpy(part, acc, sizeof part);
    total += hsum((part[0] + part[1]) + (part[2] + part[3]));
  }
  for (; i < n; ++i) {
    const float e = fastExp((x[i] - shift) * scale);
    if constexpr (kStore) out[i] = e;
    total += e;
  }
  return total;
}

// Multiplying by 1 is exact, so expSum's terms are fastExp(x[i] - shift).
double expStoreBaseline(const float* x, size_t n, float shift, float scale, float* out) {
  return expKernelV<F4, true>(x, n, shift, scale, out);
}
double expSumBaseline(const float* x, size_t n, float shift) {
  return expKernelV<F4, false>(x, n, shift, 1.0f, nullptr);
}

#ifdef LLMRT_SAMPLING_AVX2
__attribute__((target("avx2"))) double expStoreAvx2(const float* x, size_t n, float shift, float scale,
                                                    float* out) {
  return expKernelV<F8, true>(x, n, shift, scale, out);
}
__attribute__((target("avx2"))) double expSumAvx2(const float* x, size_t n, float shift) {
  return expKernelV<F8, false>(x, n, shift, 1.0f, nullptr);
}
bool cpuHasAvx2() { return __builtin_cpu_supports("avx2"); }
#else
bool cpuHasAvx2() { return false; }
#endif

std::atomic<bool>& avx2Enabled() {
  static std::atomic<bool> enabled{cpuHasAvx2()};
  return enabled;
}

}  // namespace

MaxScan maxScan(const float* x, size_t n) {
  F4 m0 = splat(-kInf), m1 = m0, m2 = m0, m3 = m0;
  I4 bad = splatI(0);
  const F4 inf = splat(kInf);
  size_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    const F4 a = load(x + i), b = load(x + i + 4), c = load(x + i + 8), d = load(x + i + 12);
    m0 = vmax(a, m0);
    m1 = vmax(b, m1);
    m2 = vmax(c, m2);
    m3 = vmax(d, m3);
    // NaN and +inf both fail "< inf".
    bad |= ~(a < inf) | ~(b < inf) | ~(c < inf) | ~(d < inf);
  }
  const F4 m = vmax(vmax(m0, m1), vmax(m2, m3));
  MaxScan r{-kInf, (bad[0] | bad[1] | bad[2] | bad[3]) != 0};
  for (int j = 0; j < 4; ++j) r.max = m[j] > r.max ? m[j] : r.max;
  for (; i < n; ++i) {
    r.max = x[i] > r.max ? x[i] : r.max;
    r.invalid |= !(x[i] < kInf);
  }
  return r;
}

float minFinite(const float* x, size_t n) {
  const F4 inf = splat(kInf), ninf = splat(-kInf);
  F4 m0 = inf, m1 = inf, m2 = inf, m3 = inf;
  size_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    const F4 a = load(x + i), b = load(x + i + 4), c = load(x + i + 8), d = load(x + i + 12);
    m0 = vmin(select(a > ninf, a, inf), m0);
    m1 = vmin(select(b > ninf, b, inf), m1);
    m2 = vmin(select(c > ninf, c, inf), m2);
    m3 = vmin(select(d > ninf, d, inf), m3);
  }
  const F4 m = vmin(vmin(m0, m1), vmin(m2, m3));
  float r = kInf;
  for (int j = 0; j < 4; ++j) r = m[j] < r ? m[j] : r;
  for (; i < n; ++i) {
    if (x[i] > -kInf && x[i] < r) r = x[i];
  }
  return r;
}

bool avx2Available() { return cpuHasAvx2(); }
bool setAvx2Enabled(bool enabled) { return avx2Enabled().exchange(enabled && cpuHasAvx2()); }

double expStore(const float* x, size_t n, float shift, float scale, float* out) {
#ifdef LLMRT_SAMPLING_AVX2
  if (avx2Enabled().load(std::memory_order_relaxed)) return expStoreAvx2(x, n, shift, scale, out);
#endif
  return expStoreBaseline(x, n, shift, scale, out);
}

double expSum(const float* x, size_t n, float shift) {
#ifdef LLMRT_SAMPLING_AVX2
  if (avx2Enabled().load(std::memory_order_relaxed)) return expSumAvx2(x, n, shift);
#endif
  return expSumBaseline(x, n, shift);
}

double sum(const float* p, size_t n) {
  return blockedSum(
      n, [&](size_t i) { return load(p + i); }, [&](size_t i) { return p[i]; });
}

double maskProbs(const float* x, float* p, size_t n, bool has_cut, float cut_logit, int32_t cut_id,
                 float min_p) {
  if (!has_cut) {
    cut_logit = -kInf;  // every token is at or before (-inf, max id)
    cut_id = std::numeric_limits<int32_t>::max();
  }
  const F4 cl = splat(cut_logit), mp = splat(min_p);
  const I4 cid = splatI(cut_id), lane = I4{0, 1, 2, 3};
  return blockedSum(
      n,
      [&](size_t i) {
        const F4 v = load(x + i), q = load(p + i);
        const I4 id = splatI(static_cast<int32_t>(i)) + lane;
        const I4 keep = ((v > cl) | ((v == cl) & (id <= cid))) & (q >= mp);
        const F4 r = select(keep, q, splat(0.0f));
        store(p + i, r);
        return r;
      },
      [&](size_t i) {
        const int32_t id = static_cast<int32_t>(i);
        const bool keep = (x[i] > cut_logit || (x[i] == cut_logit && id <= cut_id)) && p[i] >= min_p;
        p[i] = keep ? p[i] : 0.0f;
        return p[i];
      });
}

void bucketize(const float* x, size_t n, float max, float scale, int32_t last, uint16_t* out) {
  const float top = static_cast<float>(last);
  const F4 vm = splat(max), vs = splat(scale), vt = splat(top);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const F4 d = (vm - load(x + i)) * vs;
    const I4 b = __builtin_convertvector(select(d < vt, d, vt), I4);  // NaN (-inf * 0) fails "<"
    for (int j = 0; j < 4; ++j) out[i + static_cast<size_t>(j)] = static_cast<uint16_t>(b[j]);
  }
  for (; i < n; ++i) {
    const float d = (max - x[i]) * scale;
    out[i] = static_cast<uint16_t>(static_cast<int32_t>(d < top ? d : top));
  }
}

size_t firstAbove(const float* x, size_t begin, size_t n, float threshold) {
  const F4 t = splat(threshold);
  size_t i = begin;
  for (; i + kStep <= n; i += kStep) {
    const I4 hit = (load(x + i) > t) | (load(x + i + 4) > t) | (load(x + i + 8) > t) | (load(x + i + 12) > t);
    if ((hit[0] | hit[1] | hit[2] | hit[3]) != 0) break;
  }
  for (; i < n; ++i) {
    if (x[i] > threshold) return i;
  }
  return n;
}

size_t firstEqual(const uint16_t* x, size_t begin, size_t n, uint16_t value) {
  using U8 = uint16_t __attribute__((vector_size(16)));
  const U8 v = {value, value, value, value, value, value, value, value};
  size_t i = begin;
  for (; i + 16 <= n; i += 16) {
    U8 a, b;
    std::memcpy(&a, x + i, sizeof a);
    std::memcpy(&b, x + i + 8, sizeof b);
    const auto hit = (a == v) | (b == v);
    uint64_t any;
    std::memcpy(&any, &hit, sizeof any);
    uint64_t any_hi;
    std::memcpy(&any_hi, reinterpret_cast<const char*>(&hit) + 8, sizeof any_hi);
    if ((any | any_hi) != 0) break;
  }
  for (; i < n; ++i) {
    if (x[i] == value) return i;
  }
  return n;
}

size_t countGreater(const float* x, size_t n, float v) {
  I4 c = splatI(0);
  const F4 vv = splat(v);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) c -= (load(x + i) > vv);  // true lanes are -1
  size_t total = static_cast<size_t>(c[0]) + static_cast<size_t>(c[1]) + static_cast<size_t>(c[2]) +
                 static_cast<size_t>(c[3]);
  for (; i < n; ++i) total += x[i] > v;
  return total;
}

int64_t inverseCdf(const float* p, size_t n, double target) {
  double cum = 0.0;
  int64_t last_positive_block = -1;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t len = n - b < kBlock ? n - b : kBlock;
    const double block = sum(p + b, len);
    if (block > 0.0) last_positive_block = static_cast<int64_t>(b);
    if (cum + block > target) {
      for (size_t i = b; i < b + len; ++i) {
        cum += p[i];
        if (cum > target && p[i] > 0.0f) return static_cast<int64_t>(i);
      }
      // Rounding: the block said yes, the running sum says no. Take its last positive token.
      for (size_t i = b + len; i-- > b;) {
        if (p[i] > 0.0f) return static_cast<int64_t>(i);
      }
    }
    cum += block;
  }
  if (last_positive_block < 0) return -1;
  for (size_t i = n; i-- > static_cast<size_t>(last_positive_block);) {
    if (p[i] > 0.0f) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace llmrt::detail

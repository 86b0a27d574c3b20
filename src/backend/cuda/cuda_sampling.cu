// Sampling on the device (Backend::sampleRows): one CTA per logits row (or, for steps
// of a few rows, many CTAs per row: the row-group kernel below) does what the host
// Sampler (src/sampling/sampler.cpp) does for one sequence, so only the token (and
// requested logprobs) cross to the host:
//   penalties and min_tokens masks in place -> max / validity scan -> greedy argmax,
//   or temperature probabilities, top-k cut, top-p cut, min-p, inverse-CDF draw
//   with the Philox uniform of (seed, step, sample index) -> logprobs.
//
// Exactness: the probabilities use the host's exponential operation for operation
// (no FMA contraction), so they are bit-identical to the host's. Masses are summed
// for the top-p cut in 2^-40 fixed point, each probability rounded to nearest (integer
// sums, independent of order); the draw sums the float probabilities in double as the
// host does — in id order on the candidate path (exactly the host's sum), else in a
// fixed tree order — so a row samples the same token on every run.
// (A fixed-point draw moved one draw in ~2,000 to a neighbouring token at a 128k
// vocabulary: the probabilities below 2^-41 that it drops add up.) The kept set under top-k is exact
// (logit order, ties to the lower id); top-p and the draw agree with the host except
// where a boundary falls within ~1e-12 of the target (a token whose probability is
// below 2^-40 of the top one is never drawn).
//
// Selection without sorting: the k-th token in (logit desc, id asc) order, or the
// token where the descending-order mass reaches a target, is found by a 4-pass radix
// select over an order-preserving 32-bit key (256-bin shared histograms), then a
// scan over the equal-keyed tokens in id order for the tie. A vocabulary of 128k
// tokens costs one pass for greedy and up to ~13 passes (L2-resident) with top-k,
// top-p and logprobs together.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_vec.h"
#include "backend/row_sampling.h"
#include "core/philox.h"

namespace llmrt::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xffffffffu;
constexpr float kFixedScale = 0x1p40f;  // probability 1 (the top token) = 2^40
constexpr int kMaxCandidates = kThreads;  // the candidate path's set: one token per thread
using u64 = unsigned long long;

// The compact pass for a few rows, each with a small top-k and no logprobs (one CTA per row would
// stream the vocabulary ~7 times on one SM): kCompactCtas CTAs per row each keep their slice's
// top-k, and the row's CTA samples from the union (at most kCompactCap tokens, holding the row's
// top-k) instead of the vocabulary.
constexpr int kCompactCtas = kWarps;  // (the sampling CTA keeps the slice offsets in warp_i32)
constexpr int kCompactMaxK = 256;
constexpr int kCompactCap = kCompactCtas * kCompactMaxK;
constexpr int64_t kCompactMaxRows = 16;

// The row-group path (groupSampleKernel): steps of at most kGroupMaxRows rows, each row cut into
// up to kGroupMaxCtas slices (fewer where the GPU cannot keep rows x slices CTAs resident).
constexpr int64_t kGroupMaxRows = 16;
constexpr int kGroupMaxCtas = 32;
constexpr int kGroupMinCtas = 8;

// Where the compact pass leaves each slice's candidates (in id order) and the row's union.
struct CompactView {
  float* seg_val;      // [rows][kCompactCtas][kCompactMaxK]
  int32_t* seg_id;
  int32_t* seg_count;  // [rows][kCompactCtas]
  int32_t* seg_bad;    // [rows][kCompactCtas]: the slice holds a NaN or +inf
  float* row_val;      // [rows][kCompactCap]
  int32_t* row_id;
};

// fastExp of src/sampling/kernels.h (Cephes expf), the same operations in the same
// order with explicit rounding (no FMA contraction): bit-identical results.
__device__ __forceinline__ float fastExpDev(float x) {
  const float xc = x > -88.0f ? x : -88.0f;  // also maps -inf and NaN, as selectFloat does
  const float n = __fsub_rn(__fadd_rn(__fmul_rn(xc, 1.44269504088896341f), 12582912.0f), 12582912.0f);
  float r = __fsub_rn(xc, __fmul_rn(n, 0.693359375f));
  r = __fsub_rn(r, __fmul_rn(n, -2.12194440e-4f));
  float p = 1.9875691500e-4f;
  p = __fadd_rn(__fmul_rn(p, r), 1.3981999507e-3f);
  p = __fadd_rn(__fmul_rn(p, r), 8.3334519073e-3f);
  p = __fadd_rn(__fmul_rn(p, r), 4.1665795894e-2f);
  p = __fadd_rn(__fmul_rn(p, r), 1.6666665459e-1f);
  p = __fadd_rn(__fmul_rn(p, r), 5.0000001201e-1f);
  const float y = __fadd_rn(__fadd_rn(__fmul_rn(p, __fmul_rn(r, r)), r), 1.0f);
  const int32_t e = (static_cast<int32_t>(n) + 127) << 23;
  const float v = __fmul_rn(y, __int_as_float(e));
  return x >= -87.0f ? v : 0.0f;
}

// Ascending key = (logit descending); -0 and +0 are one value, as the host compares them.
__device__ __forceinline__ uint32_t orderKey(float x) {
  const uint32_t b = __float_as_uint(__fadd_rn(x, 0.0f));
  const uint32_t ascending = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return ~ascending;
}
// The logit whose orderKey is k.
__device__ __forceinline__ float keyValue(uint32_t k) {
  const uint32_t ascending = ~k;
  return __uint_as_float((ascending & 0x80000000u) ? (ascending & 0x7fffffffu) : ~ascending);
}

// Calls f(i, x[i]) for this thread's indices i = threadIdx.x + m * kThreads, ascending,
// with kLoads loads in flight (one load at a time leaves a lone CTA latency-bound).
constexpr int kLoads = 8;
template <typename F>
__device__ __forceinline__ void forEachValue(const float* x, int64_t n, F f) {
  for (int64_t base = threadIdx.x; base < n; base += kLoads * kThreads) {
    float v[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int64_t i = base + static_cast<int64_t>(j) * kThreads;
      v[j] = i < n ? x[i] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int64_t i = base + static_cast<int64_t>(j) * kThreads;
      if (i < n) f(i, v[j]);
    }
  }
}

struct Cut {
  bool on = false;
  uint32_t key = 0;
  int32_t id = 0;
  // Token (key k, id i) at or before the cut in (logit desc, id asc) order.
  __device__ bool keeps(uint32_t k, int64_t i) const { return !on || k < key || (k == key && i <= id); }
};

struct Shared {
  u64 hist[256];
  u64 warp_u64[kWarps];  // per-warp partial sums (any 8-byte-or-smaller type)
  float warp_f32[kWarps];
  int32_t warp_i32[kWarps];
  int32_t warp_i32b[kWarps];
  u64 rest;
  int32_t bin;
  int32_t found;
  int32_t result;
  int32_t top_count;
  // The candidate path (drawFromCandidates): the tokens, in id order, their fixed-point and
  // drawing weights.
  int32_t cand_count;
  int32_t cand_id[kMaxCandidates];
  float cand_val[kMaxCandidates];
  float cand_w[kMaxCandidates];
  u64 cand_fp[kMaxCandidates];
  double total;
};

template <typename T>
__device__ __forceinline__ T warpInclusiveScan(T v) {
  const int lane = threadIdx.x & 31;
  for (int o = 1; o < 32; o <<= 1) {
    const T n = __shfl_up_sync(kFull, v, o);
    if (lane >= o) v += n;
  }
  return v;
}

// Lane h holds part h of a sum taken in lane order and incl = warpInclusiveScan(part). The first
// lane where `hit` holds (-1: none) and, in *before, the sum of the parts ahead of it (the scan's
// own partial sum, so a double matches what the scan added); every lane calls it and gets both.
template <typename T>
__device__ __forceinline__ int firstLaneHit(bool hit, T incl, T* before) {
  const unsigned ball = __ballot_sync(kFull, hit);
  const int first = ball ? __ffs(ball) - 1 : -1;
  const T up = __shfl_up_sync(kFull, incl, 1);
  const T excl = (threadIdx.x & 31) == 0 ? T(0) : up;
  *before = __shfl_sync(kFull, excl, first < 0 ? 0 : first);
  return first;
}

template <typename T>
__device__ __forceinline__ T warpSum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// Block-wide sum (every thread gets the result), for u64, double or int32_t.
// Deterministic: a fixed tree order.
template <typename T>
__device__ T blockSum(T v, Shared& sh) {
  static_assert(sizeof(T) <= sizeof(u64), "one 8-byte slot per warp");
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  T* sums = reinterpret_cast<T*>(sh.warp_u64);
  v = warpSum(v);
  if (lane == 0) sums[warp] = v;
  __syncthreads();
  const T t = warpSum(lane < kWarps ? sums[lane] : T(0));
  __syncthreads();
  return t;
}

// Block-wide minimum of a u64 (every thread gets the result).
__device__ u64 blockMin(u64 v, Shared& sh) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(kFull, v, o));
  if (lane == 0) sh.warp_u64[warp] = v;
  __syncthreads();
  u64 t = lane < kWarps ? sh.warp_u64[lane] : ~0ull;
  for (int o = 16; o > 0; o >>= 1) t = min(t, __shfl_xor_sync(kFull, t, o));
  __syncthreads();
  return t;
}
// Block-wide largest of the threads' indices i in [0, n) (-1: the thread has none); -1 when none has.
__device__ int64_t blockLastIndex(int64_t i, int64_t n, Shared& sh) {
  const u64 gap = blockMin(i >= 0 ? static_cast<u64>(n - 1 - i) : ~0ull, sh);
  return gap == ~0ull ? -1 : n - 1 - static_cast<int64_t>(gap);
}

struct Row {
  const float* x;
  int64_t vocab;
  float max;
  float inv_t;

  // The host Sampler's probability of logit v (relative to the top token's 1).
  __device__ float prob(float v) const { return fastExpDev(__fmul_rn(__fsub_rn(v, max), inv_t)); }
  __device__ u64 fixedProb(float v) const { return __float2ull_rn(__fmul_rn(prob(v), kFixedScale)); }
};

// The first index i (ascending) at which the running sum of w(0..i) reaches
// target(total) (kStrict: exceeds it), where total is the sum of every w; -1 when
// it never does. T is u64 (counts, fixed-point masses) or double (the draw: the host
// sums float probabilities in double and takes the first cumulative sum > u * total).
// Narrowing: the range is cut into one contiguous segment per warp, the warps sum
// their segments (8 loads per lane in flight), warp 0 finds the segment holding the
// crossing; repeated until a segment is short enough for one warp to walk.
template <typename T, bool kStrict, typename W, typename Target>
__device__ int64_t firstReaching(int64_t n, W w, Target target_of, Shared& sh) {
  auto reached = [](T cum, T target) { return kStrict ? cum > target : (target > T(0) && cum >= target); };
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int64_t begin = 0, end = n;
  T rest = 0;
  bool first = true;
  while (end - begin > 256) {
    const int64_t seg = ((end - begin + kWarps - 1) / kWarps + 31) / 32 * 32;
    const int64_t b = begin + warp * seg, e = min(end, b + seg);
    T s = 0;
    for (int64_t base = b + lane; base < e; base += 32 * kLoads) {
      T part[kLoads];
#pragma unroll
      for (int j = 0; j < kLoads; ++j) {
        const int64_t i = base + 32 * j;
        part[j] = i < e ? w(i) : T(0);
      }
#pragma unroll
      for (int j = 0; j < kLoads; ++j) s += part[j];
    }
    s = warpSum(s);
    T* sums = reinterpret_cast<T*>(sh.warp_u64);
    if (lane == 0) sums[warp] = s;
    __syncthreads();
    if (warp == 0) {
      const T incl = warpInclusiveScan(sums[lane]);
      const T target = first ? target_of(__shfl_sync(kFull, incl, 31)) : rest;
      T before;
      const int hit = firstLaneHit(reached(incl, target), incl, &before);
      if (lane == 0) {
        sh.found = hit;
        if (hit >= 0) *reinterpret_cast<T*>(&sh.rest) = target - before;
      }
    }
    __syncthreads();
    const int owner = sh.found;
    rest = *reinterpret_cast<T*>(&sh.rest);
    __syncthreads();
    if (owner < 0) return -1;
    begin = begin + owner * seg;
    end = min(end, begin + seg);
    first = false;
  }
  if (first) {  // a short range: its total first
    T s = 0;
    for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) s += w(i);
    const T total = blockSum(s, sh);
    rest = target_of(total);
    if (!reached(total, rest)) return -1;
  }
  if (warp == 0) {
    if (lane == 0) sh.result = -1;
    __syncwarp();
    T cum = 0;
    for (int64_t base = begin; base < end; base += 32) {
      const int64_t i = base + lane;
      const T incl = warpInclusiveScan(i < end ? w(i) : T(0));
      const unsigned ball = __ballot_sync(kFull, reached(cum + incl, rest));
      if (ball) {
        if (lane == __ffs(ball) - 1) sh.result = static_cast<int32_t>(i);
        break;
      }
      cum += __shfl_sync(kFull, incl, 31);
    }
  }
  __syncthreads();
  const int64_t r = sh.result;
  __syncthreads();
  return r;
}

// hist[bin] += w for the calling lane, the warp's lanes with the same bin combined first: one
// shared atomic per distinct bin and warp step. (Logits share few leading key bytes, so per-lane
// atomics on the first radix pass serialised on a handful of bins.) w < 2^60 is reduced in three
// 20-bit parts (redux.sync adds 32-bit values).
__device__ __forceinline__ void histAdd(u64* hist, int bin, u64 w) {
  const unsigned peers = __match_any_sync(__activemask(), bin);
  const unsigned lo = __reduce_add_sync(peers, static_cast<unsigned>(w & 0xfffffu));
  const unsigned mid = __reduce_add_sync(peers, static_cast<unsigned>((w >> 20) & 0xfffffu));
  const unsigned hi = __reduce_add_sync(peers, static_cast<unsigned>(w >> 40));
  if ((threadIdx.x & 31) == __ffs(peers) - 1)
    atomicAdd(&hist[bin], static_cast<u64>(lo) + (static_cast<u64>(mid) << 20) + (static_cast<u64>(hi) << 40));
}

// One radix pass's histogram of the tokens `within` keeps whose key matches `prefix` under `mask`:
// sh.hist[bin of key bits shift..shift+7] += weight (1, or the fixed-point probability). `id0`:
// the global id of row.x[0] (a slice of a row). Ends with the histogram complete.
__device__ void radixHistogram(const Row& row, int64_t id0, const Cut& within, bool by_mass, uint32_t prefix,
                               uint32_t mask, int shift, Shared& sh) {
  for (int b = threadIdx.x; b < 256; b += kThreads) sh.hist[b] = 0;
  __syncthreads();
  forEachValue(row.x, row.vocab, [&](int64_t i, float v) {
    const uint32_t k = orderKey(v);
    if ((k & mask) != prefix || !within.keeps(k, id0 + i)) return;
    histAdd(sh.hist, static_cast<int>((k >> shift) & 255u), by_mass ? row.fixedProb(v) : 1ull);
  });
  __syncthreads();
}

// With sh.hist holding a pass's histogram: the bin at which the cumulative weight (ascending bins:
// logits descending) reaches target joins prefix / mask, and target becomes what is left of it
// within that bin. False when the histogram's total stays below target. (Every thread.)
__device__ bool radixStep(int shift, uint32_t& prefix, uint32_t& mask, u64& target, Shared& sh) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp == 0) {
    u64 s = 0;
    for (int j = 0; j < 8; ++j) s += sh.hist[lane * 8 + j];
    const u64 incl = warpInclusiveScan(s);
    u64 cum;
    const int hit = firstLaneHit(incl >= target, incl, &cum);
    if (lane == 0) sh.found = hit >= 0;
    if (lane == hit) {
      int b = lane * 8;
      for (; b < lane * 8 + 7 && cum + sh.hist[b] < target; ++b) cum += sh.hist[b];
      sh.bin = b;
      sh.rest = target - cum;
    }
  }
  __syncthreads();
  const bool found = sh.found;
  if (found) {
    prefix |= static_cast<uint32_t>(sh.bin) << shift;
    mask |= 255u << shift;
    target = sh.rest;
  }
  __syncthreads();
  return found;
}

// The position, among the tokens of key `prefix` (one logit value) in id order, of the cut once
// the radix passes leave `target` to reach within that key: the target-th token, or by mass the
// first whose cumulative (equal) fixed-point probability reaches target.
__device__ u64 tieRank(const Row& row, uint32_t prefix, bool by_mass, u64 target) {
  if (!by_mass) return target;
  const u64 m = row.fixedProb(keyValue(prefix));
  return m > 0 ? (target + m - 1) / m : 1ull;
}

// The token at which the cumulative weight, in (logit desc, id asc) order over the
// tokens `within` keeps, reaches `target` (>= 1): weight 1 per token (by_mass false:
// the target-th token) or its fixed-point probability. Returns the cut at that token;
// `on` false when the total weight stays below target.
__device__ Cut selectCut(const Row& row, const Cut& within, bool by_mass, u64 target, Shared& sh) {
  uint32_t prefix = 0, mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    radixHistogram(row, 0, within, by_mass, prefix, mask, shift, sh);
    if (!radixStep(shift, prefix, mask, target, sh)) return Cut{};
  }
  // Every token of key `prefix` has the same logit (and probability): the cut is
  // the r-th of them in id order.
  const u64 r = tieRank(row, prefix, by_mass, target);
  const int64_t id = firstReaching<u64, false>(
      row.vocab,
      [&](int64_t i) -> u64 {
        const uint32_t k = orderKey(row.x[i]);
        return k == prefix && within.keeps(k, i) ? 1ull : 0ull;
      },
      [&](u64 total) { return r < total ? r : total; }, sh);
  Cut c;
  c.on = id >= 0;
  c.key = prefix;
  c.id = static_cast<int32_t>(id);
  return c;
}

// Fixed-point mass of the tokens `cut` keeps (one pass; every thread gets it), and the top-p
// cut's target in it: ceil(top_p * mass), at least 1.
// (`id0`: the global id of row.x[0], for a slice of a row.)
__device__ u64 keptMass(const Row& row, int64_t id0, const Cut& cut, Shared& sh) {
  u64 mass = 0;
  forEachValue(row.x, row.vocab, [&](int64_t i, float v) {
    if (cut.keeps(orderKey(v), id0 + i)) mass += row.fixedProb(v);
  });
  return blockSum(mass, sh);
}

// min-p's threshold on the probability relative to the top token's 1 (0: off).
__device__ __forceinline__ float minProb(const RowSampling& p) { return p.min_p > 0.0f ? fminf(p.min_p, 1.0f) : 0.0f; }

// The draw's weight of the token of id `id` and logit v: its probability when `cut` keeps it
// and it reaches min_prob, else 0.
__device__ __forceinline__ double drawWeight(const Row& row, const Cut& cut, float min_prob, int64_t id, float v) {
  if (!cut.keeps(orderKey(v), id)) return 0.0;
  const float q = row.prob(v);
  return q >= min_prob ? static_cast<double>(q) : 0.0;
}
__device__ u64 topPTarget(float top_p, u64 mass) {
  const double t = ceil(static_cast<double>(top_p) * static_cast<double>(mass));
  return t < 1.0 ? 1ull : static_cast<u64>(t);
}

// Sorts sh.cand_fp[0..n) ascending (n <= kMaxCandidates): a bitonic sort over the next power of
// two, the slots from n up to it padded with ~0 (they sort last).
__device__ void sortKeys(int n, Shared& sh) {
  const int j = threadIdx.x;
  int width = 1;
  while (width < n) width <<= 1;
  if (j >= n && j < width) sh.cand_fp[j] = ~0ull;
  __syncthreads();
  for (int size = 2; size <= width; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      const int partner = j ^ stride;
      if (j < width && partner > j) {
        const u64 a = sh.cand_fp[j], b = sh.cand_fp[partner];
        if ((a > b) == ((j & size) == 0)) {
          sh.cand_fp[j] = b;
          sh.cand_fp[partner] = a;
        }
      }
      __syncthreads();
    }
  }
}

// A candidate's sort key in (logit desc, id asc) order, and back.
__device__ __forceinline__ u64 orderOf(float v, int32_t id) {
  return (static_cast<u64>(orderKey(v)) << 32) | static_cast<uint32_t>(id);
}
__device__ __forceinline__ float orderValue(u64 o) { return keyValue(static_cast<uint32_t>(o >> 32)); }
__device__ __forceinline__ int32_t orderId(u64 o) { return static_cast<int32_t>(static_cast<uint32_t>(o)); }

// Sorts the first n (<= kMaxCandidates) candidates in shared memory by id.
__device__ void sortCandidatesById(int n, Shared& sh) {
  const int j = threadIdx.x;
  if (j < n) sh.cand_fp[j] = (static_cast<u64>(static_cast<uint32_t>(sh.cand_id[j])) << 32) | __float_as_uint(sh.cand_val[j]);
  sortKeys(n, sh);
  if (j < n) {
    sh.cand_id[j] = static_cast<int32_t>(sh.cand_fp[j] >> 32);
    sh.cand_val[j] = __uint_as_float(static_cast<uint32_t>(sh.cand_fp[j]));
  }
  __syncthreads();
}

// Block-wide inclusive prefix sum of a u64 in thread order (every thread gets its own).
__device__ u64 blockInclusiveScan(u64 v, Shared& sh) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const u64 incl = warpInclusiveScan(v);
  if (lane == 31) sh.warp_u64[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    const u64 t = sh.warp_u64[lane];
    const u64 s = warpInclusiveScan(t);
    sh.warp_u64[lane] = s - t;  // exclusive: what the warps before add
  }
  __syncthreads();
  const u64 r = incl + sh.warp_u64[warp];
  __syncthreads();
  return r;
}

// Gathers the tokens `cut` keeps into sh.cand_id / cand_val (at most `cap` <= kMaxCandidates of
// them) and sorts them by id; returns how many the cut keeps (more than `cap`: not sorted).
__device__ int gatherById(const Row& row, const Cut& cut, int cap, Shared& sh) {
  if (threadIdx.x == 0) sh.cand_count = 0;
  __syncthreads();
  forEachValue(row.x, row.vocab, [&](int64_t i, float v) {
    if (!cut.keeps(orderKey(v), i)) return;
    const int slot = atomicAdd(&sh.cand_count, 1);
    if (slot < cap) {
      sh.cand_id[slot] = static_cast<int32_t>(i);
      sh.cand_val[slot] = v;
    }
  });
  __syncthreads();
  const int n = sh.cand_count;
  if (n <= cap) sortCandidatesById(n, sh);
  return n;
}

// The candidate path of a truncated draw: when the top-k set has at most kMaxCandidates tokens,
// or a top-p cut falls within the first kMaxCandidates tokens (usual for LLM logits), the cut and
// the draw need only those tokens. They are gathered into shared memory once and sorted by id;
// then the top-p cut (fixed-point masses, order-independent, as selectCut) and the inverse-CDF
// draw (double sums in id order, exactly the host Sampler's explicit-candidate pick) run there,
// instead of ~8 more passes over the vocabulary. `kcut`: the top-k cut (off without top-k);
// `small_k`: top-k is on and keeps at most kMaxCandidates tokens (else top-p is on and
// `kept_mass` is keptMass of kcut). Returns the token, or -2 when the path does not apply (top-p
// reaches beyond the candidates): the caller takes the full path.
__device__ int32_t drawFromCandidates(const Row& row, const Cut& kcut, bool small_k, u64 kept_mass,
                                      const RowSampling& p, Shared& sh) {
  const int j = threadIdx.x;
  const bool top_p = p.top_p < 1.0f;
  // The candidates: the top-k set itself, or the first kMaxCandidates tokens of the kept set.
  Cut cand = kcut;
  u64 mass = kept_mass;  // fixed-point mass of the kept set (top-p's reference)
  if (!small_k && row.vocab > kMaxCandidates)
    cand = selectCut(row, Cut{}, false, static_cast<u64>(kMaxCandidates), sh);
  const int n = gatherById(row, cand, kMaxCandidates, sh);
  if (n > kMaxCandidates || n == 0) return -2;  // (cannot happen: the cut keeps min(k, vocab) tokens)
  const bool valid = j < n;
  const float v = valid ? sh.cand_val[j] : 0.0f;
  const u64 order = valid ? orderOf(v, sh.cand_id[j]) : ~0ull;
  bool kept = valid;
  if (top_p) {
    // The candidates in (logit desc, id asc) order, their fixed-point masses summed along it; the
    // cut is the first token whose running mass reaches target.
    if (valid) sh.cand_fp[j] = order;
    sortKeys(n, sh);
    const u64 sorted = sh.cand_fp[j];
    const u64 fp = j < n ? row.fixedProb(orderValue(sorted)) : 0ull;
    const u64 cum = blockInclusiveScan(fp, sh);
    if (small_k) mass = blockMin(j == kThreads - 1 ? cum : ~0ull, sh);  // (the total: padding adds 0)
    const u64 target = topPTarget(p.top_p, mass);
    const u64 cut = blockMin(j < n && cum >= target ? sorted : ~0ull, sh);
    if (cut == ~0ull) return -2;  // the cut lies beyond the candidates (only without a small top-k)
    kept = valid && order <= cut;
  }
  // The draw, as the host's pick(): weights in id order, total and target in double, the first
  // positive weight whose cumulative sum exceeds u * total; the last positive one if rounding
  // leaves the sum a hair below.
  const float min_prob = minProb(p);
  const float q = kept ? row.prob(v) : 0.0f;
  sh.cand_w[j] = q >= min_prob ? q : 0.0f;
  __syncthreads();
  double cum = 0.0;
  for (int i = 0; i <= j && i < n; ++i) cum += static_cast<double>(sh.cand_w[i]);
  if (j == n - 1) sh.total = cum;
  __syncthreads();
  const double target = philoxUniform(p.seed, p.step, p.sample_index) * sh.total;
  const float w = sh.cand_w[j];
  const u64 hit = blockMin(valid && w > 0.0f && cum > target ? static_cast<u64>(j) : ~0ull, sh);
  u64 slot = hit;
  if (hit == ~0ull) {
    const int64_t last = blockLastIndex(valid && w > 0.0f ? j : -1, kMaxCandidates, sh);
    if (last < 0) return -1;  // nothing positive: the caller draws the top token
    slot = static_cast<u64>(last);
  }
  return sh.cand_id[slot];
}

// The largest value of x[0..n) and the first index holding it, and the first index of a NaN or
// +inf (0x7fffffff: none). Every thread gets them.
struct MaxScan {
  float best;
  int32_t best_i;
  int32_t bad;
};
// Merges the lanes' (largest value, its lowest index) and their lowest bad index; every lane gets them.
__device__ __forceinline__ void warpMaxMerge(float& best, int32_t& best_i, int32_t& bad) {
  warpArgmax(best, best_i);
  for (int o = 16; o > 0; o >>= 1) bad = min(bad, __shfl_xor_sync(kFull, bad, o));
}
__device__ MaxScan blockMaxScan(const float* xs, int64_t n, Shared& sh) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float best = -INFINITY;
  int32_t best_i = 0x7fffffff, bad = 0x7fffffff;
  forEachValue(xs, n, [&](int64_t i, float v) {
    if (!(v < INFINITY) && i < bad) bad = static_cast<int32_t>(i);
    if (v > best) {  // strided ascending: the first of equal values stays
      best = v;
      best_i = static_cast<int32_t>(i);
    }
  });
  warpMaxMerge(best, best_i, bad);
  if (lane == 0) {
    sh.warp_f32[warp] = best;
    sh.warp_i32[warp] = best_i;
    sh.warp_i32b[warp] = bad;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kWarps; ++w) {
      keepBest(sh.warp_f32[w], sh.warp_i32[w], best, best_i);
      bad = min(bad, sh.warp_i32b[w]);
    }
    sh.warp_f32[0] = best;
    sh.warp_i32[0] = best_i;
    sh.warp_i32b[0] = bad;
  }
  __syncthreads();
  const MaxScan r{sh.warp_f32[0], sh.warp_i32[0], sh.warp_i32b[0]};
  __syncthreads();
  return r;
}

// The row's num_top (<= min(kMaxTop, row.vocab)) best tokens at sh.cand_fp[0..num_top), as
// order keys (orderOf: logit desc, id asc) of ids id0 + i, sorted.
__device__ void topTokens(const Row& row, int64_t id0, int num_top, Shared& sh) {
  const Cut top = selectCut(row, Cut{}, false, static_cast<u64>(num_top), sh);
  if (threadIdx.x == 0) sh.top_count = 0;
  __syncthreads();
  forEachValue(row.x, row.vocab, [&](int64_t i, float v) {
    if (top.keeps(orderKey(v), i)) {
      const int slot = atomicAdd(&sh.top_count, 1);
      if (slot < num_top) sh.cand_fp[slot] = orderOf(v, static_cast<int32_t>(id0 + i));
    }
  });
  __syncthreads();
  sortKeys(num_top, sh);
}

// One penalty (repetition, then presence / frequency) on logit v of a token seen `generated`
// times in the output (and in the prompt when in_prompt).
__device__ __forceinline__ float penalized(const RowSampling& p, float v, int32_t generated, bool in_prompt) {
  if (p.repetition_penalty != 1.0f && (in_prompt || generated > 0))
    v = v > 0.0f ? __fdiv_rn(v, p.repetition_penalty) : __fmul_rn(v, p.repetition_penalty);
  if ((p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) && generated > 0)
    v = __fsub_rn(v, __fadd_rn(__fmul_rn(p.frequency_penalty, static_cast<float>(generated)), p.presence_penalty));
  return v;
}

// Penalties, then the min_tokens mask (the listed tokens are distinct), in place. A row with a
// pending token (RowSampling::pending_src) counts it once more: with its listed entry, or on
// its own when the list does not hold it.
__device__ void applyPenaltiesAndMask(const RowSampling& p, float* x, int64_t vocab, const PenaltyToken* penalties,
                                      const int32_t* masked, ResultTokens pending) {
  __shared__ int32_t pending_listed;
  // (pend is the block's: the barriers below are taken by every thread or none)
  const int32_t pend = p.pending_src >= 0 ? pending.ids[static_cast<int64_t>(p.pending_src) * pending.stride] : -1;
  if (pend >= 0) {
    if (threadIdx.x == 0) pending_listed = 0;
    __syncthreads();
  }
  for (int32_t j = threadIdx.x; j < p.penalty_count; j += kThreads) {
    const PenaltyToken t = penalties[p.penalty_begin + j];
    if (t.token < 0 || t.token >= vocab) continue;
    const bool is_pending = t.token == pend;
    if (is_pending) pending_listed = 1;
    x[t.token] = __fadd_rn(penalized(p, x[t.token], t.generated_count + (is_pending ? 1 : 0), t.in_prompt != 0), t.bias);
  }
  __syncthreads();
  if (pend >= 0) {
    if (threadIdx.x == 0 && pend < vocab && !pending_listed) x[pend] = penalized(p, x[pend], 1, false);
    __syncthreads();
  }
  for (int32_t j = threadIdx.x; j < p.mask_count; j += kThreads) {
    const int32_t id = masked[p.mask_begin + j];
    if (id >= 0 && id < vocab) x[id] = -INFINITY;
  }
  __syncthreads();
}

// A row's result: its error (`bad`: the first NaN / +inf index of x, 0x7fffffff when none, then
// nothing above -inf is left), or its token with num_top top logprobs (written beside it); and how
// many top logprobs a row asks for among n candidates.
__device__ void writeRowError(RowSample& o, int32_t bad, const float* x) {
  o.token = -1;
  o.error = bad != 0x7fffffff ? RowSample::kBadValue : RowSample::kAllMasked;
  o.bad_index = bad != 0x7fffffff ? bad : -1;
  o.bad_value = bad != 0x7fffffff ? x[bad] : 0.0f;
  o.num_top = 0;
}
__device__ void writeRowOk(RowSample& o, int32_t token, int32_t num_top) {
  o.token = token;
  o.error = RowSample::kOk;
  o.bad_index = -1;
  o.num_top = num_top;
}
__device__ int32_t numTop(const RowSampling& p, int64_t n) {
  if (p.num_logprobs < 0) return 0;
  return static_cast<int32_t>(min(static_cast<int64_t>(min(p.num_logprobs, RowSample::kMaxTop)), n));
}

// The compact pass, part 1 (one CTA per row): penalties and masks in place.
__global__ void __launch_bounds__(kThreads) prepareKernel(float* logits, int64_t ld, int64_t vocab,
                                                          const RowSampling* params, const PenaltyToken* penalties,
                                                          const int32_t* masked, ResultTokens pending) {
  applyPenaltiesAndMask(params[blockIdx.x], logits + blockIdx.x * ld, vocab, penalties, masked, pending);
}

// The compact pass, part 2 (grid kCompactCtas x rows): slice blockIdx.x of row blockIdx.y keeps its
// top-k tokens (logit desc, id asc), sorted by id, and says whether it saw a NaN or +inf.
__global__ void __launch_bounds__(kThreads) compactKernel(const float* logits, int64_t ld, int64_t vocab,
                                                          const RowSampling* params, CompactView cv) {
  __shared__ Shared sh;
  const int64_t row = blockIdx.y, g = blockIdx.x;
  const int32_t k = params[row].top_k;  // (1..kCompactMaxK: sampleCompactApplies)
  const int64_t per = (vocab + kCompactCtas - 1) / kCompactCtas;
  const int64_t begin = min(vocab, g * per), len = min(vocab, begin + per) - begin;
  const Row slice{logits + row * ld + begin, len, 0.0f, 1.0f};
  int32_t bad = 0;
  forEachValue(slice.x, len, [&](int64_t, float v) { bad |= !(v < INFINITY); });
  bad = blockSum(bad, sh);
  const Cut cut = len > k ? selectCut(slice, Cut{}, false, static_cast<u64>(k), sh) : Cut{};
  const int n = min(gatherById(slice, cut, kCompactMaxK, sh), kCompactMaxK);  // (the cut keeps min(k, len))
  const int64_t seg = (row * kCompactCtas + g) * kCompactMaxK;
  for (int j = threadIdx.x; j < n; j += kThreads) {
    cv.seg_val[seg + j] = sh.cand_val[j];
    cv.seg_id[seg + j] = static_cast<int32_t>(begin) + sh.cand_id[j];
  }
  if (threadIdx.x == 0) {
    cv.seg_count[row * kCompactCtas + g] = n;
    cv.seg_bad[row * kCompactCtas + g] = bad != 0;
  }
}

__global__ void __launch_bounds__(kThreads) sampleKernel(float* logits, int64_t ld, int64_t vocab,
                                                         const RowSampling* params, const PenaltyToken* penalties,
                                                         const int32_t* masked, ResultTokens pending,
                                                         RowSample* out, CompactView cv, bool use_compact) {
  __shared__ Shared sh;
  const RowSampling p = params[blockIdx.x];
  float* x = logits + blockIdx.x * ld;
  const CompactView* compact = use_compact ? &cv : nullptr;

  // 1-2. Penalties, then the min_tokens mask (done by the compact pass when there is one).
  if (compact == nullptr) applyPenaltiesAndMask(p, x, vocab, penalties, masked, pending);

  // The compact pass (small batches, every row with a small top-k): the union of every slice's
  // top-k holds the row's top-k, its max and everything the draw reads; work on it, in id order,
  // unless a slice saw a NaN / +inf (then the full row reports it).
  const int32_t* ids = nullptr;
  const float* xs = x;
  int64_t n = vocab;
  if (compact != nullptr) {
    const int32_t* counts = compact->seg_count + blockIdx.x * kCompactCtas;
    if (threadIdx.x == 0) {
      int32_t off = 0, any_bad = 0;
      for (int g = 0; g < kCompactCtas; ++g) {
        sh.warp_i32[g] = off;
        off += counts[g];
        any_bad |= compact->seg_bad[blockIdx.x * kCompactCtas + g];
      }
      sh.result = any_bad ? -1 : off;
    }
    __syncthreads();
    const int32_t total = sh.result;
    if (total >= 0) {
      float* row_val = compact->row_val + static_cast<int64_t>(blockIdx.x) * kCompactCap;
      int32_t* row_id = compact->row_id + static_cast<int64_t>(blockIdx.x) * kCompactCap;
      for (int g = 0; g < kCompactCtas; ++g) {
        const int64_t seg = (static_cast<int64_t>(blockIdx.x) * kCompactCtas + g) * kCompactMaxK;
        for (int32_t j = threadIdx.x; j < counts[g]; j += kThreads) {
          row_val[sh.warp_i32[g] + j] = compact->seg_val[seg + j];
          row_id[sh.warp_i32[g] + j] = compact->seg_id[seg + j];
        }
      }
      __syncthreads();  // (makes the block's global writes visible to the block)
      xs = row_val;
      ids = row_id;
      n = total;
    }
    __syncthreads();
  }

  // Max (first index of it) and the first NaN / +inf.
  const MaxScan ms = blockMaxScan(xs, n, sh);
  float best = ms.best;
  int32_t best_i = ms.best_i;
  const int32_t bad = ms.bad;
  RowSample& o = out[blockIdx.x];
  if (bad != 0x7fffffff || best == -INFINITY) {
    if (threadIdx.x == 0) writeRowError(o, bad, xs);
    return;
  }

  Row row{xs, n, best, 1.0f};
  int32_t token = best_i;
  if (!p.greedy) {
    row.inv_t = __fdiv_rn(1.0f, p.temperature);
    Cut cut;
    const bool top_k = p.top_k > 0 && p.top_k < n;
    if (top_k) cut = selectCut(row, Cut{}, false, static_cast<u64>(p.top_k), sh);
    const bool small_k = top_k && p.top_k <= kMaxCandidates, top_p = p.top_p < 1.0f;
    // Top-p's reference mass over the kept set: one pass, shared by both paths (a small top-k
    // set's mass the candidate path sums itself).
    u64 mass = top_p && !small_k ? keptMass(row, 0, cut, sh) : 0ull;
    const int32_t drawn = small_k || top_p ? drawFromCandidates(row, cut, small_k, mass, p, sh) : -2;
    if (drawn != -2) {
      token = drawn >= 0 ? drawn : best_i;
    } else {
      if (top_p) {
        if (small_k) mass = keptMass(row, 0, cut, sh);
        const Cut pc = selectCut(row, cut, true, topPTarget(p.top_p, mass), sh);
        if (pc.on) cut = pc;
      }
      const float min_prob = minProb(p);
      const double u = philoxUniform(p.seed, p.step, p.sample_index);
      const int64_t t = firstReaching<double, true>(
          n, [&](int64_t i) -> double { return drawWeight(row, cut, min_prob, i, xs[i]); },
          [&](double total) { return u * total; }, sh);
      token = t >= 0 ? static_cast<int32_t>(t) : best_i;
    }
  }

  // Logprobs of the processed logits at temperature 1.
  int32_t num_top = 0;
  float log_z = 0.0f;
  if (p.num_logprobs >= 0) {
    const float chosen = xs[token];
    double z = 0.0;
    int32_t greater = 0;
    forEachValue(xs, n, [&](int64_t, float v) {
      z += fastExpDev(__fsub_rn(v, best));
      greater += v > chosen;
    });
    z = blockSum(z, sh);
    greater = blockSum(greater, sh);
    log_z = static_cast<float>(log(z));
    if (threadIdx.x == 0) {
      o.logprob = __fsub_rn(__fsub_rn(chosen, best), log_z);
      o.rank = greater + 1;
    }
    num_top = numTop(p, n);
    if (num_top > 0) {
      topTokens(Row{xs, n, best, 1.0f}, 0, num_top, sh);
      if (threadIdx.x < num_top) {
        const u64 t = sh.cand_fp[threadIdx.x];
        o.top_ids[threadIdx.x] = ids != nullptr ? ids[orderId(t)] : orderId(t);
        o.top_logprobs[threadIdx.x] = __fsub_rn(__fsub_rn(orderValue(t), best), log_z);
      }
    }
  }
  if (threadIdx.x == 0) writeRowOk(o, ids != nullptr ? ids[token] : token, num_top);
}


// ---- The row-group path: few rows, many CTAs per row --------------------------------------
// One CTA per row leaves most of the GPU idle when a step has a few rows (and its ~13 passes over
// a 128k vocabulary cost ~1 ms); the host takes ~0.17 ms a row. groupSampleKernel gives each row
// `ctas` CTAs, each owning a contiguous slice of the vocabulary, and runs the same algorithm
// with the slices' partial results exchanged through global memory between grid-wide barriers
// (a cooperative launch keeps every CTA resident): the max, the masses, each radix pass's
// histogram (summed over the slices in slice order), the tie scan's counts, the draw's sums.
// Fixed-point masses and counts are integers, so cuts equal the one-CTA kernel's; the draw's
// double sums run in a fixed order (a tree within each slice, then the slices in order; the owning
// slice narrows by segment sums): deterministic, equal to the host's pick (which sums in id order)
// except within ~1e-16 of a CDF boundary. Where the sums leave no crossing, the last positive
// token is drawn, as the host does. The softmax denominator is summed in the same kind of order.

// One CTA's contribution to one exchange.
struct GroupSlot {
  u64 hist[256];
  u64 u;
  double d;
  float f;
  int32_t i;
  int32_t j;
};

struct GroupView {
  GroupSlot* slots;  // [2][rows][ctas]: exchanges alternate between the halves
  u64* top;          // [rows][ctas][kMaxTop]: each slice's best tokens (order keys; ~0: none)
  int32_t* found;    // [rows]: a token found by one CTA for the row's others
  int32_t rows;
  int32_t ctas;
};

// A CTA's place in the grid. Each exchange: every CTA writes mine(), sync(), then reads of(h)
// for each of its row's slices before its next barrier. Every barrier flips the half written, so
// a slot is rewritten only after a further barrier, when every CTA has read it.
struct Group {
  GroupView v;
  int32_t row;
  int32_t g;
  int parity;
  __device__ GroupSlot& mine() const {
    return v.slots[(static_cast<int64_t>(parity) * v.rows + row) * v.ctas + g];
  }
  __device__ const GroupSlot& of(int h) const {
    return v.slots[(static_cast<int64_t>(parity ^ 1) * v.rows + row) * v.ctas + h];
  }
  // (The grid barrier orders memory: its arrival is a gpu-scope release after a CTA barrier, its
  // wait an acquire, so no fence of our own.)
  __device__ void sync() {
    cooperative_groups::this_grid().sync();
    parity ^= 1;
  }
};

// The row's slots' field, lane h of every warp reading slice h's (one L2 round trip, not one per
// slice); the sums below combine them by a shuffle tree, the same on every lane and CTA.
template <typename T, typename F>
__device__ __forceinline__ T slotField(const Group& grp, F field, T none) {
  const int h = threadIdx.x & 31;
  return h < grp.v.ctas ? __ldcg(field(grp.of(h))) : none;
}
template <typename T, typename F>
__device__ __forceinline__ T slotSum(const Group& grp, F field) {
  return warpSum(slotField<T>(grp, field, T(0)));
}

// sh.hist[b] = the sum of bin b over the row's slots' histograms: four quarters of the slices
// summed by 256 threads each (eight loads in flight), then added in quarter order.
__device__ void sumHistograms(const Group& grp, Shared& sh) {
  static_assert(kThreads == 4 * 256 && kGroupMaxCtas <= 32, "four quarters of at most eight slices");
  const int b = threadIdx.x & 255, q = threadIdx.x >> 8;
  u64 v[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int h = q * 8 + j;
    v[j] = h < grp.v.ctas ? __ldcg(&grp.of(h).hist[b]) : 0ull;
  }
  u64 t = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) t += v[j];
  sh.cand_fp[q * 256 + b] = t;  // (scratch: no candidates are held across a selection)
  __syncthreads();
  if (threadIdx.x < 256)
    sh.hist[b] = sh.cand_fp[b] + sh.cand_fp[256 + b] + sh.cand_fp[512 + b] + sh.cand_fp[768 + b];
  __syncthreads();
}

// selectCut over a row cut into the group's slices (`slice`: this CTA's, its ids from id0).
// Every CTA of the grid calls it (the barriers are grid-wide); `active` false: the row takes no
// part (returns Cut{}).
__device__ Cut groupSelectCut(const Row& slice, int64_t id0, bool active, const Cut& within, bool by_mass, u64 target,
                              Group& grp, Shared& sh) {
  uint32_t prefix = 0, mask = 0;
  bool found = active;
  for (int shift = 24; shift >= 0; shift -= 8) {
    if (found) {
      radixHistogram(slice, id0, within, by_mass, prefix, mask, shift, sh);
      for (int b = threadIdx.x; b < 256; b += kThreads) grp.mine().hist[b] = sh.hist[b];
    }
    grp.sync();
    if (found) {
      sumHistograms(grp, sh);
      found = radixStep(shift, prefix, mask, target, sh);
    }
  }
  // The tie: the r-th token of key `prefix` in id order, counted across the slices in order.
  auto equalValue = [&](int64_t i, float v) -> u64 {
    const uint32_t k = orderKey(v);
    return k == prefix && within.keeps(k, id0 + i) ? 1ull : 0ull;
  };
  auto equal = [&](int64_t i) { return equalValue(i, slice.x[i]); };
  if (found) {
    u64 c = 0;
    forEachValue(slice.x, slice.vocab, [&](int64_t i, float v) { c += equalValue(i, v); });
    c = blockSum(c, sh);
    if (threadIdx.x == 0) grp.mine().u = c;
  }
  grp.sync();
  if (found) {
    // Counts in slice order; the owner is the first slice whose running count reaches r.
    const u64 incl = warpInclusiveScan(slotField<u64>(grp, [](const GroupSlot& t) { return &t.u; }, 0ull));
    const u64 total = __shfl_sync(kFull, incl, 31);
    const u64 r0 = tieRank(slice, prefix, by_mass, target);
    const u64 r = r0 < total ? r0 : total;
    found = r > 0;
    u64 before;
    const int owner = firstLaneHit(incl >= r, incl, &before);
    if (found && owner == grp.g) {
      const int64_t local = firstReaching<u64, false>(slice.vocab, equal, [&](u64) { return r - before; }, sh);
      if (threadIdx.x == 0) grp.v.found[grp.row] = static_cast<int32_t>(id0 + local);
    }
  }
  grp.sync();
  Cut c;
  if (found) {
    c.on = true;
    c.key = prefix;
    c.id = __ldcg(&grp.v.found[grp.row]);
  }
  return c;
}

__global__ void __launch_bounds__(kThreads, 1)
    groupSampleKernel(float* logits, int64_t ld, int64_t vocab, const RowSampling* params,
                      const PenaltyToken* penalties, const int32_t* masked, ResultTokens pending, RowSample* out,
                      GroupView gv) {
  __shared__ Shared sh;
  Group grp{gv, static_cast<int32_t>(blockIdx.x / gv.ctas), static_cast<int32_t>(blockIdx.x % gv.ctas), 0};
  const RowSampling p = params[grp.row];
  float* x = logits + grp.row * ld;
  const int64_t per = (vocab + gv.ctas - 1) / gv.ctas;
  const int64_t id0 = min(vocab, grp.g * per), len = min(vocab, id0 + per) - id0;
  const float* xs = x + id0;
  auto truncatesK = [&](const RowSampling& q) { return !q.greedy && q.top_k > 0 && q.top_k < vocab; };
  auto truncatesP = [&](const RowSampling& q) { return !q.greedy && q.top_p < 1.0f; };
  // Which exchanges run: any row's controls decide, so every CTA takes the same barriers.
  bool any_sampled = false, any_k = false, any_p = false, any_kp = false, any_whole = false, any_lp = false;
  for (int r = 0; r < gv.rows; ++r) {
    const RowSampling& q = params[r];
    any_sampled |= !q.greedy;
    any_k |= truncatesK(q);
    any_p |= truncatesP(q);
    any_kp |= truncatesK(q) && truncatesP(q);
    any_whole |= !truncatesK(q) && truncatesP(q);
    any_lp |= q.num_logprobs >= 0;
  }

  // Penalties and the min_tokens mask, by the row's first CTA (the others read the row after).
  if (grp.g == 0) applyPenaltiesAndMask(p, x, vocab, penalties, masked, pending);
  grp.sync();

  // The max (first index of it) and the first NaN / +inf.
  {
    const MaxScan ms = blockMaxScan(xs, len, sh);
    if (threadIdx.x == 0) {
      grp.mine().f = ms.best;
      grp.mine().i = ms.best_i == 0x7fffffff ? 0x7fffffff : static_cast<int32_t>(id0 + ms.best_i);
      grp.mine().j = ms.bad == 0x7fffffff ? 0x7fffffff : static_cast<int32_t>(id0 + ms.bad);
    }
  }
  grp.sync();
  float best = slotField<float>(grp, [](const GroupSlot& t) { return &t.f; }, -INFINITY);
  int32_t best_i = slotField<int32_t>(grp, [](const GroupSlot& t) { return &t.i; }, 0x7fffffff);
  int32_t bad = slotField<int32_t>(grp, [](const GroupSlot& t) { return &t.j; }, 0x7fffffff);
  warpMaxMerge(best, best_i, bad);
  RowSample& o = out[grp.row];
  const bool ok = bad == 0x7fffffff && best != -INFINITY;
  if (!ok && grp.g == 0 && threadIdx.x == 0) writeRowError(o, bad, x);
  const bool sampled = ok && !p.greedy, cut_k = ok && truncatesK(p), cut_p = ok && truncatesP(p);
  const bool lp = ok && p.num_logprobs >= 0;
  const int32_t num_top = lp ? numTop(p, vocab) : 0;
  const Row slice{xs, len, best, sampled ? __fdiv_rn(1.0f, p.temperature) : 1.0f};

  // The whole row's mass (top-p without top-k), the softmax denominator and each slice's best
  // tokens (logprobs).
  u64 mass = 0;
  double z = 0.0;
  if (any_whole || any_lp) {
    if (cut_p && !cut_k) {
      const u64 m = keptMass(slice, id0, Cut{}, sh);
      if (threadIdx.x == 0) grp.mine().u = m;
    }
    if (lp) {
      double s = 0.0;
      forEachValue(xs, len, [&](int64_t, float v) { s += fastExpDev(__fsub_rn(v, best)); });
      s = blockSum(s, sh);
      if (threadIdx.x == 0) grp.mine().d = s;
      const int n_top = static_cast<int>(min(static_cast<int64_t>(num_top), len));
      if (n_top > 0) topTokens(Row{xs, len, best, 1.0f}, id0, n_top, sh);
      u64* top = gv.top + (static_cast<int64_t>(grp.row) * gv.ctas + grp.g) * RowSample::kMaxTop;
      if (threadIdx.x < RowSample::kMaxTop) top[threadIdx.x] = threadIdx.x < n_top ? sh.cand_fp[threadIdx.x] : ~0ull;
    }
    grp.sync();
    if (cut_p && !cut_k) mass = slotSum<u64>(grp, [](const GroupSlot& t) { return &t.u; });
    if (lp) z = slotSum<double>(grp, [](const GroupSlot& t) { return &t.d; });
  }

  // The top-k cut, then top-p's reference mass over what it keeps, then the top-p cut.
  Cut cut;
  if (any_k) cut = groupSelectCut(slice, id0, cut_k, Cut{}, false, static_cast<u64>(p.top_k), grp, sh);
  if (any_kp) {
    if (cut_k && cut_p) {
      const u64 m = keptMass(slice, id0, cut, sh);
      if (threadIdx.x == 0) grp.mine().u = m;
    }
    grp.sync();
    if (cut_k && cut_p) mass = slotSum<u64>(grp, [](const GroupSlot& t) { return &t.u; });
  }
  if (any_p) {
    const Cut pc = groupSelectCut(slice, id0, cut_p, cut, true, cut_p ? topPTarget(p.top_p, mass) : 0ull, grp, sh);
    if (pc.on) cut = pc;
  }

  // The draw: the first kept token (id order) whose cumulative weight exceeds u * total; each
  // slice's sum, then the slice holding the crossing walks its own tokens.
  int32_t token = best_i;
  if (any_sampled) {
    const float min_prob = minProb(p);
    auto weight = [&](int64_t i) -> double { return drawWeight(slice, cut, min_prob, id0 + i, xs[i]); };
    int64_t last = -1;  // this slice's last positive weight
    if (sampled) {
      double s = 0.0;
      forEachValue(xs, len, [&](int64_t i, float v) {
        const double w = drawWeight(slice, cut, min_prob, id0 + i, v);
        s += w;
        if (w > 0.0) last = i;  // (ascending per thread)
      });
      s = blockSum(s, sh);
      last = blockLastIndex(last, len, sh);
      if (threadIdx.x == 0) {
        grp.mine().d = s;
        grp.mine().i = last >= 0 ? static_cast<int32_t>(id0 + last) : -1;
      }
    }
    grp.sync();
    int owner = -1;
    if (sampled) {
      // Sums in slice order (an inclusive scan); the owner: the first positive slice whose running
      // sum exceeds the target.
      const double d = slotField<double>(grp, [](const GroupSlot& t) { return &t.d; }, 0.0);
      int32_t last_any = slotField<int32_t>(grp, [](const GroupSlot& t) { return &t.i; }, -1);
      for (int o = 16; o > 0; o >>= 1) last_any = max(last_any, __shfl_xor_sync(kFull, last_any, o));
      const double incl = warpInclusiveScan(d);
      const double target = philoxUniform(p.seed, p.step, p.sample_index) * __shfl_sync(kFull, incl, 31);
      double cum;
      owner = firstLaneHit(d > 0.0 && incl > target, incl, &cum);
      if (owner == grp.g) {
        const int64_t t = firstReaching<double, true>(len, weight, [&](double) { return target - cum; }, sh);
        if (threadIdx.x == 0) grp.v.found[grp.row] = static_cast<int32_t>(id0 + (t >= 0 ? t : last));
      }
      if (owner < 0 && last_any >= 0) token = last_any;  // rounding left the sum a hair below
    }
    grp.sync();
    if (owner >= 0) token = __ldcg(&grp.v.found[grp.row]);
  }

  // Logprobs of the processed logits at temperature 1: the rank counted across the slices, the
  // best tokens merged from the slices' lists.
  if (any_lp) {
    const float chosen = lp ? x[token] : 0.0f;
    if (lp) {
      u64 greater = 0;
      forEachValue(xs, len, [&](int64_t, float v) { greater += v > chosen; });
      greater = blockSum(greater, sh);
      if (threadIdx.x == 0) grp.mine().u = greater;
    }
    grp.sync();
    if (lp && grp.g == 0) {
      const u64 greater = slotSum<u64>(grp, [](const GroupSlot& t) { return &t.u; });
      const float log_z = static_cast<float>(log(z));
      static_assert(kGroupMaxCtas * RowSample::kMaxTop <= kMaxCandidates, "the slices' lists fit one sort");
      const int n = gv.ctas * RowSample::kMaxTop;
      const u64* top = gv.top + static_cast<int64_t>(grp.row) * n;
      for (int j = threadIdx.x; j < n; j += kThreads) sh.cand_fp[j] = __ldcg(&top[j]);
      sortKeys(n, sh);
      if (threadIdx.x < num_top) {
        const u64 t = sh.cand_fp[threadIdx.x];
        o.top_ids[threadIdx.x] = orderId(t);
        o.top_logprobs[threadIdx.x] = __fsub_rn(__fsub_rn(orderValue(t), best), log_z);
      }
      if (threadIdx.x == 0) {
        o.logprob = __fsub_rn(__fsub_rn(chosen, best), log_z);
        o.rank = static_cast<int32_t>(greater) + 1;
      }
    }
  }
  if (ok && grp.g == 0 && threadIdx.x == 0) writeRowOk(o, token, num_top);
}

}  // namespace

bool sampleCompactApplies(const RowSampling* rows, int64_t n, int64_t vocab) {
  if (n < 1 || n > kCompactMaxRows || vocab < kCompactCtas) return false;
  for (int64_t r = 0; r < n; ++r) {
    const RowSampling& p = rows[r];
    const bool small_k = p.top_k >= 1 && p.top_k <= kCompactMaxK && p.top_k < vocab;
    if (p.greedy || !small_k || p.num_logprobs >= 0) return false;
  }
  return true;
}

// The compact pass's workspace for `rows` rows at `base` (null: only its size).
CompactView compactLayout(int64_t rows, void* base, size_t* bytes) {
  const size_t segs = static_cast<size_t>(rows) * kCompactCtas;
  const size_t seg_vals = segs * kCompactMaxK, row_vals = static_cast<size_t>(rows) * kCompactCap;
  char* w = static_cast<char*>(base);
  CompactView cv{};
  if (w != nullptr) {
    cv.seg_val = reinterpret_cast<float*>(w);
    cv.seg_id = reinterpret_cast<int32_t*>(w + seg_vals * 4);
    cv.seg_count = reinterpret_cast<int32_t*>(w + seg_vals * 8);
    cv.seg_bad = cv.seg_count + segs;
    cv.row_val = reinterpret_cast<float*>(w + seg_vals * 8 + segs * 8);
    cv.row_id = reinterpret_cast<int32_t*>(w + seg_vals * 8 + segs * 8 + row_vals * 4);
  }
  if (bytes != nullptr) *bytes = seg_vals * 8 + segs * 8 + row_vals * 8;
  return cv;
}

size_t sampleCompactBytes(int64_t rows) {
  size_t bytes = 0;
  compactLayout(rows, nullptr, &bytes);
  return bytes;
}

int sampleGroupCapacity() {
  int dev = 0, coop = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, groupSampleKernel, kThreads, 0) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return coop ? sms * per_sm : 0;
}

int sampleGroupCtas(int64_t rows, int capacity) {
  if (rows < 1 || rows > kGroupMaxRows) return 0;
  const int ctas = static_cast<int>(std::min<int64_t>(kGroupMaxCtas, capacity / rows));
  return ctas >= kGroupMinCtas ? ctas : 0;
}

// The row-group kernel's workspace at `base` (views null when base is), its size in *bytes.
GroupView groupLayout(int64_t rows, int ctas, void* base, size_t* bytes) {
  const size_t slots = static_cast<size_t>(rows) * static_cast<size_t>(ctas);
  const size_t top_at = 2 * slots * sizeof(GroupSlot), found_at = top_at + slots * RowSample::kMaxTop * sizeof(u64);
  char* w = static_cast<char*>(base);
  GroupView gv{};
  if (w != nullptr) {
    gv.slots = reinterpret_cast<GroupSlot*>(w);
    gv.top = reinterpret_cast<u64*>(w + top_at);
    gv.found = reinterpret_cast<int32_t*>(w + found_at);
  }
  gv.rows = static_cast<int32_t>(rows);
  gv.ctas = ctas;
  if (bytes != nullptr) *bytes = found_at + static_cast<size_t>(rows) * 4;
  return gv;
}

size_t sampleGroupBytes(int64_t rows, int ctas) {
  size_t bytes = 0;
  groupLayout(rows, ctas, nullptr, &bytes);
  return bytes;
}

cudaError_t sampleRows(float* logits, int64_t ld, int64_t rows, int64_t vocab, const RowSampling* params,
                       const PenaltyToken* penalties, const int32_t* masked, ResultTokens pending, RowSample* out,
                       void* compact_ws, int group_ctas, void* group_ws, bool* group_refused, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (group_ctas > 0) {
    GroupView gv = groupLayout(rows, group_ctas, group_ws, nullptr);
    void* args[] = {&logits, &ld, &vocab, &params, &penalties, &masked, &pending, &out, &gv};
    const cudaError_t e = cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&groupSampleKernel),
                                                      dim3(static_cast<unsigned>(rows * group_ctas)), dim3(kThreads),
                                                      args, 0, stream);
    // Refused (e.g. fewer SMs free than the device reports, under MPS): one CTA per row instead.
    if (e != cudaErrorCooperativeLaunchTooLarge) return e;
    cudaGetLastError();
    if (group_refused != nullptr) *group_refused = true;
  }
  const CompactView cv = compactLayout(rows, compact_ws, nullptr);
  if (compact_ws != nullptr) {
    prepareKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, ld, vocab, params, penalties, masked,
                                                                         pending);
    compactKernel<<<dim3(kCompactCtas, static_cast<unsigned>(rows)), kThreads, 0, stream>>>(logits, ld, vocab, params,
                                                                                             cv);
  }
  sampleKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, ld, vocab, params, penalties, masked,
                                                                    pending, out, cv, compact_ws != nullptr);
  return cudaGetLastError();
}

}  // namespace llmrt::cuda

// The device side shared by the sampling kernels (cuda_sampling.cu: one CTA per row and the
// compact pass; cuda_sampling_group.cu: the row-group path): constants, the exact exponential,
// order-preserving keys, block scans and sums, the radix select, the candidate draw, top
// logprobs, penalties and the row result writers. How they fit together: cuda_sampling.cu's
// opening comment. Internal to src/backend/cuda; each including file gets its own copy (internal
// linkage, no device link step).
#pragma once

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

}  // namespace

// The row-group path's cooperative launch (cuda_sampling_group.cu), for sampleRows.
cudaError_t launchGroupSample(float* logits, int64_t ld, int64_t rows, int64_t vocab, const RowSampling* params,
                              const PenaltyToken* penalties, const int32_t* masked, ResultTokens pending,
                              RowSample* out, int group_ctas, void* group_ws, cudaStream_t stream);

}  // namespace llmrt::cuda

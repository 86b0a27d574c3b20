// Sampling on the device (Backend::sampleRows): one CTA per logits row does what
// the host Sampler (src/sampling/sampler.cpp) does for one sequence, so only the
// token (and requested logprobs) cross to the host:
//   penalties and min_tokens masks in place -> max / validity scan -> greedy argmax,
//   or temperature probabilities, top-k cut, top-p cut, min-p, inverse-CDF draw
//   with the Philox uniform of (seed, step, sample index) -> logprobs.
//
// Exactness: the probabilities use the host's exponential operation for operation
// (no FMA contraction), so they are bit-identical to the host's. Masses are summed
// for the top-p cut in 2^-40 fixed point, each probability rounded to nearest (integer
// sums, independent of order); the draw sums the float probabilities in double as the
// host does, in a fixed tree order, so a row samples the same token on every run.
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
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"
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

// The compact pass for a few rows with a small top-k, or with top-p and no top-k (one CTA per row
// would stream the vocabulary ~7 times on one SM): kCompactCtas CTAs per row each keep their
// slice's top-k (top-p rows: top-kCompactMaxK), and the row's CTA samples from the union (at most
// kCompactCap tokens) instead of the vocabulary. A top-p row's union holds every token whose
// logit is above each cut slice's lowest kept logit (the "floor"); when those tokens carry
// top-p's target mass of the whole row, the nucleus lies among them and the union gives the
// host's token; otherwise the row falls back to the whole vocabulary.
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
  uint32_t* seg_floor;  // [rows][kCompactCtas]: largest kept order key of a cut slice (0xffffffff: kept whole)
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
  uint32_t floor;  // the compact union's floor (min of its slices' keys)
  int32_t top_count;
  float top_val[RowSample::kMaxTop];
  int32_t top_id[RowSample::kMaxTop];
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
      const T t = sums[lane];
      const T incl = warpInclusiveScan(t);
      const T target = first ? target_of(__shfl_sync(kFull, incl, 31)) : rest;
      const unsigned ball = __ballot_sync(kFull, reached(incl, target));
      if (lane == 0) sh.found = ball ? __ffs(ball) - 1 : -1;
      if (ball && lane == __ffs(ball) - 1) *reinterpret_cast<T*>(&sh.rest) = target - (incl - t);
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

// The token at which the cumulative weight, in (logit desc, id asc) order over the
// tokens `within` keeps, reaches `target` (>= 1): weight 1 per token (by_mass false:
// the target-th token) or its fixed-point probability. Returns the cut at that token;
// `on` false when the total weight stays below target.
__device__ Cut selectCut(const Row& row, const Cut& within, bool by_mass, u64 target, Shared& sh) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  uint32_t prefix = 0, mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kThreads) sh.hist[b] = 0;
    __syncthreads();
    forEachValue(row.x, row.vocab, [&](int64_t i, float v) {
      const uint32_t k = orderKey(v);
      if ((k & mask) != prefix || !within.keeps(k, i)) return;
      histAdd(sh.hist, static_cast<int>((k >> shift) & 255u), by_mass ? row.fixedProb(v) : 1ull);
    });
    __syncthreads();
    if (warp == 0) {
      u64 s = 0;
      for (int j = 0; j < 8; ++j) s += sh.hist[lane * 8 + j];
      const u64 incl = warpInclusiveScan(s);
      const unsigned ball = __ballot_sync(kFull, incl >= target);
      if (lane == 0) sh.found = ball != 0;
      if (ball && lane == __ffs(ball) - 1) {
        u64 cum = incl - s;
        int b = lane * 8;
        for (; b < lane * 8 + 7 && cum + sh.hist[b] < target; ++b) cum += sh.hist[b];
        sh.bin = b;
        sh.rest = target - cum;
      }
    }
    __syncthreads();
    if (!sh.found) {
      __syncthreads();
      return Cut{};
    }
    prefix |= static_cast<uint32_t>(sh.bin) << shift;
    mask |= 255u << shift;
    target = sh.rest;
    __syncthreads();
  }
  // Every token of key `prefix` has the same logit (and probability): the cut is
  // the r-th of them in id order.
  u64 r = target;
  if (by_mass) {
    const u64 m = row.fixedProb(keyValue(prefix));
    r = m > 0 ? (target + m - 1) / m : 1ull;
  }
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
__device__ u64 keptMass(const Row& row, const Cut& cut, Shared& sh) {
  u64 mass = 0;
  forEachValue(row.x, row.vocab, [&](int64_t i, float v) {
    if (cut.keeps(orderKey(v), i)) mass += row.fixedProb(v);
  });
  return blockSum(mass, sh);
}
__device__ u64 topPTarget(float top_p, u64 mass) {
  const double t = ceil(static_cast<double>(top_p) * static_cast<double>(mass));
  return t < 1.0 ? 1ull : static_cast<u64>(t);
}

// Sorts the first n (<= kMaxCandidates) candidates in shared memory by id: a bitonic sort over
// the next power of two (empty slots sort last).
__device__ void sortCandidatesById(int n, Shared& sh) {
  const int j = threadIdx.x;
  int width = 1;
  while (width < n) width <<= 1;
  if (j >= n && j < width) {
    sh.cand_id[j] = 0x7fffffff;
    sh.cand_val[j] = -INFINITY;
  }
  __syncthreads();
  for (int size = 2; size <= width; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      const int partner = j ^ stride;
      if (j < width && partner > j) {
        const int32_t a = sh.cand_id[j], b = sh.cand_id[partner];
        if ((a > b) == ((j & size) == 0)) {
          sh.cand_id[j] = b;
          sh.cand_id[partner] = a;
          const float t = sh.cand_val[j];
          sh.cand_val[j] = sh.cand_val[partner];
          sh.cand_val[partner] = t;
        }
      }
      __syncthreads();
    }
  }
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
  const uint32_t key = valid ? orderKey(v) : 0xffffffffu;
  const u64 order = (static_cast<u64>(key) << 32) | static_cast<uint32_t>(valid ? sh.cand_id[j] : 0x7fffffff);
  bool kept = valid;
  if (top_p) {
    const u64 fp = valid ? row.fixedProb(v) : 0ull;
    if (j < kMaxCandidates) sh.cand_fp[j] = fp;
    if (small_k) mass = blockSum(fp, sh);  // (also orders the cand_fp writes)
    else __syncthreads();
    const u64 target = topPTarget(p.top_p, mass);
    // Mass through this token in (logit desc, id asc) order; the cut is the first token reaching target.
    u64 cum = 0;
    if (valid) {
      for (int i = 0; i < n; ++i) {
        const u64 oi = (static_cast<u64>(orderKey(sh.cand_val[i])) << 32) | static_cast<uint32_t>(sh.cand_id[i]);
        if (oi <= order) cum += sh.cand_fp[i];
      }
    }
    const u64 cut = blockMin(valid && cum >= target ? order : ~0ull, sh);
    if (cut == ~0ull) return -2;  // the cut lies beyond the candidates (only without a small top-k)
    kept = valid && order <= cut;
  }
  // The draw, as the host's pick(): weights in id order, total and target in double, the first
  // positive weight whose cumulative sum exceeds u * total; the last positive one if rounding
  // leaves the sum a hair below.
  const float min_prob = p.min_p > 0.0f ? fminf(p.min_p, 1.0f) : 0.0f;
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
    const u64 last = blockMin(valid && w > 0.0f ? static_cast<u64>(kMaxCandidates - 1 - j) : ~0ull, sh);
    if (last == ~0ull) return -1;  // nothing positive: the caller draws the top token
    slot = static_cast<u64>(kMaxCandidates - 1) - last;
  }
  return sh.cand_id[slot];
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
    x[t.token] = penalized(p, x[t.token], t.generated_count + (is_pending ? 1 : 0), t.in_prompt != 0);
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
  const int32_t top_k = params[row].top_k;
  const int32_t k = top_k > 0 && top_k <= kCompactMaxK ? top_k : kCompactMaxK;  // top-p rows: kCompactMaxK
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
  // Every token the slice leaves out has an order key at least the largest kept one (keys ascend
  // as logits descend), the cut's key: that is the slice's floor; a slice kept whole has none
  // (0xffffffff).
  const uint32_t floor = len > k ? cut.key : 0xffffffffu;
  if (threadIdx.x == 0) {
    cv.seg_count[row * kCompactCtas + g] = n;
    cv.seg_bad[row * kCompactCtas + g] = bad != 0;
    cv.seg_floor[row * kCompactCtas + g] = floor;
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
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

  // 1-2. Penalties, then the min_tokens mask (done by the compact pass when there is one).
  if (compact == nullptr) applyPenaltiesAndMask(p, x, vocab, penalties, masked, pending);

  // The compact pass (small batches with a small top-k, or top-p alone): the union of every slice's
  // top-k holds the row's top-k, its max and everything the draw reads (top-p alone: checked
  // below); work on it, in id order, unless a slice saw a NaN / +inf (then the full row reports it).
  const int32_t* ids = nullptr;
  const float* xs = x;
  int64_t n = vocab;
  if (compact != nullptr) {
    const int32_t* counts = compact->seg_count + blockIdx.x * kCompactCtas;
    if (threadIdx.x == 0) {
      int32_t off = 0, any_bad = 0;
      uint32_t floor = 0xffffffffu;  // the union holds every token whose key is below each slice's floor
      for (int g = 0; g < kCompactCtas; ++g) {
        sh.warp_i32[g] = off;
        off += counts[g];
        any_bad |= compact->seg_bad[blockIdx.x * kCompactCtas + g];
        floor = min(floor, compact->seg_floor[blockIdx.x * kCompactCtas + g]);
      }
      sh.result = any_bad ? -1 : off;
      sh.floor = floor;
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
  float best = -INFINITY;
  int32_t best_i = 0x7fffffff, bad = 0x7fffffff;
  forEachValue(xs, n, [&](int64_t i, float v) {
    if (!(v < INFINITY) && i < bad) bad = static_cast<int32_t>(i);
    if (v > best) {  // strided ascending: the first of equal values stays
      best = v;
      best_i = static_cast<int32_t>(i);
    }
  });
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(kFull, best, o);
    const int32_t oi = __shfl_xor_sync(kFull, best_i, o);
    bad = min(bad, __shfl_xor_sync(kFull, bad, o));
    if (ov > best || (ov == best && oi < best_i)) {
      best = ov;
      best_i = oi;
    }
  }
  if (lane == 0) {
    sh.warp_f32[warp] = best;
    sh.warp_i32[warp] = best_i;
    sh.warp_i32b[warp] = bad;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kWarps; ++w) {
      if (sh.warp_f32[w] > best || (sh.warp_f32[w] == best && sh.warp_i32[w] < best_i)) {
        best = sh.warp_f32[w];
        best_i = sh.warp_i32[w];
      }
      bad = min(bad, sh.warp_i32b[w]);
    }
    sh.warp_f32[0] = best;
    sh.warp_i32[0] = best_i;
    sh.warp_i32b[0] = bad;
  }
  __syncthreads();
  best = sh.warp_f32[0];
  best_i = sh.warp_i32[0];
  bad = sh.warp_i32b[0];
  __syncthreads();
  RowSample& o = out[blockIdx.x];
  if (bad != 0x7fffffff || best == -INFINITY) {
    if (threadIdx.x == 0) {
      o.token = -1;
      o.error = bad != 0x7fffffff ? RowSample::kBadValue : RowSample::kAllMasked;
      o.bad_index = bad != 0x7fffffff ? bad : -1;
      o.bad_value = bad != 0x7fffffff ? xs[bad] : 0.0f;
      o.num_top = 0;
    }
    return;
  }

  Row row{xs, n, best, 1.0f};
  int32_t token = best_i;
  if (!p.greedy) {
    row.inv_t = __fdiv_rn(1.0f, p.temperature);
    // A compact top-p row (no top-k): top-p's reference is the whole row's mass; the union serves
    // when its tokens above the floor (all of the row's tokens above it) reach the target.
    u64 whole_mass = 0;
    const bool whole_reference = ids != nullptr && !(p.top_k > 0 && p.top_k < vocab);
    if (whole_reference) {
      whole_mass = keptMass(Row{x, vocab, best, row.inv_t}, Cut{}, sh);
      const uint32_t floor = sh.floor;
      u64 above = 0;
      forEachValue(xs, n, [&](int64_t, float v) {
        if (orderKey(v) < floor) above += row.fixedProb(v);  // (keys ascend as logits descend)
      });
      if (blockSum(above, sh) < topPTarget(p.top_p, whole_mass)) {  // the nucleus may reach outside
        token = best_i = ids[best_i];
        xs = x;
        n = vocab;
        ids = nullptr;
        row = Row{x, vocab, best, row.inv_t};
      }
    }
    Cut cut;
    const bool top_k = p.top_k > 0 && p.top_k < n;
    if (top_k) cut = selectCut(row, Cut{}, false, static_cast<u64>(p.top_k), sh);
    const bool small_k = top_k && p.top_k <= kMaxCandidates, top_p = p.top_p < 1.0f;
    // Top-p's reference mass over the kept set: one pass, shared by both paths (a small top-k
    // set's mass the candidate path sums itself).
    u64 mass = top_p && !small_k ? (whole_reference ? whole_mass : keptMass(row, cut, sh)) : 0ull;
    const int32_t drawn = small_k || top_p ? drawFromCandidates(row, cut, small_k, mass, p, sh) : -2;
    if (drawn != -2) {
      token = drawn >= 0 ? drawn : best_i;
    } else {
      if (top_p) {
        if (small_k) mass = keptMass(row, cut, sh);
        const Cut pc = selectCut(row, cut, true, topPTarget(p.top_p, mass), sh);
        if (pc.on) cut = pc;
      }
      const float min_prob = p.min_p > 0.0f ? fminf(p.min_p, 1.0f) : 0.0f;
      const double u = philoxUniform(p.seed, p.step, p.sample_index);
      const int64_t t = firstReaching<double, true>(
          n,
          [&](int64_t i) -> double {
            const float v = xs[i];
            if (!cut.keeps(orderKey(v), i)) return 0.0;
            const float q = row.prob(v);
            return q >= min_prob ? static_cast<double>(q) : 0.0;
          },
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
    num_top = min(p.num_logprobs, static_cast<int32_t>(RowSample::kMaxTop));
    if (n < num_top) num_top = static_cast<int32_t>(n);
    if (num_top > 0) {
      const Row raw{xs, n, best, 1.0f};
      const Cut top = selectCut(raw, Cut{}, false, static_cast<u64>(num_top), sh);
      if (threadIdx.x == 0) sh.top_count = 0;
      __syncthreads();
      forEachValue(xs, n, [&](int64_t i, float v) {
        if (top.keeps(orderKey(v), i)) {
          const int slot = atomicAdd(&sh.top_count, 1);
          if (slot < RowSample::kMaxTop) {
            sh.top_val[slot] = v;
            sh.top_id[slot] = static_cast<int32_t>(i);
          }
        }
      });
      __syncthreads();
      if (threadIdx.x == 0) {
        const int n = min(sh.top_count, num_top);
        for (int a = 1; a < n; ++a) {  // insertion sort: logit desc, id asc
          const float v = sh.top_val[a];
          const int32_t id = sh.top_id[a];
          int b = a;
          while (b > 0 && (sh.top_val[b - 1] < v || (sh.top_val[b - 1] == v && sh.top_id[b - 1] > id))) {
            sh.top_val[b] = sh.top_val[b - 1];
            sh.top_id[b] = sh.top_id[b - 1];
            --b;
          }
          sh.top_val[b] = v;
          sh.top_id[b] = id;
        }
        for (int a = 0; a < n; ++a) {
          o.top_ids[a] = ids != nullptr ? ids[sh.top_id[a]] : sh.top_id[a];
          o.top_logprobs[a] = __fsub_rn(__fsub_rn(sh.top_val[a], best), log_z);
        }
        num_top = n;
      }
    }
  }
  if (threadIdx.x == 0) {
    o.token = ids != nullptr ? ids[token] : token;
    o.error = RowSample::kOk;
    o.bad_index = -1;
    o.num_top = num_top;
  }
}

}  // namespace

bool sampleCompactApplies(const RowSampling* rows, int64_t n, int64_t vocab, bool top_p_alone) {
  if (n < 1 || n > kCompactMaxRows || vocab < kCompactCtas) return false;
  for (int64_t r = 0; r < n; ++r) {
    const RowSampling& p = rows[r];
    const bool small_k = p.top_k >= 1 && p.top_k <= kCompactMaxK && p.top_k < vocab;
    const bool top_p_only = top_p_alone && (p.top_k < 1 || p.top_k >= vocab) && p.top_p < 1.0f;
    if (p.greedy || !(small_k || top_p_only) || p.num_logprobs >= 0) return false;
  }
  return true;
}

size_t sampleCompactBytes(int64_t rows) {
  const size_t segs = static_cast<size_t>(rows) * kCompactCtas;
  return segs * kCompactMaxK * 8 + segs * 12 + static_cast<size_t>(rows) * kCompactCap * 8;
}

cudaError_t sampleRows(float* logits, int64_t ld, int64_t rows, int64_t vocab, const RowSampling* params,
                       const PenaltyToken* penalties, const int32_t* masked, ResultTokens pending, RowSample* out,
                       void* compact_ws, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  CompactView cv{};
  if (compact_ws != nullptr) {
    const size_t segs = static_cast<size_t>(rows) * kCompactCtas;
    char* w = static_cast<char*>(compact_ws);
    cv.seg_val = reinterpret_cast<float*>(w);
    cv.seg_id = reinterpret_cast<int32_t*>(w + segs * kCompactMaxK * 4);
    cv.seg_count = reinterpret_cast<int32_t*>(w + segs * kCompactMaxK * 8);
    cv.seg_bad = cv.seg_count + segs;
    cv.seg_floor = reinterpret_cast<uint32_t*>(cv.seg_bad + segs);
    cv.row_val = reinterpret_cast<float*>(w + segs * kCompactMaxK * 8 + segs * 12);
    cv.row_id = reinterpret_cast<int32_t*>(reinterpret_cast<char*>(cv.row_val) + static_cast<size_t>(rows) * kCompactCap * 4);
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

// Mixture-of-experts kernels (cuda_moe.h): routing, the grouping of slots by expert, the
// matrix-vector path for decode-sized steps and the combine of the grouped products' outputs.
//
// Routing (routeToken): one warp per token. The softmax is float32 with accurate expf, as the CPU
// reference; the top_k are taken one at a time as the largest probability below the previous pick
// in the order (probability descending, expert id ascending), so ties go to the lower id and no
// list of the picked is kept. A NaN probability ranks below every number (the picks stay valid
// expert ids; their weights are NaN, as the CPU's would be).
//
// Grouping for the grouped products, deterministic and without atomics: moeRoute's block b owns
// tokens 32b .. 32b+31 and writes word b of every expert's bitmask (bit j: token 32b + j chose the
// expert), zeros included, so nothing has to be cleared first. moePlanTiles counts each expert's
// slots (popcounts of its bitmask, a warp per expert), then its block e takes expert e's first
// sorted row and first tile as sums over the experts below it and walks e's bitmask in token
// order: a token's position is the running popcount, its slot the one of its top_k choices that
// is e.
//
// The matrix-vector path follows cuda_gemv.cu: each warp streams whole weight rows with 16-byte
// loads (U chunks in flight), the slots' input rows come through L1, float32 dot products are
// reduced across the warp. A group's slots are taken up to 4 at a time (1, 2 or 4 accumulator
// sets; steps of one or two tokens get kernels without the larger ones, so batch-1 decode keeps
// few registers); a group of more re-reads its rows (from L2) per 4.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <type_traits>

#include "backend/cuda/cuda_moe.h"
#include "backend/cuda/cuda_pdl.h"
#include "backend/cuda/cuda_vec.h"

namespace llmrt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xffffffffu;

cudaError_t launched(cudaError_t e) { return e != cudaSuccess ? e : cudaGetLastError(); }

// ---- routing ------------------------------------------------------------------------------

// The top_k experts of one token (logits l[0, E)), by the whole warp: lane 0 writes ids[k] and
// weights[k] for k < K (weights: the softmax probability, divided by the chosen ones' sum, added in
// top-k order, when renormalizing). Every lane returns after the same work.
__device__ __forceinline__ void routeToken(const float* l, int E, int K, bool renorm, int lane, int32_t* ids, float* weights) {
  float mx = -INFINITY;
  for (int e = lane; e < E; e += 32) mx = fmaxf(mx, l[e]);
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, o));
  float sum = 0.0f;
  for (int e = lane; e < E; e += 32) sum += expf(l[e] - mx);
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(kFull, sum, o);
  float prev_p = INFINITY, chosen = 0.0f;
  int32_t prev_e = -1;
  for (int k = 0; k < K; ++k) {
    float bv = -INFINITY;
    int32_t bi = INT_MAX;
    for (int e = lane; e < E; e += 32) {
      float p = expf(l[e] - mx) / sum;
      if (!(p == p)) p = -1.0f;  // NaN: below every probability
      const bool below = p < prev_p || (p == prev_p && e > prev_e);
      if (below && (p > bv || (p == bv && e < bi))) {
        bv = p;
        bi = e;
      }
    }
    warpArgmax(bv, bi);  // K <= E: some expert is always left below the previous pick
    const float w = expf(l[bi] - mx) / sum;
    if (lane == 0) {
      ids[k] = bi;
      weights[k] = w;
    }
    chosen += w;
    prev_p = bv;
    prev_e = bi;
  }
  if (renorm && lane == 0)
    for (int k = 0; k < K; ++k) weights[k] = weights[k] / chosen;
}

// Block b routes tokens 32b .. 32b+31 (warp w: tokens w, w + 8, ...), then writes word b of every
// expert's token bitmask.
__global__ void __launch_bounds__(kThreads) moeRouteKernel(MoeRoute r, MoePlan p) {
  __shared__ int32_t s_ids[32 * kMoeMaxTopK];
  pdlWait();
  pdlLaunchDependents();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, K = r.top_k;
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * 32;
  const int64_t words = (r.tokens + 31) / 32;
  for (int j = warp; j < 32; j += kWarps) {
    const int64_t t = t0 + j;
    if (t < r.tokens)
      routeToken(r.logits + t * r.ld, r.experts, K, r.renormalize, lane, s_ids + j * K, p.slot_weight + t * K);
    else
      for (int k = lane; k < K; k += 32) s_ids[j * K + k] = -1;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 32 * K; i += kThreads)
    if (t0 + i / K < r.tokens) p.slot_expert[t0 * K + i] = s_ids[i];
  for (int e = threadIdx.x; e < r.experts; e += kThreads) {
    uint32_t word = 0;
    for (int j = 0; j < 32; ++j)
      for (int k = 0; k < K; ++k)
        if (s_ids[j * K + k] == e) word |= 1u << j;
    p.bits[static_cast<int64_t>(e) * words + blockIdx.x] = word;
  }
}

// The block's sum of v (every thread gets it); red holds kWarps ints and may be reused at once.
__device__ int blockSum(int v, int* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  int s = 0;
  for (int w = 0; w < kWarps; ++w) s += red[w];
  __syncthreads();
  return s;
}

// Warp w of block b: the slot count of expert 8b + w, from its bitmask.
__global__ void __launch_bounds__(kThreads) moeCountKernel(MoeRoute r, MoePlan p) {
  pdlWait();
  pdlLaunchDependents();
  const int e = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (e >= r.experts) return;
  const int64_t words = (r.tokens + 31) / 32;
  const uint32_t* row = p.bits + static_cast<int64_t>(e) * words;
  int c = 0;
  for (int64_t w = lane; w < words; w += 32) c += __popc(row[w]);
  for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(kFull, c, o);
  if (lane == 0) p.counts[e] = c;
}

// Block e: the sorted rows and the tiles of expert e (see the top).
__global__ void __launch_bounds__(kThreads) moePlanKernel(MoeRoute r, MoePlan p) {
  __shared__ int32_t s_count[kMoeMaxExperts];
  __shared__ int red[kWarps];
  __shared__ int scan[kWarps];
  pdlWait();
  pdlLaunchDependents();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, E = r.experts, K = r.top_k, e = blockIdx.x;
  const int64_t words = (r.tokens + 31) / 32;
  for (int x = threadIdx.x; x < E; x += kThreads) s_count[x] = p.counts[x];
  __syncthreads();
  int below = 0, below_tiles = 0, all_tiles = 0;
  for (int x = threadIdx.x; x < E; x += kThreads) {
    const int c = s_count[x], t = (c + kMoeTileM - 1) / kMoeTileM;
    all_tiles += t;
    if (x < e) {
      below += c;
      below_tiles += t;
    }
  }
  below = blockSum(below, red);
  below_tiles = blockSum(below_tiles, red);
  all_tiles = blockSum(all_tiles, red);
  const int count = s_count[e], tiles = (count + kMoeTileM - 1) / kMoeTileM;
  if (e == 0 && threadIdx.x == 0) p.header[0] = all_tiles;
  for (int j = threadIdx.x; j < tiles; j += kThreads)
    p.tiles[below_tiles + j] = make_int4(e, below + j * kMoeTileM, min(kMoeTileM, count - j * kMoeTileM), 0);
  if (count == 0) return;
  const uint32_t* row = p.bits + static_cast<int64_t>(e) * words;
  int running = below;
  for (int64_t base = 0; base < words; base += kThreads) {
    const int64_t wi = base + threadIdx.x;
    uint32_t word = wi < words ? row[wi] : 0u;
    const int n = __popc(word);
    int incl = n;  // inclusive scan over the warp, then over the warps
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(kFull, incl, o);
      if (lane >= o) incl += v;
    }
    if (lane == 31) scan[warp] = incl;
    __syncthreads();
    int warp_off = 0, total = 0;
    for (int w = 0; w < kWarps; ++w) {
      warp_off += w < warp ? scan[w] : 0;
      total += scan[w];
    }
    int pos = running + warp_off + incl - n;
    while (word != 0u) {
      const int b = __ffs(word) - 1;
      word &= word - 1u;
      const int64_t t = wi * 32 + b;
      const int32_t* ids = p.slot_expert + t * K;
      int k = 0;
      while (k + 1 < K && ids[k] != e) ++k;
      p.sorted_slot[pos++] = static_cast<int32_t>(t * K + k);
    }
    running += total;
    __syncthreads();  // `scan` is rewritten next pass
  }
}

// Routes at most kMoeGemvMaxSlots slots and groups them by expert: rank of slot i = the slots of a
// lower expert, or of the same expert and a lower index; a group starts where the expert changes.
__global__ void __launch_bounds__(kThreads, 1) moeRouteSmallKernel(MoeRoute r, MoePlan p) {
  __shared__ int32_t s_ids[kMoeGemvMaxSlots];
  __shared__ int32_t s_sorted[kMoeGemvMaxSlots];
  __shared__ int32_t s_start[kMoeGemvMaxSlots];
  pdlWait();
  pdlLaunchDependents();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, K = r.top_k;
  const int T = static_cast<int>(r.tokens), S = T * K;
  for (int t = warp; t < T; t += kWarps)
    routeToken(r.logits + t * r.ld, r.experts, K, r.renormalize, lane, s_ids + t * K, p.slot_weight + t * K);
  __syncthreads();
  const int i = threadIdx.x;
  if (i < S) {
    const int32_t e = s_ids[i];
    int rank = 0;
    for (int j = 0; j < S; ++j) rank += s_ids[j] < e || (s_ids[j] == e && j < i);
    s_sorted[rank] = i;
  }
  __syncthreads();
  if (i < S) {
    p.sorted_slot[i] = s_sorted[i];
    s_start[i] = i == 0 || s_ids[s_sorted[i]] != s_ids[s_sorted[i - 1]];
  }
  __syncthreads();
  if (i < S && s_start[i]) {
    int g = 0;
    for (int j = 1; j <= i; ++j) g += s_start[j];
    int end = i + 1;
    while (end < S && !s_start[end]) ++end;
    p.groups[g] = make_int4(s_ids[s_sorted[i]], i, end - i, 0);
  }
  if (i == 0) {
    int n = 0;
    for (int j = 0; j < S; ++j) n += s_start[j];
    p.header[0] = n;
  }
}

// ---- the matrix-vector path ---------------------------------------------------------------

// acc[m][r] = x[m] . w[r] over `chunks` 16-byte chunks of the weight rows, reduced over the warp
// (every lane gets the sums). x[m] rows of TX (float or W), 16-byte aligned.
template <int M, int NR, typename W, typename TX>
__device__ __forceinline__ void warpDots(const uint4* const* w, const TX* const* x, int64_t chunks, int lane,
                                         float (&acc)[M][NR]) {
  constexpr int U = M <= 2 ? 4 : 2;
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < NR; ++r) acc[m][r] = 0.0f;
  int64_t c = lane;
  // U chunks per row from `at` on, loads first; kTail: the row's last (< U), as cuda_gemv.cu.
  auto step = [&](int64_t at, auto tail_tag) {
    constexpr bool kTail = decltype(tail_tag)::value;
    uint4 wv[U][NR];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < NR; ++r)
        wv[u][r] = !kTail || at + 32 * u < chunks ? loadStreaming(w[r] + at + 32 * u) : uint4{};
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (kTail && at + 32 * u >= chunks) break;
        float4 a, b;
        load8(x[m] + 8 * (at + 32 * u), a, b);
#pragma unroll
        for (int r = 0; r < NR; ++r) acc[m][r] += dot8<W>(wv[u][r], a, b);
      }
  };
  for (; c + 32 * (U - 1) < chunks; c += 32 * U) step(c, std::false_type{});
  if (c < chunks) step(c, std::true_type{});
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < NR; ++r) {
      float v = acc[m][r];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
      acc[m][r] = v;
    }
}

// The slots first .. first + mc - 1 of a group (mc <= N; the rest repeat the last, unused) and
// their input rows: x rows of their tokens (div = top_k) or a rows of the slots (div = 1).
template <int N, typename TX>
__device__ __forceinline__ void groupSlots(const int32_t* sorted_slot, int first, int mc, const TX* x, int64_t ld,
                                           int div, int32_t (&slot)[N], const TX* (&rows)[N]) {
#pragma unroll
  for (int m = 0; m < N; ++m) {
    slot[m] = sorted_slot[first + (m < mc ? m : mc - 1)];
    rows[m] = x + static_cast<int64_t>(slot[m] / div) * ld;
  }
}

// Calls f(std::integral_constant<int, M>{}) for the smallest M in {1, 2, 4} (at most kMaxM) that
// holds mc slots: each instantiation keeps only its own accumulators.
template <int kMaxM, typename F>
__device__ __forceinline__ void withSlotCount(int mc, F&& f) {
  if constexpr (kMaxM == 1) {
    f(std::integral_constant<int, 1>{});
  } else if constexpr (kMaxM == 2) {
    if (mc == 1)
      f(std::integral_constant<int, 1>{});
    else
      f(std::integral_constant<int, 2>{});
  } else {
    if (mc == 1)
      f(std::integral_constant<int, 1>{});
    else if (mc == 2)
      f(std::integral_constant<int, 2>{});
    else
      f(std::integral_constant<int, 4>{});
  }
}

// grid (ceil(inter / 8), max_groups): warp w of block (b, g) computes column i = 8b + w of every
// slot of group g (its expert's gate row i and up row i), kMaxM slots at a time.
template <int kMaxM, typename W, typename TX, typename TA>
__global__ void __launch_bounds__(kThreads) moeGemvUpKernel(MoeGemvArgs g) {
  pdlWait();
  pdlLaunchDependents();
  if (static_cast<int>(blockIdx.y) >= g.header[0]) return;
  const int4 grp = g.groups[blockIdx.y];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (i >= g.inter) return;
  const W* we = static_cast<const W*>(g.w) + static_cast<int64_t>(grp.x) * 2 * g.inter * g.hidden;
  const uint4* w[2] = {reinterpret_cast<const uint4*>(we + i * g.hidden),
                       reinterpret_cast<const uint4*>(we + (g.inter + i) * g.hidden)};
  for (int mb = 0; mb < grp.z; mb += kMaxM) {
    const int mc = min(kMaxM, grp.z - mb);
    int32_t slot[kMaxM];
    const TX* xr[kMaxM];
    groupSlots<kMaxM>(g.sorted_slot, grp.y + mb, mc, static_cast<const TX*>(g.x), g.ld_x, g.top_k, slot, xr);
    withSlotCount<kMaxM>(mc, [&](auto m_tag) {
      constexpr int M = decltype(m_tag)::value;
      float acc[M][2];
      warpDots<M, 2, W, TX>(w, xr, g.hidden / 8, lane, acc);
#pragma unroll
      for (int m = 0; m < M; ++m)
        if (lane == m && m < mc)
          storeFloat(static_cast<TA*>(g.a) + static_cast<int64_t>(slot[m]) * g.inter + i,
                     moeActivate(g.act, acc[m][0]) * acc[m][1]);
    });
  }
}

// Blocks per SM the down kernel is built for (at most 64 (85 with float32 activations), 128, 255
// registers): without the bound ptxas settles on fewer registers and spills; one slot at a time
// (batch-1 decode) keeps 24-32 warps per SM streaming weights.
constexpr int downMinBlocks(int max_slots, bool f32_acts) {
  return max_slots == 1 ? (f32_acts ? 3 : 4) : (max_slots == 2 ? 2 : 1);
}

// grid ceil(hidden / (8 / col_warps)): block b computes output columns n = b * cols + c (cols = 8 /
// col_warps) of every slot, warp w taking column w % cols and the groups w / cols, w / cols +
// col_warps, ... (each slot is in one group: one warp writes it), each chosen expert's down row n in
// turn, into shared memory; then the block adds each token's top_k outputs (in top-k order) to its
// residual columns. col_warps > 1 spreads few groups (batch-1 decode) over more warps.
template <int kMaxM, typename W, typename TA>
__global__ void __launch_bounds__(kThreads, downMinBlocks(kMaxM, std::is_same<TA, float>::value)) moeGemvDownKernel(MoeGemvArgs g) {
  __shared__ float ys[kMoeGemvMaxSlots * kWarps];  // [slot][column of the block]
  pdlWait();
  pdlLaunchDependents();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int cols = kWarps / g.col_warps, col = warp % cols;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * cols + col;
  const int groups = g.header[0];
  if (n < g.hidden) {
    for (int gi = warp / cols; gi < groups; gi += g.col_warps) {
      const int4 grp = g.groups[gi];
      const uint4* w[1] = {reinterpret_cast<const uint4*>(static_cast<const W*>(g.w) +
                                                          (static_cast<int64_t>(grp.x) * g.hidden + n) * g.inter)};
      for (int mb = 0; mb < grp.z; mb += kMaxM) {
        const int mc = min(kMaxM, grp.z - mb);
        int32_t slot[kMaxM];
        const TA* ar[kMaxM];
        groupSlots<kMaxM>(g.sorted_slot, grp.y + mb, mc, static_cast<const TA*>(g.a), g.inter, 1, slot, ar);
        withSlotCount<kMaxM>(mc, [&](auto m_tag) {
          constexpr int M = decltype(m_tag)::value;
          float acc[M][1];
          warpDots<M, 1, W, TA>(w, ar, g.inter / 8, lane, acc);
#pragma unroll
          for (int m = 0; m < M; ++m)
            if (lane == m && m < mc) ys[slot[m] * kWarps + col] = acc[m][0] * g.slot_weight[slot[m]];
        });
      }
    }
  }
  __syncthreads();
  const int K = g.top_k;
  for (int64_t idx = threadIdx.x; idx < g.tokens * cols; idx += kThreads) {
    const int64_t t = idx / cols;
    const int j = static_cast<int>(idx % cols);
    const int64_t c = static_cast<int64_t>(blockIdx.x) * cols + j;
    if (c >= g.hidden) continue;
    float s = 0.0f;
    for (int k = 0; k < K; ++k) s += ys[(t * K + k) * kWarps + j];
    g.residual[t * g.ld_res + c] += s;
  }
}

// ---- combine ------------------------------------------------------------------------------

__global__ void moeCombineKernel(const float* y, int64_t tokens, int64_t hidden, int K, float* res, int64_t ld_res) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= hidden) return;
  for (int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
    float s = 0.0f;
    for (int k = 0; k < K; ++k) s += y[(t * K + k) * hidden + c];
    res[t * ld_res + c] += s;
  }
}

// Four columns per thread: hidden and ld_res multiples of 4, y and res 16-byte aligned.
__global__ void moeCombineVecKernel(const float* y, int64_t tokens, int64_t hidden, int K, float* res,
                                    int64_t ld_res) {
  pdlWait();
  pdlLaunchDependents();
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (c >= hidden) return;
  for (int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
    float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int k = 0; k < K; ++k) {
      const float4 v = *reinterpret_cast<const float4*>(y + (t * K + k) * hidden + c);
      s = make_float4(s.x + v.x, s.y + v.y, s.z + v.z, s.w + v.w);
    }
    float4* r = reinterpret_cast<float4*>(res + t * ld_res + c);
    const float4 o = *r;
    *r = make_float4(o.x + s.x, o.y + s.y, o.z + s.z, o.w + s.w);
  }
}

dim3 grid2(int64_t rows, int64_t cols) {
  return dim3(static_cast<unsigned>((cols + kThreads - 1) / kThreads),
              static_cast<unsigned>(rows < 65535 ? rows : 65535));
}
bool aligned16(const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; }

}  // namespace

cudaError_t moeRoute(const MoeRoute& r, const MoePlan& p, cudaStream_t stream) {
  if (r.tokens == 0) return cudaSuccess;
  if (r.top_k < 1 || r.top_k > kMoeMaxTopK || r.top_k > r.experts || r.experts > kMoeMaxExperts)
    return cudaErrorInvalidValue;
  const unsigned blocks = static_cast<unsigned>((r.tokens + 31) / 32);
  return launched(launchPdl(moeRouteKernel, blocks, kThreads, 0, stream, r, p));
}

cudaError_t moePlanTiles(const MoeRoute& r, const MoePlan& p, cudaStream_t stream) {
  if (r.tokens == 0) return cudaSuccess;
  if (r.experts < 1 || r.experts > kMoeMaxExperts) return cudaErrorInvalidValue;
  const cudaError_t e = launched(launchPdl(moeCountKernel, static_cast<unsigned>((r.experts + kWarps - 1) / kWarps),
                                           kThreads, 0, stream, r, p));
  if (e != cudaSuccess) return e;
  return launched(launchPdl(moePlanKernel, static_cast<unsigned>(r.experts), kThreads, 0, stream, r, p));
}

cudaError_t moeRouteSmall(const MoeRoute& r, const MoePlan& p, cudaStream_t stream) {
  if (r.tokens == 0) return cudaSuccess;
  if (r.top_k < 1 || r.top_k > r.experts || r.tokens * r.top_k > kMoeGemvMaxSlots) return cudaErrorInvalidValue;
  return launched(launchPdl(moeRouteSmallKernel, 1, kThreads, 0, stream, r, p));
}

namespace {
bool gemvArgsOk(const MoeGemvArgs& g) {
  return g.hidden % 8 == 0 && g.inter % 8 == 0 && aligned16(g.w) && aligned16(g.a) &&
         g.tokens * g.top_k <= kMoeGemvMaxSlots && g.max_groups >= 1 &&
         (g.a_dtype == DType::kF32 || g.a_dtype == g.w_dtype);
}
}  // namespace

// The largest group of a step of `tokens` tokens has at most `tokens` slots (a token chooses an
// expert once): kernels for 1, 2 and up to 4 slots at a time, so batch-1 decode keeps few registers.
template <typename F>
cudaError_t withMaxSlots(int64_t tokens, F&& f) {
  if (tokens <= 1) return f(std::integral_constant<int, 1>{});
  if (tokens == 2) return f(std::integral_constant<int, 2>{});
  return f(std::integral_constant<int, 4>{});
}

cudaError_t moeGemvUp(const MoeGemvArgs& g, cudaStream_t stream) {
  if (g.tokens == 0 || g.inter == 0) return cudaSuccess;
  const int64_t per16 = g.x_dtype == DType::kF32 ? 4 : 8;
  if (!gemvArgsOk(g) || !aligned16(g.x) || g.ld_x % per16 != 0 ||
      (g.x_dtype != DType::kF32 && g.x_dtype != g.w_dtype) ||
      (g.x_dtype != DType::kF32 && g.a_dtype == DType::kF32))
    return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((g.inter + kWarps - 1) / kWarps), static_cast<unsigned>(g.max_groups));
  return launched(withHalfType(g.w_dtype, [&](auto tag) {
    using W = decltype(tag);
    return withMaxSlots(g.tokens, [&](auto m_tag) {
      constexpr int M = decltype(m_tag)::value;
      if (g.x_dtype != DType::kF32) return launchPdl(moeGemvUpKernel<M, W, W, W>, grid, kThreads, 0, stream, g);
      if (g.a_dtype == DType::kF32)
        return launchPdl(moeGemvUpKernel<M, W, float, float>, grid, kThreads, 0, stream, g);
      return launchPdl(moeGemvUpKernel<M, W, float, W>, grid, kThreads, 0, stream, g);
    });
  }));
}

cudaError_t moeGemvDown(const MoeGemvArgs& g, cudaStream_t stream) {
  if (g.tokens == 0 || g.hidden == 0) return cudaSuccess;
  if (!gemvArgsOk(g) || g.residual == nullptr) return cudaErrorInvalidValue;
  // Warps per output column: up to one per group the step can have (a power of two, at most 8).
  MoeGemvArgs a = g;
  a.col_warps = 1;
  while (a.col_warps < kWarps && a.col_warps * 2 <= g.max_groups) a.col_warps *= 2;
  const int64_t cols = kWarps / a.col_warps;
  const unsigned blocks = static_cast<unsigned>((g.hidden + cols - 1) / cols);
  return launched(withHalfType(g.w_dtype, [&](auto tag) {
    using W = decltype(tag);
    return withMaxSlots(g.tokens, [&](auto m_tag) {
      constexpr int M = decltype(m_tag)::value;
      if (g.a_dtype == DType::kF32) return launchPdl(moeGemvDownKernel<M, W, float>, blocks, kThreads, 0, stream, a);
      return launchPdl(moeGemvDownKernel<M, W, W>, blocks, kThreads, 0, stream, a);
    });
  }));
}

cudaError_t moeCombine(const float* y, int64_t tokens, int64_t hidden, int32_t top_k, float* residual,
                       int64_t ld_res, cudaStream_t stream) {
  if (tokens * hidden == 0) return cudaSuccess;
  if (hidden % 4 == 0 && ld_res % 4 == 0 && aligned16(y) && aligned16(residual))
    return launched(launchPdl(moeCombineVecKernel, grid2(tokens, (hidden + 3) / 4), kThreads, 0, stream, y, tokens,
                              hidden, static_cast<int>(top_k), residual, ld_res));
  return launched(launchPdl(moeCombineKernel, grid2(tokens, hidden), kThreads, 0, stream, y, tokens, hidden,
                            static_cast<int>(top_k), residual, ld_res));
}

}  // namespace llmrt::cuda

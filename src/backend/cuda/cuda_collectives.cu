// The custom collectives (protocol: cuda_collectives.h).
#include "backend/cuda/cuda_collectives.h"

namespace llmrt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kPerBlock = 1024;  // floats per block (one float4 per thread) before the grid widens

// Blocks of a call: a function of the count alone, so every rank runs the same grid.
int blocksFor(int64_t count) {
  const int64_t b = (count + kPerBlock - 1) / kPerBlock;
  return static_cast<int>(b < 1 ? 1 : b > kCollectiveMaxBlocks ? kCollectiveMaxBlocks : b);
}

__device__ __forceinline__ unsigned long long loadAcquire(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void storeRelease(unsigned long long* p, unsigned long long v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// Raises this block's flag to `value` in every rank's array and waits until every rank's block
// has raised its flag in ours (or the group is aborted). Ends with __syncthreads.
__device__ void meet(const CollectivePeers& peers, const CollectiveRankState& state, int rank, unsigned long long value) {
  __syncthreads();  // (this block's writes to its staging buffer come first)
  const int t = threadIdx.x;
  if (t < peers.ranks) {
    __threadfence_system();
    storeRelease(peers.flags[t] + blockIdx.x * kCollectiveMaxRanks + rank, value);
    const unsigned long long* mine = peers.flags[rank] + blockIdx.x * kCollectiveMaxRanks + t;
    for (uint32_t spins = 0; loadAcquire(mine) < value; ++spins)
      if ((spins & 1023u) == 1023u && *state.abort_flag != 0) break;
  }
  __syncthreads();
}

// This block's share [lo, hi) of `count` floats: equal shares, multiples of 4 * `parts` floats
// (so every part of a share starts 16-byte aligned), the last share shorter.
__device__ __forceinline__ void blockShare(int64_t count, int parts, int64_t& lo, int64_t& hi) {
  const int64_t quantum = 4 * parts;
  int64_t per = (count + gridDim.x - 1) / gridDim.x;
  per = (per + quantum - 1) / quantum * quantum;
  lo = min(count, per * blockIdx.x);
  hi = min(count, lo + per);
}

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// dst[lo, hi) = src[lo, hi), float4 where both are aligned.
__device__ void copyRange(const float* src, float* dst, int64_t lo, int64_t hi) {
  if (aligned16(src + lo) && aligned16(dst + lo)) {
    const int64_t n4 = (hi - lo) / 4;
    for (int64_t i = threadIdx.x; i < n4; i += blockDim.x)
      reinterpret_cast<float4*>(dst + lo)[i] = __ldcg(reinterpret_cast<const float4*>(src + lo) + i);
    lo += n4 * 4;
  }
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) dst[i] = __ldcg(src + i);
}

// dst[lo, hi) = sum over ranks of staging[r][lo, hi), in rank order (rank 0's value first).
__device__ void sumRange(const CollectivePeers& peers, int parity, float* dst, int64_t lo, int64_t hi) {
  bool vec = aligned16(dst + lo);
  for (int r = 0; r < peers.ranks; ++r) vec = vec && aligned16(peers.staging[r][parity] + lo);
  if (vec) {
    const int64_t n4 = (hi - lo) / 4;
    for (int64_t i = threadIdx.x; i < n4; i += blockDim.x) {
      float4 s = __ldcg(reinterpret_cast<const float4*>(peers.staging[0][parity] + lo) + i);
      for (int r = 1; r < peers.ranks; ++r) {
        const float4 v = __ldcg(reinterpret_cast<const float4*>(peers.staging[r][parity] + lo) + i);
        s.x += v.x;
        s.y += v.y;
        s.z += v.z;
        s.w += v.w;
      }
      reinterpret_cast<float4*>(dst + lo)[i] = s;
    }
    lo += n4 * 4;
  }
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    float s = __ldcg(peers.staging[0][parity] + i);
    for (int r = 1; r < peers.ranks; ++r) s += __ldcg(peers.staging[r][parity] + i);
    dst[i] = s;
  }
}

// The rank's call state (CollectiveRankState::counters): [0] the last flag value, [1] calls so
// far (the parity), [2] blocks of the current call done. Every block reads [0] and [1] at its
// start; the last block to finish advances them, so the next call (stream order) sees them.
struct Call {
  int parity;
  unsigned long long flag;
};

__device__ Call beginCall(const CollectiveRankState& state) {
  __shared__ Call call;
  if (threadIdx.x == 0) {
    call.flag = state.counters[0];
    call.parity = static_cast<int>(state.counters[1] & 1u);
  }
  __syncthreads();
  return call;
}

__device__ void endCall(const CollectiveRankState& state, unsigned long long flag) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(state.counters + 2, 1ull) == gridDim.x - 1) {  // the last block of the call
      state.counters[2] = 0;
      state.counters[1] += 1;
      state.counters[0] = flag;
    }
  }
}

__global__ void __launch_bounds__(kThreads) allReduceKernel(CollectivePeers peers, CollectiveRankState state, int rank,
                                                            float* data, int64_t count, bool two_shot) {
  const Call call = beginCall(state);
  int64_t lo, hi;
  blockShare(count, two_shot ? peers.ranks : 1, lo, hi);
  float* mine = peers.staging[rank][call.parity];
  copyRange(data, mine, lo, hi);
  meet(peers, state, rank, call.flag + 1);
  if (!two_shot) {
    sumRange(peers, call.parity, data, lo, hi);
    endCall(state, call.flag + 1);
    return;
  }
  // Reduce-scatter: this rank's part of the share, summed into its own staging buffer (only this
  // rank reads that part in the first phase), then gathered from each part's owner.
  const int64_t part = (hi - lo + peers.ranks - 1) / peers.ranks;
  auto partOf = [&](int r, int64_t& a, int64_t& b) {
    a = min(hi, lo + part * r);
    b = min(hi, a + part);
  };
  int64_t a, b;
  partOf(rank, a, b);
  sumRange(peers, call.parity, data, a, b);  // (into data first: the sums read `mine` too)
  __syncthreads();
  copyRange(data, mine, a, b);
  meet(peers, state, rank, call.flag + 2);
  for (int r = 0; r < peers.ranks; ++r) {
    if (r == rank) continue;
    partOf(r, a, b);
    copyRange(peers.staging[r][call.parity], data, a, b);
  }
  endCall(state, call.flag + 2);
}

__global__ void __launch_bounds__(kThreads) allGatherKernel(CollectivePeers peers, CollectiveRankState state, int rank,
                                                            const float* in, int64_t count, int64_t cols, float* out,
                                                            int64_t ld_out) {
  const Call call = beginCall(state);
  int64_t lo, hi;
  blockShare(count, 1, lo, hi);
  copyRange(in, peers.staging[rank][call.parity], lo, hi);
  meet(peers, state, rank, call.flag + 1);
  for (int r = 0; r < peers.ranks; ++r) {
    const float* src = peers.staging[r][call.parity];
    float* dst = out + static_cast<int64_t>(r) * cols;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
      const int64_t row = i / cols;
      dst[row * ld_out + (i - row * cols)] = __ldcg(src + i);
    }
  }
  endCall(state, call.flag + 1);
}

}  // namespace

cudaError_t customAllReduce(const CollectivePeers& peers, const CollectiveRankState& state, int rank, float* data,
                            int64_t count, bool two_shot, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  allReduceKernel<<<blocksFor(count), kThreads, 0, stream>>>(peers, state, rank, data, count, two_shot);
  return cudaGetLastError();
}

cudaError_t customAllGather(const CollectivePeers& peers, const CollectiveRankState& state, int rank,
                            const float* in, int64_t rows, int64_t cols, float* out, int64_t ld_out,
                            cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  allGatherKernel<<<blocksFor(rows * cols), kThreads, 0, stream>>>(peers, state, rank, in, rows * cols, cols, out, ld_out);
  return cudaGetLastError();
}

}  // namespace llmrt::cuda

// Paged attention of single query rows (decode, and every row the tensor-core
// context kernel does not take). One CTA per (query row, kv head, key split),
// one warp per query head of that kv head's group (GQA), so the group shares
// each K/V tile. A group of more than 32 heads (Falcon-7B: 71 over one KV head)
// is cut into `chunks` CTAs of at most 32 warps each, fewer where the kernel's
// registers allow fewer threads (grid y = kv head x chunk); the last chunk's
// spare warps load tiles and skip the rest. Keys are visited in tiles of 32: the tile's K and V rows are
// gathered through the block table with 16-byte loads into shared memory (as
// float32 — an FP8 cache's codes as their values, K's scale folded into q and V's into the
// output; K rows padded so one key per lane is conflict-free), each lane
// scores one key, an online softmax keeps (max, sum), and each lane
// accumulates head_dim / 32 output features. Causal, with an optional sliding
// window: a query at position p sees keys (p - W, p].
//
// Split keys (flash-decoding): when the rows x kv heads cannot fill the GPU
// (batch-1 decode of a long context), each row's visible keys are cut into
// `splits` equal ranges, computed by separate CTAs; each writes its
// unnormalised accumulator with its max and sum, and mergeKernel combines them:
//   M = max_z m_z,  out = sum_z acc_z e^(m_z - M) / sum_z l_z e^(m_z - M).
// The range of a split depends only on the row's own length (read on the
// device), so a recorded (graph) launch stays valid as sequences grow.
//
// Attention extras (DecodeAttnArgs::extras: soft-capping, ALiBi) take the kernels' second
// instantiation (kExtras): each lane's score (q pre-scaled, so the scaled score) is soft-capped
// and biased before the softmax; the partial states' maxima are then in those units, which the
// merge takes as they are.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_flash_attention.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_pdl.h"
#include "backend/cuda/cuda_vec.h"

namespace llmrt::cuda {
namespace {

constexpr int kTile = 32;
constexpr int kMaxWarps = 32;  // blockDim = heads per CTA * 32 <= 1024
constexpr int kMaxSmem = 200 * 1024;
constexpr int kInFlight = 8;      // 16-byte loads per thread in flight while gathering a tile
constexpr int kMaxSplits = 1024;  // the merge keeps one weight per split in shared memory

template <typename H>  // 16 bytes of H: __nv_bfloat16, __half (float below)
struct Vec {
  static constexpr int kN = 8;
  __device__ static void toFloat(const uint4& v, float* o) {
    float4 a, b;
    load8(reinterpret_cast<const H*>(&v), a, b);
    o[0] = a.x, o[1] = a.y, o[2] = a.z, o[3] = a.w;
    o[4] = b.x, o[5] = b.y, o[6] = b.z, o[7] = b.w;
  }
};
template <>
struct Vec<__nv_fp8_e4m3> {  // an FP8 cache: 16 codes, as their values (unscaled)
  static constexpr int kN = 16;
  __device__ static void toFloat(const uint4& v, float* o) {
    Vec<__half>::toFloat(fp8x8ToHalf(make_uint2(v.x, v.y)), o);
    Vec<__half>::toFloat(fp8x8ToHalf(make_uint2(v.z, v.w)), o + 8);
  }
};
template <>
struct Vec<float> {
  static constexpr int kN = 4;
  __device__ static void toFloat(const uint4& v, float* o) {
    o[0] = __uint_as_float(v.x);
    o[1] = __uint_as_float(v.y);
    o[2] = __uint_as_float(v.z);
    o[3] = __uint_as_float(v.w);
  }
};

// kPerLane: output features per lane (head_dim <= 32 * kPerLane). kExtras: a.extras applies.
// `group`: query heads per KV head; blockDim.x / 32 of them (`sub`) per CTA.
template <typename T, int kPerLane, bool kExtras>
__global__ void decodeKernel(const T* __restrict__ pool, KvLayout g, DecodeAttnArgs a, int group) {
  extern __shared__ float smem[];
  __shared__ const T* k_rows[kTile];
  __shared__ const T* v_rows[kTile];
  const int hd = static_cast<int>(g.head_dim);
  const int sub = blockDim.x / 32, chunks = (group + sub - 1) / sub;
  float* q_s = smem;                   // [sub][hd], pre-scaled
  float* k_s = q_s + sub * hd;         // [kTile][hd + 1]
  float* v_s = k_s + kTile * (hd + 1); // [kTile][hd]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kvh = blockIdx.y / chunks, split = blockIdx.z;
  const int first = kvh * group + (blockIdx.y % chunks) * sub;  // this CTA's first query head
  const int heads = min(sub, (kvh + 1) * group - first);      // warps >= heads only load tiles

  const DecodeKeys keys = decodeKeys(a, blockIdx.x, split);
  const int2 item = keys.item;
  const int32_t* table = keys.table;
  const int64_t begin = keys.begin, end = keys.end;  // [begin, end); empty for trailing splits

  const int tpb = static_cast<int>(g.tokens_per_block);
  const int64_t head_elems = static_cast<int64_t>(tpb) * hd;
  const int64_t k_off = (static_cast<int64_t>(a.layer) * 2 + 0) * g.num_kv_heads * head_elems + kvh * head_elems;
  const int64_t v_off = (static_cast<int64_t>(a.layer) * 2 + 1) * g.num_kv_heads * head_elems + kvh * head_elems;
  auto rowPtr = [&](int64_t j, int64_t off) {
    return pool + static_cast<int64_t>(table[j / tpb]) * g.elems_per_block + off + (j % tpb) * hd;
  };
  pdlWait();
  pdlLaunchDependents();

  const float* q = a.q + static_cast<int64_t>(item.x) * a.ld_q + static_cast<int64_t>(first) * hd;
  // (An FP8 cache's K scale folded into q: the scores of the codes are the scores of the values.)
  const float q_scale = a.scale * a.k_scale;
  for (int i = threadIdx.x; i < sub * hd; i += blockDim.x) q_s[i] = i < heads * hd ? q[i] * q_scale : 0.0f;

  float m = -INFINITY, l = 0.0f;
  float acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) acc[i] = 0.0f;
  const float* my_q = q_s + warp * hd;
  float slope = 0.0f;  // kExtras: this warp's head's ALiBi slope
  if constexpr (kExtras) slope = warp < heads ? alibiSlope(a.extras, first + warp) : 0.0f;
  constexpr int kVec = Vec<T>::kN;
  const bool vec_ok = hd % kVec == 0;

  for (int64_t t0 = begin; t0 < end; t0 += kTile) {
    const int n_valid = static_cast<int>(min(static_cast<int64_t>(kTile), end - t0));
    __syncthreads();  // q_s written / previous tile consumed
    // The tile's K/V row addresses first (one block-table lookup per key), then the rows
    // gathered with 16-byte loads, kInFlight in flight per thread (a whole bf16 tile of
    // head_dim 128 in one round for a GQA group of 4: 1024 loads over 128 threads).
    if (threadIdx.x < n_valid) {
      k_rows[threadIdx.x] = rowPtr(t0 + threadIdx.x, k_off);
      v_rows[threadIdx.x] = rowPtr(t0 + threadIdx.x, v_off);
    }
    __syncthreads();
    if (vec_ok) {
      const int vecs = hd / kVec, total = 2 * n_valid * vecs;
      for (int e0 = threadIdx.x; e0 < total; e0 += kInFlight * blockDim.x) {
        uint4 raw[kInFlight];
        float* dst[kInFlight];
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) {
          const int e = e0 + u * blockDim.x;
          dst[u] = nullptr;
          if (e < total) {
            const int kv = e >= n_valid * vecs ? 1 : 0;
            const int ee = e - kv * n_valid * vecs, j = ee / vecs, c = ee % vecs;
            raw[u] = *reinterpret_cast<const uint4*>((kv ? v_rows[j] : k_rows[j]) + c * kVec);
            dst[u] = kv ? v_s + j * hd + c * kVec : k_s + j * (hd + 1) + c * kVec;
          }
        }
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) {
          if (dst[u]) {
            float f[kVec];
            Vec<T>::toFloat(raw[u], f);
#pragma unroll
            for (int i = 0; i < kVec; ++i) dst[u][i] = f[i];
          }
        }
      }
    } else {
      for (int e = threadIdx.x; e < n_valid * hd; e += blockDim.x) {
        const int j = e / hd, d = e % hd;
        k_s[j * (hd + 1) + d] = toFloat(k_rows[j][d]);
        v_s[j * hd + d] = toFloat(v_rows[j][d]);
      }
    }
    __syncthreads();

    float sc = -INFINITY;
    if (lane < n_valid) {
      const float* kr = k_s + lane * (hd + 1);
      float dot = 0.0f;
      for (int d = 0; d < hd; ++d) dot = fmaf(my_q[d], kr[d], dot);
      sc = dot;
      if constexpr (kExtras) sc = extraScore(a.extras, dot, slope, t0 + lane, keys.pos);
    }
    float tile_max = sc;
    for (int o = 16; o > 0; o >>= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
    const float m_new = fmaxf(m, tile_max);  // finite: lane 0 always holds a valid key
    const float p = lane < n_valid ? expf(sc - m_new) : 0.0f;
    const float corr = expf(m - m_new);  // 0 on the first tile (m = -inf)
    float psum = p;
    for (int o = 16; o > 0; o >>= 1) psum += __shfl_xor_sync(0xffffffffu, psum, o);
    l = l * corr + psum;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) acc[i] *= corr;
    for (int j = 0; j < n_valid; ++j) {
      const float pj = __shfl_sync(0xffffffffu, p, j);
      const float* vr = v_s + j * hd;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int d = lane + 32 * i;
        if (d < hd) acc[i] = fmaf(pj, vr[d], acc[i]);
      }
    }
    m = m_new;
  }

  if (warp >= heads) return;
  const int head = first + warp;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) acc[i] *= a.v_scale;  // (an FP8 cache's V scale; else 1: exact)
  if (a.splits == 1) {
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int64_t o = static_cast<int64_t>(item.x) * a.ld_out + static_cast<int64_t>(head) * hd;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < hd) storeDecodeOut(a, o + d, acc[i] * inv);
    }
    return;
  }
  float* part = a.partial + ((static_cast<int64_t>(blockIdx.x) * a.num_heads + head) * a.splits + split) * (hd + 2);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < hd) part[d] = acc[i];
  }
  if (lane == 0) {
    part[hd] = m;
    part[hd + 1] = l;
  }
}

// Block-wide reductions for the merge; every thread gets the result. `red` holds one float per warp.
template <typename Op>
__device__ float blockReduce(float v, float* red, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // `red` may still be read from a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < warps; ++w) r = op(r, red[w]);
  return r;
}

// One CTA per (item, head): combines the splits' partial states. The weights e^(m_z - M) of the
// splits are computed once into shared memory (in parallel), then each thread sums its features.
__global__ void mergeKernel(DecodeAttnArgs a, int hd) {
  pdlWait();
  pdlLaunchDependents();
  extern __shared__ float wz[];  // [splits]
  __shared__ float red[32];
  const int head = blockIdx.y;
  const float* part = a.partial + (static_cast<int64_t>(blockIdx.x) * a.num_heads + head) * a.splits * (hd + 2);
  float big = -INFINITY;
  for (int z = threadIdx.x; z < a.splits; z += blockDim.x) big = fmaxf(big, part[z * (hd + 2) + hd]);
  big = blockReduce(big, red, [](float x, float y) { return fmaxf(x, y); });
  float denom = 0.0f;
  for (int z = threadIdx.x; z < a.splits; z += blockDim.x) {
    const float mz = part[z * (hd + 2) + hd];
    const float w = mz != -INFINITY ? expf(mz - big) : 0.0f;  // empty splits (m = -inf) weigh nothing
    wz[z] = w;
    denom += part[z * (hd + 2) + hd + 1] * w;
  }
  denom = blockReduce(denom, red, [](float x, float y) { return x + y; });  // also orders the wz writes
  const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
  const int64_t o = static_cast<int64_t>(a.items[blockIdx.x].x) * a.ld_out + static_cast<int64_t>(head) * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float s = 0.0f;
    for (int z = 0; z < a.splits; ++z) s = fmaf(part[z * (hd + 2) + d], wz[z], s);
    storeDecodeOut(a, o + d, s * inv);
  }
}

// Query heads per CTA for a GQA group: the group when it fits `cap` warps, else the group cut
// into the fewest chunks of at most `cap`, as even as possible (71 over 32 -> 24 + 24 + 23).
int headsPerCta(int64_t group, int cap) {
  const int64_t chunks = (group + cap - 1) / cap;
  return static_cast<int>((group + chunks - 1) / chunks);
}

// The most warps a CTA of `kernel` may have: kMaxWarps, or fewer where its registers per thread
// allow fewer threads (the kernels with 8 features per lane at 1024 threads would not launch).
template <typename Kernel>
int warpCap(Kernel kernel) {
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, kernel) != cudaSuccess) return 8;
  return std::max(1, std::min(kMaxWarps, attr.maxThreadsPerBlock / 32));
}

size_t smemBytes(int sub, int64_t hd) {
  return (static_cast<size_t>(sub) * hd + kTile * (hd + 1) + kTile * hd) * sizeof(float);
}

template <typename T, int kPerLane>
cudaError_t launch(const void* pool, const KvLayout& g, const DecodeAttnArgs& a, int group, cudaStream_t stream) {
  static const int cap_plain = warpCap(decodeKernel<T, kPerLane, false>);
  static const int cap_extras = warpCap(decodeKernel<T, kPerLane, true>);
  auto kernel = a.extras.any() ? decodeKernel<T, kPerLane, true> : decodeKernel<T, kPerLane, false>;
  const int sub = headsPerCta(group, a.extras.any() ? cap_extras : cap_plain), chunks = (group + sub - 1) / sub;
  const size_t smem = smemBytes(sub, g.head_dim);
  const dim3 grid(static_cast<unsigned>(a.num_items), static_cast<unsigned>(g.num_kv_heads * chunks),
                  static_cast<unsigned>(a.splits));
  return launchPdl(kernel, grid, sub * 32, smem, stream, static_cast<const T*>(pool), g, a, group);
}

cudaError_t launchMerge(const KvLayout& g, const DecodeAttnArgs& a, cudaStream_t stream) {
  const dim3 mgrid(static_cast<unsigned>(a.num_items), static_cast<unsigned>(a.num_heads));
  // The weights' array is padded to whole 16-byte vectors plus one: the compiled merge loop reads
  // wz in vectors and compute-sanitizer saw a read past splits * 4 bytes without the padding.
  const size_t merge_smem = (static_cast<size_t>(a.splits + 3) / 4 + 1) * 4 * sizeof(float);
  return launchPdl(mergeKernel, mgrid, g.head_dim >= 128 ? 128 : 64, merge_smem, stream, a,
                   static_cast<int>(g.head_dim));
}

template <typename T>
cudaError_t dispatch(const void* pool, const KvLayout& g, const DecodeAttnArgs& a, int group, cudaStream_t stream) {
  if (g.head_dim <= 32) return launch<T, 1>(pool, g, a, group, stream);
  if (g.head_dim <= 64) return launch<T, 2>(pool, g, a, group, stream);
  if (g.head_dim <= 128) return launch<T, 4>(pool, g, a, group, stream);
  if (g.head_dim <= 256) return launch<T, 8>(pool, g, a, group, stream);
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t optIn() {
  for (auto k : {decodeKernel<T, 1, false>, decodeKernel<T, 2, false>, decodeKernel<T, 4, false>,
                 decodeKernel<T, 8, false>, decodeKernel<T, 1, true>, decodeKernel<T, 2, true>,
                 decodeKernel<T, 4, true>, decodeKernel<T, 8, true>})
    if (cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem);
        e != cudaSuccess)
      return e;
  return cudaSuccess;
}

}  // namespace

cudaError_t initAttentionKernels() {
  if (cudaError_t e = initFlashAttentionKernels(); e != cudaSuccess) return e;
  if (cudaError_t e = initDecodeMmaKernels(); e != cudaSuccess) return e;
  if (cudaError_t e = optIn<float>(); e != cudaSuccess) return e;
  if (cudaError_t e = optIn<__half>(); e != cudaSuccess) return e;
  if (cudaError_t e = optIn<__nv_fp8_e4m3>(); e != cudaSuccess) return e;
  return optIn<__nv_bfloat16>();
}

bool decodeRopeSupported(const KvLayout& g, int32_t num_heads, const void* pool, DType kv_dtype, int64_t rotary_dim,
                         const float* k, int64_t ld_k, const float* v, int64_t ld_v) {
  auto aligned = [](const float* p, int64_t ld) { return reinterpret_cast<uintptr_t>(p) % 16 == 0 && ld % 4 == 0; };
  return kv_dtype != DType::kF32 && kv_dtype != DType::kF8E4M3 && decodeMmaSupported(g, num_heads, pool) &&
         rotary_dim >= 0 && rotary_dim <= g.head_dim && rotary_dim % 16 == 0 && aligned(k, ld_k) &&
         aligned(v, ld_v);
}

cudaError_t decodeAttention(const void* pool, DType kv_dtype, const KvLayout& g, const DecodeAttnArgs& a,
                            cudaStream_t stream) {
  if (a.num_items == 0) return cudaSuccess;
  if (a.num_heads % g.num_kv_heads != 0 || a.splits < 1 || a.splits > kMaxSplits) return cudaErrorInvalidValue;
  if (a.splits > 1 && (a.partial == nullptr ||
                       decodePartialBytes(a.num_items, a.num_heads, g.head_dim, a.splits) > a.partial_bytes))
    return cudaErrorInvalidValue;
  const int64_t group = a.num_heads / g.num_kv_heads;
  if (group > 65535 || smemBytes(headsPerCta(group, kMaxWarps), g.head_dim) > kMaxSmem) return cudaErrorInvalidValue;
  const bool mma = kv_dtype != DType::kF32 && a.tensor_cores && decodeMmaSupported(g, a.num_heads, pool);
  if (a.rope.k && (!mma || a.rope.pool != pool)) return cudaErrorInvalidValue;  // RoPE only inside that kernel
  cudaError_t launched;
  if (mma)
    launched = decodeAttentionMma(pool, kv_dtype, g, a, stream);
  else
    launched = withKvType(kv_dtype, [&](auto tag) {
      return dispatch<decltype(tag)>(pool, g, a, static_cast<int>(group), stream);
    });
  if (launched != cudaSuccess || a.splits == 1) return launched;
  return launchMerge(g, a, stream);
}

}  // namespace llmrt::cuda

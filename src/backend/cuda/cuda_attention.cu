// Paged attention, first version: one CTA per (query token, kv head), one warp
// per query head of that kv head's group (GQA), so the group shares each K
// tile in shared memory. Keys are visited in tiles of 32 (one key per lane
// for the scores) with an online softmax; V rows are read coalesced (one
// feature per lane) straight from the pool. Causal, with an optional sliding
// window: a query at position p sees keys (p - W, p].
//
// Not yet: FlashAttention-style tiling of many queries per CTA for context
// chunks, split-K over the keys for long decodes, tensor cores.
#include <cuda_bf16.h>

#include <cmath>

#include "backend/cuda/cuda_kernels.h"

namespace llmrt::cuda {
namespace {

constexpr int kTile = 32;
constexpr int kMaxGroup = 32;  // blockDim = group * 32 <= 1024

__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }

// kPerLane: features per lane (head_dim <= 32 * kPerLane).
template <typename T, int kPerLane>
__global__ void attentionKernel(const T* pool, KvLayout g, AttentionArgs a) {
  extern __shared__ float smem[];
  const int64_t hd = g.head_dim;
  const int group = blockDim.x / 32;
  float* q_s = smem;               // [group][hd], pre-scaled
  float* k_s = smem + group * hd;  // [kTile][hd + 1]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t kvh = blockIdx.y;

  const int32_t row = a.items[2 * blockIdx.x], s = a.items[2 * blockIdx.x + 1];
  const int32_t* seq = a.seqs + 5 * s;
  const int64_t q_start = seq[0], q_len = seq[1], kv_len = seq[2], window = seq[3];
  const int32_t* table = a.tables + seq[4];
  const int64_t pos = kv_len - q_len + (row - q_start);
  const int64_t lo = window > 0 ? max(int64_t{0}, pos - window + 1) : 0;

  const float* q = a.q + row * a.ld_q + kvh * group * hd;
  for (int64_t i = threadIdx.x; i < group * hd; i += blockDim.x) q_s[i] = q[i] * a.scale;

  const int64_t head_elems = g.tokens_per_block * hd;
  const int64_t k_off = (a.layer * 2 + 0) * g.num_kv_heads * head_elems + kvh * head_elems;
  const int64_t v_off = (a.layer * 2 + 1) * g.num_kv_heads * head_elems + kvh * head_elems;
  auto keyRow = [&](int64_t j, int64_t off) {
    return pool + static_cast<int64_t>(table[j / g.tokens_per_block]) * g.elems_per_block + off +
           (j % g.tokens_per_block) * hd;
  };

  float m = -INFINITY, l = 0.0f;
  float acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) acc[i] = 0.0f;
  const float* my_q = q_s + warp * hd;

  for (int64_t t0 = lo; t0 <= pos; t0 += kTile) {
    const int n_valid = static_cast<int>(min(static_cast<int64_t>(kTile), pos - t0 + 1));
    __syncthreads();  // q_s written / previous tile consumed
    for (int64_t e = threadIdx.x; e < n_valid * hd; e += blockDim.x) {
      const int64_t j = e / hd, d = e % hd;
      k_s[j * (hd + 1) + d] = load(keyRow(t0 + j, k_off) + d);
    }
    __syncthreads();

    float sc = -INFINITY;
    if (lane < n_valid) {
      const float* kr = k_s + lane * (hd + 1);
      float dot = 0.0f;
      for (int64_t d = 0; d < hd; ++d) dot += my_q[d] * kr[d];
      sc = dot;
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
      const T* vr = keyRow(t0 + j, v_off);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int64_t d = lane + 32 * i;
        if (d < hd) acc[i] += pj * load(vr + d);
      }
    }
    m = m_new;
  }

  const float inv = 1.0f / l;
  float* o = a.out + row * a.ld_out + (kvh * group + warp) * hd;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t d = lane + 32 * i;
    if (d < hd) o[d] = acc[i] * inv;
  }
}

template <typename T, int kPerLane>
cudaError_t launch(const void* pool, const KvLayout& g, const AttentionArgs& a, int group,
                   cudaStream_t stream) {
  const size_t smem = (static_cast<size_t>(group) * g.head_dim + kTile * (g.head_dim + 1)) * sizeof(float);
  auto kernel = attentionKernel<T, kPerLane>;
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  const dim3 grid(static_cast<unsigned>(a.num_items), static_cast<unsigned>(g.num_kv_heads));
  kernel<<<grid, group * 32, smem, stream>>>(static_cast<const T*>(pool), g, a);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dispatch(const void* pool, const KvLayout& g, const AttentionArgs& a, int group,
                     cudaStream_t stream) {
  if (g.head_dim <= 32) return launch<T, 1>(pool, g, a, group, stream);
  if (g.head_dim <= 64) return launch<T, 2>(pool, g, a, group, stream);
  if (g.head_dim <= 128) return launch<T, 4>(pool, g, a, group, stream);
  if (g.head_dim <= 256) return launch<T, 8>(pool, g, a, group, stream);
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t attention(const void* pool, DType kv_dtype, const KvLayout& g, const AttentionArgs& a,
                      cudaStream_t stream) {
  if (a.num_items == 0) return cudaSuccess;
  if (a.num_heads % g.num_kv_heads != 0) return cudaErrorInvalidValue;
  const int64_t group = a.num_heads / g.num_kv_heads;
  if (group > kMaxGroup || a.num_items > 0x7fffffff) return cudaErrorInvalidValue;
  if (kv_dtype == DType::kBF16) return dispatch<__nv_bfloat16>(pool, g, a, static_cast<int>(group), stream);
  return dispatch<float>(pool, g, a, static_cast<int>(group), stream);
}

}  // namespace llmrt::cuda

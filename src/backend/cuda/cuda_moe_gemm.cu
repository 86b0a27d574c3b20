// The grouped products of the mixture-of-experts layers (cuda_moe.h, moeGemm): every tile of
// moePlanTiles' plan (kMoeTileM = 64 consecutive sorted slots of one expert) times that expert's
// weight rows. The grid is (the most tiles the step can have, column tiles); a block past the
// step's tile count (header[0]) leaves at once, so the host never needs the per-expert counts.
//
// Tensor cores (BF16 / FP16 weights): mma.sync.m16n8k16 with fp32 accumulators (fragment layouts:
// cuda_flash_attention.cu), a 64 x 128 x 32 block tile, 8 warps as 2 (rows) x 4 (columns), each
// warp 32 x 32 (2 x 4 mma tiles). A and B tiles come through a 3-stage ring of shared buffers filled
// with 16-byte cp.async (rows padded by 16 bytes: conflict-free ldmatrix); rows past the tile's
// slots, columns past n and k past kdim are zero-filled and never read from memory. A's rows are
// gathered: x rows of the slots' tokens (the gated product) or the sorted rows of the gated
// product's output (the down product). The gated product's 128 weight rows are 64 gate rows and the
// 64 up rows of the same columns, placed so that every warp holds gate and up of the same output
// columns: act(gate) * up is taken in the epilogue, in float32, and only [slots, inter] is written.
// Two-part A (float32 activations: hi + lo 16-bit parts, ~16 significant bits): the k loop runs
// over both parts against the same weights (the parts' products are summed in the accumulators).
//
// CUDA cores (F32 weights, or sizes / alignments the tensor-core kernel does not take): a 64 x 64
// x 16 tile in shared memory as float32, each thread 4 x 4 outputs with fused multiply-adds.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/cuda_mma.h"
#include "backend/cuda/cuda_moe.h"
#include "backend/cuda/cuda_pdl.h"
#include "backend/cuda/cuda_vec.h"

namespace llmrt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTileN = 128;  // weight rows per block tile (gated: 64 gate + 64 up)
constexpr int kTileK = 32;
constexpr int kStages = 3;
constexpr int kRowStride = kTileK + 8;  // shared row: 32 elements + 16 bytes of padding
static_assert(kMoeTileM == 64, "the tensor-core tile is 64 rows: 2 warps x 2 m16 tiles");

cudaError_t launched(cudaError_t e) { return e != cudaSuccess ? e : cudaGetLastError(); }

// The tile's A row of sorted row p: the token's x row (gather_k > 0) or p.
__device__ __forceinline__ int64_t aRow(const MoeGemm& g, int p) {
  return g.gather_k > 0 ? static_cast<int64_t>(g.sorted_slot[p] / g.gather_k) : static_cast<int64_t>(p);
}

template <typename H, bool kGated>
__global__ void __launch_bounds__(kThreads) moeMmaKernel(MoeGemm g) {
  __shared__ __align__(16) H sa[kStages][kMoeTileM][kRowStride];
  __shared__ __align__(16) H sb[kStages][kTileN][kRowStride];
  pdlWait();
  pdlLaunchDependents();
  if (static_cast<int>(blockIdx.x) >= g.header[0]) return;
  const int4 tile = g.tiles[blockIdx.x];
  const int e = tile.x, p0 = tile.y, rows = tile.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * (kGated ? kTileN / 2 : kTileN);

  // Loads: thread tid copies chunk tid % 4 (8 elements) of A row tid / 4 and of B rows tid / 4 and
  // tid / 4 + 64 per stage.
  const int lr = tid / 4, kc = (tid % 4) * 8;
  const bool a_ok = lr < rows;
  const int64_t a_off = (a_ok ? aRow(g, p0 + lr) * g.ld_a : 0) + kc;
  const H* a_src0 = static_cast<const H*>(g.a[0]) + a_off;
  const H* a_src1 = g.a_parts > 1 ? static_cast<const H*>(g.a[1]) + a_off : a_src0;
  const H* w = static_cast<const H*>(g.w);
  int64_t b_row0, b_row1;
  bool b_ok0, b_ok1;
  if (kGated) {  // gate row n0 + lr and up row n + n0 + lr
    b_ok0 = b_ok1 = n0 + lr < g.n;
    b_row0 = n0 + lr;
    b_row1 = g.n + n0 + lr;
  } else {
    b_ok0 = n0 + lr < g.n;
    b_ok1 = n0 + lr + 64 < g.n;
    b_row0 = n0 + lr;
    b_row1 = n0 + lr + 64;
  }
  const H* b_src0 = w + (static_cast<int64_t>(e) * g.w_rows + (b_ok0 ? b_row0 : 0)) * g.kdim + kc;
  const H* b_src1 = w + (static_cast<int64_t>(e) * g.w_rows + (b_ok1 ? b_row1 : 0)) * g.kdim + kc;
  const int64_t k_tiles = (g.kdim + kTileK - 1) / kTileK, total = k_tiles * g.a_parts;
  auto load = [&](int64_t kt, int st) {
    const int64_t part = kt / k_tiles, k0 = (kt - part * k_tiles) * kTileK;
    const bool k_ok = k0 + kc < g.kdim;
    const H* as = part == 0 ? a_src0 : a_src1;
    cpAsync16(sharedAddress(&sa[st][lr][kc]), a_ok && k_ok ? as + k0 : a_src0, a_ok && k_ok);
    cpAsync16(sharedAddress(&sb[st][lr][kc]), b_ok0 && k_ok ? b_src0 + k0 : w, b_ok0 && k_ok);
    cpAsync16(sharedAddress(&sb[st][lr + 64][kc]), b_ok1 && k_ok ? b_src1 + k0 : w, b_ok1 && k_ok);
  };

  // Warp (wm, wn): tile rows 32 wm .. 32 wm + 31 (two m16 tiles) and four n8 tiles of B rows from
  // nb0 (tiles 0, 1) and nb1 (tiles 2, 3). Gated: nb0 = gate rows 16 wn.., nb1 = the up rows of the
  // same columns; plain: 32 consecutive rows.
  const int wm = warp / 4, wn = warp % 4;
  const int nb0 = kGated ? 16 * wn : 32 * wn, nb1 = kGated ? 64 + 16 * wn : 32 * wn + 16;
  float acc[2][4][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mi][j][q] = 0.0f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < total) load(s, s);
    cpAsyncCommit();  // empty groups keep the wait counts uniform
  }
  const int a_lm_row = lane % 16, a_lm_col = (lane / 16) * 8;
  const int b_lm_row = (lane / 16) * 8 + lane % 8, b_lm_col = ((lane / 8) % 2) * 8;
  for (int64_t kt = 0; kt < total; ++kt) {
    cpAsyncWait<kStages - 2>();  // stage kt has landed (this thread's copies)
    __syncthreads();             // ... everyone's, and stage kt - 1 is no longer read
    const int64_t next = kt + kStages - 1;
    if (next < total) load(next, static_cast<int>(next % kStages));
    cpAsyncCommit();
    const int st = static_cast<int>(kt % kStages);
#pragma unroll
    for (int ks = 0; ks < kTileK / 16; ++ks) {
      uint32_t af[2][4], bf[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
        ldmatrixX4(af[mi], sharedAddress(&sa[st][32 * wm + 16 * mi + a_lm_row][16 * ks + a_lm_col]));
      ldmatrixX4(bf[0], sharedAddress(&sb[st][nb0 + b_lm_row][16 * ks + b_lm_col]));
      ldmatrixX4(bf[1], sharedAddress(&sb[st][nb1 + b_lm_row][16 * ks + b_lm_col]));
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          mma16816<H>(acc[mi][j], af[mi], bf[j / 2][(j % 2) * 2], bf[j / 2][(j % 2) * 2 + 1]);
    }
  }
  cpAsyncWait<0>();

  // Epilogue: acc[mi][j][2h + q] is tile row 32 wm + 16 mi + 8h + lane / 4, column 2 (lane % 4) + q
  // of n8 tile j.
  const int gr = lane / 4, tc = (lane % 4) * 2;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 32 * wm + 16 * mi + 8 * h + gr;
      if (r >= rows) continue;
      const int p = p0 + r;
      if constexpr (kGated) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int64_t c = n0 + 16 * wn + 8 * j + tc;
          if (c >= g.n) continue;  // (n % 8 == 0: c + 1 < n too)
          const float v0 = moeActivate(g.act, acc[mi][j][2 * h]) * acc[mi][j + 2][2 * h];
          const float v1 = moeActivate(g.act, acc[mi][j][2 * h + 1]) * acc[mi][j + 2][2 * h + 1];
          const int64_t at = static_cast<int64_t>(p) * g.ld_out + c;
          if (g.out_parts > 1) {
            uint32_t hi, lo;
            splitPair<H>(v0, v1, hi, lo);
            *reinterpret_cast<uint32_t*>(static_cast<H*>(g.out[0]) + at) = hi;
            *reinterpret_cast<uint32_t*>(static_cast<H*>(g.out[1]) + at) = lo;
          } else {
            *reinterpret_cast<uint32_t*>(static_cast<H*>(g.out[0]) + at) = packPair<H>(v0, v1);
          }
        }
      } else {
        const int32_t slot = g.sorted_slot[p];
        const float wt = g.slot_weight[slot];
        float* out = static_cast<float*>(g.out[0]) + static_cast<int64_t>(slot) * g.ld_out;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t c = n0 + 32 * wn + 8 * j + tc;
          if (c >= g.n) continue;
          *reinterpret_cast<float2*>(out + c) = make_float2(acc[mi][j][2 * h] * wt, acc[mi][j][2 * h + 1] * wt);
        }
      }
    }
}

// CUDA cores: a 64 x 64 x 16 tile (gated: 32 gate + 32 up rows, 32 output columns), thread (ty,
// tx) = (tid / 16, tid % 16) owns rows 4 ty .. 4 ty + 3 and four B columns (plain: 4 tx .. 4 tx + 3;
// gated: gate 2 tx, 2 tx + 1 and the up rows of the same columns).
constexpr int kSimtN = 64;
constexpr int kSimtK = 16;

template <typename TA, typename TW, bool kGated>
__global__ void __launch_bounds__(kThreads) moeSimtKernel(MoeGemm g) {
  __shared__ float sa[kSimtK][kMoeTileM + 4];
  __shared__ float sb[kSimtK][kSimtN + 4];
  pdlWait();
  pdlLaunchDependents();
  if (static_cast<int>(blockIdx.x) >= g.header[0]) return;
  const int4 tile = g.tiles[blockIdx.x];
  const int e = tile.x, p0 = tile.y, rows = tile.z;
  const int tid = threadIdx.x;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * (kGated ? kSimtN / 2 : kSimtN);
  // Loads: thread tid reads element k = tid % 16 of tile rows (and B rows) tid / 16 + 16 i, i < 4.
  const int lk = tid % 16, lr = tid / 16;
  const TA* a_row[4];
  const TW* b_row[4];
  bool a_ok[4], b_ok[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = lr + 16 * i;
    a_ok[i] = r < rows;
    a_row[i] = static_cast<const TA*>(g.a[0]) + (a_ok[i] ? aRow(g, p0 + r) * g.ld_a : 0);
    int64_t c, wr;
    if (kGated) {
      c = n0 + r % 32;
      wr = (r < 32 ? 0 : g.n) + c;
    } else {
      c = n0 + r;
      wr = c;
    }
    b_ok[i] = c < g.n;
    b_row[i] = static_cast<const TW*>(g.w) + (static_cast<int64_t>(e) * g.w_rows + (b_ok[i] ? wr : 0)) * g.kdim;
  }
  const int ty = tid / 16, tx = tid % 16;
  int bc[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) bc[j] = kGated ? (j < 2 ? 2 * tx + j : 32 + 2 * tx + j - 2) : 4 * tx + j;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  for (int64_t k0 = 0; k0 < g.kdim; k0 += kSimtK) {
    const int64_t k = k0 + lk;
    const bool k_ok = k < g.kdim;
    float av[4], bv[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      av[i] = a_ok[i] && k_ok ? toFloat(a_row[i][k]) : 0.0f;
      bv[i] = b_ok[i] && k_ok ? toFloat(b_row[i][k]) : 0.0f;
    }
    __syncthreads();  // the previous tile is no longer read
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      sa[lk][lr + 16 * i] = av[i];
      sb[lk][lr + 16 * i] = bv[i];
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kSimtK; ++kk) {
      float a4[4], b4[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a4[i] = sa[kk][4 * ty + i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b4[j] = sb[kk][bc[j]];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a4[i], b4[j], acc[i][j]);
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = 4 * ty + i;
    if (r >= rows) continue;
    const int p = p0 + r;
    if constexpr (kGated) {
      float* out = static_cast<float*>(g.out[0]) + static_cast<int64_t>(p) * g.ld_out;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int64_t c = n0 + 2 * tx + j;
        if (c < g.n) out[c] = moeActivate(g.act, acc[i][j]) * acc[i][j + 2];
      }
    } else {
      const int32_t slot = g.sorted_slot[p];
      const float wt = g.slot_weight[slot];
      float* out = static_cast<float*>(g.out[0]) + static_cast<int64_t>(slot) * g.ld_out;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t c = n0 + 4 * tx + j;
        if (c < g.n) out[c] = acc[i][j] * wt;
      }
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

cudaError_t moeGemm(const MoeGemm& g, bool tensor_cores, cudaStream_t stream) {
  if (g.max_tiles == 0 || g.n == 0) return cudaSuccess;
  if (g.kdim < 1 || g.a_parts < 1 || g.a_parts > 2 || (!tensor_cores && g.a_parts != 1) ||
      (g.gated && g.w_rows < 2 * g.n) || (!g.gated && g.w_rows < g.n))
    return cudaErrorInvalidValue;
  if (tensor_cores) {
    if (g.w_dtype != g.a_dtype || g.kdim % 8 != 0 || g.n % 8 != 0 || g.ld_a % 8 != 0 || g.ld_out % 8 != 0 ||
        !aligned16(g.a[0]) || (g.a_parts > 1 && !aligned16(g.a[1])) || !aligned16(g.w) || g.out_parts < 1 ||
        g.out_parts > 2)
      return cudaErrorInvalidValue;
    const dim3 grid(static_cast<unsigned>(g.max_tiles),
                    static_cast<unsigned>((g.n + (g.gated ? kTileN / 2 : kTileN) - 1) / (g.gated ? kTileN / 2 : kTileN)));
    return launched(withHalfType(g.w_dtype, [&](auto tag) {
      using H = decltype(tag);
      if (g.gated) return launchPdl(moeMmaKernel<H, true>, grid, kThreads, 0, stream, g);
      return launchPdl(moeMmaKernel<H, false>, grid, kThreads, 0, stream, g);
    }));
  }
  const dim3 grid(static_cast<unsigned>(g.max_tiles),
                  static_cast<unsigned>((g.n + (g.gated ? kSimtN / 2 : kSimtN) - 1) / (g.gated ? kSimtN / 2 : kSimtN)));
  return launched(withElementType(g.w_dtype, [&](auto w_tag) {
    using TW = decltype(w_tag);
    if (!g.gated) {  // A: the gated product's float32 output
      if (g.a_dtype != DType::kF32) return cudaErrorInvalidValue;
      return launchPdl(moeSimtKernel<float, TW, false>, grid, kThreads, 0, stream, g);
    }
    return withElementType(g.a_dtype, [&](auto a_tag) {
      using TA = decltype(a_tag);
      return launchPdl(moeSimtKernel<TA, TW, true>, grid, kThreads, 0, stream, g);
    });
  }));
}

}  // namespace llmrt::cuda

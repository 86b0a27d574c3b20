// FlashAttention-2-style context attention over the paged bf16 or fp16 KV cache, on
// tensor cores of the cache's type through mma.sync.m16n8k16 (sm_80+; built for sm_90a).
// The comments say bf16; with an fp16 cache read fp16 (Q's parts, P and the mma are fp16 then).
// An FP8 cache (E4M3 codes) runs the fp16 kernel on the codes turned into fp16 in shared memory
// (kFp8 below), K's scale joined to the softmax scale and V's to O.
//
// Work decomposition
//   grid  = (num_tiles, num_heads), block = 128 threads (4 warps).
//   One CTA computes one query tile (kFlashBlockM = 64 consecutive query rows
//   of one sequence) for one query head; warp w owns tile rows 16w..16w+15.
//   blockIdx.x walks the tile list backwards: the host lists a sequence's
//   tiles in increasing row order, and later tiles see more keys, so the
//   longest CTAs start first. GQA: head h reads kv head h / (num_heads /
//   num_kv_heads); the heads of a group share K/V through L2 (no copies).
//
// Semantics (as cuda_attention.cu): tile row i is query row r = r0 + i of the
// sequence, at absolute position p = kv_len - q_len + r; it attends keys j in
// [lo(p), p], lo(p) = max(0, p - W + 1) with a sliding window W > 0, else 0;
// out = softmax(scale * q.k) . v in fp32.
//
// Algorithm (per CTA)
//   1. Key range of the tile: [key_lo, p_last] = [lo(first row), p(last valid
//      row)] (the union of the rows' windows, contiguous). Keys are visited in
//      tiles of kBlockN = 64 aligned to multiples of 64; tiles outside the
//      range are never touched.
//   2. K/V tiles are gathered through the block table with 16-byte cp.async
//      into shared memory, double-buffered: tile t+1 is in flight while tile t
//      is computed. Keys outside [key_lo, p_last] (the aligned tile's ends)
//      are zero-filled (cp.async src-size 0) and never read from the pool:
//      their blocks may not exist, and garbage (NaN) in V would poison
//      0 * NaN in P.V.
//   3. Q (fp32, unscaled) is read once from global memory straight into mma
//      A fragments, split into two bf16 parts: Q_hi = bf16(Q) and
//      Q_lo = bf16(Q - Q_hi) (the difference is exact in fp32), so
//      Q_hi + Q_lo carries ~16 significant bits instead of 8. Rounding Q to a
//      single bf16 was the dominant error for large q.k (peaky softmax): the
//      score error scale * |q| |k| 2^-9 is amplified by exp. Both parts stay in
//      registers for the whole CTA (no spills; it costs occupancy, see
//      setKernelAttributes). The scale is applied to the fp32 scores (folded
//      with log2(e) for exp2f), so Q's rounding does not depend on it.
//   4. Per key tile and warp: S = Q_hi K^T + Q_lo K^T (16 x 64, fp32
//      accumulators; two mma per k-step sharing the K fragments), mask
//      (only on tiles that cross a row's causal / window edge), online softmax
//      in fp32 (row max across the 4 threads of a quad), P rounded to bf16 and
//      O += P V. The row sum l is accumulated from the bf16-rounded P that the
//      mma actually uses, so O / l is an exact convex combination of the V
//      rows with those weights. A warp skips key tiles that no row of its own
//      sees (exact: such a tile would only contribute zeros).
//   5. O / l is written (fp32, bf16 or fp16: out_dtype) for the valid rows of the tile.
//   Attention extras (FlashAttnArgs::extras: soft-capping, ALiBi) take a second instantiation
//   (kExtras): after step 4's S, each score becomes extraScore(scale * S) (soft-capped, plus the
//   row's ALiBi bias) before the mask, and the online softmax runs on those with a scale of 1.
//   Rows past the end of a partial tile get Q = 0 and the position of the
//   last valid row, so they compute harmless finite values and are not
//   written. A row whose keys in a tile are all masked keeps m = -inf safely:
//   the exponent offset is taken as 0 then, so exp2(-inf - 0) = 0 (no NaN).
//
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 fragments (PTX ISA,
// "Matrix Fragments for mma.m16n8k16 with floating point type"), with
// g = lane / 4 (groupID) and t = lane % 4 (threadID_in_group); each .b32
// register holds two bf16, the lower column / row index in the low 16 bits:
//   A (16x16, row-major)  a[0]: row g,   cols 2t, 2t+1      a[1]: row g+8, cols 2t, 2t+1
//                         a[2]: row g,   cols 2t+8, 2t+9    a[3]: row g+8, cols 2t+8, 2t+9
//   B (16x8, "col")       b[0]: rows 2t, 2t+1, col g        b[1]: rows 2t+8, 2t+9, col g
//   C/D (16x8, fp32)      c[0], c[1]: row g, cols 2t, 2t+1  c[2], c[3]: row g+8, cols 2t, 2t+1
// - S = Q K^T: A = Q (rows = queries, k = head dims). B[k = dim][n = key] =
//   K[key][dim], so B's column n is K's row: a non-transposed ldmatrix of
//   8 key rows x 8 dims hands thread (g, t) K[key g][dims 2t, 2t+1] = b[0].
// - O = P V: the C fragments of two adjacent S n-tiles (keys 16c..16c+7 and
//   16c+8..16c+15) are exactly the A fragment of P for k-chunk c:
//   a[0] = S[2c][0,1], a[1] = S[2c][2,3], a[2] = S[2c+1][0,1], a[3] = S[2c+1][2,3]
//   (FA2's register reuse: P never goes through shared memory).
//   B[k = key][n = dim] = V[key][dim] is row-major, so ldmatrix.trans of
//   8 key rows x 8 dims hands thread (g, t) V[keys 2t, 2t+1][dim g] = b[0].
// ldmatrix.x4: lanes 8m..8m+7 give the row addresses of matrix m; matrix m
// lands in register m. Shared-memory rows are padded by 16 bytes (row stride
// 144 / 272 bytes for head_dim 64 / 128): the 8 rows of one 8x8 matrix then
// start 4 banks apart and cover all 32 banks, so ldmatrix and the cp.async
// stores are free of bank conflicts.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_flash_attention.h"
#include "backend/cuda/cuda_mma.h"

namespace llmrt::cuda {
namespace {

constexpr int kBlockM = kFlashBlockM;  // query rows per CTA
constexpr int kBlockN = 64;            // keys per K/V tile
constexpr int kWarps = kBlockM / 16;   // one warp per 16 query rows
constexpr int kThreads = kWarps * 32;
constexpr int kPad = 8;  // bf16 elements (16 bytes) of padding per shared-memory row
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kBlockM == 64 && kBlockN % 16 == 0, "tile shapes");

template <int kHeadDim>
struct Geometry {
  static_assert(kHeadDim % 16 == 0, "head_dim must be a multiple of 16");
  static constexpr int kStride = kHeadDim + kPad;       // shared row stride, elements
  static constexpr int kTileElems = kBlockN * kStride;  // one K or V tile
  static constexpr int kTileBytes = kTileElems * 2;
  static constexpr int kChunksPerRow = kHeadDim / 8;             // 16-byte chunks per key row
  static constexpr int kRowsPerPass = kThreads / kChunksPerRow;  // key rows one pass loads
  static constexpr int kLoadPasses = kBlockN / kRowsPerPass;
  static constexpr size_t kSmemBytes = 4 * static_cast<size_t>(kTileBytes);  // {K, V} x 2 stages
  // An FP8 cache: the codes land in a staging area behind it ([stage][K, V][kBlockN][kHeadDim]
  // bytes), and each thread turns the 8 codes it copied into fp16 in the tiles above.
  static constexpr int kStageTileBytes = kBlockN * kHeadDim;
  static constexpr size_t kFp8SmemBytes = kSmemBytes + 4 * static_cast<size_t>(kStageTileBytes);
  static_assert(kThreads % kChunksPerRow == 0 && kBlockN % kRowsPerPass == 0, "load mapping");
};

// Two adjacent outputs (x at p[0], y at p[1]), with one vector store where `vec` (aligned).
__device__ __forceinline__ void storePair(float* p, float x, float y, bool vec) {
  if (vec) {
    *reinterpret_cast<float2*>(p) = make_float2(x, y);
  } else {
    p[0] = x;
    p[1] = y;
  }
}
template <typename H>
__device__ __forceinline__ void storePair(H* p, float x, float y, bool vec) {
  if (vec) {
    *reinterpret_cast<uint32_t*>(p) = floatsToPair(x, y, p);
  } else {
    storeFloat(p, x);
    storeFloat(p + 1, y);
  }
}

// vec_io: q and out are 8-byte aligned with even leading dimensions (float2 access).
// H: the cache's element type and the products' operand type (__nv_bfloat16 or __half).
// kExtras: a.extras applies to the scores. kFp8 (H = __half): the pool holds E4M3 codes, copied
// into the staging area and turned into fp16 (exact) before the tile is read; K's scale joins the
// float32 score scale and V's multiplies O.
template <int kHeadDim, typename H, bool kExtras, bool kFp8 = false>
__global__ void __launch_bounds__(kThreads)
    flashAttentionKernel(const void* __restrict__ pool_raw, KvLayout g, FlashAttnArgs a, int tpb_shift,
                         bool vec_io) {
  static_assert(!kFp8 || std::is_same_v<H, __half>, "FP8 codes are computed as fp16");
  using G = Geometry<kHeadDim>;
  using P = std::conditional_t<kFp8, __nv_fp8_e4m3, H>;  // the pool's element
  const P* pool = static_cast<const P*>(pool_raw);
  constexpr int kDimChunks = kHeadDim / 16;  // k-chunks of S = Q K^T, dim pairs of O = P V
  constexpr int kDimTiles = kHeadDim / 8;    // n-tiles of O
  constexpr int kKeyTiles = kBlockN / 8;     // n-tiles of S
  constexpr int kKeyChunks = kBlockN / 16;   // k-chunks of O = P V
  extern __shared__ __align__(16) unsigned char smem_raw[];

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gq = lane >> 2, tq = lane & 3;  // groupID, threadID_in_group

  // ---- the tile and its key range ----
  const int2 tile = a.tiles[a.num_tiles - 1 - static_cast<int>(blockIdx.x)];
  const AttnSeqDev seq = a.seqs[tile.x];
  const int head = static_cast<int>(blockIdx.y);
  const int kv_head = head / (a.num_heads / static_cast<int>(g.num_kv_heads));
  const int r0 = tile.y;                          // first query row of the tile in the sequence
  const int rows = min(kBlockM, seq.q_len - r0);  // valid rows of the tile
  if (rows <= 0 || r0 < 0) return;                // malformed tile: nothing to do (uniform)
  const int window = a.sliding_window > 0 ? a.sliding_window : 0;
  const int p0 = seq.kv_len - seq.q_len + r0;  // position of tile row 0
  const int p_last = p0 + rows - 1;            // position of the last valid row
  const int key_lo = window > 0 ? max(0, p0 - window + 1) : 0;
  const int kt_begin = key_lo / kBlockN, kt_end = p_last / kBlockN;
  const int num_key_tiles = kt_end - kt_begin + 1;

  // ---- K/V gather: thread -> (key row, 16-byte chunk) ----
  const int32_t* table = a.tables + seq.table_offset;
  const int64_t head_elems = g.tokens_per_block * kHeadDim;
  const int64_t k_off = (static_cast<int64_t>(a.layer) * 2 * g.num_kv_heads + kv_head) * head_elems;
  const int64_t v_off = k_off + g.num_kv_heads * head_elems;
  const int tpb_mask = (1 << tpb_shift) - 1;
  const int ld_row = tid / G::kChunksPerRow, ld_chunk = tid % G::kChunksPerRow;
  const uint32_t smem_base = sharedAddress(smem_raw);  // [stage][K, V][kBlockN][kStride] bf16
  const uint32_t stage_base = smem_base + static_cast<uint32_t>(G::kSmemBytes);  // kFp8: the codes
  // kFp8: this thread's codes of the stage (copied by it, so landed after its wait) into its tiles as fp16.
  auto convertStage = [&](int stage) {
#pragma unroll
    for (int i = 0; i < G::kLoadPasses; ++i) {
      const int row = ld_row + i * G::kRowsPerPass;
      const int st = 2 * stage * G::kStageTileBytes + row * kHeadDim + ld_chunk * 8;
      const int off = 2 * stage * G::kTileBytes + (row * G::kStride + ld_chunk * 8) * 2;
#pragma unroll
      for (int kv = 0; kv < 2; ++kv) {
        const uint2 codes = *reinterpret_cast<const uint2*>(smem_raw + G::kSmemBytes + st + kv * G::kStageTileBytes);
        *reinterpret_cast<uint4*>(smem_raw + off + kv * G::kTileBytes) = fp8x8ToHalf(codes);
      }
    }
  };

  auto loadKvTile = [&](int kt, int stage) {
    const uint32_t k_dst = smem_base + (2 * stage) * G::kTileBytes;
    const uint32_t v_dst = k_dst + G::kTileBytes;
#pragma unroll
    for (int i = 0; i < G::kLoadPasses; ++i) {
      const int row = ld_row + i * G::kRowsPerPass;
      const int j = kt * kBlockN + row;  // key position
      const bool valid = j >= key_lo && j <= p_last;
      const P* k_src = pool;  // any valid address; not read when !valid
      const P* v_src = pool;
      if (valid) {
        const int64_t at = static_cast<int64_t>(__ldg(table + (j >> tpb_shift))) * g.elems_per_block +
                           static_cast<int64_t>(j & tpb_mask) * kHeadDim + ld_chunk * 8;
        k_src = pool + k_off + at;
        v_src = pool + v_off + at;
      }
      if constexpr (kFp8) {
        const uint32_t st = stage_base + 2 * stage * G::kStageTileBytes + row * kHeadDim + ld_chunk * 8;
        cpAsync8(st, k_src, valid);
        cpAsync8(st + G::kStageTileBytes, v_src, valid);
        continue;
      }
      const uint32_t off = static_cast<uint32_t>((row * G::kStride + ld_chunk * 8) * 2);
      cpAsync16(k_dst + off, k_src, valid);
      cpAsync16(v_dst + off, v_src, valid);
    }
  };

  loadKvTile(kt_begin, 0);
  cpAsyncCommit();

  // ---- Q -> bf16 hi / lo A fragments (overlaps the first K/V tile's copy) ----
  const int w_row0 = warp * 16;  // first tile row of this warp
  uint32_t q_hi[kDimChunks][4], q_lo[kDimChunks][4];
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // h = 0: row gq, h = 1: row gq + 8
    const int row = w_row0 + gq + 8 * h;
    const bool ok = row < rows;
    const float* q_row = ok ? a.q + static_cast<int64_t>(seq.q_start + r0 + row) * a.ld_q +
                                  static_cast<int64_t>(head) * kHeadDim
                            : a.q;
#pragma unroll
    for (int c = 0; c < kDimChunks; ++c) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // dims 16c + 2t (+8 for half 1)
        const int col = c * 16 + half * 8 + 2 * tq;
        float x = 0.0f, y = 0.0f;
        if (ok) {
          if (vec_io) {
            const float2 v = *reinterpret_cast<const float2*>(q_row + col);
            x = v.x;
            y = v.y;
          } else {
            x = q_row[col];
            y = q_row[col + 1];
          }
        }
        splitPair<H>(x, y, q_hi[c][h + 2 * half], q_lo[c][h + 2 * half]);
      }
    }
  }

  // ---- per-warp / per-row ranges ----
  const bool warp_active = w_row0 < rows;
  const int w_p_first = p0 + w_row0;  // first row of the warp (valid when active)
  const int w_p_last = p0 + min(w_row0 + 15, rows - 1);
  const int w_key_lo = window > 0 ? max(0, w_p_first - window + 1) : 0;
  int row_pos[2];  // positions of this thread's rows gq, gq + 8 (rows past the end act as the last row)
  row_pos[0] = p0 + min(w_row0 + gq, rows - 1);
  row_pos[1] = p0 + min(w_row0 + gq + 8, rows - 1);

  // ldmatrix lane -> (row, col) offsets inside a 16 x 16 block, see the header comment.
  const int k_lm_row = (lane & 7) + ((lane >> 4) << 3);        // K: matrices (keys +0/+8) x (dims +0/+8)
  const int k_lm_col = ((lane >> 3) & 1) << 3;                 //    m0 k0d0, m1 k0d8, m2 k8d0, m3 k8d8
  const int v_lm_row = (lane & 7) + (((lane >> 3) & 1) << 3);  // V: m0 k0d0, m1 k8d0, m2 k0d8, m3 k8d8
  const int v_lm_col = (lane >> 4) << 3;

  float o_acc[kDimTiles][4];
#pragma unroll
  for (int i = 0; i < kDimTiles; ++i) o_acc[i][0] = o_acc[i][1] = o_acc[i][2] = o_acc[i][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};  // running max of the raw (unscaled) scores (kExtras: final)
  float row_sum[2] = {0.0f, 0.0f};            // this thread's share of the row sums
  // kExtras scales the scores itself (then the softmax's scale is 1).
  // An FP8 cache's K scale joins the softmax scale in float32 (else 1: exact).
  const float score_scale = a.scale * a.k_scale;
  const float scale_log2 = (kExtras ? 1.0f : score_scale) * kLog2e;
  float slope = 0.0f;  // kExtras: the head's ALiBi slope
  if constexpr (kExtras) slope = alibiSlope(a.extras, head);

  for (int it = 0; it < num_key_tiles; ++it) {
    const int stage = it & 1;
    const int n0 = (kt_begin + it) * kBlockN;  // first key position of the tile
    if (it + 1 < num_key_tiles) {
      loadKvTile(kt_begin + it + 1, stage ^ 1);
      cpAsyncCommit();
      cpAsyncWait<1>();  // this tile's group has landed; the next stays in flight
    } else {
      cpAsyncWait<0>();
    }
    if constexpr (kFp8) convertStage(stage);
    __syncthreads();  // every thread's copies of this tile are visible

    if (warp_active && n0 <= w_p_last && n0 + kBlockN - 1 >= w_key_lo) {
      const uint32_t k_tile = smem_base + (2 * stage) * G::kTileBytes;
      const uint32_t v_tile = k_tile + G::kTileBytes;

      // S = Q_hi K^T + Q_lo K^T: 16 rows x kBlockN keys.
      float s[kKeyTiles][4];
#pragma unroll
      for (int i = 0; i < kKeyTiles; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
      for (int c = 0; c < kDimChunks; ++c) {
#pragma unroll
        for (int kp = 0; kp < kBlockN / 16; ++kp) {
          uint32_t b[4];
          ldmatrixX4(b, k_tile + ((kp * 16 + k_lm_row) * G::kStride + c * 16 + k_lm_col) * 2);
          mma16816<H>(s[2 * kp], q_hi[c], b[0], b[1]);      // keys 16kp .. 16kp+7
          mma16816<H>(s[2 * kp + 1], q_hi[c], b[2], b[3]);  // keys 16kp+8 .. 16kp+15
          mma16816<H>(s[2 * kp], q_lo[c], b[0], b[1]);      // the low parts, same K fragments
          mma16816<H>(s[2 * kp + 1], q_lo[c], b[2], b[3]);
        }
      }

      if constexpr (kExtras) {
#pragma unroll
        for (int nt = 0; nt < kKeyTiles; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            s[nt][e] = extraScore(a.extras, s[nt][e] * score_scale, slope, n0 + nt * 8 + 2 * tq + (e & 1),
                                  row_pos[e >> 1]);
      }

      // Mask only where the tile crosses a row's causal edge or window start.
      if (n0 + kBlockN - 1 > w_p_first || (window > 0 && n0 <= w_p_last - window)) {
#pragma unroll
        for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int j = n0 + nt * 8 + 2 * tq + (e & 1);
            const int p = row_pos[e >> 1];
            if (j > p || (window > 0 && j <= p - window)) s[nt][e] = -INFINITY;
          }
        }
      }

      // Online softmax. A row is spread over the 4 threads of a quad.
      float new_max[2] = {row_max[0], row_max[1]};
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt) {
        new_max[0] = fmaxf(new_max[0], fmaxf(s[nt][0], s[nt][1]));
        new_max[1] = fmaxf(new_max[1], fmaxf(s[nt][2], s[nt][3]));
      }
      float max_scaled[2], corr[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        new_max[h] = fmaxf(new_max[h], __shfl_xor_sync(0xffffffffu, new_max[h], 1));
        new_max[h] = fmaxf(new_max[h], __shfl_xor_sync(0xffffffffu, new_max[h], 2));
        // All keys of the row masked so far: offset 0 keeps exp2(-inf - 0) = 0, never NaN.
        max_scaled[h] = new_max[h] == -INFINITY ? 0.0f : new_max[h] * scale_log2;
        corr[h] = exp2f(row_max[h] * scale_log2 - max_scaled[h]);  // 0 while row_max = -inf, 1 if unchanged
        row_max[h] = new_max[h];
      }

      // P = exp(scale * (S - max)), rounded to bf16 into the A fragments of O = P V.
      uint32_t p_frag[kKeyChunks][4];
      float tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int c = 0; c < kKeyChunks; ++c) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int nt = 2 * c + half;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const float x = exp2f(fmaf(s[nt][2 * h], scale_log2, -max_scaled[h]));
            const float y = exp2f(fmaf(s[nt][2 * h + 1], scale_log2, -max_scaled[h]));
            const uint32_t packed = packPair<H>(x, y);
            p_frag[c][h + 2 * half] = packed;
            tile_sum[h] += pairSum<H>(packed);
          }
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) row_sum[h] = row_sum[h] * corr[h] + tile_sum[h];
#pragma unroll
      for (int i = 0; i < kDimTiles; ++i) {
        o_acc[i][0] *= corr[0];
        o_acc[i][1] *= corr[0];
        o_acc[i][2] *= corr[1];
        o_acc[i][3] *= corr[1];
      }

      // O += P V.
#pragma unroll
      for (int c = 0; c < kKeyChunks; ++c) {
#pragma unroll
        for (int dp = 0; dp < kDimChunks; ++dp) {
          uint32_t b[4];
          ldmatrixX4Trans(b, v_tile + ((c * 16 + v_lm_row) * G::kStride + dp * 16 + v_lm_col) * 2);
          mma16816<H>(o_acc[2 * dp], p_frag[c], b[0], b[1]);      // dims 16dp .. 16dp+7
          mma16816<H>(o_acc[2 * dp + 1], p_frag[c], b[2], b[3]);  // dims 16dp+8 .. 16dp+15
        }
      }
    }
    __syncthreads();  // this stage is read by all warps before the next iteration refills it
  }

  // ---- O / l -> out (fp32) ----
  if (!warp_active) return;  // warp-uniform
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = w_row0 + gq + 8 * h;
    if (row >= rows) continue;
    // (>= 1: every row sees its own key, whose weight is exp(0); times an FP8 cache's V scale, else 1)
    const float inv = 1.0f / row_sum[h] * a.v_scale;
    const int64_t o_off = static_cast<int64_t>(seq.q_start + r0 + row) * a.ld_out +
                          static_cast<int64_t>(head) * kHeadDim;
    auto write = [&](auto* o_row) {
#pragma unroll
      for (int i = 0; i < kDimTiles; ++i) {
        const int col = i * 8 + 2 * tq;
        storePair(o_row + col, o_acc[i][2 * h] * inv, o_acc[i][2 * h + 1] * inv, vec_io);
      }
    };
    if (a.out_dtype == DType::kBF16)
      write(static_cast<__nv_bfloat16*>(a.out) + o_off);
    else if (a.out_dtype == DType::kF16)
      write(static_cast<__half*>(a.out) + o_off);
    else
      write(static_cast<float*>(a.out) + o_off);
  }
}

template <int kHeadDim, typename H, bool kExtras, bool kFp8 = false>
cudaError_t setKernelAttributes() {
  auto kernel = flashAttentionKernel<kHeadDim, H, kExtras, kFp8>;
  constexpr size_t smem = kFp8 ? Geometry<kHeadDim>::kFp8SmemBytes : Geometry<kHeadDim>::kSmemBytes;
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  // Room for as many CTAs per SM as registers allow. With Q_hi and Q_lo in registers, nvcc 13.0
  // (sm_90a) uses 241 / 164 registers per thread for head_dim 128 / 64, no spills: 2 / 3 CTAs per
  // SM (it was 168 / 127 registers, 3 / 4 CTAs, with Q in one bf16 part).
  return cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                              cudaSharedmemCarveoutMaxShared);
}
// Both instantiations (without and with the attention extras).
template <int kHeadDim, typename H>
cudaError_t setAttributes() {
  cudaError_t e = setKernelAttributes<kHeadDim, H, false>();
  if (e == cudaSuccess) e = setKernelAttributes<kHeadDim, H, true>();
  if constexpr (std::is_same_v<H, __half>) {  // an FP8 cache's codes, computed as fp16
    if (e == cudaSuccess) e = setKernelAttributes<kHeadDim, H, false, true>();
    if (e == cudaSuccess) e = setKernelAttributes<kHeadDim, H, true, true>();
  }
  return e;
}

std::atomic<bool> g_attributes_set{false};

template <int kHeadDim, typename H>
cudaError_t launchFlash(const void* pool, const KvLayout& g, const FlashAttnArgs& a, cudaStream_t stream, bool fp8) {
  const int tpb_shift = tokensPerBlockShift(g);
  const bool vec_io = reinterpret_cast<uintptr_t>(a.q) % 8 == 0 && a.ld_q % 2 == 0 &&
                      reinterpret_cast<uintptr_t>(a.out) % (a.out_dtype == DType::kF32 ? 8 : 4) == 0 &&
                      a.ld_out % 2 == 0;
  const dim3 grid(static_cast<unsigned>(a.num_tiles), static_cast<unsigned>(a.num_heads));
  if constexpr (std::is_same_v<H, __half>) {
    if (fp8) {
      auto kernel = a.extras.any() ? flashAttentionKernel<kHeadDim, H, true, true>
                                   : flashAttentionKernel<kHeadDim, H, false, true>;
      kernel<<<grid, kThreads, Geometry<kHeadDim>::kFp8SmemBytes, stream>>>(pool, g, a, tpb_shift, vec_io);
      return cudaGetLastError();
    }
  }
  auto kernel = a.extras.any() ? flashAttentionKernel<kHeadDim, H, true> : flashAttentionKernel<kHeadDim, H, false>;
  kernel<<<grid, kThreads, Geometry<kHeadDim>::kSmemBytes, stream>>>(pool, g, a, tpb_shift, vec_io);
  return cudaGetLastError();
}

}  // namespace

bool flashAttentionSupported(const KvLayout& g, int32_t num_heads) {
  const int64_t tpb = g.tokens_per_block;
  return (g.head_dim == 64 || g.head_dim == 128) && tpb >= 1 && tpb <= (int64_t{1} << 30) &&
         (tpb & (tpb - 1)) == 0 && g.num_kv_heads >= 1 && num_heads >= 1 && num_heads <= 65535 &&
         num_heads % g.num_kv_heads == 0 && g.elems_per_block > 0 && g.elems_per_block % 8 == 0;
}

cudaError_t initFlashAttentionKernels() {
  cudaError_t e = setAttributes<64, __nv_bfloat16>();
  if (e == cudaSuccess) e = setAttributes<128, __nv_bfloat16>();
  if (e == cudaSuccess) e = setAttributes<64, __half>();
  if (e == cudaSuccess) e = setAttributes<128, __half>();
  if (e == cudaSuccess) g_attributes_set.store(true, std::memory_order_release);
  return e;
}

cudaError_t flashAttention(const void* pool, DType kv_dtype, const KvLayout& g, const FlashAttnArgs& a,
                           cudaStream_t stream) {
  if (a.num_tiles < 0 || !flashAttentionSupported(g, a.num_heads) || reinterpret_cast<uintptr_t>(pool) % 16 != 0 ||
      a.layer < 0 || (kv_dtype != DType::kBF16 && kv_dtype != DType::kF16 && kv_dtype != DType::kF8E4M3)) {
    return cudaErrorInvalidValue;
  }
  if (a.num_tiles == 0) return cudaSuccess;
  if (!g_attributes_set.load(std::memory_order_acquire)) {
    const cudaError_t e = initFlashAttentionKernels();
    if (e != cudaSuccess) return e;
  }
  const bool fp8 = kv_dtype == DType::kF8E4M3;  // codes computed as fp16
  return withHalfType(fp8 ? DType::kF16 : kv_dtype, [&](auto tag) {
    using H = decltype(tag);
    return g.head_dim == 64 ? launchFlash<64, H>(pool, g, a, stream, fp8)
                            : launchFlash<128, H>(pool, g, a, stream, fp8);
  });
}

}  // namespace llmrt::cuda

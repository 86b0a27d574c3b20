// Paged decode attention on bf16 / fp16 tensor cores: the kernel decodeAttention()
// (cuda_attention.cu) uses for a bf16 or fp16 cache (comments say bf16; the mma takes the
// cache's type) with head_dim 64, 128 or 256 and any GQA group. Same semantics, grid and split
// protocol as the CUDA-core kernel there: one CTA per (query row, kv head, chunk of at most 8 of
// its query heads, key split), causal with an optional sliding window, and with splits > 1 the
// unnormalised partial state (acc[head_dim], max, sum) of every (row, head,
// split) goes to `partial` for the merge kernel.
//
// Why: the CUDA-core kernel converts every K/V element to fp32 in shared
// memory and reads it back once per query head with 4-byte loads; at large
// batch that, not HBM, bounds it (~1 TB/s effective, docs/perf.md "Session 5").
// Here K/V stay bf16 from the pool to the tensor cores:
//   - K/V tiles of kTileKeys = 64 keys are gathered through the block table with
//     16-byte cp.async into a kStages-deep ring of shared buffers, so two tiles
//     are in flight while one is computed (no registers hold them);
//   - the GQA group is the M dimension of mma.m16n8k16: A = up to 8 of the group's query
//     heads (rows 0..7 of 16, the rest zero), so every K/V element is read from shared memory
//     once per CTA by ldmatrix; a larger group (Falcon-7B: 71 heads over one KV head) takes
//     several CTAs, which read the same keys (from L2 after the first);
//   - warp w of the 4 takes keys 16w..16w+15 of every tile, keeps its own online
//     softmax state (FA2's register reuse of the S fragments as P's A fragments,
//     exactly as cuda_flash_attention.cu), and the 4 warps' states are merged in
//     shared memory at the end;
//   - Q is split into bf16 hi + lo parts (~16 significant bits, as the context
//     kernel); P is rounded to bf16 and the row sum accumulates the rounded P,
//     so O / l is an exact convex combination of V rows with those weights.
// An FP8 cache (E4M3 codes) runs the fp16 kernel on the codes turned into fp16 in shared memory
// (kFp8 below), K's scale joined to the softmax scale and V's to the output.
// Only rows g (A rows 0..7) carry heads: rows 8..15 of A are zero and their accumulators are
// scratch (mma16816Top), so a thread keeps half of each fragment.
// Attention extras (DecodeAttnArgs::extras: soft-capping, ALiBi) take a second instantiation
// (kExtras): the raw scores are scaled, soft-capped and biased in the S fragments before the mask,
// and the softmax then runs on those scores with a scale of 1 (the default's code is unchanged).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <type_traits>

#include "backend/cuda/cuda_flash_attention.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_mma.h"
#include "backend/cuda/cuda_pdl.h"
#include "backend/cuda/cuda_vec.h"

namespace llmrt::cuda {
namespace {

constexpr int kTileKeys = 64;  // keys per K/V tile
constexpr int kWarps = 4;      // warp w scores keys 16w .. 16w+15 of each tile
constexpr int kThreads = kWarps * 32;
constexpr int kStages = 3;  // K/V tiles in the ring: two in flight while one is computed
constexpr int kPad = 8;     // bf16 elements of padding per shared row (conflict-free ldmatrix)
constexpr int kRows = 8;    // query heads per CTA the fragments carry (A rows 0..7)
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kTileKeys == 16 * kWarps, "one 16-key slice per warp");

template <int kHeadDim>
struct Geometry {
  static constexpr int kStride = kHeadDim + kPad;  // shared row stride, elements
  static constexpr int kTileBytes = kTileKeys * kStride * 2;
  static constexpr int kChunksPerRow = kHeadDim / 8;  // 16-byte chunks per key row
  static constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  static constexpr int kLoadPasses = kTileKeys / kRowsPerPass;
  static constexpr size_t kRingBytes = static_cast<size_t>(kStages) * 2 * kTileBytes;
  // The end-of-CTA merge reuses the ring: per warp, kRows accumulators of kHeadDim floats,
  // then kRows maxima and kRows sums.
  // (Accumulator rows padded by 8 floats: the quads' float2 stores of one warp then spread over
  // all banks.)
  static constexpr int kAccStride = kHeadDim + 8;
  static constexpr size_t kMergeBytes = static_cast<size_t>(kWarps) * kRows * (kAccStride + 2) * sizeof(float);
  static constexpr size_t kSmemBytes = kRingBytes > kMergeBytes ? kRingBytes : kMergeBytes;
  // An FP8 cache: the codes land in a ring of their own ([stage][K, V][kTileKeys][kHeadDim] bytes,
  // 16 per copy), behind one fp16 K/V tile (stage 0 of the ring above, or the merge's space), into
  // which each thread turns the codes it copied once they have landed. (One fp16 tile, not a ring
  // of them: 83 KB for head_dim 128, so two CTAs still share an SM.)
  static constexpr int kStageTileBytes = kTileKeys * kHeadDim;
  static constexpr int kCodeChunksPerRow = kHeadDim / 16;
  static constexpr int kCodeRowsPerPass = kThreads / kCodeChunksPerRow;
  static constexpr int kCodePasses = kTileKeys / kCodeRowsPerPass;
  static constexpr size_t kFp8TileBytes = 2 * kTileBytes > kMergeBytes ? 2 * kTileBytes : kMergeBytes;
  static constexpr size_t kFp8SmemBytes = kFp8TileBytes + static_cast<size_t>(kStages) * 2 * kStageTileBytes;
  static_assert(kThreads % kCodeChunksPerRow == 0 && kTileKeys % kCodeRowsPerPass == 0, "code load mapping");
  static_assert(kThreads % kChunksPerRow == 0 && kTileKeys % kRowsPerPass == 0, "load mapping");
};

// kRope: RoPE and the row's KV write inside (DecodeAttnArgs::Rope): the cos / sin of the row's
// angles go to shared memory before the wait (the step's upload, not an earlier kernel, holds the
// positions); q is rotated as its fragments are built (features [0, 2 a.rope.half) of each head,
// the rest pass); where the row has a slot, the thread that
// would gather the row's own key (k and v, 8 features of a head) from the pool rotates it from
// a.rope.k instead and stores both in its tile and in the pool. (A row without a slot reads its
// key from the pool, as attention after ropeWriteKv does.) Nothing else the kernel gathers comes
// from the kernels before it, so the first tiles' gather starts before the wait. A model without
// rotary embeddings (a.rope.inv_freq null: learned positions, ALiBi) only has the KV write fused.
// kExtras: a.extras applies to the scores. kFp8 (H = __half, no kRope): the pool holds E4M3 codes,
// copied into their ring and turned into fp16 (exact) in the one fp16 tile before it is read, a
// barrier after the previous tile's last read; K's scale joins the float32 score scale and V's
// multiplies the output.
// With a group of more than kRows heads, blockIdx.y = kv head * chunks + chunk, the chunk taking
// heads [chunk * kRows, ...) of the group; every chunk puts the row's own key in its tile, chunk 0
// alone writes it to the pool.
template <int kHeadDim, typename H, bool kRope, bool kExtras, bool kFp8 = false>
__global__ void __launch_bounds__(kThreads)
    decodeMmaKernel(const void* __restrict__ pool_raw, KvLayout g, DecodeAttnArgs a, int group,
                    int tpb_shift) {
  static_assert(!kFp8 || (!kRope && std::is_same_v<H, __half>), "FP8 codes are computed as fp16, RoPE apart");
  using G = Geometry<kHeadDim>;
  using P = std::conditional_t<kFp8, __nv_fp8_e4m3, H>;  // the pool's element
  const P* pool = static_cast<const P*>(pool_raw);
  constexpr int kDimChunks = kHeadDim / 16;  // k-chunks of S = Q K^T, dim pairs of O = P V
  constexpr int kDimTiles = kHeadDim / 8;    // n-tiles of O
  extern __shared__ __align__(16) unsigned char smem_raw[];

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gq = lane >> 2, tq = lane & 3;  // groupID (the query head in the group), threadID_in_group
  const int chunks = (group + kRows - 1) / kRows;
  const int kvh = blockIdx.y / chunks, chunk = blockIdx.y % chunks, split = blockIdx.z;
  const int rows = min(kRows, group - chunk * kRows);  // query heads of this CTA
  const int head0 = kvh * group + chunk * kRows;       // its first

  // ---- this CTA's key range ----
  const DecodeKeys keys = decodeKeys(a, blockIdx.x, split);
  const int2 item = keys.item;
  const int32_t* table = keys.table;
  const int64_t begin = keys.begin, end = keys.end;
  const int num_tiles = end > begin ? static_cast<int>((end - begin + kTileKeys - 1) / kTileKeys) : 0;

  const int64_t head_elems = g.tokens_per_block * kHeadDim;
  const int64_t k_off = (static_cast<int64_t>(a.layer) * 2 * g.num_kv_heads + kvh) * head_elems;
  const int64_t v_off = k_off + g.num_kv_heads * head_elems;
  const int64_t tpb_mask = (int64_t{1} << tpb_shift) - 1;
  const int ld_row = tid / G::kChunksPerRow, ld_chunk = tid % G::kChunksPerRow;
  const uint32_t ring = sharedAddress(smem_raw);  // [stage][K, V][kTileKeys][kStride] bf16
  // kFp8: the codes' ring, and this thread's 16 codes per pass: row, first feature.
  const uint32_t code_ring = ring + static_cast<uint32_t>(G::kFp8TileBytes);
  const int code_row = tid / G::kCodeChunksPerRow, code_col = (tid % G::kCodeChunksPerRow) * 16;
  // kFp8: this thread's codes of tile t (copied by it, so landed after its wait) into the fp16 tile.
  auto convertTile = [&](int t) {
#pragma unroll
    for (int i = 0; i < G::kCodePasses; ++i) {
      const int row = code_row + i * G::kCodeRowsPerPass;
      const int st = static_cast<int>(G::kFp8TileBytes) + (t % kStages) * 2 * G::kStageTileBytes + row * kHeadDim + code_col;
      const int off = (row * G::kStride + code_col) * 2;
#pragma unroll
      for (int kv = 0; kv < 2; ++kv) {
        const uint4 codes = *reinterpret_cast<const uint4*>(smem_raw + st + kv * G::kStageTileBytes);
        uint4* dst = reinterpret_cast<uint4*>(smem_raw + off + kv * G::kTileBytes);
        dst[0] = fp8x8ToHalf(make_uint2(codes.x, codes.y));
        dst[1] = fp8x8ToHalf(make_uint2(codes.z, codes.w));
      }
    }
  };

  constexpr int kHalf = kHeadDim / 2;
  // kRope: cos [0, rot_half), sin [kHalf, kHalf + rot_half) of the row's angles.
  __shared__ float rope_cs[kRope ? kHeadDim : 1];
  H* new_k = nullptr;  // kRope: where the row's own k and v go in the pool (null: not written)
  H* new_v = nullptr;
  const bool rotate = kRope && a.rope.inv_freq != nullptr;
  // Features [0, 2 rot_half) of each head rotate (pairs i, i + rot_half), the rest pass unchanged.
  const int rot_half = rotate ? a.rope.half : 0;
  if constexpr (kRope) {
    const int row = item.x;
    if (tid < rot_half) {
      const float* inv = a.rope.inv_freq + static_cast<int64_t>(a.rope.row_table[row]) * rot_half;
      const float2 c = ropeCosSin(static_cast<float>(a.rope.positions[row]), inv[tid], a.rope.scaling);
      rope_cs[tid] = c.x;
      rope_cs[kHalf + tid] = c.y;
    }
    const int64_t slot = a.rope.slots[row];
    if (slot >= 0 && keys.pos >= begin && keys.pos < end) {
      H* at = static_cast<H*>(a.rope.pool) + (slot >> tpb_shift) * g.elems_per_block + (slot & tpb_mask) * kHeadDim;
      new_k = at + k_off;
      new_v = at + v_off;
    }
    __syncthreads();
  }

  // kRope: the row's own key and value, features [8c, 8c + 8) of head kvh, into the tile's shared
  // rows (and the pool): k rotated with its partner features rot_half away (rot_half is a multiple
  // of 8, so the 8 features rotate or pass together).
  auto putNewKey = [&](uint32_t k_dst, uint32_t v_dst, int c) {
    const int d0 = c * 8;
    const bool turn = d0 < 2 * rot_half;
    const int pair0 = !turn ? d0 : d0 < rot_half ? d0 + rot_half : d0 - rot_half;
    const float* k_row = a.rope.k + static_cast<int64_t>(item.x) * a.rope.ld_k + static_cast<int64_t>(kvh) * kHeadDim;
    const float* v_row = a.rope.v + static_cast<int64_t>(item.x) * a.rope.ld_v + static_cast<int64_t>(kvh) * kHeadDim;
    float4 x0, x1, p0, p1, v0, v1;
    load8(k_row + d0, x0, x1);
    if (turn) {
      load8(k_row + pair0, p0, p1);
    } else {
      p0 = x0;
      p1 = x1;
    }
    load8(v_row + d0, v0, v1);
    const float xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
    const float ps[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
    float y[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int i = (d0 < rot_half ? d0 : pair0) + e;  // the pair's first feature
      y[e] = !turn           ? xs[e]
             : d0 < rot_half ? ropeRotate(xs[e], ps[e], rope_cs[i], rope_cs[kHalf + i]).x
                             : ropeRotate(ps[e], xs[e], rope_cs[i], rope_cs[kHalf + i]).y;
    }
    const H* tag = nullptr;
    uint4 kq, vq;
    kq.x = floatsToPair(y[0], y[1], tag);
    kq.y = floatsToPair(y[2], y[3], tag);
    kq.z = floatsToPair(y[4], y[5], tag);
    kq.w = floatsToPair(y[6], y[7], tag);
    vq.x = floatsToPair(v0.x, v0.y, tag);
    vq.y = floatsToPair(v0.z, v0.w, tag);
    vq.z = floatsToPair(v1.x, v1.y, tag);
    vq.w = floatsToPair(v1.z, v1.w, tag);
    *reinterpret_cast<uint4*>(smem_raw + (k_dst - ring)) = kq;
    *reinterpret_cast<uint4*>(smem_raw + (v_dst - ring)) = vq;
    if (chunk == 0) {
      *reinterpret_cast<uint4*>(new_k + d0) = kq;
      *reinterpret_cast<uint4*>(new_v + d0) = vq;
    }
  };

  // Keys past `end` are zero-filled and never read: their blocks may not exist, and garbage
  // (NaN) in V would poison 0 * NaN in P V.
  // put_new (kRope): the row's own key is put in here (else skipped: put in later).
  // Where key j's K and V features from `col` on sit in the pool (the pool's start for a key past
  // `end`: the copy reads nothing there).
  auto keySources = [&](int64_t j, int col, const P*& k_src, const P*& v_src) {
    k_src = v_src = pool;
    if (j >= end) return;
    const int64_t at =
        static_cast<int64_t>(__ldg(table + (j >> tpb_shift))) * g.elems_per_block + (j & tpb_mask) * kHeadDim + col;
    k_src = pool + k_off + at;
    v_src = pool + v_off + at;
  };
  auto loadTile = [&](int t, bool put_new) {
    if constexpr (kFp8) {
#pragma unroll
      for (int i = 0; i < G::kCodePasses; ++i) {
        const int row = code_row + i * G::kCodeRowsPerPass;
        const int64_t j = begin + static_cast<int64_t>(t) * kTileKeys + row;
        const bool valid = j < end;
        const P *k_src, *v_src;
        keySources(j, code_col, k_src, v_src);
        const uint32_t st = code_ring + (t % kStages) * 2 * G::kStageTileBytes + row * kHeadDim + code_col;
        cpAsync16(st, k_src, valid);
        cpAsync16(st + G::kStageTileBytes, v_src, valid);
      }
      return;
    }
    const uint32_t k_dst = ring + (t % kStages) * 2 * G::kTileBytes;
    const uint32_t v_dst = k_dst + G::kTileBytes;
#pragma unroll(kHeadDim > 128 ? 2 : G::kLoadPasses)
    for (int i = 0; i < G::kLoadPasses; ++i) {
      const int row = ld_row + i * G::kRowsPerPass;
      const int64_t j = begin + static_cast<int64_t>(t) * kTileKeys + row;
      const bool valid = j < end;
      const P *k_src, *v_src;
      keySources(j, ld_chunk * 8, k_src, v_src);
      const uint32_t off = static_cast<uint32_t>((row * G::kStride + ld_chunk * 8) * 2);
      if constexpr (kRope) {
        if (new_k && j == keys.pos) {  // (a row without a slot reads the pool, as the two ops do)
          if (put_new) putNewKey(k_dst + off, v_dst + off, ld_chunk);
          continue;
        }
      }
      cpAsync16(k_dst + off, k_src, valid);
      cpAsync16(v_dst + off, v_src, valid);
    }
  };
  auto prologue = [&](bool put_new) {
#pragma unroll
    for (int t = 0; t < kStages - 1; ++t) {
      if (t < num_tiles) loadTile(t, put_new);
      cpAsyncCommit();  // empty groups keep the wait counts uniform
    }
  };
  // The first tiles' gather. kRope: before the wait — every key but the row's own was written by
  // earlier steps (whose kernels have finished), so the KV reads overlap the end of the q/k/v
  // product; the own key (from that product) is put in after the wait. Otherwise the newest rows
  // come from the kernel before (ropeWriteKv): after the wait.
  if constexpr (kRope) prologue(false);
  pdlWait();
  pdlLaunchDependents();
  if constexpr (kRope) {
    const int64_t rel = keys.pos - begin;
    const int row = static_cast<int>(rel % kTileKeys);
    if (new_k && rel / kTileKeys < kStages - 1 && row % G::kRowsPerPass == ld_row) {
      const uint32_t k_dst = ring + static_cast<uint32_t>(rel / kTileKeys) * 2 * G::kTileBytes;
      const uint32_t off = static_cast<uint32_t>((row * G::kStride + ld_chunk * 8) * 2);
      putNewKey(k_dst + off, k_dst + G::kTileBytes + off, ld_chunk);
    }
  } else {
    prologue(true);
  }

  // ---- Q of the group -> bf16 hi / lo A fragments (rows gq; rows 8..15 zero) ----
  uint32_t q_hi[kDimChunks][2], q_lo[kDimChunks][2];  // A rows 0..7 (mma16816Top)
  {
    const bool ok = gq < rows;
    const float* q_row =
        a.q + static_cast<int64_t>(item.x) * a.ld_q + static_cast<int64_t>(head0 + gq) * kHeadDim;
    // Feature i (kRope: rotated with its partner i +- rot_half, read from memory as well).
    auto feature = [&](int i) {
      if (!ok) return 0.0f;
      const float x = q_row[i];
      if (i >= 2 * rot_half) return x;
      if (i < rot_half) return ropeRotate(x, q_row[i + rot_half], rope_cs[i], rope_cs[kHalf + i]).x;
      const int p = i - rot_half;
      return ropeRotate(q_row[p], x, rope_cs[p], rope_cs[kHalf + p]).y;
    };
    float qv[kDimChunks][2][2];  // [chunk][half][pair]: features c * 16 + half * 8 + 2 tq (+1)
#pragma unroll
    for (int c = 0; c < kDimChunks; ++c)
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int e = 0; e < 2; ++e) qv[c][half][e] = feature(c * 16 + half * 8 + 2 * tq + e);
#pragma unroll
    for (int c = 0; c < kDimChunks; ++c) {
#pragma unroll
      for (int half = 0; half < 2; ++half)
        splitPair<H>(qv[c][half][0], qv[c][half][1], q_hi[c][half], q_lo[c][half]);
    }
  }

  // ldmatrix lane -> (row, col) offsets inside a 16 x 16 block (cuda_flash_attention.cu).
  const int k_lm_row = (lane & 7) + ((lane >> 4) << 3);
  const int k_lm_col = ((lane >> 3) & 1) << 3;
  const int v_lm_row = (lane & 7) + (((lane >> 3) & 1) << 3);
  const int v_lm_col = (lane >> 4) << 3;

  float o_acc[kDimTiles][2];  // rows 0..7 of the C fragments (mma16816Top)
#pragma unroll
  for (int i = 0; i < kDimTiles; ++i) o_acc[i][0] = o_acc[i][1] = 0.0f;
  float row_max = -INFINITY;  // running max of the raw (unscaled) scores of head gq (kExtras: the final scores)
  float row_sum = 0.0f;       // this thread's share of the row's sum
  // What turns the running scores into scaled ones: kExtras scales them itself.
  // An FP8 cache's K scale joins the softmax scale in float32 (else 1: exact).
  const float score_scale = a.scale * a.k_scale;
  const float unit = kExtras ? 1.0f : score_scale;
  const float scale_log2 = unit * kLog2e;
  float slope = 0.0f;  // kExtras: head gq's ALiBi slope
  if constexpr (kExtras) slope = gq < rows ? alibiSlope(a.extras, head0 + gq) : 0.0f;

  for (int t = 0; t < num_tiles; ++t) {
    cpAsyncWait<kStages - 2>();  // tile t has landed (this thread's copies)
    if constexpr (kFp8) {
      __syncthreads();  // every warp is done with tile t - 1 in the one fp16 tile
      convertTile(t);
    }
    __syncthreads();             // everyone's copies; and tile t - 1's buffer is no longer read
    if (t + kStages - 1 < num_tiles) loadTile(t + kStages - 1, true);
    cpAsyncCommit();

    const int64_t k0 = begin + static_cast<int64_t>(t) * kTileKeys + warp * 16;  // the warp's first key
    if (k0 < end) {  // warp-uniform
      const uint32_t k_tile = ring + (kFp8 ? 0 : (t % kStages) * 2 * G::kTileBytes);
      const uint32_t v_tile = k_tile + G::kTileBytes;
      float s[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
#pragma unroll
      for (int c = 0; c < kDimChunks; ++c) {
        uint32_t b[4];
        ldmatrixX4(b, k_tile + ((warp * 16 + k_lm_row) * G::kStride + c * 16 + k_lm_col) * 2);
        mma16816Top<H>(s[0], q_hi[c], b[0], b[1]);
        mma16816Top<H>(s[1], q_hi[c], b[2], b[3]);
        mma16816Top<H>(s[0], q_lo[c], b[0], b[1]);
        mma16816Top<H>(s[1], q_lo[c], b[2], b[3]);
      }
      if constexpr (kExtras) {  // (row gq only: elements 0, 1; rows 8..15 are never read)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            s[nt][e] =
                extraScore(a.extras, s[nt][e] * score_scale, slope, k0 + nt * 8 + 2 * tq + e, keys.pos);
      }
      if (k0 + 16 > end) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (k0 + nt * 8 + 2 * tq + e >= end) s[nt][e] = -INFINITY;
      }
      // Online softmax of row gq over the warp's 16 keys (spread over the quad's 4 threads).
      float m_new = fmaxf(row_max, fmaxf(fmaxf(s[0][0], s[0][1]), fmaxf(s[1][0], s[1][1])));
      m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffffu, m_new, 1));
      m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffffu, m_new, 2));  // finite: key k0 is valid
      const float max_scaled = m_new * scale_log2;
      const float corr = exp2f(row_max * scale_log2 - max_scaled);  // 0 on the first tile
      row_max = m_new;
      uint32_t p[2];  // A rows 0..7 (rows 8..15 zero)
      p[0] = packPair<H>(exp2f(fmaf(s[0][0], scale_log2, -max_scaled)), exp2f(fmaf(s[0][1], scale_log2, -max_scaled)));
      p[1] = packPair<H>(exp2f(fmaf(s[1][0], scale_log2, -max_scaled)),
                         exp2f(fmaf(s[1][1], scale_log2, -max_scaled)));
      row_sum = row_sum * corr + (pairSum<H>(p[0]) + pairSum<H>(p[1]));
#pragma unroll
      for (int i = 0; i < kDimTiles; ++i) {
        o_acc[i][0] *= corr;
        o_acc[i][1] *= corr;
      }
#pragma unroll
      for (int dp = 0; dp < kDimChunks; ++dp) {
        uint32_t b[4];
        ldmatrixX4Trans(b, v_tile + ((warp * 16 + v_lm_row) * G::kStride + dp * 16 + v_lm_col) * 2);
        mma16816Top<H>(o_acc[2 * dp], p, b[0], b[1]);
        mma16816Top<H>(o_acc[2 * dp + 1], p, b[2], b[3]);
      }
    }
  }
  cpAsyncWait<0>();
  __syncthreads();  // the ring is free: reuse it for the merge of the warps' states

  // ---- merge the 4 warps' states: M = max_w m_w, acc = sum_w acc_w 2^((m_w - M) s), l likewise ----
  float* acc_s = reinterpret_cast<float*>(smem_raw);   // [kWarps][kRows][kAccStride]
  float* max_s = acc_s + kWarps * kRows * G::kAccStride;  // [kWarps][kRows]
  float* sum_s = max_s + kWarps * kRows;                // [kWarps][kRows]
  row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
  row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);
  {
    float* mine = acc_s + (warp * kRows + gq) * G::kAccStride;
#pragma unroll
    for (int i = 0; i < kDimTiles; ++i)
      *reinterpret_cast<float2*>(mine + i * 8 + 2 * tq) = make_float2(o_acc[i][0], o_acc[i][1]);
    if (tq == 0) {
      max_s[warp * kRows + gq] = row_max;
      sum_s[warp * kRows + gq] = row_sum;
    }
  }
  __syncthreads();
  for (int e = tid; e < rows * kHeadDim; e += kThreads) {
    const int r = e / kHeadDim, d = e % kHeadDim;
    float big = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) big = fmaxf(big, max_s[w * kRows + r]);
    float acc = 0.0f, l = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float mw = max_s[w * kRows + r];
      const float wt = mw == -INFINITY ? 0.0f : exp2f((mw - big) * scale_log2);  // idle warps weigh nothing
      acc = fmaf(acc_s[(w * kRows + r) * G::kAccStride + d], wt, acc);
      l = fmaf(sum_s[w * kRows + r], wt, l);
    }
    acc *= a.v_scale;  // (an FP8 cache's V scale; else 1: exact)
    const int head = head0 + r;
    if (a.splits == 1) {
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      storeDecodeOut(a, static_cast<int64_t>(item.x) * a.ld_out + static_cast<int64_t>(head) * kHeadDim + d, acc * inv);
    } else {
      // The merge kernel's units: max of the scaled scores, sum of e^(scaled - max).
      float* part = a.partial + ((static_cast<int64_t>(blockIdx.x) * a.num_heads + head) * a.splits + split) *
                                    (kHeadDim + 2);
      part[d] = acc;
      if (d == 0) {
        part[kHeadDim] = big * unit;  // -inf for an empty split
        part[kHeadDim + 1] = l;
      }
    }
  }
}

template <int kHeadDim, typename H>
cudaError_t optInOne() {
  const int bytes = static_cast<int>(Geometry<kHeadDim>::kSmemBytes);
  for (auto k : {decodeMmaKernel<kHeadDim, H, false, false>, decodeMmaKernel<kHeadDim, H, true, false>,
                 decodeMmaKernel<kHeadDim, H, false, true>, decodeMmaKernel<kHeadDim, H, true, true>})
    if (cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes); e != cudaSuccess)
      return e;
  if constexpr (std::is_same_v<H, __half>) {
    const int fp8_bytes = static_cast<int>(Geometry<kHeadDim>::kFp8SmemBytes);
    for (auto k : {decodeMmaKernel<kHeadDim, H, false, false, true>, decodeMmaKernel<kHeadDim, H, false, true, true>})
      if (cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, fp8_bytes);
          e != cudaSuccess)
        return e;
  }
  return cudaSuccess;
}

template <int kHeadDim, typename H>
cudaError_t launchOne(const void* pool, const KvLayout& g, const DecodeAttnArgs& a, int group, cudaStream_t stream,
                      bool fp8) {
  const int tpb_shift = tokensPerBlockShift(g);
  const int64_t chunks = (group + kRows - 1) / kRows;
  const dim3 grid(static_cast<unsigned>(a.num_items), static_cast<unsigned>(g.num_kv_heads * chunks),
                  static_cast<unsigned>(a.splits));
  auto go = [&](auto kernel, size_t smem = Geometry<kHeadDim>::kSmemBytes) {
    return launchPdl(kernel, grid, kThreads, smem, stream, pool, g, a, group, tpb_shift);
  };
  if constexpr (std::is_same_v<H, __half>) {
    if (fp8) {
      if (a.rope.k) return cudaErrorInvalidValue;
      constexpr size_t smem = Geometry<kHeadDim>::kFp8SmemBytes;
      return a.extras.any() ? go(decodeMmaKernel<kHeadDim, H, false, true, true>, smem)
                            : go(decodeMmaKernel<kHeadDim, H, false, false, true>, smem);
    }
  }
  if (a.extras.any())
    return a.rope.k ? go(decodeMmaKernel<kHeadDim, H, true, true>) : go(decodeMmaKernel<kHeadDim, H, false, true>);
  return a.rope.k ? go(decodeMmaKernel<kHeadDim, H, true, false>) : go(decodeMmaKernel<kHeadDim, H, false, false>);
}

}  // namespace

bool decodeMmaSupported(const KvLayout& g, int32_t num_heads, const void* pool) {
  // head_dim 64, 128 or 256, power-of-two blocks, 16-byte rows, whole groups, and grids of at most
  // 65535 heads and 65535 (kv head, chunk) pairs.
  const int64_t tpb = g.tokens_per_block;
  if (!(g.head_dim == 64 || g.head_dim == 128 || g.head_dim == 256) || tpb < 1 || tpb > (int64_t{1} << 30) ||
      (tpb & (tpb - 1)) != 0 || g.num_kv_heads < 1 || num_heads < 1 || num_heads % g.num_kv_heads != 0 ||
      g.elems_per_block <= 0 || g.elems_per_block % 8 != 0 || reinterpret_cast<uintptr_t>(pool) % 16 != 0)
    return false;
  const int64_t group = num_heads / g.num_kv_heads;
  return num_heads <= 65535 && g.num_kv_heads * ((group + kRows - 1) / kRows) <= 65535;
}

cudaError_t initDecodeMmaKernels() {
  cudaError_t e = optInOne<64, __nv_bfloat16>();
  if (e == cudaSuccess) e = optInOne<128, __nv_bfloat16>();
  if (e == cudaSuccess) e = optInOne<256, __nv_bfloat16>();
  if (e == cudaSuccess) e = optInOne<64, __half>();
  if (e == cudaSuccess) e = optInOne<128, __half>();
  return e != cudaSuccess ? e : optInOne<256, __half>();
}

cudaError_t decodeAttentionMma(const void* pool, DType kv_dtype, const KvLayout& g, const DecodeAttnArgs& a,
                               cudaStream_t stream) {
  if (!decodeMmaSupported(g, a.num_heads, pool) || a.layer < 0) return cudaErrorInvalidValue;
  const int group = static_cast<int>(a.num_heads / g.num_kv_heads);
  const bool fp8 = kv_dtype == DType::kF8E4M3;  // codes computed as fp16
  return withHalfType(fp8 ? DType::kF16 : kv_dtype, [&](auto tag) {
    using H = decltype(tag);
    if (g.head_dim == 64) return launchOne<64, H>(pool, g, a, group, stream, fp8);
    return g.head_dim == 128 ? launchOne<128, H>(pool, g, a, group, stream, fp8)
                             : launchOne<256, H>(pool, g, a, group, stream, fp8);
  });
}

}  // namespace llmrt::cuda

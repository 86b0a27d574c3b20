// FlashAttention-2-style context (prefill) attention over the paged bf16 or fp16
// KV cache, on tensor cores of the cache's type (mma.sync m16n8k16); see cuda_flash_attention.cu
// for the algorithm and the fragment layouts. Same semantics as `attention()`
// in cuda_attention.cu (causal, HF sliding window, GQA, queries after a cached
// prefix); the backend picks this kernel where flashAttentionSupported() says
// so and falls back to `attention()` elsewhere.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"

namespace llmrt::cuda {

// AttnSeqDev (one sequence of the step: q_start, q_len, kv_len, table_offset) is declared in
// cuda_kernels.h and shared with the decode kernel.

// Query rows per tile: the host cuts every sequence's q_len rows into tiles of
// this many rows (the last one may be partial) and lists them in `tiles`.
constexpr int kFlashBlockM = 64;

struct FlashAttnArgs {
  const float* q;  // [tokens, num_heads * head_dim], fp32, already rotated (RoPE), NOT scaled
  int64_t ld_q;
  void* out;  // [tokens, num_heads * head_dim], fp32, bf16 or fp16 (out_dtype)
  DType out_dtype;
  int64_t ld_out;
  int32_t num_heads;  // query heads; num_heads % g.num_kv_heads == 0
  float scale;        // softmax scale (1/sqrt(head_dim))
  int32_t layer;
  int32_t sliding_window;  // <= 0: full causal; else a query at position p sees keys (p - W, p]
  const AttnSeqDev* seqs;  // device
  const int32_t* tables;   // device: all block tables back to back (block ids)
  const int2* tiles;       // device: (sequence index, first query row within the sequence), one per
                           // kFlashBlockM query rows; any order (the kernel runs the last ones first)
  int32_t num_tiles;
  AttnExtras extras;  // soft-capping and ALiBi (none by default)
  // An FP8 cache: its layer's K and V scales (K's with the score scale, V's on O); else 1.
  float k_scale = 1.0f;
  float v_scale = 1.0f;
};

// True when the kernel supports this geometry: head_dim 64 or 128; tokens_per_block a power of two
// (any, 1 included); num_kv_heads >= 1; 1 <= num_heads <= 65535 and num_heads % num_kv_heads == 0
// (any GQA group); elems_per_block a multiple of 8 (16-byte aligned blocks). The pool must be bf16,
// fp16 or FP8 E4M3 (flashAttention checks its dtype; FP8 codes are turned into fp16 in shared
// memory and computed as an fp16 cache).
bool flashAttentionSupported(const KvLayout& g, int32_t num_heads);

// Shared-memory opt-ins of the flash kernels (cudaFuncSetAttribute); call once per device before
// any launch and before graph capture (e.g. from initAttentionKernels()). flashAttention() calls it
// itself the first time if nobody did.
cudaError_t initFlashAttentionKernels();

// Enqueues the kernel on `stream`; returns cudaErrorInvalidValue for an unsupported geometry, a pool
// not 16-byte aligned, a cache neither bf16, fp16 nor FP8 or num_tiles < 0, else the launch's error. num_tiles == 0 launches nothing.
// `q`/`out` may have any alignment and leading dimension (8-byte aligned with even ld is faster).
cudaError_t flashAttention(const void* pool, DType kv_dtype, const KvLayout& g, const FlashAttnArgs& a,
                           cudaStream_t stream);

}  // namespace llmrt::cuda

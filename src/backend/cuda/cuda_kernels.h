// Launchers of the CUDA backend's kernels (cuda_ops.cu, cuda_attention.cu).
// Each enqueues on `stream` and returns the launch's error (cudaGetLastError);
// pointers are device pointers, leading dimensions are in elements.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace llmrt::cuda {

// out[i, :] = table[ids[i], :]; table is F32 or BF16 [*, dim].
cudaError_t embedding(const void* table, DType table_dtype, int64_t dim, const int32_t* ids, int64_t n,
                      float* out, int64_t ld_out, cudaStream_t stream);
// With `residual` null: out = rmsNorm(x) * w. Otherwise residual += x; out = rmsNorm(residual) * w.
cudaError_t rmsNorm(const float* x, int64_t ld_x, float* residual, int64_t ld_res, const float* w, float eps,
                    int64_t rows, int64_t cols, float* out, int64_t ld_out, cudaStream_t stream);
// x += y
cudaError_t add(float* x, int64_t ld_x, const float* y, int64_t ld_y, int64_t rows, int64_t cols,
                cudaStream_t stream);
// out[r, :] += bias
cudaError_t addBias(float* out, int64_t ld_out, const float* bias, int64_t rows, int64_t cols,
                    cudaStream_t stream);
// out[i, :] = src[rows[i], :]
cudaError_t gatherRows(const float* src, int64_t ld_src, const int64_t* rows, int64_t n, int64_t cols,
                       float* out, int64_t ld_out, cudaStream_t stream);
// out[r, i] = silu(gu[r, i]) * gu[r, inter + i]
cudaError_t siluMul(const float* gu, int64_t ld_gu, int64_t rows, int64_t inter, float* out, int64_t ld_out,
                    cudaStream_t stream);
// Rotates `rows` rows of q/k in place at positions[r] (HF rotate-half).
cudaError_t rope(float* q, int64_t ld_q, int64_t q_heads, float* k, int64_t ld_k, int64_t k_heads,
                 int64_t head_dim, const int32_t* positions, int64_t rows, const float* inv_freq,
                 int64_t rotary_dim, float scaling, cudaStream_t stream);
// Converts a F32 [rows, cols] view (row stride ld) to contiguous BF16 [rows, cols].
cudaError_t toBf16(const float* x, int64_t ld_x, int64_t rows, int64_t cols, void* out, cudaStream_t stream);

// KV pool geometry as the kernels see it.
struct KvLayout {
  int64_t elems_per_block;  // [layers][2][kv_heads][tpb][head_dim]
  int64_t num_kv_heads;
  int64_t tokens_per_block;
  int64_t head_dim;
};
// Writes k/v rows into the pool (F32 or BF16) of `layer` at slots[r] (block * tpb + offset).
cudaError_t writeKv(void* pool, DType kv_dtype, const KvLayout& g, int64_t layer, const float* k,
                    int64_t ld_k, const float* v, int64_t ld_v, const int64_t* slots, int64_t rows,
                    cudaStream_t stream);

// Paged attention metadata, packed in one int32 device buffer:
//   items  [num_items][2]: (packed q row, sequence index)
//   seqs   [num_seqs][5]:  (q_start, q_len, kv_len, sliding_window, offset of the block table in `tables`)
//   tables [...]:          every sequence's block table, back to back
struct AttentionArgs {
  const float* q;
  int64_t ld_q;
  float* out;
  int64_t ld_out;
  int64_t num_heads;
  float scale;
  int64_t layer;
  const int32_t* items;
  int64_t num_items;
  const int32_t* seqs;
  const int32_t* tables;
};
cudaError_t attention(const void* pool, DType kv_dtype, const KvLayout& g, const AttentionArgs& a,
                      cudaStream_t stream);

}  // namespace llmrt::cuda

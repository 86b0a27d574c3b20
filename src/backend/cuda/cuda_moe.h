// Mixture-of-experts kernels of the CUDA backend (cuda_moe.cu: routing, grouping, the
// matrix-vector path and the combine; cuda_moe_gemm.cu: the grouped products), launched by
// CudaBackend::moeAdd (cuda_backend_moe.cpp). Each launcher enqueues on `stream` and returns the
// launch's error; pointers are device pointers, leading dimensions in elements.
//
// A step's T tokens each pick top_k experts: T * top_k "slots", slot s = t * top_k + k (the k-th
// choice of token t). Two ways through:
//   - grouped products (any step): moeRoute writes every slot's expert and weight and a bitmask
//     per expert of the tokens that chose it; moePlanTiles sorts the slots by expert (in slot order
//     within an expert) and cuts each expert's run into tiles of kMoeTileM slots; moeGemm runs over
//     the tiles (a grid covering the most tiles the step can have; blocks past the step's tiles
//     leave) for act(gate) * up, then the down product, each slot's output weighted into y[slot];
//     moeCombine adds each token's top_k outputs, in top-k order, to the residual.
//   - the matrix-vector path (decode: at most kMoeGemvMaxSlots slots, 16-bit weights): one block
//     routes and groups the slots by expert (moeRouteSmall); moeGemvUp reads each chosen expert's
//     gate and up rows once for all its slots; moeGemvDown reads each chosen expert's down rows once
//     and adds the weighted sums per token, in top-k order, to the residual (no combine kernel).
// Only the chosen experts' weights are read on either way.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"  // Act
#include "core/dtype.h"

namespace llmrt::cuda {

constexpr int kMoeMaxExperts = 1024;
constexpr int kMoeMaxTopK = 64;
constexpr int kMoeTileM = 64;              // slots per tile of the grouped products
constexpr int64_t kMoeGemvMaxSlots = 64;   // the matrix-vector path's most slots per step

// A step's (chunk's) routing inputs: logits [tokens, experts] F32 with row stride ld.
struct MoeRoute {
  const float* logits = nullptr;
  int64_t ld = 0;
  int64_t tokens = 0;
  int32_t experts = 0;
  int32_t top_k = 0;
  bool renormalize = true;
};

// The routing and grouping of a step's slots, in the workspace (S = tokens * top_k).
struct MoePlan {
  int32_t* header = nullptr;       // [0]: tiles (grouped products) or groups (matrix-vector path)
  float* slot_weight = nullptr;    // [S]: each slot's routing weight
  int32_t* sorted_slot = nullptr;  // [S]: the slots by expert, in slot order within an expert
  int32_t* slot_expert = nullptr;  // [S] (grouped products)
  uint32_t* bits = nullptr;        // [experts][ceil(tokens / 32)]: tokens that chose each expert
  int32_t* counts = nullptr;       // [experts]: slots per expert (grouped products)
  int4* tiles = nullptr;           // grouped products: {expert, first sorted row, rows, 0}
  int4* groups = nullptr;          // matrix-vector path: {expert, first sorted row, rows, 0}
};
// The most tiles a step of `slots` slots over `experts` experts can have (the grid's extent).
inline int64_t moeMaxTiles(int64_t slots, int64_t experts) {
  return (slots + kMoeTileM - 1) / kMoeTileM + (experts < slots ? experts : slots);
}

// Routing (softmax in float32, the top_k with ties to the lower expert id, renormalized over the
// chosen when asked), the slots' experts and weights, the per-expert token bitmasks.
cudaError_t moeRoute(const MoeRoute& r, const MoePlan& p, cudaStream_t stream);
// The slots per expert, the sorted slots, the tiles and their count (header[0]), from moeRoute's
// plan (two launches).
cudaError_t moePlanTiles(const MoeRoute& r, const MoePlan& p, cudaStream_t stream);
// Routing and grouping of at most kMoeGemvMaxSlots slots in one block: slot weights, sorted
// slots, the groups (one per chosen expert, in expert order) and their count (header[0]).
cudaError_t moeRouteSmall(const MoeRoute& r, const MoePlan& p, cudaStream_t stream);

// The matrix-vector path. Up: a[slot, i] = act(x[t] . gate_e[i]) * (x[t] . up_e[i]) for every
// slot of every group (t = slot / top_k, e its group's expert); x F32 or w_dtype [tokens, hidden]
// (row stride ld_x), a [S, inter] F32 or w_dtype. Down: residual[t, :] += sum over k in order of
// slot_weight[s] * (a[s] . down_e) with s = t * top_k + k. Weights BF16 or F16; hidden and inter
// multiples of 8; x rows (and a) 16-byte aligned.
struct MoeGemvArgs {
  const void* x = nullptr;
  DType x_dtype = DType::kF32;
  int64_t ld_x = 0;
  const void* w = nullptr;  // up: experts' [gate | up] rows; down: experts' down rows
  DType w_dtype = DType::kBF16;
  int64_t hidden = 0, inter = 0, tokens = 0;
  int32_t top_k = 0;
  int32_t max_groups = 0;  // the grid's groups: min(experts, S)
  const int32_t* header = nullptr;
  const int4* groups = nullptr;
  const int32_t* sorted_slot = nullptr;
  const float* slot_weight = nullptr;
  void* a = nullptr;
  DType a_dtype = DType::kF32;
  Act act = Act::kSilu;
  float* residual = nullptr;
  int64_t ld_res = 0;
  int32_t col_warps = 1;  // (set by moeGemvDown: warps sharing an output column, by groups)
};
cudaError_t moeGemvUp(const MoeGemvArgs& g, cudaStream_t stream);
cudaError_t moeGemvDown(const MoeGemvArgs& g, cudaStream_t stream);

// One grouped product over moePlanTiles' tiles. A's row for sorted row p: gather_k > 0: row
// sorted_slot[p] / gather_k (the token; x), else p (the gated product's output). With a_parts == 2
// (tensor cores only) A is the sum of two 16-bit parts a[0] + a[1] (hi and lo), both multiplied.
//   gated: out[p, c] = act(A[p] . W[e * w_rows + c]) * (A[p] . W[e * w_rows + n + c]), c < n, out by
//          sorted row; on tensor cores in w_dtype (with out_parts == 2 as hi and lo parts), else F32.
//   plain: out[slot, c] = slot_weight[slot] * (A[p] . W[e * w_rows + c]), slot = sorted_slot[p];
//          out F32.
// tensor_cores: W BF16 or F16, A of W's type, kdim and n multiples of 8, rows 16-byte aligned
// (mma.sync m16n8k16, fp32 accumulation); else any of F32, BF16, F16 (CUDA cores, float32).
struct MoeGemm {
  const int32_t* header = nullptr;
  const int4* tiles = nullptr;
  int64_t max_tiles = 0;
  const int32_t* sorted_slot = nullptr;
  const float* slot_weight = nullptr;
  const void* a[2] = {nullptr, nullptr};
  int32_t a_parts = 1;
  DType a_dtype = DType::kF32;
  int64_t ld_a = 0;
  int32_t gather_k = 0;
  const void* w = nullptr;
  DType w_dtype = DType::kF32;
  int64_t w_rows = 0;  // rows per expert
  int64_t kdim = 0;
  int64_t n = 0;
  bool gated = false;
  Act act = Act::kSilu;
  void* out[2] = {nullptr, nullptr};
  int32_t out_parts = 1;
  int64_t ld_out = 0;
};
cudaError_t moeGemm(const MoeGemm& g, bool tensor_cores, cudaStream_t stream);

// residual[t, c] += sum over k in order of y[t * top_k + k, c] (y [tokens * top_k, hidden] F32).
cudaError_t moeCombine(const float* y, int64_t tokens, int64_t hidden, int32_t top_k, float* residual,
                       int64_t ld_res, cudaStream_t stream);

#ifdef __CUDACC__
// transformers' ACT2FN functions in float32 (as cuda_arch_ops.cu and the CPU reference).
__device__ __forceinline__ float moeActivate(Act a, float x) {
  switch (a) {
    case Act::kSilu:
      return x / (1.0f + expf(-x));
    case Act::kGelu:
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case Act::kGeluTanh:
      return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    default:
      return x > 0.0f ? x : 0.0f;
  }
}
#endif

}  // namespace llmrt::cuda

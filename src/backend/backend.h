// The backend interface: the numerical ops a model is composed of, over tensor
// views, plus the paged KV cache pool. The CPU backend (backend/cpu) is the
// readable reference; the CUDA backend implements the same interface and is
// checked against it. Kernels know nothing of requests: attention receives
// per-sequence lengths and block tables, nothing more.
//
// Conventions: activations are row-major [tokens, features]; `linear` weights
// are [out_features, in_features] as HF stores them (y = x W^T + b).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "llmrt/status.h"

namespace llmrt {

// Geometry of the paged KV pool. One block holds `tokens_per_block` tokens of
// every layer: [layers][2 (K,V)][kv_heads][tokens_per_block][head_dim].
struct KvPoolGeometry {
  int64_t num_blocks = 0;
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t tokens_per_block = 0;
  DType dtype = DType::kF32;

  int64_t elementsPerBlock() const { return num_layers * 2 * num_kv_heads * tokens_per_block * head_dim; }
  size_t bytesPerBlock() const { return static_cast<size_t>(elementsPerBlock()) * dtypeSize(dtype); }
};

// Rotary embedding parameters for one group of tokens (one sequence, or all).
struct RopeParams {
  const float* inv_freq = nullptr;  // [rotary_dim / 2]
  int64_t rotary_dim = 0;           // <= head_dim; the first rotary_dim features rotate
  float attention_scaling = 1.0f;   // multiplies cos and sin (yarn)
};

// One sequence's slice of a packed attention call.
struct AttentionSeq {
  int64_t q_start = 0;     // first row of this sequence in the packed q/out tensors
  int64_t q_len = 0;       // new tokens this step
  int64_t kv_len = 0;      // tokens in the cache after this step (cached + new); new ones are the last q_len
  const int32_t* block_table = nullptr;  // block ids covering positions [0, kv_len) in order
  int64_t sliding_window = 0;            // 0 = full attention; else a query at p sees keys (p-W, p]
};

// A block copy between pools (offload / onboard / partial-reuse copy).
enum class KvPoolKind : uint8_t { kPrimary, kSecondary };
struct KvBlockCopy {
  KvPoolKind src_pool = KvPoolKind::kPrimary;
  int32_t src_block = 0;
  KvPoolKind dst_pool = KvPoolKind::kPrimary;
  int32_t dst_block = 0;
  int32_t num_tokens = -1;  // -1: the whole block; else the first num_tokens token slots
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  virtual int numThreads() const = 0;

  // ---- memory ---------------------------------------------------------------
  // Memory left for the KV cache after what is already allocated (bytes).
  virtual uint64_t freeMemoryBytes() const = 0;
  virtual uint64_t totalMemoryBytes() const = 0;

  // ---- weights --------------------------------------------------------------
  // Makes a weight usable by this backend's ops: the parts (same trailing
  // shape, any float dtype, host memory) are concatenated along dim 0 and
  // stored in the backend's compute dtype. The view stays valid for the
  // backend's lifetime. A single F32 part may be used in place (zero copy).
  virtual Result<TensorView> loadWeight(std::span<const TensorView> parts, const std::string& name) = 0;
  virtual uint64_t weightBytes() const = 0;

  // ---- activations ----------------------------------------------------------
  // Returns a F32 scratch tensor [rows, cols] in the backend's memory; `slot`
  // names a buffer reused across calls (grown when too small).
  virtual TensorView scratch(int slot, int64_t rows, int64_t cols) = 0;

  // ---- host transfers -------------------------------------------------------
  // Copies a F32 2-D view (rows may be strided) of this backend's memory to
  // `dst`, row after row ([rows * cols] floats). Waits until the data is on the host.
  virtual Status copyToHost(const TensorView& src, float* dst) = 0;
  // Copies `src` ([rows * cols] floats, row after row) into a F32 2-D view of
  // this backend's memory.
  virtual Status copyFromHost(const float* src, TensorView dst) = 0;

  // ---- KV cache pools -------------------------------------------------------
  // Allocates the primary (and, with secondary_blocks > 0, host) pools.
  virtual Status allocateKvPools(const KvPoolGeometry& primary, int64_t secondary_blocks) = 0;
  virtual const KvPoolGeometry& kvGeometry() const = 0;
  virtual Status copyKvBlocks(std::span<const KvBlockCopy> copies) = 0;
  // The KV dtype this backend stores by default (what the engine sizes the pools with).
  virtual DType preferredKvDtype() const { return DType::kF32; }
  // Reads one block of a pool as float32 ([layers][2][kv_heads][tokens_per_block][head_dim]
  // into `dst`, geometry().elementsPerBlock() floats). For tests and debugging.
  virtual Status readKvBlock(KvPoolKind pool, int32_t block, float* dst) = 0;

  // ---- ops ------------------------------------------------------------------
  // out[i, :] = table[ids[i], :]  (table any float dtype, out F32)
  virtual void embedding(const TensorView& table, std::span<const int32_t> ids, TensorView out) = 0;
  // out = x / rms(x) * weight, per row
  virtual void rmsNorm(const TensorView& x, const TensorView& weight, float eps, TensorView out) = 0;
  // residual += x; out = rmsNorm(residual)
  virtual void addRmsNorm(TensorView residual, const TensorView& x, const TensorView& weight, float eps,
                          TensorView out) = 0;
  // out = x W^T (+ bias); x [n, in], W [out, in], out [n, out]
  virtual void linear(const TensorView& x, const TensorView& weight, const TensorView* bias, TensorView out) = 0;
  // x += y
  virtual void add(TensorView x, const TensorView& y) = 0;
  // out[i, :] = src[rows[i], :]
  virtual void gatherRows(const TensorView& src, std::span<const int64_t> rows, TensorView out) = 0;
  // gate_up [n, 2*i] = [gate | up] -> out [n, i] = silu(gate) * up
  virtual void siluMul(const TensorView& gate_up, TensorView out) = 0;
  // Rotates rows [row_begin, row_end) of q [n, heads*head_dim] and k [n, kv_heads*head_dim] in place
  // (HF rotate-half layout) at the given positions.
  virtual void rope(TensorView q, TensorView k, int64_t head_dim, std::span<const int32_t> positions,
                    int64_t row_begin, int64_t row_end, const RopeParams& params) = 0;
  // Writes k/v rows into the primary pool of `layer` at the slots (block*tpb + offset) given per row.
  virtual void writeKv(int64_t layer, const TensorView& k, const TensorView& v, std::span<const int64_t> slots) = 0;
  // Paged attention over the primary pool for `layer`: q [n, heads*head_dim] -> out [n, heads*head_dim].
  virtual void attention(int64_t layer, const TensorView& q, int64_t num_heads, std::span<const AttentionSeq> seqs,
                         float scale, TensorView out) = 0;
};

}  // namespace llmrt

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
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/row_sampling.h"
#include "core/kv_block_copy.h"
#include "core/tensor.h"
#include "llmrt/model_config.h"  // Activation
#include "llmrt/status.h"

namespace llmrt {

class Communicator;  // backend/comm/communicator.h

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

// A block-table entry of a block the KV cache manager released (it left every layer's
// sliding window; the manager's kNoBlock). Allowed only where no row of the step reads it
// (StepInputs::attention_window); attention never reads it.
inline constexpr int32_t kNoKvBlock = -1;

// One sequence of a step: its rows in the packed batch and its cache.
struct StepSeq {
  int64_t q_start = 0;                   // first row of this sequence in the packed activations
  int64_t q_len = 0;                     // new tokens this step
  int64_t kv_len = 0;                    // tokens in the cache after this step (cached + new); new ones are the last q_len
  // Block ids covering positions [0, kv_len) in order; kNoKvBlock for blocks wholly below
  // every row's window (see StepInputs::attention_window).
  std::span<const int32_t> block_table;
  int32_t rope_table = 0;                // which of StepInputs::rope_inv_freq's tables rotates its tokens
};

// A token of the step that the step before it produced and only the backend holds
// yet (overlapped steps): token_ids[row] is replaced by token `src` of the most
// recent argmaxRowsAsync or sampleRowsAsync result.
struct FedToken {
  int32_t row = 0;
  int32_t src = 0;
};

// What the ops of one forward pass share: token ids, positions, cache slots,
// the sequences' block tables, the logits rows and the RoPE tables. Handed to
// Backend::beginStep once per forward (the GPU backend uploads it in one copy);
// the backend keeps its own copy, so the caller's memory may go away afterwards.
struct StepInputs {
  std::span<const int32_t> token_ids;   // [T] packed new tokens of all sequences
  std::span<const int32_t> positions;   // [T] position of each token in its sequence
  std::span<const int64_t> slots;       // [T] cache slot (block * tokens_per_block + offset); < 0: not written
  std::span<const StepSeq> seqs;        // every row belongs to exactly one sequence
  std::span<const int64_t> logit_rows;  // rows gatherLogitRows picks, in order
  std::span<const FedToken> fed_tokens;  // rows whose id comes from the previous step's result, argmax or sampled (their token_ids entry is ignored)
  // RoPE: `num tables` tables of rotary_dim / 2 inverse frequencies, back to back
  // (one for the model, or one per sequence where the scaling depends on length).
  std::span<const float> rope_inv_freq;
  int64_t rotary_dim = 0;               // <= head_dim; the first rotary_dim features rotate
  float rope_attention_scaling = 1.0f;  // multiplies cos and sin (yarn)
  // The widest sliding window any attention op of this step uses (tokens; 0 = some op attends
  // fully). A row at position p then reads no key below p - attention_window + 1, so block
  // tables may hold kNoKvBlock for blocks wholly below their sequence's first row's window;
  // attention ops of the step must use windows in [1, attention_window] when any table does.
  int64_t attention_window = 0;
};

// What attention adds to the scaled scores of a model, the same for every layer; set once
// after the weights (setAttentionExtras). Defaults: nothing.
struct AttentionExtras {
  // Gemma-2: score = cap * tanh(score / cap) after scaling, before the mask and softmax.
  float logit_softcap = 0.0f;
  // ALiBi: score of query head h at position p for key j += slopes[h] * (j - p) (<= 0); empty = none.
  std::vector<float> alibi_slopes;
  bool empty() const { return logit_softcap == 0.0f && alibi_slopes.empty(); }
};

// How a mixture-of-experts layer picks experts for a token: the top_k of softmax(router logits)
// (float32; ties: the lower expert id first), their probabilities renormalized to sum 1 when
// `renormalize` (Mixtral; Qwen2-MoE's norm_topk_prob).
struct MoeRouting {
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool renormalize = true;
};

// A row-quantized activation view (dtype F8_E4M3 or I8, as Backend::productInputDtype names it):
// the rows' codes at data (row stride the view's), then one float32 scale per row at this byte
// offset, so that a row's values are its codes times its scale (core/fp8.h, core/int8.h). A
// backend's scratch() of such a dtype has room for both.
inline int64_t rowQuantizedScalesOffset(int64_t rows, int64_t row_stride) {
  return (rows * row_stride + 255) / 256 * 256;
}
inline float* rowQuantizedScales(const TensorView& t) {
  const int64_t rows = t.shape.rank() >= 2 ? t.shape[0] : 1;
  const int64_t stride = t.shape.rank() >= 2 ? t.strides[0] : t.shape[0];
  return reinterpret_cast<float*>(static_cast<uint8_t*>(t.data) + rowQuantizedScalesOffset(rows, stride));
}
inline bool isRowQuantized(DType d) { return d == DType::kF8E4M3 || d == DType::kI8; }

// Block copies between pools (offload / onboard / partial-reuse copy): KvPool and
// KvBlockCopy (core/kv_block_copy.h), the type the KV cache manager queues.

// Where a backend's memory is (bytes); zeros for what a backend does not have.
struct BackendMemoryStats {
  uint64_t weights = 0;
  uint64_t kv_primary = 0;          // the primary KV pool
  uint64_t kv_secondary = 0;        // the host-memory KV pool (pinned on CUDA)
  uint64_t workspace_reserved = 0;  // activations, step metadata, workspaces: held by the backend's pool
  uint64_t workspace_used = 0;      // of which in use now
  uint64_t workspace_peak = 0;      // the most ever in use
  uint64_t device_free = 0;         // the device's free memory now
  uint64_t device_total = 0;
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
  virtual BackendMemoryStats memoryStats() const { return {}; }

  // ---- weights --------------------------------------------------------------
  // Makes a weight usable by this backend's ops: the parts (same trailing
  // shape, any float dtype, host memory) are concatenated along dim 0 and
  // stored in the backend's compute dtype. The view stays valid for the
  // backend's lifetime. A single F32 part may be used in place (zero copy).
  // The copy may still be in flight when it returns (the CUDA backend streams
  // weights through pinned staging buffers): call finishWeights() after the last
  // one and before using any; it waits for the copies, frees the staging memory
  // and reports a failed copy. `borrowable`: the parts' memory outlives the backend (a mapped
  // checkpoint), so it may be used in place; false for copies the caller frees afterwards.
  virtual Result<TensorView> loadWeight(std::span<const TensorView> parts, const std::string& name,
                                        bool borrowable = true) = 0;
  virtual Status finishWeights() { return Status::ok(); }
  virtual uint64_t weightBytes() const = 0;

  // ---- 8-bit products (W8A8: float8 E4M3 or INT8 codes) --------------------------
  // Whether loadQuantizedWeight takes codes of this dtype (F8_E4M3 or I8) here (then linear,
  // linearAdd and linearAddNormLinear take its weights).
  virtual bool supportsQuantizedWeights(DType codes) const {
    (void)codes;
    return false;
  }
  // A product weight of 8-bit codes [out, in] (F8_E4M3 or I8) and one float32 scale per row
  // (scales [out]), both in host memory: W = code * scale. The view returned (the codes' dtype,
  // shape [out, in]) names the weight for this backend's products; its memory is in the backend's
  // own layout (scales included), read by nothing else. A product with it quantizes each row of x
  // per token, dynamically, by the codes' rule (core/fp8.h: scale_x = amax / 448; core/int8.h:
  // scale_x = amax / 127) and computes out = float(codes_x . codes_w) * (scale_x * scale_w)
  // (+ bias): FP8 code products summed in float32, INT8 ones in int32 (exact: every backend gets
  // the same sums, and the same outputs from them).
  virtual Result<TensorView> loadQuantizedWeight(const TensorView& codes, const TensorView& scales,
                                                 const std::string& name) {
    (void)codes;
    (void)scales;
    return unimplemented("loadQuantizedWeight(" + name + "): backend " + this->name() +
                         " has no 8-bit products");
  }

  // ---- 4-bit weights (W4A16: AWQ's asymmetric int4 groups) ---------------------------
  // A product weight W[i][j] = float(code[i][j] - zero[i][j / group]) * scale[i][j / group]
  // (float32 math, as AutoAWQ dequantizes): codes [out, in] (U8, values 0..15), scales
  // [out, in / group] (F32), zeros [out, in / group] (U8, 0..15), in host memory; in % group == 0.
  // The view returned names the weight for this backend's products: a backend without 4-bit
  // products (the default) returns the dequantized weight from loadWeight (F32 parts); one with
  // them returns a view of dtype U8 and shape [out, in] in its own layout, which its products
  // take as that W times 16-bit (or float32) activations.
  virtual Result<TensorView> loadInt4Weight(const TensorView& codes, const TensorView& scales,
                                            const TensorView& zeros, int64_t group, const std::string& name);

  // ---- activations ----------------------------------------------------------
  // Returns a scratch tensor [rows, cols] of `dtype` in the backend's memory; `slot`
  // names a buffer reused across calls (grown when too small). Every backend
  // supports F32; other dtypes only where activationDtype() names them (else the
  // view's data is null).
  virtual TensorView scratch(int slot, int64_t rows, int64_t cols, DType dtype = DType::kF32) = 0;
  // The dtype the model may use for the inputs of its products and what feeds
  // them: normed rows (rmsNorm out), siluMul in/out, attention out and
  // linear in/out. The residual stream, q/k/v, logits and every other operand stay
  // F32. The CPU reference is F32 throughout; the CUDA backend uses BF16 with bf16
  // weights (what the tensor cores read), halving that traffic.
  virtual DType activationDtype() const { return DType::kF32; }
  // The dtype the input of a product with weights `w` is best written in by the op that produces
  // it (rmsNorm, siluMul, gatedActivation, activation): activationDtype() (this default), or for
  // 8-bit products (loadQuantizedWeight) their code type, F8_E4M3 or I8, on a backend whose
  // ops write quantized rows (rowQuantizedScales), so the product skips its own quantization of
  // x. Either way the product's output has the same bits: the op rounds each value to
  // activationDtype() first and quantizes the rounded row as the product would.
  virtual DType productInputDtype(const TensorView& w) const {
    (void)w;
    return activationDtype();
  }

  // ---- host transfers -------------------------------------------------------
  // Copies a 2-D view (rows may be strided; F32, or activationDtype()) of this
  // backend's memory to `dst` as floats, row after row ([rows * cols] floats).
  // Waits until the data is on the host.
  virtual Status copyToHost(const TensorView& src, float* dst) = 0;
  // Copies `src` ([rows * cols] floats, row after row) into a 2-D view (F32, or
  // activationDtype(), rounded) of this backend's memory.
  virtual Status copyFromHost(const float* src, TensorView dst) = 0;

  // Makes this backend's device the calling thread's current one (a thread using a backend that
  // another thread created: tensor-parallel ranks).
  virtual Status bindThread() { return Status::ok(); }

  // ---- collectives of a tensor-parallel group (DecoderModelOptions::comm) ---------
  // Each rank calls them in the same order with equal shapes (communicator.h's contract). The
  // default bodies exchange through the host with comm's collectives and wait; a backend whose
  // communicators work on its memory enqueues them (CUDA: recorded into its graphs).
  // t (2-D F32 view) = the sum over ranks of their t, in rank order: the same bits on every rank.
  virtual Status allReduceSum(Communicator& comm, TensorView t);
  // out[:, p * c + j] = rank p's local[:, j] for local [rows, c] and out [rows, size * c] (F32).
  virtual Status allGatherColumns(Communicator& comm, const TensorView& local, TensorView out);

  // ---- KV cache pools -------------------------------------------------------
  // Allocates the primary (and, with secondary_blocks > 0, host) pools.
  virtual Status allocateKvPools(const KvPoolGeometry& primary, int64_t secondary_blocks) = 0;
  virtual const KvPoolGeometry& kvGeometry() const = 0;
  virtual Status copyKvBlocks(std::span<const KvBlockCopy> copies) = 0;
  // An FP8 pool (KvPoolGeometry::dtype F8_E4M3): the scales of K and V of every layer,
  // [layer][K, V] (core/fp8.h's Fp8KvScale rule; each positive and finite). Every scale is 1 until
  // set; a new geometry keeps them. Other pools ignore them.
  virtual Status setKvCacheScales(std::span<const float> scales) = 0;
  // Reads one block of a pool as float32 ([layers][2][kv_heads][tokens_per_block][head_dim]
  // into `dst`, geometry().elementsPerBlock() floats). For tests and debugging.
  virtual Status readKvBlock(KvPool pool, int32_t block, float* dst) = 0;

  // ---- steps ----------------------------------------------------------------
  // Sizes the activation workspace for steps of up to `max_tokens` tokens and
  // matrices up to `max_width` columns, so a step within those bounds never
  // allocates. Optional: backends grow on demand without it.
  virtual Status reserveWorkspace(int64_t max_tokens, int64_t max_width) {
    (void)max_tokens;
    (void)max_width;
    return Status::ok();
  }
  // Hands over the step's shared inputs (see StepInputs); the ops below that
  // read token ids, positions, slots, sequences or logits rows use the last
  // step begun. Fails on inconsistent inputs (a row outside every sequence, a
  // block table too short, ...).
  virtual Status beginStep(const StepInputs& inputs) = 0;
  // Runs `body`, a sequence of ops with no host transfers, and returns. A
  // backend that can record (CUDA graphs) records it the first time a `key`
  // is seen with the same step layout and replays the record afterwards, so
  // `body` must enqueue the same ops with the same arguments every time it is
  // run under one key; inputs may change only through beginStep.
  virtual void recordOrReplay(uint64_t key, const std::function<void()>& body) {
    (void)key;
    body();
  }
  virtual bool canRecord() const { return false; }
  // Device time of the steps so far, summed: from each beginStep's first upload to the step's
  // results (argmax, samples or logits) being copied back. Beside the host's wall time of the
  // steps it shows how long the device waited for the host. 0 where the backend does not measure.
  virtual double deviceStepSeconds() const { return 0.0; }

  // ---- ops ------------------------------------------------------------------
  // out[i, :] = table[token_ids[i], :] for the step's tokens (table any float dtype, out F32)
  virtual void embedding(const TensorView& table, TensorView out) = 0;
  // out = x / rms(x) * weight, per row
  virtual void rmsNorm(const TensorView& x, const TensorView& weight, float eps, TensorView out) = 0;
  // out = x W^T (+ bias); x [n, in], W [out, in], out [n, out]
  virtual void linear(const TensorView& x, const TensorView& weight, const TensorView* bias, TensorView out) = 0;
  // residual += x W^T (+ bias); residual F32 [n, out]. What linear into a temporary and add do,
  // without the temporary where the backend can add in the product (the CUDA backend does).
  virtual void linearAdd(const TensorView& x, const TensorView& weight, const TensorView* bias,
                         TensorView residual) = 0;
  // A residual product followed by a product of the RMS-normed residual, as Llama blocks chain
  // them (o -> gate|up, down -> the next q/k/v): residual += x W1^T (+ b1); normed = rmsNorm(residual)
  // * norm_weight; out = normed W2^T (+ b2). What linearAdd, rmsNorm and linear do one after another
  // (this default). `normed` is scratch of the activation dtype: a backend splitting the norm over
  // the two products (the CUDA backend for decode-sized steps) leaves other values in it; its
  // `out` is still the three ops' (on the CUDA backend, to the bit).
  virtual void linearAddNormLinear(const TensorView& x, const TensorView& w1, const TensorView* b1,
                                   TensorView residual, const TensorView& norm_weight, float eps, TensorView normed,
                                   const TensorView& w2, const TensorView* b2, TensorView out) {
    linearAdd(x, w1, b1, residual);
    rmsNorm(residual, norm_weight, eps, normed);
    linear(normed, w2, b2, out);
  }
  // out = (x - mean) / sqrt(var + eps) * weight (+ bias), per row, statistics in float32
  // (HF nn.LayerNorm). x F32; weight, bias [cols]; out F32 or the activation dtype.
  virtual void layerNorm(const TensorView& x, const TensorView& weight, const TensorView* bias, float eps,
                         TensorView out) = 0;
  // out = act(x) element-wise; x and out [n, i], F32 or the activation dtype (MLPs without a gate).
  virtual void activation(Activation act, const TensorView& x, TensorView out) = 0;
  // out = act(x W^T (+ bias)): the product into `tmp` (scratch [n, out_features], F32 or the
  // activation dtype), then activation() into out (this default). A backend applying the activation in the
  // product's epilogue (the CUDA backend's matrix-vector kernel) leaves tmp unused; its out is the two ops'
  // to the bit.
  virtual void linearActivation(Activation act, const TensorView& x, const TensorView& weight,
                                const TensorView* bias, TensorView tmp, TensorView out) {
    linear(x, weight, bias, tmp);
    activation(act, tmp, out);
  }
  // gate_up [n, 2*i] = [gate | up] -> out [n, i] = act(gate) * up. siluMul is act = kSilu.
  virtual void gatedActivation(Activation act, const TensorView& gate_up, TensorView out) = 0;
  // x[i, :] += table[positions[i], :] at the step's positions (learned absolute positions, GPT-2);
  // table any float dtype, x F32.
  virtual void addPositionEmbedding(const TensorView& table, TensorView x) = 0;
  // residual += y; residual F32, y F32 or the activation dtype, both [n, cols].
  virtual void add(const TensorView& y, TensorView residual) = 0;
  // x = x * scale, then with cap > 0 x = cap * tanh(x / cap); in place, F32 (embedding
  // multipliers, final logit soft-capping).
  virtual void scaleSoftcap(TensorView x, float scale, float cap) = 0;
  // Mixture of experts: residual[t] += sum over the experts e chosen for token t (MoeRouting) of
  // p[t, e] * down_e(act(gate_e(x[t])) * up_e(x[t])). x [T, hidden] (F32 or the activation dtype);
  // router_logits [T, num_experts] F32; experts_gate_up [num_experts * 2 * inter, hidden], expert
  // e's rows [gate | up] from e * 2 * inter; experts_down [num_experts * hidden, inter], expert e's
  // rows from e * hidden; residual F32. Only the chosen experts' weights are read.
  virtual void moeAdd(const TensorView& x, const TensorView& router_logits, const TensorView& experts_gate_up,
                      const TensorView& experts_down, const MoeRouting& routing, Activation act,
                      TensorView residual) = 0;
  // residual[t, :] += sigmoid(gate[t]) * y[t, :]; gate [T, 1] F32, y [T, cols] F32 (Qwen2-MoE's
  // shared expert).
  virtual void sigmoidGatedAdd(const TensorView& y, const TensorView& gate, TensorView residual) = 0;
  // The model's attention extras (see AttentionExtras) for every later attention op. A backend
  // without them fails here with a message naming what it lacks.
  virtual Status setAttentionExtras(const AttentionExtras& extras) = 0;
  // out[i, :] = src[logit_rows[i], :] for the step's logits rows
  virtual void gatherLogitRows(const TensorView& src, TensorView out) = 0;
  // gate_up [n, 2*i] = [gate | up] -> out [n, i] = silu(gate) * up
  virtual void siluMul(const TensorView& gate_up, TensorView out) = 0;
  // Rotates every row of q [T, heads*head_dim] and k [T, kv_heads*head_dim] in place at the
  // step's positions (HF rotate-half layout, each sequence with its RoPE table), then writes
  // the rotated k and v [T, kv_heads*head_dim] into the primary pool of `layer` at the step's slots.
  virtual void ropeWriteKv(int64_t layer, TensorView q, TensorView k, const TensorView& v, int64_t head_dim) = 0;
  // Paged attention over the primary pool for `layer` and the step's sequences:
  // q [T, heads*head_dim] -> out [T, heads*head_dim]. Causal; with sliding_window W > 0
  // a query at position p sees keys (p - W, p]. Keys below that are never read (their blocks
  // may be released, kNoKvBlock); where the step's tables hold released blocks, W must be in
  // [1, StepInputs::attention_window] (the CUDA backend fails the step otherwise).
  virtual void attention(int64_t layer, const TensorView& q, int64_t num_heads, int64_t sliding_window,
                         float scale, TensorView out) = 0;
  // ropeWriteKv then attention (this default). The pool and `out` end as the two ops leave them;
  // q's contents afterwards are unspecified (the CUDA backend, for decode steps, rotates q as its
  // attention kernel reads it and leaves the buffer unrotated; to the bit the same `out`).
  virtual void ropeAttention(int64_t layer, TensorView q, TensorView k, const TensorView& v, int64_t head_dim,
                             int64_t num_heads, int64_t sliding_window, float scale, TensorView out) {
    ropeWriteKv(layer, q, k, v, head_dim);
    attention(layer, q, num_heads, sliding_window, scale, out);
  }

  // ---- sampling help ----------------------------------------------------------
  // Whether argmaxRows runs on the backend (saves copying logits to the host).
  virtual bool hasArgmax() const { return false; }
  // out[r] = argmax of logits row r (ties: the lowest id), or -1 where the row holds a NaN
  // or +inf or nothing finite (the host sampler then reports it). Waits until the ids are on the host.
  virtual Status argmaxRows(const TensorView& logits, int32_t* out) {
    (void)logits;
    (void)out;
    return unimplemented("argmaxRows: not supported by backend " + name());
  }
  // Overlapped steps: the argmax of every row (as argmaxRows) is started and the call
  // returns without waiting. The ids stay with the backend, where the next step's
  // StepInputs::fed_tokens read them (fed from the most recent argmaxRowsAsync or
  // sampleRowsAsync), and their copy to the host is collected with
  // waitArgmax(ticket). The two most recent results are kept: a step may be launched
  // before the previous step's ids are collected.
  virtual Result<uint64_t> argmaxRowsAsync(const TensorView& logits) {
    (void)logits;
    return unimplemented("argmaxRowsAsync: not supported by backend " + name());
  }
  // Waits for the ids of argmaxRowsAsync's `ticket` (one of the two most recent) and
  // copies them to `out` (as many as that call had rows).
  virtual Status waitArgmax(uint64_t ticket, int32_t* out) {
    (void)ticket;
    (void)out;
    return unimplemented("waitArgmax: not supported by backend " + name());
  }
  // Overlapped steps with sampling: as sampleRows, but returns at once with a ticket from the
  // same sequence as argmaxRowsAsync's (the latest result of either feeds the next step's
  // fed tokens); waitSamples(ticket, out) waits for the rows (out.size() == rows.size()).
  virtual Result<uint64_t> sampleRowsAsync(TensorView logits, std::span<const RowSampling> rows,
                                           std::span<const PenaltyToken> penalties,
                                           std::span<const int32_t> masked) {
    (void)logits;
    (void)rows;
    (void)penalties;
    (void)masked;
    return unimplemented("sampleRowsAsync: not supported by backend " + name());
  }
  virtual Status waitSamples(uint64_t ticket, std::span<RowSample> out) {
    (void)ticket;
    (void)out;
    return unimplemented("waitSamples: not supported by backend " + name());
  }
  // Whether sampleRows should sample these rows of a `vocab`-wide step (the backend knows
  // when the host would be faster).
  virtual bool samplesRows(std::span<const RowSampling> rows, int64_t vocab) const {
    (void)rows;
    (void)vocab;
    return false;
  }
  // Samples one token per logits row (F32 [rows.size(), vocab]) as the host Sampler
  // does for the same inputs: penalties and masks (written into `logits` in place),
  // greedy or temperature / top-k / top-p / min-p with the Philox uniform of
  // (seed, step, sample_index), logprobs. Only `out` comes back to the host; a row
  // that fails reports it in its RowSample::error. Waits until `out` is on the host.
  virtual Status sampleRows(TensorView logits, std::span<const RowSampling> rows,
                            std::span<const PenaltyToken> penalties, std::span<const int32_t> masked,
                            std::span<RowSample> out) {
    (void)logits;
    (void)rows;
    (void)penalties;
    (void)masked;
    (void)out;
    return unimplemented("sampleRows: not supported by backend " + name());
  }
};

}  // namespace llmrt

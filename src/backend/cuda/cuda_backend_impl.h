// CudaBackend: the Backend interface on one CUDA device. Internal to
// src/backend/cuda (it includes CUDA headers); others use cuda_backend.h.
//
// Everything runs in order on one stream. A step's metadata (token ids,
// positions, slots, sequences, block tables, RoPE tables, attention work
// lists) is packed by beginStep into a pinned host buffer and uploaded with one
// asynchronous copy into a device buffer the ops read (StepUploader). recordOrReplay captures
// a step's ops into a CUDA graph per (key, layout) and replays it; any buffer
// reallocation drops the graphs (their pointers would dangle; GraphCache). Ops return void
// (the Backend interface): the first CUDA error is kept in `error_` (with file and line), later ops are
// skipped, and the next call that returns a Status (copyToHost, copyKvBlocks,
// ...) reports it. Every resource is held by an owning handle (cuda_handles.h) in a unit of its
// own (weights staging, step upload, result slots, graphs, KV pools, step timing); the members'
// order of declaration is the order of teardown, reversed (see the members).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_graph_cache.h"
#include "backend/cuda/cuda_handles.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_kv_pools.h"
#include "backend/cuda/cuda_profiler.h"
#include "backend/cuda/cuda_result_slots.h"
#include "backend/cuda/cuda_status.h"
#include "backend/cuda/cuda_step_timer.h"
#include "backend/cuda/cuda_step_uploader.h"
#include "backend/cuda/cuda_weight_stager.h"

namespace llmrt {

// The kernels' activation enum for the model's (the same functions, cuda_kernels.h).
inline cuda::Act toCudaAct(Activation a) {
  switch (a) {
    case Activation::kSilu: return cuda::Act::kSilu;
    case Activation::kGelu: return cuda::Act::kGelu;
    case Activation::kGeluTanh: return cuda::Act::kGeluTanh;
    case Activation::kRelu: return cuda::Act::kRelu;
  }
  return cuda::Act::kSilu;
}

// A 2-D view's rows, columns and row stride (a 1-D view is one row).
inline int64_t viewRows(const TensorView& t) { return t.shape.rank() >= 2 ? t.shape[0] : 1; }
inline int64_t viewCols(const TensorView& t) { return t.shape.rank() >= 1 ? t.shape[t.shape.rank() - 1] : 1; }
inline int64_t viewRowStride(const TensorView& t) { return t.shape.rank() >= 2 ? t.strides[0] : viewCols(t); }

// Opens cuBLAS and cuBLASLt (cuda_blas_loader.cpp); FailedPrecondition naming the library when
// it cannot be loaded. Idempotent.
Status loadCublasLibraries();

// In void ops: records the first error in error_ and leaves the op.
#define LLMRT_CUDA_OP_CHECK(expr)                                            \
  do {                                                                       \
    const cudaError_t llmrt_cuda_err_ = (expr);                              \
    if (llmrt_cuda_err_ != cudaSuccess) {                                    \
      fail(::llmrt::cudaStatus(llmrt_cuda_err_, #expr, __FILE__, __LINE__)); \
      return;                                                                \
    }                                                                        \
  } while (0)

#define LLMRT_CUBLAS_OP_CHECK(expr)                                              \
  do {                                                                           \
    const cublasStatus_t llmrt_cublas_err_ = (expr);                             \
    if (llmrt_cublas_err_ != CUBLAS_STATUS_SUCCESS) {                            \
      fail(::llmrt::cublasStatus(llmrt_cublas_err_, #expr, __FILE__, __LINE__)); \
      return;                                                                    \
    }                                                                            \
  } while (0)

class CudaBackend final : public Backend {
 public:
  ~CudaBackend() override;
  // Sets up the device, streams, pool and cuBLAS handles.
  static Result<std::unique_ptr<CudaBackend>> create(const CudaBackendOptions& options);

  std::string name() const override { return "cuda"; }
  Device device() const override { return Device::kCuda; }
  int numThreads() const override { return 1; }

  uint64_t freeMemoryBytes() const override;
  uint64_t totalMemoryBytes() const override;
  BackendMemoryStats memoryStats() const override;

  Result<TensorView> loadWeight(std::span<const TensorView> parts, const std::string& name,
                                bool borrowable = true) override;
  Status finishWeights() override;
  uint64_t weightBytes() const override { return weight_bytes_; }
  // 8-bit weights (FP8 or INT8 codes): the codes (rows padded with zeros to a multiple of 16),
  // then (at the next 256-byte boundary) the row scales, in one allocation (fp8RowScales).
  // Products: activation rows quantized by one kernel, then the tensor-core matrix-vector kernel
  // (up to tuning fp8_gemv_rows rows) or cuBLASLt's 8-bit GEMM: FP8 with both scale vectors in
  // its epilogue where cuBLASLt can, INT8 into int32 sums and a scaling kernel (cuda_fp8.cu,
  // cuda_gemm.h).
  bool supportsQuantizedWeights(DType codes) const override {
    return codes == DType::kF8E4M3 || codes == DType::kI8;
  }
  Result<TensorView> loadQuantizedWeight(const TensorView& codes, const TensorView& scales, const std::string& name) override;
  // 4-bit weights (W4A16): codes packed 8 to a uint32 along k, then (256-byte aligned) the scales
  // [n, k / group] and the zero terms (2^23 + zero) [n, k / group], float32, in one allocation;
  // the view is U8 [n, k]. Products: the W4A16 matrix-vector kernels (cuda::int4GemvSupported),
  // else the weight dequantized into a 16-bit buffer for cuBLASLt (cuda_int4.cu).
  Result<TensorView> loadInt4Weight(const TensorView& codes, const TensorView& scales, const TensorView& zeros,
                                    int64_t group, const std::string& name) override;
  TensorView scratch(int slot, int64_t rows, int64_t cols, DType dtype = DType::kF32) override;
  DType activationDtype() const override { return activation_dtype_; }
  DType productInputDtype(const TensorView& w) const override;
  Status copyToHost(const TensorView& src, float* dst) override;
  Status copyFromHost(const float* src, TensorView dst) override;
  Status bindThread() override;
  // With a CudaCommunicator: enqueued on the stream (recorded into graphs); else Backend's.
  Status allReduceSum(Communicator& comm, TensorView t) override;
  Status allGatherColumns(Communicator& comm, const TensorView& local, TensorView out) override;
  // What a collective reports once the backend failed (cuda_backend_collectives.cpp).
  Status recordingFailed() const;

  Status allocateKvPools(const KvPoolGeometry& primary, int64_t secondary_blocks) override;
  const KvPoolGeometry& kvGeometry() const override { return kv_.geometry(); }
  Status copyKvBlocks(std::span<const KvBlockCopy> copies) override;
  Status readKvBlock(KvPool pool, int32_t block, float* dst) override;
  Status setKvCacheScales(std::span<const float> scales) override;

  Status reserveWorkspace(int64_t max_tokens, int64_t max_width) override;
  Status beginStep(const StepInputs& inputs) override;
  void recordOrReplay(uint64_t key, const std::function<void()>& body) override;
  bool canRecord() const override { return graphs_.enabled(); }
  double deviceStepSeconds() const override { return timer_.seconds(); }

  void embedding(const TensorView& table, TensorView out) override;
  void rmsNorm(const TensorView& x, const TensorView& weight, float eps, TensorView out) override;
  void linear(const TensorView& x, const TensorView& weight, const TensorView* bias, TensorView out) override;
  void linearAdd(const TensorView& x, const TensorView& weight, const TensorView* bias, TensorView residual) override;
  void linearAddNormLinear(const TensorView& x, const TensorView& w1, const TensorView* b1, TensorView residual,
                           const TensorView& norm_weight, float eps, TensorView normed, const TensorView& w2,
                           const TensorView* b2, TensorView out) override;
  void gatherLogitRows(const TensorView& src, TensorView out) override;
  void siluMul(const TensorView& gate_up, TensorView out) override;
  // The ops only some architectures use (cuda_backend_arch_ops.cpp, kernels in cuda_arch_ops.cu).
  void layerNorm(const TensorView& x, const TensorView& weight, const TensorView* bias, float eps,
                 TensorView out) override;
  void activation(Activation act, const TensorView& x, TensorView out) override;
  // Products the matrix-vector kernel takes (16-bit weights, decode-sized steps, out of tmp's
  // dtype F32 or the weights'): the activation in its epilogue (tuning act_fusion). Else the two ops.
  void linearActivation(Activation act, const TensorView& x, const TensorView& weight, const TensorView* bias,
                        TensorView tmp, TensorView out) override;
  void gatedActivation(Activation act, const TensorView& gate_up, TensorView out) override;
  void addPositionEmbedding(const TensorView& table, TensorView x) override;
  void add(const TensorView& y, TensorView residual) override;
  void scaleSoftcap(TensorView x, float scale, float cap) override;
  // Every attention kernel takes the extras (cuda::AttnExtras); the ALiBi slopes are uploaded
  // here, once, into alibi_ (before any step is recorded: recorded steps are dropped).
  Status setAttentionExtras(const AttentionExtras& extras) override;
  // Mixture of experts (cuda_backend_moe.cpp, kernels in cuda_moe.cu and cuda_moe_gemm.cu): routing
  // and a sort of the slots by expert on the device, then grouped products over the chosen experts
  // only (tensor cores with 16-bit weights), or for decode-sized steps matrix-vector kernels that
  // read each chosen expert's rows once.
  void moeAdd(const TensorView& x, const TensorView& router_logits, const TensorView& experts_gate_up,
              const TensorView& experts_down, const MoeRouting& routing, Activation act, TensorView residual) override;
  void sigmoidGatedAdd(const TensorView& y, const TensorView& gate, TensorView residual) override;
  void ropeWriteKv(int64_t layer, TensorView q, TensorView k, const TensorView& v, int64_t head_dim) override;
  void attention(int64_t layer, const TensorView& q, int64_t num_heads, int64_t sliding_window, float scale,
                 TensorView out) override;
  // Steps whose every row is its sequence's one new token (decode) on the tensor-core decode kernel
  // (bf16 / fp16 cache, head_dim 64 / 128 / 256, rotary dim a multiple of 16): one kernel rotates q
  // and k, writes the KV and attends (cuda::DecodeAttnArgs::Rope; tuning rope_fusion=off:
  // the two ops). Other steps: the two ops.
  void ropeAttention(int64_t layer, TensorView q, TensorView k, const TensorView& v, int64_t head_dim,
                     int64_t num_heads, int64_t sliding_window, float scale, TensorView out) override;

  bool hasArgmax() const override { return true; }
  Status argmaxRows(const TensorView& logits, int32_t* out) override;
  Result<uint64_t> argmaxRowsAsync(const TensorView& logits) override;
  Status waitArgmax(uint64_t ticket, int32_t* out) override;
  Result<uint64_t> sampleRowsAsync(TensorView logits, std::span<const RowSampling> rows,
                                   std::span<const PenaltyToken> penalties, std::span<const int32_t> masked) override;
  Status waitSamples(uint64_t ticket, std::span<RowSample> out) override;
  // Rows are sampled on the GPU (unless tuning sampling=off): steps of more than a few rows
  // one CTA per row, steps of up to 16 rows the row-group kernel (many CTAs per row) or the compact
  // pass. Where the row-group kernel cannot run (no cooperative launch, or it was refused), steps
  // of at most kHostSamplingMaxTruncatingRows rows with a truncating row and no compact pass are
  // sampled on the host, which is faster there than one CTA per row (docs/perf.md, sessions 8-10).
  static constexpr int64_t kHostSamplingMaxTruncatingRows = 4;
  bool samplesRows(std::span<const RowSampling> rows, int64_t vocab) const override;
  Status sampleRows(TensorView logits, std::span<const RowSampling> rows, std::span<const PenaltyToken> penalties,
                    std::span<const int32_t> masked, std::span<RowSample> out) override;

  // The first CUDA error seen by an op (OK when none).
  const Status& error() const { return error_; }

 private:
  // linear (accumulate false) and linearAdd (true: out += x W^T (+ bias)).
  void product(const TensorView& x, const TensorView& weight, const TensorView* bias, TensorView out,
               bool accumulate);
  // 8-bit weights hold their rows padded to a multiple of 16 (zeros): cuBLASLt's 8-bit GEMMs need
  // the product's output dimension in multiples of 16.
  static int64_t fp8PaddedRows(int64_t n) { return (n + 15) / 16 * 16; }
  // Where an [n, k] 8-bit weight's row scales start: after its padded codes, at a 256-byte boundary.
  static size_t fp8ScalesOffset(int64_t n, int64_t k);
  // The row scales of an 8-bit weight (loadQuantizedWeight's layout).
  static const float* fp8RowScales(const TensorView& w);
  // product() for 4-bit weights (loadInt4Weight).
  void productInt4(const TensorView& x, const TensorView& w, const TensorView* bias, TensorView out, bool accumulate);
  // product() for 8-bit weights (loadQuantizedWeight); x 16-bit or float32 (quantized here), or
  // row-quantized in the weights' code type (productInputDtype).
  void productW8a8(const TensorView& x, const TensorView& w, const TensorView* bias, TensorView out, bool accumulate);
  // An op writing an 8-bit product's input (out row-quantized, productInputDtype): `fused`, the
  // op's quantizing kernel, where it fits (else it returns cudaErrorNotSupported), else `op` into
  // half_x_ in the activation dtype (its row stride the out's) and w8a8QuantizeRows from there.
  void writeQuantized(const char* what, TensorView out, const std::function<cudaError_t()>& fused,
                      const std::function<cudaError_t(void* tmp)>& op);
  explicit CudaBackend(const CudaBackendOptions& options) : options_(options) {}
  const CudaTuning& tuning() const { return options_.tuning; }
  void fail(Status s);
  bool failed() const { return !error_.isOk(); }
  // An op's operand of an unsupported dtype fails the backend (as a CUDA error would).
  bool checkDtypes(const char* what, const TensorView& t, DType want);
  bool checkActivation(const char* what, const TensorView& t);  // F32, BF16 or F16
  // Grows `b` (device memory from pool_) to at least `bytes`; false (and error_ set) on failure.
  // A buffer that recorded graphs may read (`used_by_graphs`) drops them when it moves.
  bool reserve(PoolBuffer& b, size_t bytes, bool used_by_graphs = true);
  // The decode attention kernel's arguments for the step's items (attention and ropeAttention).
  cuda::DecodeAttnArgs decodeArgs(int64_t layer, const TensorView& q, int64_t num_heads, int64_t sliding_window,
                                  float scale, const TensorView& out) const;
  // attention()'s checks of the heads and q / out dtypes (fails the backend when one does not hold).
  // Heads, dtypes, and a window that reads no released block (HostStep::windowCovered).
  bool checkAttention(const TensorView& q, int64_t num_heads, int64_t sliding_window, const TensorView& out);
  // Ends a step's results in `slot` (its copy to the host enqueued): closes the step's timing,
  // records the slot's event and returns the ticket.
  Result<uint64_t> publishResult(int slot, int64_t rows, bool samples);
  // Waits for the slot of `ticket` (one of the two most recent, of kind `samples`).
  Result<int> waitResult(uint64_t ticket, bool samples);
  // Waits for the stream after a step's results were enqueued for the host (faults of the step
  // surface here) and adds the steps' device times.
  Status syncStepResults() { return timer_.sync(stream_.get()); }

  // Brackets one op for the profiler (no-op when not profiling); `name` is only built then.
  class OpScope {
   public:
    template <typename F>
    OpScope(CudaBackend* b, F&& name) : b_(b->profiler_ ? b : nullptr) {
      if (b_) b_->profiler_->begin(b_->stream_.get(), name());
    }
    ~OpScope() {
      if (b_) b_->profiler_->end(b_->stream_.get());
    }

   private:
    CudaBackend* b_;
  };
  void collectProfile() {
    if (profiler_) profiler_->collect();
  }

  // The order of these members is the teardown's, reversed (~CudaBackend first drains the compute
  // and copy streams, so nothing in flight reads what goes): the recorded graphs go first (they
  // point into every buffer below), then the profiler's and the step timer's events, the step,
  // result and workspace buffers (pool buffers are freed in stream order, pinned ones at once),
  // the weights and their staging, the KV pools and their copy stream; then pool_, which waits
  // for the stream-ordered frees before it is destroyed (so it must come after stream_ and before
  // every PoolBuffer); then cuBLAS(Lt), whose workspace is gone by then; the stream last.
  CudaBackendOptions options_;
  Status error_;
  int num_sms_ = 0;
  // Inputs of the products (normed rows, SiLU·mul, attention output) in the weights' 16-bit type
  // when the weights and the cache are 16-bit; else float32.
  DType activation_dtype_ = DType::kF32;

  CudaStream stream_;  // the compute stream: every op, in order
  BlasHandle cublas_;
  LtGemm lt_;  // bf16 / fp16 products with a plan per shape
  // Every growable device buffer (activations, metadata, workspaces) comes from this stream-ordered
  // pool, which keeps what it reserved: a buffer that grows is freed in stream order, without
  // waiting for the device, and its memory serves the next one.
  StreamPool pool_;
  KvPools kv_;
  std::vector<DeviceMemory> weights_;  // one cudaMalloc per loadWeight
  uint64_t weight_bytes_ = 0;
  WeightStager stager_;  // freed by finishWeights

  PoolBuffer cublas_ws_;  // cuBLAS workspace (set once, so graph capture never allocates)
  std::vector<PoolBuffer> scratch_;
  PoolBuffer half_x_;     // 16-bit copy (or hi + lo parts) of a float32 linear input (cuBLAS path)
  PoolBuffer fp8_x_;      // an 8-bit product's quantized input: codes [m, k], then the row scales
  PoolBuffer fp8_sums_;   // an 8-bit product's unscaled sums (float32 or int32) for the scaling kernel
  static constexpr int64_t kW8a8SumsBytes = 64 << 20;  // fp8_sums_'s size: products take bands of rows
  bool fp8_scaled_gemm_ = true;  // cleared when cuBLASLt refuses outer-vector scaling
  bool has_fp8_weights_ = false;  // loadQuantizedWeight was called (reserveWorkspace sizes fp8_x_)
  struct Int4Weight {
    int64_t group = 0;
    size_t scales_at = 0, zeros_at = 0;  // byte offsets in the allocation
  };
  std::unordered_map<const void*, Int4Weight> int4_weights_;  // loadInt4Weight's, by address
  int64_t int4_max_elems_ = 0;  // the largest 4-bit weight (n * k): int4_w_'s size
  PoolBuffer int4_w_;           // a 4-bit weight dequantized for a cuBLASLt product
  PoolBuffer norm_sums_;  // linearAddNormLinear (split): sums of squares of the residual's 8-column groups
  PoolBuffer partial_;    // split-key attention partial states
  PoolBuffer alibi_;      // setAttentionExtras: the ALiBi slopes, one per query head
  // moeAdd: routing, grouping and both products' outputs (cuda_backend_moe.cpp); sized outside
  // recording for steps of up to moe_max_tokens_ tokens (reserveWorkspace) within a budget.
  PoolBuffer moe_ws_;
  int64_t moe_max_tokens_ = 0;

  AttentionExtras extras_;        // setAttentionExtras (the host's copy)
  cuda::AttnExtras attn_extras_;  // what the attention kernels get (alibi points into alibi_)

  StepUploader step_;  // the step's metadata, on the host and uploaded
  ResultSlots results_;
  PoolBuffer sample_in_;       // sampleRows: rows, penalty tokens and masked ids on the device
  PoolBuffer sample_compact_;  // sampleRows: the compact pass's candidates (few rows, small top-k)
  PoolBuffer sample_group_;    // sampleRows: the row-group kernel's exchanges (few rows)
  int group_capacity_ = 0;     // resident CTAs of the row-group sampling kernel (0: path off)
  StepTimer timer_;

  // tuning profile=on: per-op GPU times (graphs off).
  std::unique_ptr<OpProfiler> profiler_;
  GraphCache graphs_;  // CUDA graphs per (key, step layout)
};

}  // namespace llmrt

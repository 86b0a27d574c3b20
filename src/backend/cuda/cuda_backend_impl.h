// CudaBackend: the Backend interface on one CUDA device. Internal to
// src/backend/cuda (it includes CUDA headers); others use cuda_backend.h.
//
// Everything runs in order on one stream. A step's metadata (token ids,
// positions, slots, sequences, block tables, RoPE tables, attention work
// lists) is packed by beginStep into a pinned host buffer and uploaded with one
// asynchronous copy into a device buffer the ops read. recordOrReplay captures
// a step's ops into a CUDA graph per (key, layout) and replays it; any buffer
// reallocation drops the graphs (their pointers would dangle). Ops return void
// (the Backend interface): the first CUDA error is kept in `error_` (with file and line), later ops are
// skipped, and the next call that returns a Status (copyToHost, copyKvBlocks,
// ...) reports it.
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
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_profiler.h"
#include "backend/step.h"

namespace llmrt {

// A 2-D view's rows, columns and row stride (a 1-D view is one row).
inline int64_t viewRows(const TensorView& t) { return t.shape.rank() >= 2 ? t.shape[0] : 1; }
inline int64_t viewCols(const TensorView& t) { return t.shape.rank() >= 1 ? t.shape[t.shape.rank() - 1] : 1; }
inline int64_t viewRowStride(const TensorView& t) { return t.shape.rank() >= 2 ? t.strides[0] : viewCols(t); }

// Keeps the first failure of a CUDA runtime call in `status`: "cudaMalloc(...) at file:line: <error>".
Status cudaStatus(cudaError_t err, const char* expr, const char* file, int line);
Status cublasStatus(cublasStatus_t err, const char* expr, const char* file, int line);

#define LLMRT_CUDA_RETURN_IF_ERROR(expr)                                      \
  do {                                                                        \
    const cudaError_t llmrt_cuda_err_ = (expr);                               \
    if (llmrt_cuda_err_ != cudaSuccess)                                       \
      return ::llmrt::cudaStatus(llmrt_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

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
  // Sets up the device, stream and cuBLAS handle.
  static Result<std::unique_ptr<CudaBackend>> create(const CudaBackendOptions& options);

  std::string name() const override { return "cuda"; }
  Device device() const override { return Device::kCuda; }
  int numThreads() const override { return 1; }

  uint64_t freeMemoryBytes() const override;
  uint64_t totalMemoryBytes() const override;
  BackendMemoryStats memoryStats() const override;

  Result<TensorView> loadWeight(std::span<const TensorView> parts, const std::string& name) override;
  Status finishWeights() override;
  uint64_t weightBytes() const override { return weight_bytes_; }
  TensorView scratch(int slot, int64_t rows, int64_t cols, DType dtype = DType::kF32) override;
  DType activationDtype() const override { return activation_dtype_; }
  Status copyToHost(const TensorView& src, float* dst) override;
  Status copyFromHost(const float* src, TensorView dst) override;

  Status allocateKvPools(const KvPoolGeometry& primary, int64_t secondary_blocks) override;
  const KvPoolGeometry& kvGeometry() const override { return geometry_; }
  Status copyKvBlocks(std::span<const KvBlockCopy> copies) override;
  DType preferredKvDtype() const override { return options_.kv_dtype; }
  Status readKvBlock(KvPoolKind pool, int32_t block, float* dst) override;

  Status reserveWorkspace(int64_t max_tokens, int64_t max_width) override;
  Status beginStep(const StepInputs& inputs) override;
  void recordOrReplay(uint64_t key, const std::function<void()>& body) override;
  bool canRecord() const override { return use_graphs_; }
  double deviceStepSeconds() const override { return device_step_seconds_; }

  void embedding(const TensorView& table, TensorView out) override;
  void rmsNorm(const TensorView& x, const TensorView& weight, float eps, TensorView out) override;
  void linear(const TensorView& x, const TensorView& weight, const TensorView* bias, TensorView out) override;
  void linearAdd(const TensorView& x, const TensorView& weight, const TensorView* bias, TensorView residual) override;
  void linearAddNormLinear(const TensorView& x, const TensorView& w1, const TensorView* b1, TensorView residual,
                           const TensorView& norm_weight, float eps, TensorView normed, const TensorView& w2,
                           const TensorView* b2, TensorView out) override;
  void gatherLogitRows(const TensorView& src, TensorView out) override;
  void siluMul(const TensorView& gate_up, TensorView out) override;
  void ropeWriteKv(int64_t layer, TensorView q, TensorView k, const TensorView& v, int64_t head_dim) override;
  void attention(int64_t layer, const TensorView& q, int64_t num_heads, int64_t sliding_window, float scale,
                 TensorView out) override;
  // Steps whose every row is its sequence's one new token (decode) on the tensor-core decode kernel
  // (bf16 / fp16 cache, head_dim 64 / 128, GQA group <= 8, full rotary dim): one kernel rotates q
  // and k, writes the KV and attends (cuda::DecodeAttnArgs::Rope; LLMRT_CUDA_DISABLE=ropefuse:
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
  bool runsAhead() const override { return true; }
  // Rows are sampled on the GPU (unless LLMRT_CUDA_DISABLE=sampling): steps of more than a few rows
  // one CTA per row, steps of up to 16 rows the row-group kernel (many CTAs per row) or the compact
  // pass. Where the row-group kernel cannot run (no cooperative launch, or it was refused), steps
  // of at most kHostSamplingMaxTruncatingRows rows with a truncating row and no compact pass are
  // sampled on the host, which is faster there than one CTA per row (docs/perf.md, sessions 8-10).
  static constexpr int64_t kHostSamplingMaxTruncatingRows = 4;
  // linearAddNormLinear splits the norm over its two products for steps of up to this many rows:
  // faster at 1-2 rows, slower at 4 (H200, docs/perf.md, session 14); the same bits either way.
  static constexpr int64_t kNormSplitRows = 2;
  // linear / linearAdd take the matrix-vector kernel for steps of up to this many rows, cuBLAS(Lt)
  // above: the kernel is the faster at 1 row and as fast at 2 (where the norm split needs it), but
  // from 3 rows on its CUDA-core dot products (120-190 registers a thread) lose to cuBLAS's tensor
  // cores: batch-8 decode steps 4.78 vs 8.09 ms on the H200 (docs/perf.md, session 16).
  static constexpr int64_t kGemvRows = 2;
  bool samplesRows(std::span<const RowSampling> rows, int64_t vocab) const override;
  Status sampleRows(TensorView logits, std::span<const RowSampling> rows, std::span<const PenaltyToken> penalties,
                    std::span<const int32_t> masked, std::span<RowSample> out) override;

  // The first CUDA error seen by an op (OK when none).
  const Status& error() const { return error_; }

 private:
  // linear (accumulate false) and linearAdd (true: out += x W^T (+ bias)).
  void product(const TensorView& x, const TensorView& weight, const TensorView* bias, TensorView out,
               bool accumulate);
  // A device (or pinned host) allocation that grows on demand.
  struct Buffer {
    void* ptr = nullptr;
    size_t bytes = 0;
  };

  // Device pointers into the step's uploaded metadata (see beginStep).
  struct DeviceStep {
    const int32_t* token_ids = nullptr;
    const int32_t* positions = nullptr;
    const int32_t* row_table = nullptr;
    const int64_t* slots = nullptr;
    const cuda::AttnSeqDev* seqs = nullptr;
    const int64_t* logit_rows = nullptr;
    const int2* items = nullptr;  // rows for the decode attention kernel
    int32_t num_items = 0;
    const int2* tiles = nullptr;  // query tiles for the context attention kernel
    int32_t num_tiles = 0;
    const float* inv_freq = nullptr;
    const int32_t* tables = nullptr;
    int32_t splits = 1;  // key splits of the decode attention kernel
  };

  explicit CudaBackend(const CudaBackendOptions& options) : options_(options) {}
  void fail(Status s);
  bool failed() const { return !error_.isOk(); }
  // An op's operand of an unsupported dtype fails the backend (as a CUDA error would).
  bool checkDtypes(const char* what, const TensorView& t, DType want);
  bool checkActivation(const char* what, const TensorView& t);  // F32, BF16 or F16
  // Grows `b` (device memory) to at least `bytes`; false (and error_ set) on failure. A buffer
  // that recorded graphs may read (`used_by_graphs`) drops them when it moves.
  bool reserve(Buffer& b, size_t bytes, bool used_by_graphs = true);
  void release(Buffer& b);  // back to the pool, in stream order
  // Grows `b` (pinned host memory) to at least `bytes`, after the work in flight, which may
  // read it, has finished.
  Status reservePinned(Buffer& b, size_t bytes);
  void dropGraphs();
  // Copies part `p` (any dtype, host memory, maybe unaligned) into `dev` as `dt`, through the
  // pinned staging buffers (one is filled while the other's copy runs); a dtype change is made on
  // the device (convertElements), a fp16 overflow recorded for finishWeights under `name`.
  Status stageWeight(const TensorView& p, DType dt, uint8_t* dev, const std::string& name);
  cuda::KvLayout kvLayout() const;
  // Key splits for `items` decode rows whose longest visible context is `max_keys`.
  int32_t chooseSplits(int64_t items, int64_t max_keys) const;
  // The decode attention kernel's arguments for the step's items (attention and ropeAttention).
  cuda::DecodeAttnArgs decodeArgs(int64_t layer, const TensorView& q, int64_t num_heads, int64_t sliding_window,
                                  float scale, const TensorView& out) const;
  // attention()'s checks of the heads and q / out dtypes (fails the backend when one does not hold).
  bool checkAttention(const TensorView& q, int64_t num_heads, const TensorView& out);

  CudaBackendOptions options_;
  cudaStream_t stream_ = nullptr;
  // Every growable device buffer (activations, metadata, workspaces) comes from this stream-ordered
  // pool (cudaMallocFromPoolAsync on stream_), which keeps what it reserved: a buffer that grows is
  // freed in stream order, without waiting for the device, and its memory serves the next one.
  cudaMemPool_t pool_ = nullptr;
  // KV block copies that touch the host pool (offload / onboard) run on their own stream, after the
  // compute stream's work so far (copies_ready_); the compute stream's later work waits for them
  // (copies_done_).
  cudaStream_t copy_stream_ = nullptr;
  cudaEvent_t copies_ready_ = nullptr;
  cudaEvent_t copies_done_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  LtGemm lt_;  // bf16 / fp16 products with a plan per shape
  Status error_;
  int num_sms_ = 0;
  std::vector<void*> weights_;  // owned device allocations
  uint64_t weight_bytes_ = 0;
  // Weight uploads: two pinned staging buffers used in turn, each with an event that says its last
  // copy has read it; freed by finishWeights.
  static constexpr size_t kStagingBytes = size_t{32} << 20;
  Buffer staging_[2];
  cudaEvent_t staged_[2] = {nullptr, nullptr};
  int staging_next_ = 0;
  Buffer staging_dev_[2];                   // raw chunks converted on the device (F32 / BF16 / F16)
  int32_t* first_bad_weight_ = nullptr;     // device: lowest tag of a converted weight that overflowed
  std::vector<std::string> converted_names_;  // tag -> weight name, for finishWeights' error
  std::vector<Buffer> scratch_;
  Buffer half_x_;    // 16-bit copy (or hi + lo parts) of a float32 linear input (cuBLAS path)
  Buffer norm_sums_;  // linearAddNormLinear (split): sums of squares of the residual's 8-column groups
  Buffer cublas_ws_;  // cuBLAS workspace (set once, so graph capture never allocates)
  Buffer partial_;    // split-key attention partial states
  // Step results (argmaxRowsAsync ids or sampleRowsAsync rows) by ticket parity: on the device
  // (what the next step's fed tokens read), pinned copies on their way to the caller, an event
  // after each copy, row counts and which kind each slot holds.
  Buffer argmax_[2];
  Buffer argmax_host_[2];
  cudaEvent_t result_ready_[2] = {nullptr, nullptr};
  int64_t result_rows_[2] = {0, 0};
  bool result_samples_[2] = {false, false};  // the slot holds RowSamples (else argmax ids)
  uint64_t result_tickets_ = 0;  // results so far (the latest ticket is this - 1)
  // Ends a step's results in `slot` (its copy to the host enqueued): closes the step's timing,
  // records the slot's event and returns the ticket.
  Result<uint64_t> publishResult(int slot, int64_t rows, bool samples);
  // Waits for the slot of `ticket` (one of the two most recent, of kind `samples`).
  Result<int> waitResult(uint64_t ticket, bool samples);
  // The latest result's token ids on the device (what fed tokens and pending penalty tokens
  // read), refused when there is none or row `max_src` lies outside it (`who` names the caller).
  Result<cuda::ResultTokens> latestResultTokens(int64_t max_src, const char* who) const;
  Buffer sample_in_;         // sampleRows: rows, penalty tokens and masked ids on the device
  Buffer sample_in_host_[2];   // pinned: the same, packed on the host (by result slot)
  Buffer sample_out_[2];       // sampleRows: RowSample per row on the device (by result slot)
  Buffer sample_out_host_[2];  // pinned: the same on their way to the caller
  Buffer sample_compact_;      // sampleRows: the compact pass's candidates (few rows, small top-k)
  Buffer sample_group_;        // sampleRows: the row-group kernel's exchanges (few rows)

  // Step metadata: packed on the host (pinned), uploaded in one copy.
  HostStep step_;
  std::vector<int2> items_, tiles_;
  Buffer meta_;
  Buffer pinned_meta_;                 // pinned: the packed step on its way to meta_
  cudaEvent_t meta_copied_ = nullptr;  // the last upload has read `pinned_meta_`
  // Step timing (deviceStepSeconds): an event pair per step, [began, done], recorded after
  // beginStep's upload and where the results go back (or, for a step with no results, when the
  // next step begins);
  // read once complete (a step may be in flight while the one before it is collected).
  std::vector<cudaEvent_t> step_events_;
  size_t step_events_used_ = 0;  // 2 per interval not yet read, oldest first
  bool step_timing_open_ = false;
  double device_step_seconds_ = 0.0;
  Status openStepTiming();
  Status closeStepTiming();
  // Adds the device times of the intervals that have completed (`all`: every closed one, after a
  // stream synchronisation), oldest first, and recycles their events.
  Status harvestStepTiming(bool all);
  // Waits for the stream after a step's results were enqueued for the host (faults of the step
  // surface here) and adds the steps' device times.
  Status syncStepResults();
  DeviceStep dev_;
  uint64_t step_layout_ = 0;  // hash of what fixes the ops' arguments for a step shape

  // LLMRT_CUDA_PROFILE=1: per-op GPU times (graphs off).
  std::unique_ptr<OpProfiler> profiler_;
  // Brackets one op for the profiler (no-op when not profiling); `name` is only built then.
  class OpScope {
   public:
    template <typename F>
    OpScope(CudaBackend* b, F&& name) : b_(b->profiler_ ? b : nullptr) {
      if (b_) b_->profiler_->begin(b_->stream_, name());
    }
    ~OpScope() {
      if (b_) b_->profiler_->end(b_->stream_);
    }

   private:
    CudaBackend* b_;
  };
  void collectProfile() {
    if (profiler_) profiler_->collect();
  }

  // CUDA graphs per (key, step layout).
  bool use_graphs_ = true;
  bool use_gemv_ = true;
  int64_t gemv_rows_ = kGemvRows;  // the matrix-vector kernel serves products of up to this many rows
  int64_t norm_split_rows_ = kNormSplitRows;  // linearAddNormLinear's norm split: steps of up to this many rows
  bool use_flash_ = true;
  bool use_mma_decode_ = true;
  bool use_rope_fusion_ = true;  // ropeAttention's one kernel for decode steps
  bool single_token_rows_ = false;  // the step's every sequence has at most one new row
  bool use_sampling_ = true;  // sampleRows (else the runner samples on the host)
  bool use_compact_sampling_ = true;  // sampleRows' compact pass for few rows with a small top-k
  int group_capacity_ = 0;  // resident CTAs of the row-group sampling kernel (0: path off)
  int split_waves_ = 2;  // decode attention: key splits until about this many CTAs per SM
  // Inputs of the products (normed rows, SiLU·mul, attention output) in the weights' 16-bit type
  // when the weights and the cache are 16-bit; else float32.
  DType activation_dtype_ = DType::kF32;
  bool capturing_ = false;
  uint64_t alloc_epoch_ = 0;  // bumped by every (re)allocation of a buffer ops read
  uint64_t graph_epoch_ = 0;
  std::unordered_map<uint64_t, cudaGraphExec_t> graphs_;

  KvPoolGeometry geometry_;
  int64_t secondary_blocks_ = 0;
  void* primary_ = nullptr;    // device
  void* secondary_ = nullptr;  // pinned host
};

}  // namespace llmrt

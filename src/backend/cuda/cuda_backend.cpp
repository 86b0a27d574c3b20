// CudaBackend: device setup, memory, weights, KV pools and host transfers.
// The ops are in cuda_backend_ops.cpp (host side) and the .cu files (kernels).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_pdl.h"
#include "backend/weight_parts.h"
#include "core/logging.h"

namespace llmrt {
Status cudaStatus(cudaError_t err, const char* expr, const char* file, int line) {
  const StatusCode code =
      err == cudaErrorMemoryAllocation ? StatusCode::kResourceExhausted : StatusCode::kInternal;
  return Status(code, strprintf("%s failed at %s:%d: %s (%s)", expr, file, line, cudaGetErrorName(err),
                                cudaGetErrorString(err)));
}

Status cublasStatus(cublasStatus_t err, const char* expr, const char* file, int line) {
  return internalError(strprintf("%s failed at %s:%d: %s", expr, file, line, cublasGetStatusName(err)));
}

int cudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the error state
    return 0;
  }
  return n;
}

Result<std::unique_ptr<Backend>> createCudaBackend(const CudaBackendOptions& options) {
  LLMRT_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> b, CudaBackend::create(options));
  return std::unique_ptr<Backend>(std::move(b));
}

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(const CudaBackendOptions& options) {
  const int n = cudaDeviceCount();
  if (n == 0) return failedPrecondition("CUDA backend: no CUDA device found");
  if (options.device < 0 || options.device >= n)
    return fieldError("CudaBackendOptions", "device", std::to_string(options.device),
                      "a device index in [0, " + std::to_string(n) + ")");
  auto supported = [](DType d) { return d == DType::kBF16 || d == DType::kF16 || d == DType::kF32; };
  if (!supported(options.weight_dtype))
    return fieldError("CudaBackendOptions", "weight_dtype", std::string(dtypeName(options.weight_dtype)),
                      "BF16, F16 or F32");
  if (!supported(options.kv_dtype))
    return fieldError("CudaBackendOptions", "kv_dtype", std::string(dtypeName(options.kv_dtype)),
                      "BF16, F16 or F32");
  std::unique_ptr<CudaBackend> b(new CudaBackend(options));
  if (options.weight_dtype == DType::kF32) b->options_.kv_dtype = DType::kF32;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&b->stream_, cudaStreamNonBlocking));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&b->copy_stream_, cudaStreamNonBlocking));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&b->copies_ready_, cudaEventDisableTiming));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&b->copies_done_, cudaEventDisableTiming));
  {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = options.device;
    LLMRT_CUDA_RETURN_IF_ERROR(cudaMemPoolCreate(&b->pool_, &props));
    // Keep everything reserved: the KV cache is sized from what is free after the workspace is
    // reserved, so the pool must not hand memory back and need it again later.
    uint64_t keep = UINT64_MAX;
    LLMRT_CUDA_RETURN_IF_ERROR(cudaMemPoolSetAttribute(b->pool_, cudaMemPoolAttrReleaseThreshold, &keep));
  }
  if (cublasStatus_t s = cublasCreate(&b->cublas_); s != CUBLAS_STATUS_SUCCESS)
    return cublasStatus(s, "cublasCreate", __FILE__, __LINE__);
  if (cublasStatus_t s = cublasSetStream(b->cublas_, b->stream_); s != CUBLAS_STATUS_SUCCESS)
    return cublasStatus(s, "cublasSetStream", __FILE__, __LINE__);
  // Float32 products stay float32 (no TF32), so the F32 mode agrees with the CPU backend.
  if (cublasStatus_t s = cublasSetMathMode(b->cublas_, CUBLAS_DEFAULT_MATH); s != CUBLAS_STATUS_SUCCESS)
    return cublasStatus(s, "cublasSetMathMode", __FILE__, __LINE__);
  cudaDeviceProp prop{};
  LLMRT_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, options.device));
  b->num_sms_ = prop.multiProcessorCount;
  // A fixed cuBLAS workspace: cuBLAS then never allocates, which graph capture requires.
  if (!b->reserve(b->cublas_ws_, size_t{32} << 20)) return b->error_;
  if (cublasStatus_t s = cublasSetWorkspace(b->cublas_, b->cublas_ws_.ptr, b->cublas_ws_.bytes);
      s != CUBLAS_STATUS_SUCCESS)
    return cublasStatus(s, "cublasSetWorkspace", __FILE__, __LINE__);
  if (cublasStatus_t s = b->lt_.init(); s != CUBLAS_STATUS_SUCCESS) return cublasStatus(s, "cublasLtCreate", __FILE__, __LINE__);
  LLMRT_CUDA_RETURN_IF_ERROR(cuda::initAttentionKernels());
  LLMRT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&b->meta_copied_, cudaEventDisableTiming));
  for (cudaEvent_t& e : b->result_ready_) LLMRT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  if (const char* prof = std::getenv("LLMRT_CUDA_PROFILE"); prof && std::string(prof) == "1") {
    b->profiler_ = std::make_unique<OpProfiler>();
    b->use_graphs_ = false;
    LLMRT_LOG_INFO("CUDA backend: LLMRT_CUDA_PROFILE=1: timing every op (graphs off)");
  }
  // 16-bit product operands (the weights' type) with 16-bit weights and a 16-bit cache; a float32
  // cache asks for accuracy: activations stay float32 and the products take them as hi + lo
  // pairs of the weights' type (linear()).
  bool half_activations = options.weight_dtype != DType::kF32 && b->options_.kv_dtype != DType::kF32;
  bool pdl = prop.major >= 9;  // programmatic dependent launch (cuda_pdl.h)
  bool rowgroup = true;        // the row-group sampling kernel
  bool vector_ops = true;      // float4 kernels for RMSNorm and RoPE + KV write
  // Switches for measurements and diagnosis:
  // LLMRT_CUDA_DISABLE=graphs,gemv,flash,mmadecode,ropefuse,bf16act,pdl,sampling,compact,rowgroup,vecops
  // (comma-separated).
  if (const char* off = std::getenv("LLMRT_CUDA_DISABLE")) {
    const std::string v = off;
    b->use_graphs_ = v.find("graphs") == std::string::npos;
    b->use_gemv_ = v.find("gemv") == std::string::npos;
    b->use_flash_ = v.find("flash") == std::string::npos;
    b->use_mma_decode_ = v.find("mmadecode") == std::string::npos;
    b->use_rope_fusion_ = v.find("ropefuse") == std::string::npos;
    half_activations = half_activations && v.find("bf16act") == std::string::npos;
    pdl = pdl && v.find("pdl") == std::string::npos;
    b->use_sampling_ = v.find("sampling") == std::string::npos;
    b->use_compact_sampling_ = v.find("compact") == std::string::npos;
    rowgroup = v.find("rowgroup") == std::string::npos;
    vector_ops = v.find("vecops") == std::string::npos;
    LLMRT_LOG_INFO("CUDA backend: LLMRT_CUDA_DISABLE=%s (graphs %s, gemv %s, flash attention %s, tensor-core "
                   "decode attention %s, RoPE in decode attention %s, 16-bit activations %s, dependent launch %s, "
                   "sampling on the GPU %s, compact sampling pass %s, row-group sampling %s, vector norm/RoPE "
                   "kernels %s)",
                   off, b->use_graphs_ ? "on" : "off", b->use_gemv_ ? "on" : "off", b->use_flash_ ? "on" : "off",
                   b->use_mma_decode_ ? "on" : "off", b->use_rope_fusion_ ? "on" : "off",
                   half_activations ? "on" : "off", pdl ? "on" : "off", b->use_sampling_ ? "on" : "off",
                   b->use_compact_sampling_ ? "on" : "off", rowgroup ? "on" : "off", vector_ops ? "on" : "off");
  }
  cuda::setPdlEnabled(pdl);
  cuda::setVectorOpsEnabled(vector_ops);
  b->group_capacity_ = rowgroup ? cuda::sampleGroupCapacity() : 0;
  // The RMSNorm split over the decode products (linearAddNormLinear) takes steps of up to
  // LLMRT_CUDA_NORM_SPLIT rows (0..8, for measurements; 0: never) that the matrix-vector kernel
  // serves (LLMRT_CUDA_GEMV_ROWS below). Same bits either way.
  if (const char* ns = std::getenv("LLMRT_CUDA_NORM_SPLIT")) {
    const int v = std::atoi(ns);
    if (v >= 0 && v <= cuda::kGemvMaxRows) b->norm_split_rows_ = v;
    LLMRT_LOG_INFO("CUDA backend: LLMRT_CUDA_NORM_SPLIT=%s (norm split over the products of steps of up to %lld rows)",
                   ns, static_cast<long long>(b->norm_split_rows_));
  }
  // The matrix-vector kernel serves products of up to LLMRT_CUDA_GEMV_ROWS rows (0..8, for
  // measurements and the kernel's tests; default kGemvRows).
  if (const char* gr = std::getenv("LLMRT_CUDA_GEMV_ROWS")) {
    const int v = std::atoi(gr);
    if (v >= 0 && v <= cuda::kGemvMaxRows) b->gemv_rows_ = v;
    LLMRT_LOG_INFO("CUDA backend: LLMRT_CUDA_GEMV_ROWS=%s (the matrix-vector kernel for products of up to %lld rows)",
                   gr, static_cast<long long>(b->gemv_rows_));
  }
  // Decode attention key splits aim at this many CTAs per SM (LLMRT_CUDA_SPLIT_WAVES, 1..16, for measurements).
  if (const char* w = std::getenv("LLMRT_CUDA_SPLIT_WAVES")) {
    const int v = std::atoi(w);
    if (v >= 1 && v <= 16) b->split_waves_ = v;
    LLMRT_LOG_INFO("CUDA backend: LLMRT_CUDA_SPLIT_WAVES=%s (using %d)", w, b->split_waves_);
  }
  b->activation_dtype_ = half_activations ? options.weight_dtype : DType::kF32;
  LLMRT_LOG_INFO("CUDA backend on device %d: %s (sm_%d%d, %d SMs, %s), weights %s, KV cache %s, product inputs %s",
                 options.device, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                 formatBytes(prop.totalGlobalMem).c_str(),
                 std::string(dtypeName(options.weight_dtype)).c_str(),
                 std::string(dtypeName(b->options_.kv_dtype)).c_str(),
                 std::string(dtypeName(b->activation_dtype_)).c_str());
  return b;
}

CudaBackend::~CudaBackend() {
  // Errors on the way out cannot be reported; the process keeps going.
  if (stream_) (void)cudaStreamSynchronize(stream_);
  if (profiler_) {
    profiler_->collect();
    std::fprintf(stderr, "%s", profiler_->report().c_str());  // asked for by LLMRT_CUDA_PROFILE: always shown
    profiler_.reset();
  }
  if (copy_stream_) (void)cudaStreamSynchronize(copy_stream_);
  dropGraphs();
  for (void* p : weights_) (void)cudaFree(p);
  for (Buffer& b : scratch_) release(b);
  for (Buffer* b : {&meta_, &half_x_, &norm_sums_, &cublas_ws_, &partial_, &argmax_[0], &argmax_[1], &sample_in_,
                    &sample_out_[0], &sample_out_[1], &sample_compact_, &sample_group_})
    release(*b);
  if (stream_) (void)cudaStreamSynchronize(stream_);
  if (pool_) (void)cudaMemPoolDestroy(pool_);
  for (cudaEvent_t e : {copies_ready_, copies_done_})
    if (e) (void)cudaEventDestroy(e);
  if (copy_stream_) (void)cudaStreamDestroy(copy_stream_);
  for (Buffer* b : {&pinned_meta_, &argmax_host_[0], &argmax_host_[1], &sample_in_host_[0], &sample_in_host_[1],
                    &sample_out_host_[0], &sample_out_host_[1]})
    (void)cudaFreeHost(b->ptr);
  for (cudaEvent_t e : {meta_copied_, result_ready_[0], result_ready_[1]})
    if (e) (void)cudaEventDestroy(e);
  for (cudaEvent_t e : step_events_) (void)cudaEventDestroy(e);
  (void)cudaFree(first_bad_weight_);
  for (int i = 0; i < 2; ++i) {
    (void)cudaFree(staging_dev_[i].ptr);
    (void)cudaFreeHost(staging_[i].ptr);
    if (staged_[i]) (void)cudaEventDestroy(staged_[i]);
  }
  (void)cudaFree(primary_);
  (void)cudaFreeHost(secondary_);
  if (cublas_) (void)cublasDestroy(cublas_);
  if (stream_) (void)cudaStreamDestroy(stream_);
}

void CudaBackend::fail(Status s) {
  if (error_.isOk()) {
    LLMRT_LOG_ERROR("CUDA backend: %s", s.message().c_str());
    error_ = std::move(s);
  }
}

bool CudaBackend::reserve(Buffer& b, size_t bytes, bool used_by_graphs) {
  if (b.bytes >= bytes) return true;
  if (failed()) return false;
  if (capturing_) {
    fail(internalError(strprintf("a buffer must grow to %zu bytes while a step is being recorded", bytes)));
    return false;
  }
  if (used_by_graphs) ++alloc_epoch_;  // recorded graphs may point into the old buffer
  size_t want = b.bytes == 0 ? bytes : std::max(bytes, b.bytes + b.bytes / 2);
  // Stream-ordered: work already enqueued still reads the old buffer; its memory is reused
  // only by work enqueued after it.
  release(b);
  if (cudaError_t e = cudaMallocFromPoolAsync(&b.ptr, want, pool_, stream_); e != cudaSuccess) {
    b.ptr = nullptr;
    fail(cudaStatus(e, strprintf("cudaMallocFromPoolAsync(%zu bytes)", want).c_str(), __FILE__, __LINE__));
    return false;
  }
  b.bytes = want;
  return true;
}

void CudaBackend::release(Buffer& b) {
  if (b.ptr) (void)cudaFreeAsync(b.ptr, stream_);
  b = Buffer{};
}

Status CudaBackend::reservePinned(Buffer& b, size_t bytes) {
  if (b.bytes >= bytes) return Status::ok();
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // nothing reads the old one any more
  LLMRT_CUDA_RETURN_IF_ERROR(cudaFreeHost(b.ptr));
  b = Buffer{};
  const size_t want = std::max(bytes + bytes / 2, size_t{1} << 16);
  LLMRT_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&b.ptr, want, cudaHostAllocDefault));
  b.bytes = want;
  return Status::ok();
}

void CudaBackend::dropGraphs() {
  for (auto& [key, exec] : graphs_) (void)cudaGraphExecDestroy(exec);
  graphs_.clear();
}

Status CudaBackend::reserveWorkspace(int64_t max_tokens, int64_t max_width) {
  if (failed()) return error_;
  if (max_tokens < 1 || max_width < 1) return invalidArgument("reserveWorkspace: sizes must be positive");
  if (options_.weight_dtype != DType::kF32)  // (hi and lo parts with float32 activations)
    reserve(half_x_, static_cast<size_t>(max_tokens * max_width) * (activation_dtype_ == DType::kF32 ? 4 : 2));
  for (Buffer& b : argmax_) reserve(b, static_cast<size_t>(max_tokens) * sizeof(int32_t), false);
  reserve(norm_sums_, static_cast<size_t>(cuda::kGemvMaxRows * ((max_width + cuda::kGemvNormGroup - 1) /
                                                                  cuda::kGemvNormGroup)) * sizeof(float));
  return error_;  // set by a failed reserve
}

void CudaBackend::recordOrReplay(uint64_t key, const std::function<void()>& body) {
  if (failed() || !use_graphs_) {
    body();
    return;
  }
  if (graph_epoch_ != alloc_epoch_) {  // a buffer moved: every record is stale
    dropGraphs();
    graph_epoch_ = alloc_epoch_;
  }
  const uint64_t k = key * 0x9E3779B97F4A7C15ull ^ step_layout_;
  auto it = graphs_.find(k);
  if (it == graphs_.end()) {
    // Record: the ops enqueue into a graph instead of running.
    if (cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal); e != cudaSuccess) {
      fail(cudaStatus(e, "cudaStreamBeginCapture", __FILE__, __LINE__));
      return;
    }
    capturing_ = true;
    body();
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    cudaGraphExec_t exec = nullptr;
    cudaError_t inst = cudaSuccess;
    if (end == cudaSuccess && !failed()) inst = cudaGraphInstantiate(&exec, graph, 0);
    if (graph) (void)cudaGraphDestroy(graph);
    if (end != cudaSuccess || inst != cudaSuccess || failed()) {
      // Recording failed (nothing ran; e.g. a buffer had to grow): that is no device fault,
      // so stop recording, forget the error and run this step op by op. A real fault shows
      // again in the op-by-op run and is kept there.
      const std::string why = failed() ? error_.message()
                                       : cudaStatus(end != cudaSuccess ? end : inst,
                                                    end != cudaSuccess ? "cudaStreamEndCapture" : "cudaGraphInstantiate",
                                                    __FILE__, __LINE__)
                                             .message();
      LLMRT_LOG_WARNING("CUDA backend: recording a step failed (%s); steps run op by op from now on", why.c_str());
      use_graphs_ = false;
      error_ = Status::ok();
      (void)cudaGetLastError();
      body();
      return;
    }
    it = graphs_.emplace(k, exec).first;
    LLMRT_LOG_DEBUG("CUDA backend: recorded a graph for key %llu (%zu recorded)", static_cast<unsigned long long>(key),
                    graphs_.size());
  }
  if (cudaError_t e = cudaGraphLaunch(it->second, stream_); e != cudaSuccess)
    fail(cudaStatus(e, "cudaGraphLaunch", __FILE__, __LINE__));
}

Status CudaBackend::openStepTiming() {
  LLMRT_RETURN_IF_ERROR(closeStepTiming());  // a step whose results never went back
  if (step_events_used_ >= 256) LLMRT_RETURN_IF_ERROR(syncStepResults());  // (128 such steps in a row)
  while (step_events_.size() < step_events_used_ + 2) {
    cudaEvent_t e = nullptr;
    LLMRT_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
    step_events_.push_back(e);
  }
  LLMRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(step_events_[step_events_used_], stream_));
  step_events_used_ += 2;
  step_timing_open_ = true;
  return Status::ok();
}

Status CudaBackend::closeStepTiming() {
  if (!step_timing_open_) return Status::ok();
  step_timing_open_ = false;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(step_events_[step_events_used_ - 1], stream_));
  return Status::ok();
}

Status CudaBackend::harvestStepTiming(bool all) {
  size_t done = 0;  // events of the intervals read
  for (; done + 1 < step_events_used_; done += 2) {
    if (step_timing_open_ && done + 2 == step_events_used_) break;  // its end is not recorded yet
    if (!all) {
      const cudaError_t q = cudaEventQuery(step_events_[done + 1]);
      if (q == cudaErrorNotReady) break;
      LLMRT_CUDA_RETURN_IF_ERROR(q);
    }
    float ms = 0.0f;
    LLMRT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, step_events_[done], step_events_[done + 1]));
    device_step_seconds_ += ms * 1e-3;
  }
  // The read pairs' events go behind the unread ones, for reuse.
  std::rotate(step_events_.begin(), step_events_.begin() + static_cast<std::ptrdiff_t>(done),
              step_events_.begin() + static_cast<std::ptrdiff_t>(step_events_used_));
  step_events_used_ -= done;
  return Status::ok();
}

Status CudaBackend::syncStepResults() {
  LLMRT_RETURN_IF_ERROR(closeStepTiming());
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return harvestStepTiming(true);
}

Status CudaBackend::argmaxRows(const TensorView& logits, int32_t* out) {
  LLMRT_ASSIGN_OR_RETURN(uint64_t ticket, argmaxRowsAsync(logits));
  return waitArgmax(ticket, out);
}

Result<uint64_t> CudaBackend::argmaxRowsAsync(const TensorView& logits) {
  if (failed()) return error_;
  if (capturing_) return internalError("argmaxRowsAsync while a step is being recorded");
  const int64_t rows = viewRows(logits), vocab = viewCols(logits);
  const int slot = static_cast<int>(result_tickets_ % 2);
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(rows, 1)) * sizeof(int32_t);
  // The ids, then (16-byte aligned) the split argmax's partial results.
  const size_t ids_bytes = (bytes + 15) / 16 * 16, work_bytes = cuda::argmaxWorkBytes(rows, vocab);
  if (!reserve(argmax_[slot], ids_bytes + work_bytes, false)) return error_;
  LLMRT_RETURN_IF_ERROR(reservePinned(argmax_host_[slot], bytes));
  if (rows > 0) {
    OpScope scope(this, [&] { return std::string("argmax"); });
    void* work = work_bytes > 0 ? static_cast<uint8_t*>(argmax_[slot].ptr) + ids_bytes : nullptr;
    LLMRT_CUDA_RETURN_IF_ERROR(cuda::argmaxRows(static_cast<const float*>(logits.data), viewRowStride(logits), rows,
                                                vocab, static_cast<int32_t*>(argmax_[slot].ptr), work, stream_));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(argmax_host_[slot].ptr, argmax_[slot].ptr,
                                               static_cast<size_t>(rows) * 4, cudaMemcpyDeviceToHost, stream_));
  }
  return publishResult(slot, rows, false);
}

Result<uint64_t> CudaBackend::publishResult(int slot, int64_t rows, bool samples) {
  LLMRT_RETURN_IF_ERROR(closeStepTiming());
  LLMRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(result_ready_[slot], stream_));
  result_rows_[slot] = rows;
  result_samples_[slot] = samples;
  return result_tickets_++;
}

Result<int> CudaBackend::waitResult(uint64_t ticket, bool samples) {
  if (failed()) return error_;
  if (ticket >= result_tickets_ || ticket + 2 < result_tickets_)
    return invalidArgument("waiting for result " + std::to_string(ticket) + ": not one of the two most recent");
  const int slot = static_cast<int>(ticket % 2);
  if (result_samples_[slot] != samples)
    return invalidArgument("waiting for result " + std::to_string(ticket) + ": it holds " +
                           (result_samples_[slot] ? "samples" : "argmax ids"));
  if (profiler_) {
    LLMRT_RETURN_IF_ERROR(syncStepResults());  // the profiler reads every op's events
    collectProfile();
  } else {
    LLMRT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(result_ready_[slot]));  // faults of the step surface here
    LLMRT_RETURN_IF_ERROR(harvestStepTiming(false));
  }
  return slot;
}

Result<cuda::ResultTokens> CudaBackend::latestResultTokens(int64_t max_src, const char* who) const {
  if (result_tickets_ == 0) return failedPrecondition(std::string(who) + ": tokens of an earlier step, but it has none");
  const int slot = static_cast<int>((result_tickets_ - 1) % 2);
  if (max_src >= result_rows_[slot])
    return invalidArgument(strprintf("%s: token source row %lld lies outside the previous step's %lld rows", who,
                                     static_cast<long long>(max_src), static_cast<long long>(result_rows_[slot])));
  static_assert(offsetof(RowSample, token) == 0 && sizeof(RowSample) % 4 == 0);
  if (!result_samples_[slot]) return cuda::ResultTokens{static_cast<const int32_t*>(argmax_[slot].ptr), 1};
  return cuda::ResultTokens{static_cast<const int32_t*>(sample_out_[slot].ptr),
                            static_cast<int64_t>(sizeof(RowSample) / sizeof(int32_t))};
}

Status CudaBackend::waitArgmax(uint64_t ticket, int32_t* out) {
  LLMRT_ASSIGN_OR_RETURN(int slot, waitResult(ticket, false));
  std::memcpy(out, argmax_host_[slot].ptr, static_cast<size_t>(result_rows_[slot]) * 4);
  return Status::ok();
}

uint64_t CudaBackend::freeMemoryBytes() const {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 0;
  return free_b;
}

BackendMemoryStats CudaBackend::memoryStats() const {
  BackendMemoryStats m;
  m.weights = weight_bytes_;
  m.kv_primary = geometry_.bytesPerBlock() * static_cast<uint64_t>(geometry_.num_blocks);
  m.kv_secondary = geometry_.bytesPerBlock() * static_cast<uint64_t>(secondary_blocks_);
  uint64_t v = 0;
  if (cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &v) == cudaSuccess) m.workspace_reserved = v;
  if (cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemCurrent, &v) == cudaSuccess) m.workspace_used = v;
  if (cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &v) == cudaSuccess) m.workspace_peak = v;
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
    m.device_free = free_b;
    m.device_total = total_b;
  }
  return m;
}

uint64_t CudaBackend::totalMemoryBytes() const {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 0;
  return total_b;
}

Result<TensorView> CudaBackend::loadWeight(std::span<const TensorView> parts, const std::string& name) {
  if (failed()) return error_;
  LLMRT_ASSIGN_OR_RETURN(Shape shape, fusedWeightShape(parts, name));
  // Matrices take the compute dtype; vectors (norms, biases) stay float32.
  const DType dt = shape.rank() >= 2 ? options_.weight_dtype : DType::kF32;
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtypeSize(dt);
  void* dev = nullptr;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMalloc(&dev, std::max<size_t>(bytes, 1)));
  weights_.push_back(dev);
  size_t at = 0;  // bytes
  for (const TensorView& p : parts) {
    LLMRT_RETURN_IF_ERROR(stageWeight(p, dt, static_cast<uint8_t*>(dev) + at, name));
    at += static_cast<size_t>(p.numel()) * dtypeSize(dt);
  }
  weight_bytes_ += bytes;
  return TensorView(dev, dt, shape, Device::kCuda, options_.device);
}

Status CudaBackend::stageWeight(const TensorView& p, DType dt, uint8_t* dev, const std::string& name) {
  // What goes up: the checkpoint's bytes as they are when they are float32 / bf16 / fp16, other
  // dtypes widened to float32 on the host. When that differs from the weights' dtype, a kernel
  // converts it into place on the device (the host's one-thread loop took ~35 s for 8B parameters)
  // and flags a value beyond fp16's range for finishWeights.
  const bool native = p.dtype == DType::kF32 || p.dtype == DType::kBF16 || p.dtype == DType::kF16;
  const DType up = native ? p.dtype : DType::kF32;
  const bool convert = up != dt;
  for (int i = 0; i < 2; ++i) {
    if (!staged_[i])
      LLMRT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&staged_[i], cudaEventDisableTiming));
    if (!staging_[i].ptr) {
      LLMRT_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&staging_[i].ptr, kStagingBytes, cudaHostAllocDefault));
      staging_[i].bytes = kStagingBytes;
    }
    if (convert && !staging_dev_[i].ptr) {
      LLMRT_CUDA_RETURN_IF_ERROR(cudaMalloc(&staging_dev_[i].ptr, kStagingBytes));
      staging_dev_[i].bytes = kStagingBytes;
    }
  }
  if (convert && !first_bad_weight_) {
    LLMRT_CUDA_RETURN_IF_ERROR(cudaMalloc(&first_bad_weight_, sizeof(int32_t)));
    LLMRT_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(first_bad_weight_, 0x7f, sizeof(int32_t), stream_));  // > any tag
  }
  const int32_t tag = static_cast<int32_t>(converted_names_.size());
  if (convert) converted_names_.push_back(name);
  const size_t src_size = dtypeSize(p.dtype), up_size = dtypeSize(up), dst_size = dtypeSize(dt);
  const size_t n = static_cast<size_t>(p.numel());
  const size_t chunk = kStagingBytes / std::max(up_size, dst_size);  // elements per copy
  const uint8_t* src = static_cast<const uint8_t*>(p.data);
  for (size_t e0 = 0; e0 < n; e0 += chunk) {
    const size_t m = std::min(chunk, n - e0);
    void* buf = staging_[staging_next_].ptr;
    // The copy that last read this buffer must be done before it is refilled.
    LLMRT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staged_[staging_next_]));
    if (native)
      std::memcpy(buf, src + e0 * src_size, m * up_size);
    else
      convertToF32(src + e0 * src_size, p.dtype, static_cast<float*>(buf), m);  // (reads unaligned data)
    if (!convert) {
      LLMRT_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(dev + e0 * dst_size, buf, m * dst_size, cudaMemcpyHostToDevice, stream_));
    } else {
      // Up into the device buffer, then converted into place (stream-ordered: the buffer is free
      // again when the next chunk's copy into it runs).
      void* raw = staging_dev_[staging_next_].ptr;
      LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(raw, buf, m * up_size, cudaMemcpyHostToDevice, stream_));
      LLMRT_CUDA_RETURN_IF_ERROR(cuda::convertElements(
          raw, up, dev + e0 * dst_size, dt, static_cast<int64_t>(m), tag, first_bad_weight_, stream_));
    }
    LLMRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(staged_[staging_next_], stream_));
    staging_next_ ^= 1;
  }
  return Status::ok();
}

Status CudaBackend::finishWeights() {
  if (failed()) return error_;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // every weight is on the device
  int32_t first_bad = INT32_MAX;
  if (first_bad_weight_) {
    LLMRT_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(&first_bad, first_bad_weight_, sizeof(int32_t), cudaMemcpyDeviceToHost));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaFree(first_bad_weight_));
    first_bad_weight_ = nullptr;
  }
  for (Buffer& b : staging_) {
    LLMRT_CUDA_RETURN_IF_ERROR(cudaFreeHost(b.ptr));
    b = Buffer{};
  }
  for (Buffer& b : staging_dev_) {
    LLMRT_CUDA_RETURN_IF_ERROR(cudaFree(b.ptr));
    b = Buffer{};
  }
  std::vector<std::string> names = std::move(converted_names_);
  converted_names_ = {};
  // bf16 / fp32 -> fp16 keeps every finite value up to 65504 (bf16's 8 significant bits fit in
  // fp16's 11 down to 2^-14; smaller ones lose bits as subnormals); beyond that a value turned
  // into infinity, so such a checkpoint needs bfloat16.
  if (first_bad >= 0 && static_cast<size_t>(first_bad) < names.size())
    return invalidArgument(
        "weight " + names[static_cast<size_t>(first_bad)] +
        " holds values beyond float16's range (65504): load the model with dtype \"bfloat16\"");
  return Status::ok();
}

TensorView CudaBackend::scratch(int slot, int64_t rows, int64_t cols, DType dtype) {
  if (slot >= static_cast<int>(scratch_.size())) scratch_.resize(static_cast<size_t>(slot) + 1);
  Buffer& b = scratch_[static_cast<size_t>(slot)];
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16) {
    fail(invalidArgument("scratch: dtype " + std::string(dtypeName(dtype)) + " (F32, BF16 or F16 supported)"));
    return TensorView(nullptr, dtype, Shape{rows, cols}, Device::kCuda, options_.device);
  }
  const size_t need = static_cast<size_t>(std::max<int64_t>(rows * cols, 1)) * dtypeSize(dtype);
  reserve(b, need);  // on failure error_ is set and every op is skipped
  return TensorView(b.bytes >= need ? b.ptr : nullptr, dtype, Shape{rows, cols}, Device::kCuda, options_.device);
}


Status CudaBackend::copyToHost(const TensorView& src, float* dst) {
  if (failed()) return error_;
  const int64_t r = viewRows(src), c = viewCols(src), ld = viewRowStride(src);
  if (src.dtype == DType::kBF16 || src.dtype == DType::kF16) {  // (tests) read as 16 bits, widened on the host
    if (r * c == 0) return Status::ok();
    std::vector<uint16_t> tmp(static_cast<size_t>(r * c));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(tmp.data(), c * 2, src.data, ld * 2, c * 2, r,
                                                 cudaMemcpyDeviceToHost, stream_));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    convertToF32(tmp.data(), src.dtype, dst, tmp.size());
    return Status::ok();
  }
  if (src.dtype != DType::kF32) return invalidArgument("copyToHost: only F32, BF16 and F16 views are supported");
  if (r * c == 0) return Status::ok();
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(dst, c * sizeof(float), src.data, ld * sizeof(float),
                                               c * sizeof(float), r, cudaMemcpyDeviceToHost, stream_));
  LLMRT_RETURN_IF_ERROR(syncStepResults());
  collectProfile();
  return Status::ok();
}

Status CudaBackend::copyFromHost(const float* src, TensorView dst) {
  if (failed()) return error_;
  const int64_t r = viewRows(dst), c = viewCols(dst), ld = viewRowStride(dst);
  if (dst.dtype == DType::kBF16 || dst.dtype == DType::kF16) {  // (tests) rounded to 16 bits on the host
    if (r * c == 0) return Status::ok();
    std::vector<uint16_t> tmp(static_cast<size_t>(r * c));
    convertFromF32(src, tmp.data(), dst.dtype, tmp.size());
    LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(dst.data, ld * 2, tmp.data(), c * 2, c * 2, r,
                                                 cudaMemcpyHostToDevice, stream_));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return Status::ok();
  }
  if (dst.dtype != DType::kF32) return invalidArgument("copyFromHost: only F32, BF16 and F16 views are supported");
  if (r * c == 0) return Status::ok();
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(dst.data, ld * sizeof(float), src, c * sizeof(float),
                                               c * sizeof(float), r, cudaMemcpyHostToDevice, stream_));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // `src` may be pageable and short-lived
  return Status::ok();
}

Status CudaBackend::allocateKvPools(const KvPoolGeometry& g, int64_t secondary_blocks) {
  if (g.dtype != DType::kF32 && g.dtype != DType::kBF16 && g.dtype != DType::kF16)
    return unimplemented("CUDA backend stores the KV cache in F32, BF16 or F16, not " +
                         std::string(dtypeName(g.dtype)));
  if (g.num_blocks <= 0 || g.num_layers <= 0 || g.num_kv_heads <= 0 || g.head_dim <= 0 ||
      g.tokens_per_block <= 0)
    return invalidArgument("allocateKvPools: every pool dimension must be positive");
  if (g.head_dim > 256) return unimplemented("CUDA attention supports head_dim <= 256");
  if (secondary_blocks < 0) return invalidArgument("allocateKvPools: secondary_blocks must be >= 0");
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy_stream_));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  ++alloc_epoch_;  // recorded graphs point into the old pool
  LLMRT_CUDA_RETURN_IF_ERROR(cudaFree(primary_));
  primary_ = nullptr;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaFreeHost(secondary_));
  secondary_ = nullptr;
  geometry_ = KvPoolGeometry{};
  const size_t primary_bytes = g.bytesPerBlock() * static_cast<size_t>(g.num_blocks);
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMalloc(&primary_, primary_bytes));
  // Unwritten slots are never read (attention stops at kv_len), but zeroed pools keep
  // whole-block copies and tests deterministic.
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(primary_, 0, primary_bytes, stream_));
  if (secondary_blocks > 0) {
    const size_t bytes = g.bytesPerBlock() * static_cast<size_t>(secondary_blocks);
    LLMRT_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&secondary_, bytes, cudaHostAllocPortable));
    std::memset(secondary_, 0, bytes);
  }
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  // Split-key attention partial states: splits are only used while rows x kv heads < waves x SMs / 2,
  // so rows x kv heads x splits < waves x SMs, each with a GQA group of <= 32 heads of head_dim + 2 floats.
  if (!reserve(partial_, static_cast<size_t>(split_waves_) * num_sms_ * 32 * static_cast<size_t>(g.head_dim + 2) *
                             sizeof(float)))
    return error_;
  geometry_ = g;
  secondary_blocks_ = secondary_blocks;
  LLMRT_LOG_INFO("CUDA KV pools: primary %s on the device, secondary %s pinned on the host",
                 formatBytes(primary_bytes).c_str(),
                 formatBytes(g.bytesPerBlock() * static_cast<size_t>(secondary_blocks)).c_str());
  return Status::ok();
}

Status CudaBackend::copyKvBlocks(std::span<const KvBlockCopy> copies) {
  if (failed()) return error_;
  if (copies.empty()) return Status::ok();
  if (capturing_) return internalError("copyKvBlocks while a step is being recorded");
  const size_t block_bytes = geometry_.bytesPerBlock();
  const size_t esz = dtypeSize(geometry_.dtype);
  // Offload / onboard copies go on the copy stream: after everything the compute stream has
  // enqueued (writes into the source blocks, reads of the destinations), and before anything it
  // enqueues next. Copies between primary blocks only (partial reuse) stay on the compute stream.
  auto pool = [&](KvPoolKind k) -> std::pair<uint8_t*, int64_t> {
    return k == KvPoolKind::kPrimary ? std::pair{static_cast<uint8_t*>(primary_), geometry_.num_blocks}
                                     : std::pair{static_cast<uint8_t*>(secondary_), secondary_blocks_};
  };
  bool touches_host = false;
  for (const KvBlockCopy& c : copies) {  // check them all before enqueuing any
    if (c.src_block < 0 || c.src_block >= pool(c.src_pool).second || c.dst_block < 0 ||
        c.dst_block >= pool(c.dst_pool).second)
      return outOfRange("copyKvBlocks: block id out of range (src " + std::to_string(c.src_block) + ", dst " +
                        std::to_string(c.dst_block) + ")");
    touches_host |= c.src_pool == KvPoolKind::kSecondary || c.dst_pool == KvPoolKind::kSecondary;
  }
  cudaStream_t s_copy = stream_;
  if (touches_host) {
    LLMRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(copies_ready_, stream_));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy_stream_, copies_ready_, 0));
    s_copy = copy_stream_;
  }
  for (const KvBlockCopy& c : copies) {
    uint8_t* src = pool(c.src_pool).first;
    uint8_t* dst = pool(c.dst_pool).first;
    uint8_t* s = src + static_cast<size_t>(c.src_block) * block_bytes;
    uint8_t* d = dst + static_cast<size_t>(c.dst_block) * block_bytes;
    // cudaMemcpyDefault: unified addressing tells device memory from pinned host memory.
    if (c.num_tokens < 0 || c.num_tokens >= geometry_.tokens_per_block) {
      LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d, s, block_bytes, cudaMemcpyDefault, s_copy));
      continue;
    }
    // The first num_tokens slots of every (layer, K/V, head) row of the block: one 2-D copy.
    const size_t pitch = static_cast<size_t>(geometry_.tokens_per_block * geometry_.head_dim) * esz;
    const size_t width = static_cast<size_t>(c.num_tokens * geometry_.head_dim) * esz;
    const size_t height = static_cast<size_t>(geometry_.num_layers * 2 * geometry_.num_kv_heads);
    if (width == 0) continue;
    LLMRT_CUDA_RETURN_IF_ERROR(
        cudaMemcpy2DAsync(d, pitch, s, pitch, width, height, cudaMemcpyDefault, s_copy));
  }
  if (touches_host) {
    LLMRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(copies_done_, copy_stream_));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, copies_done_, 0));
  }
  return Status::ok();
}

Status CudaBackend::readKvBlock(KvPoolKind pool, int32_t block, float* dst) {
  if (failed()) return error_;
  const bool primary = pool == KvPoolKind::kPrimary;
  const int64_t n = primary ? geometry_.num_blocks : secondary_blocks_;
  if (block < 0 || block >= n)
    return outOfRange("readKvBlock: block " + std::to_string(block) + " out of range");
  const size_t bytes = geometry_.bytesPerBlock();
  std::vector<uint8_t> raw(bytes);
  const uint8_t* base = static_cast<const uint8_t*>(primary ? primary_ : secondary_);
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(raw.data(), base + static_cast<size_t>(block) * bytes, bytes,
                                             cudaMemcpyDefault, stream_));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  convertToF32(raw.data(), geometry_.dtype, dst, static_cast<size_t>(geometry_.elementsPerBlock()));
  return Status::ok();
}

cuda::KvLayout CudaBackend::kvLayout() const {
  return cuda::KvLayout{geometry_.elementsPerBlock(), geometry_.num_kv_heads, geometry_.tokens_per_block,
                        geometry_.head_dim};
}

}  // namespace llmrt

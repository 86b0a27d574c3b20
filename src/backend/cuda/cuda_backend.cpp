// CudaBackend: device setup and teardown, the growable buffers, weights, host transfers, graph
// recording and the argmax results; it drives the units it owns (KV pools, weight staging, step
// upload, result slots, graph cache, step timer: cuda_*.h). The ops are in cuda_backend_ops.cpp
// (host side) and the .cu files (kernels).
#include <algorithm>
#include <cstdio>
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
  {
    // The kernels are built for sm_90a only: anything else would fail at the first launch.
    cudaDeviceProp p{};
    LLMRT_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&p, options.device));
    if (p.major != 9 || p.minor != 0)
      return failedPrecondition(strprintf("CUDA backend: device %d is %s (compute capability %d.%d); this build's "
                                          "kernels are for compute capability 9.0 (sm_90a: H100, H200, GH200) only",
                                          options.device, p.name, p.major, p.minor));
  }
  LLMRT_RETURN_IF_ERROR(loadCublasLibraries());
  auto supported = [](DType d) { return d == DType::kBF16 || d == DType::kF16 || d == DType::kF32; };
  if (!supported(options.weight_dtype))
    return fieldError("CudaBackendOptions", "weight_dtype", std::string(dtypeName(options.weight_dtype)),
                      "BF16, F16 or F32");
  if (!supported(options.kv_dtype) && options.kv_dtype != DType::kF8E4M3)
    return fieldError("CudaBackendOptions", "kv_dtype", std::string(dtypeName(options.kv_dtype)),
                      "BF16, F16, F32 or F8_E4M3");
  std::unique_ptr<CudaBackend> b(new CudaBackend(options));
  if (options.weight_dtype == DType::kF32 && options.kv_dtype != DType::kF8E4M3) b->options_.kv_dtype = DType::kF32;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(b->stream_.out(), cudaStreamNonBlocking));
  LLMRT_RETURN_IF_ERROR(b->kv_.init());  // the copy stream and its events
  LLMRT_RETURN_IF_ERROR(b->pool_.create(options.device, b->stream_.get()));
  if (cublasStatus_t s = cublasCreate(b->cublas_.out()); s != CUBLAS_STATUS_SUCCESS)
    return cublasStatus(s, "cublasCreate", __FILE__, __LINE__);
  if (cublasStatus_t s = cublasSetStream(b->cublas_.get(), b->stream_.get()); s != CUBLAS_STATUS_SUCCESS)
    return cublasStatus(s, "cublasSetStream", __FILE__, __LINE__);
  // Float32 products stay float32 (no TF32), so the F32 mode agrees with the CPU backend.
  if (cublasStatus_t s = cublasSetMathMode(b->cublas_.get(), CUBLAS_DEFAULT_MATH); s != CUBLAS_STATUS_SUCCESS)
    return cublasStatus(s, "cublasSetMathMode", __FILE__, __LINE__);
  cudaDeviceProp prop{};
  LLMRT_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, options.device));
  b->num_sms_ = prop.multiProcessorCount;
  // A fixed cuBLAS workspace: cuBLAS then never allocates, which graph capture requires.
  if (!b->reserve(b->cublas_ws_, size_t{32} << 20)) return b->error_;
  if (cublasStatus_t s = cublasSetWorkspace(b->cublas_.get(), b->cublas_ws_.get(), b->cublas_ws_.bytes());
      s != CUBLAS_STATUS_SUCCESS)
    return cublasStatus(s, "cublasSetWorkspace", __FILE__, __LINE__);
  if (cublasStatus_t s = b->lt_.init(); s != CUBLAS_STATUS_SUCCESS) return cublasStatus(s, "cublasLtCreate", __FILE__, __LINE__);
  LLMRT_CUDA_RETURN_IF_ERROR(cuda::initAttentionKernels());
  LLMRT_RETURN_IF_ERROR(b->step_.init());
  LLMRT_RETURN_IF_ERROR(b->results_.init());
  const CudaTuning& t = options.tuning;
  if (t.profile) {
    b->profiler_ = std::make_unique<OpProfiler>();
    LLMRT_LOG_INFO("CUDA backend: profile=on: timing every op (graphs off)");
  }
  // The other switches are read from options_.tuning where they apply.
  b->graphs_.setEnabled(t.graphs && !t.profile);
  // 16-bit product operands (the weights' type) with 16-bit weights and a 16-bit cache; a float32
  // cache asks for accuracy: activations stay float32 and the products take them as hi + lo
  // pairs of the weights' type (linear()).
  const bool half_activations =
      t.half_activations && options.weight_dtype != DType::kF32 && b->options_.kv_dtype != DType::kF32;
  cuda::setPdlEnabled(t.pdl && prop.major >= 9);  // programmatic dependent launch (cuda_pdl.h)
  cuda::setVectorOpsEnabled(t.vector_ops);        // float4 kernels for RMSNorm and RoPE + KV write
  b->group_capacity_ = t.row_group_sampling ? cuda::sampleGroupCapacity() : 0;
  if (const std::string set = t.toString(); !set.empty()) LLMRT_LOG_INFO("CUDA backend: tuning %s", set.c_str());
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
  // Errors on the way out cannot be reported; the process keeps going. Both streams are drained
  // first, so nothing in flight still reads what the members release (in reverse order of their
  // declaration: see cuda_backend_impl.h).
  if (stream_) (void)cudaStreamSynchronize(stream_.get());
  if (profiler_) {
    profiler_->collect();
    std::fprintf(stderr, "%s", profiler_->report().c_str());  // asked for by tuning profile=on: always shown
  }
  (void)kv_.waitCopies();
}

void CudaBackend::fail(Status s) {
  if (error_.isOk()) {
    LLMRT_LOG_ERROR("CUDA backend: %s", s.message().c_str());
    error_ = std::move(s);
  }
}

bool CudaBackend::reserve(PoolBuffer& b, size_t bytes, bool used_by_graphs) {
  if (b.bytes() >= bytes) return true;
  if (failed()) return false;
  if (graphs_.recording()) {
    fail(internalError(strprintf("a buffer must grow to %zu bytes while a step is being recorded", bytes)));
    return false;
  }
  if (used_by_graphs) graphs_.invalidate();  // recorded graphs may point into the old buffer
  if (Status s = pool_.grow(b, bytes); !s.isOk()) {
    fail(std::move(s));
    return false;
  }
  return true;
}

Status CudaBackend::reserveWorkspace(int64_t max_tokens, int64_t max_width) {
  if (failed()) return error_;
  if (max_tokens < 1 || max_width < 1) return invalidArgument("reserveWorkspace: sizes must be positive");
  moe_max_tokens_ = max_tokens;  // moeAdd sizes its workspace for such steps at its first call
  if (options_.weight_dtype != DType::kF32)  // (hi and lo parts with float32 activations)
    reserve(half_x_, static_cast<size_t>(max_tokens * max_width) * (activation_dtype_ == DType::kF32 ? 4 : 2));
  if (int4_max_elems_ > 0)  // 4-bit weights dequantized for cuBLASLt
    reserve(int4_w_, static_cast<size_t>(int4_max_elems_) * (options_.weight_dtype == DType::kF32 ? 4 : 2));
  if (has_fp8_weights_) {  // 8-bit products' quantized inputs (codes, then the row scales) and sums
    // (and writeQuantized's rows in the activation dtype, which half_x_ holds: with float32
    // weights the reservation above does not run)
    reserve(half_x_, static_cast<size_t>(max_tokens * max_width) * dtypeSize(activation_dtype_));
    reserve(fp8_x_, static_cast<size_t>(max_tokens * max_width + 256) + static_cast<size_t>(max_tokens) * sizeof(float));
    reserve(fp8_sums_, static_cast<size_t>(kW8a8SumsBytes));
  }
  for (int i = 0; i < 2; ++i)
    reserve(results_.slot(i).argmax, static_cast<size_t>(max_tokens) * sizeof(int32_t), false);
  reserve(norm_sums_, static_cast<size_t>(cuda::kGemvMaxRows * ((max_width + cuda::kGemvNormGroup - 1) /
                                                                  cuda::kGemvNormGroup)) * sizeof(float));
  return error_;  // set by a failed reserve
}

void CudaBackend::recordOrReplay(uint64_t key, const std::function<void()>& body) {
  if (failed() || !graphs_.enabled()) {
    body();
    return;
  }
  const uint64_t k = key * 0x9E3779B97F4A7C15ull ^ step_.layout();
  cudaGraphExec_t graph_exec = graphs_.find(k);  // (drops every record when a buffer moved)
  if (!graph_exec) {
    // Record: the ops enqueue into a graph instead of running.
    if (cudaError_t e = cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeThreadLocal); e != cudaSuccess) {
      fail(cudaStatus(e, "cudaStreamBeginCapture", __FILE__, __LINE__));
      return;
    }
    graphs_.setRecording(true);
    body();
    graphs_.setRecording(false);
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream_.get(), &graph);
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
      graphs_.setEnabled(false);
      error_ = Status::ok();
      (void)cudaGetLastError();
      body();
      return;
    }
    graph_exec = graphs_.insert(k, CudaGraphExec(exec));
    LLMRT_LOG_DEBUG("CUDA backend: recorded a graph for key %llu (%zu recorded)", static_cast<unsigned long long>(key),
                    graphs_.size());
  }
  if (cudaError_t e = cudaGraphLaunch(graph_exec, stream_.get()); e != cudaSuccess)
    fail(cudaStatus(e, "cudaGraphLaunch", __FILE__, __LINE__));
}

Status CudaBackend::argmaxRows(const TensorView& logits, int32_t* out) {
  LLMRT_ASSIGN_OR_RETURN(uint64_t ticket, argmaxRowsAsync(logits));
  return waitArgmax(ticket, out);
}

Result<uint64_t> CudaBackend::argmaxRowsAsync(const TensorView& logits) {
  if (failed()) return error_;
  if (graphs_.recording()) return internalError("argmaxRowsAsync while a step is being recorded");
  const int64_t rows = viewRows(logits), vocab = viewCols(logits);
  const int slot = results_.next();
  ResultSlots::Slot& res = results_.slot(slot);
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(rows, 1)) * sizeof(int32_t);
  // The ids, then (16-byte aligned) the split argmax's partial results.
  const size_t ids_bytes = (bytes + 15) / 16 * 16, work_bytes = cuda::argmaxWorkBytes(rows, vocab);
  if (!reserve(res.argmax, ids_bytes + work_bytes, false)) return error_;
  LLMRT_RETURN_IF_ERROR(res.argmax_host.reserve(bytes, stream_.get()));
  if (rows > 0) {
    OpScope scope(this, [&] { return std::string("argmax"); });
    void* work = work_bytes > 0 ? static_cast<uint8_t*>(res.argmax.get()) + ids_bytes : nullptr;
    LLMRT_CUDA_RETURN_IF_ERROR(cuda::argmaxRows(static_cast<const float*>(logits.data), viewRowStride(logits), rows,
                                                vocab, static_cast<int32_t*>(res.argmax.get()), work, stream_.get()));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(res.argmax_host.get(), res.argmax.get(), static_cast<size_t>(rows) * 4,
                                               cudaMemcpyDeviceToHost, stream_.get()));
  }
  return publishResult(slot, rows, false);
}

Result<uint64_t> CudaBackend::publishResult(int slot, int64_t rows, bool samples) {
  LLMRT_RETURN_IF_ERROR(timer_.close(stream_.get()));
  return results_.publish(slot, rows, samples, stream_.get());
}

Result<int> CudaBackend::waitResult(uint64_t ticket, bool samples) {
  if (failed()) return error_;
  LLMRT_ASSIGN_OR_RETURN(int slot, results_.find(ticket, samples));
  if (profiler_) {
    LLMRT_RETURN_IF_ERROR(syncStepResults());  // the profiler reads every op's events
    collectProfile();
  } else {
    // Faults of the step surface here.
    LLMRT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(results_.slot(slot).ready.get()));
    LLMRT_RETURN_IF_ERROR(timer_.harvest(false));
  }
  return slot;
}

Status CudaBackend::waitArgmax(uint64_t ticket, int32_t* out) {
  LLMRT_ASSIGN_OR_RETURN(int slot, waitResult(ticket, false));
  const ResultSlots::Slot& res = results_.slot(slot);
  std::memcpy(out, res.argmax_host.get(), static_cast<size_t>(res.rows) * 4);
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
  m.kv_primary = kv_.primaryBytes();
  m.kv_secondary = kv_.secondaryBytes();
  uint64_t v = 0;
  if (cudaMemPoolGetAttribute(pool_.get(), cudaMemPoolAttrReservedMemCurrent, &v) == cudaSuccess) m.workspace_reserved = v;
  if (cudaMemPoolGetAttribute(pool_.get(), cudaMemPoolAttrUsedMemCurrent, &v) == cudaSuccess) m.workspace_used = v;
  if (cudaMemPoolGetAttribute(pool_.get(), cudaMemPoolAttrUsedMemHigh, &v) == cudaSuccess) m.workspace_peak = v;
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

Result<TensorView> CudaBackend::loadWeight(std::span<const TensorView> parts, const std::string& name,
                                           bool /*borrowable: every part is copied*/) {
  if (failed()) return error_;
  LLMRT_ASSIGN_OR_RETURN(Shape shape, fusedWeightShape(parts, name));
  // Matrices take the compute dtype; vectors (norms, biases) stay float32.
  const DType dt = shape.rank() >= 2 ? options_.weight_dtype : DType::kF32;
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtypeSize(dt);
  void* dev = nullptr;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMalloc(&dev, std::max<size_t>(bytes, 1)));
  weights_.emplace_back(dev);
  size_t at = 0;  // bytes
  for (const TensorView& p : parts) {
    LLMRT_RETURN_IF_ERROR(stager_.stage(p, dt, static_cast<uint8_t*>(dev) + at, name, stream_.get()));
    at += static_cast<size_t>(p.numel()) * dtypeSize(dt);
  }
  weight_bytes_ += bytes;
  return TensorView(dev, dt, shape, Device::kCuda, options_.device);
}

size_t CudaBackend::fp8ScalesOffset(int64_t n, int64_t k) {
  return (static_cast<size_t>(fp8PaddedRows(n) * k) + 255) / 256 * 256;
}

Result<TensorView> CudaBackend::loadQuantizedWeight(const TensorView& codes, const TensorView& scales,
                                              const std::string& name) {
  if (failed()) return error_;
  LLMRT_RETURN_IF_ERROR(checkQuantizedWeightParts(codes, scales, name));
  const int64_t n = codes.shape[0], k = codes.shape[1];
  const size_t at = fp8ScalesOffset(n, k), bytes = at + static_cast<size_t>(n) * sizeof(float);
  void* dev = nullptr;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMalloc(&dev, bytes));
  weights_.emplace_back(dev);
  has_fp8_weights_ = true;
  auto* base = static_cast<uint8_t*>(dev);
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(base + n * k, 0, at - static_cast<size_t>(n * k), stream_.get()));
  LLMRT_RETURN_IF_ERROR(stager_.stage(codes, codes.dtype, base, name, stream_.get()));
  LLMRT_RETURN_IF_ERROR(stager_.stage(scales, DType::kF32, base + at, name, stream_.get()));
  weight_bytes_ += bytes;
  return TensorView(dev, codes.dtype, codes.shape, Device::kCuda, options_.device);
}

Result<TensorView> CudaBackend::loadInt4Weight(const TensorView& codes, const TensorView& scales,
                                               const TensorView& zeros, int64_t group, const std::string& name) {
  if (failed()) return error_;
  LLMRT_RETURN_IF_ERROR(checkInt4WeightParts(codes, scales, zeros, group, name));
  const int64_t n = codes.shape[0], k = codes.shape[1], groups = k / group;
  if (k % 8 != 0)
    return unimplemented("loadInt4Weight(" + name + "): in_features " + std::to_string(k) +
                         " is not a multiple of 8; use quantization none");
  // Host copies in the device layout: packed codes, scales, zero terms (2^23 + zero).
  std::vector<uint32_t> packed(static_cast<size_t>(n * k / 8));
  const auto* c = static_cast<const uint8_t*>(codes.data);
  for (size_t i = 0; i < packed.size(); ++i) {
    const uint8_t* e = c + i * 8;
    packed[i] = uint32_t{e[0]} | uint32_t{e[1]} << 4 | uint32_t{e[2]} << 8 | uint32_t{e[3]} << 12 |
                uint32_t{e[4]} << 16 | uint32_t{e[5]} << 20 | uint32_t{e[6]} << 24 | uint32_t{e[7]} << 28;
  }
  std::vector<float> zero_terms(static_cast<size_t>(n * groups));
  const auto* z = static_cast<const uint8_t*>(zeros.data);
  for (size_t i = 0; i < zero_terms.size(); ++i) zero_terms[i] = 8388608.0f + static_cast<float>(z[i]);
  auto align = [](size_t b) { return (b + 255) / 256 * 256; };
  Int4Weight meta;
  meta.group = group;
  meta.scales_at = align(packed.size() * sizeof(uint32_t));
  meta.zeros_at = meta.scales_at + align(static_cast<size_t>(n * groups) * sizeof(float));
  const size_t bytes = meta.zeros_at + static_cast<size_t>(n * groups) * sizeof(float);
  void* dev = nullptr;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMalloc(&dev, bytes));
  weights_.emplace_back(dev);
  auto* base = static_cast<uint8_t*>(dev);
  // (Raw words staged as F32: copied as they are.)
  LLMRT_RETURN_IF_ERROR(stager_.stage(TensorView(packed.data(), DType::kF32, Shape{static_cast<int64_t>(packed.size())}),
                                      DType::kF32, base, name, stream_.get()));
  LLMRT_RETURN_IF_ERROR(stager_.stage(scales, DType::kF32, base + meta.scales_at, name, stream_.get()));
  LLMRT_RETURN_IF_ERROR(stager_.stage(TensorView(zero_terms.data(), DType::kF32, Shape{n * groups}), DType::kF32,
                                      base + meta.zeros_at, name, stream_.get()));
  weight_bytes_ += bytes;
  int4_weights_[dev] = meta;
  int4_max_elems_ = std::max(int4_max_elems_, n * k);
  return TensorView(dev, DType::kU8, codes.shape, Device::kCuda, options_.device);
}

const float* CudaBackend::fp8RowScales(const TensorView& w) {
  return reinterpret_cast<const float*>(static_cast<const uint8_t*>(w.data) + fp8ScalesOffset(w.shape[0], w.shape[1]));
}

Status CudaBackend::finishWeights() {
  if (failed()) return error_;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));  // every weight is on the device
  return stager_.finish();
}

TensorView CudaBackend::scratch(int slot, int64_t rows, int64_t cols, DType dtype) {
  if (slot >= static_cast<int>(scratch_.size())) scratch_.resize(static_cast<size_t>(slot) + 1);
  PoolBuffer& b = scratch_[static_cast<size_t>(slot)];
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16 && !isRowQuantized(dtype)) {
    fail(invalidArgument("scratch: dtype " + std::string(dtypeName(dtype)) +
                         " (F32, BF16, F16, and F8_E4M3 or I8 row-quantized supported)"));
    return TensorView(nullptr, dtype, Shape{rows, cols}, Device::kCuda, options_.device);
  }
  // A row-quantized view's codes, then its row scales (rowQuantizedScales).
  const size_t need =
      isRowQuantized(dtype)
          ? static_cast<size_t>(rowQuantizedScalesOffset(rows, cols) + std::max<int64_t>(rows, 1) * 4)
          : static_cast<size_t>(std::max<int64_t>(rows * cols, 1)) * dtypeSize(dtype);
  reserve(b, need);  // on failure error_ is set and every op is skipped
  return TensorView(b.bytes() >= need ? b.get() : nullptr, dtype, Shape{rows, cols}, Device::kCuda, options_.device);
}

Status CudaBackend::copyToHost(const TensorView& src, float* dst) {
  if (failed()) return error_;
  const int64_t r = viewRows(src), c = viewCols(src), ld = viewRowStride(src);
  if (src.dtype == DType::kBF16 || src.dtype == DType::kF16) {  // (tests) read as 16 bits, widened on the host
    if (r * c == 0) return Status::ok();
    std::vector<uint16_t> tmp(static_cast<size_t>(r * c));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(tmp.data(), c * 2, src.data, ld * 2, c * 2, r,
                                                 cudaMemcpyDeviceToHost, stream_.get()));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
    convertToF32(tmp.data(), src.dtype, dst, tmp.size());
    return Status::ok();
  }
  if (src.dtype != DType::kF32) return invalidArgument("copyToHost: only F32, BF16 and F16 views are supported");
  if (r * c == 0) return Status::ok();
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(dst, c * sizeof(float), src.data, ld * sizeof(float),
                                               c * sizeof(float), r, cudaMemcpyDeviceToHost, stream_.get()));
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
                                                 cudaMemcpyHostToDevice, stream_.get()));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
    return Status::ok();
  }
  if (dst.dtype != DType::kF32) return invalidArgument("copyFromHost: only F32, BF16 and F16 views are supported");
  if (r * c == 0) return Status::ok();
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(dst.data, ld * sizeof(float), src, c * sizeof(float),
                                               c * sizeof(float), r, cudaMemcpyHostToDevice, stream_.get()));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));  // `src` may be pageable and short-lived
  return Status::ok();
}

Status CudaBackend::allocateKvPools(const KvPoolGeometry& g, int64_t secondary_blocks) {
  LLMRT_RETURN_IF_ERROR(KvPools::check(g, secondary_blocks));
  LLMRT_RETURN_IF_ERROR(kv_.waitCopies());
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
  graphs_.invalidate();  // recorded graphs point into the old pool
  LLMRT_RETURN_IF_ERROR(kv_.reallocate(g, secondary_blocks, stream_.get()));
  // Split-key attention partial states: splits are only used while rows x kv heads < waves x SMs / 2,
  // so rows x kv heads x splits < waves x SMs, each with a GQA group of <= 32 heads of head_dim + 2 floats.
  if (!reserve(partial_, static_cast<size_t>(tuning().split_waves) * num_sms_ * 32 *
                             static_cast<size_t>(g.head_dim + 2) * sizeof(float)))
    return error_;
  kv_.commit(g, secondary_blocks);
  return Status::ok();
}

Status CudaBackend::copyKvBlocks(std::span<const KvBlockCopy> copies) {
  if (failed()) return error_;
  if (copies.empty()) return Status::ok();
  if (graphs_.recording()) return internalError("copyKvBlocks while a step is being recorded");
  // (Called from the step loop's thread for every tensor-parallel rank: on this backend's device,
  // leaving the thread's current device as it was.)
  int previous = 0;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
  if (previous != options_.device) LLMRT_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  const Status st = kv_.copyBlocks(copies, stream_.get());
  if (previous != options_.device) LLMRT_CUDA_RETURN_IF_ERROR(cudaSetDevice(previous));
  return st;
}

Status CudaBackend::readKvBlock(KvPool pool, int32_t block, float* dst) {
  if (failed()) return error_;
  return kv_.readBlock(pool, block, dst, stream_.get());
}

Status CudaBackend::setKvCacheScales(std::span<const float> scales) {
  if (graphs_.recording()) return internalError("setKvCacheScales while a step is being recorded");
  LLMRT_RETURN_IF_ERROR(kv_.setScales(scales));
  graphs_.invalidate();  // recorded kernels carry the old scales
  return Status::ok();
}

}  // namespace llmrt

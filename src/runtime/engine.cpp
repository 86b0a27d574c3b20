#include "runtime/engine.h"

#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#if LLMRT_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "core/logging.h"
#include "kv/kv_cache_sizing.h"

namespace llmrt {

Status EngineOptions::validate() const {
  if (model_dir.empty()) return fieldError("EngineOptions", "model", "\"\"", "a model directory");
  if (backend != "cpu" && backend != "cuda")
    return fieldError("EngineOptions", "backend", "\"" + backend + "\"", "\"cpu\" or \"cuda\"");
  if (dtype != "auto" && dtype != "bfloat16" && dtype != "float16" && dtype != "float32")
    return fieldError("EngineOptions", "dtype", "\"" + dtype + "\"",
                      "\"auto\", \"bfloat16\", \"float16\" or \"float32\"");
  if (backend == "cpu" && (dtype == "bfloat16" || dtype == "float16"))
    return fieldError("EngineOptions", "dtype", "\"" + dtype + "\"",
                      "\"auto\" or \"float32\" (the CPU backend computes in float32)");
  const std::string& kvd = kv_cache_config.dtype;
  if ((kvd == "bfloat16" || kvd == "float16") && (backend == "cpu" || dtype == "float32"))
    return fieldError("KvCacheConfig", "dtype", "\"" + kvd + "\"",
                      "\"auto\" or \"float32\" with " +
                          std::string(backend == "cpu" ? "the CPU backend (it computes in float32)"
                                                       : "dtype \"float32\" (a 16-bit cache needs 16-bit weights)"));
  if (num_threads < 0) return fieldError("EngineOptions", "num_threads", std::to_string(num_threads), ">= 0");
  if (max_seq_len < 0) return fieldError("EngineOptions", "max_seq_len", std::to_string(max_seq_len), ">= 0");
  if (max_num_tokens < 1 || max_num_tokens > (1 << 20))
    return fieldError("EngineOptions", "max_num_tokens", std::to_string(max_num_tokens), "an integer in [1, 1048576]");
  return kv_cache_config.validate();
}

Engine::~Engine() = default;

DType computeDtype(const EngineOptions& options, const WeightStore& weights, const ModelConfig& config) {
  if (options.backend == "cpu" || options.dtype == "float32") return DType::kF32;
  if (options.dtype == "bfloat16") return DType::kBF16;
  if (options.dtype == "float16") return DType::kF16;
  // "auto": a float16 checkpoint stays float16 (rounding it to bf16 would drop 3 bits of every
  // weight); bf16 and fp32 checkpoints run in bf16. The checkpoint's dtype is what the config
  // says, else the floating-point dtype holding most of the weights' bytes.
  if (config.torch_dtype == "float16") return DType::kF16;
  if (!config.torch_dtype.empty()) return DType::kBF16;
  uint64_t f16 = 0, other = 0;
  for (const WeightEntry& w : weights.entries()) {
    if (w.dtype == DType::kF16)
      f16 += w.nbytes;
    else if (w.dtype == DType::kBF16 || w.dtype == DType::kF32)
      other += w.nbytes;
  }
  return f16 > other ? DType::kF16 : DType::kBF16;
}

DType kvCacheDtype(const EngineOptions& options, DType compute) {
  const std::string& d = options.kv_cache_config.dtype;
  if (compute == DType::kF32 || d == "float32") return DType::kF32;
  if (d == "bfloat16") return DType::kBF16;
  if (d == "float16") return DType::kF16;
  return compute;  // "auto"
}

namespace {

// The CPU backend reports host memory to the KV sizing rule.
class BackendMemoryReporter final : public KvMemoryReporter {
 public:
  explicit BackendMemoryReporter(const Backend& b) : b_(b) {}
  KvMemoryInfo primaryMemoryInfo() const override { return {b_.totalMemoryBytes(), b_.freeMemoryBytes()}; }

 private:
  const Backend& b_;
};

Result<std::unique_ptr<Backend>> createBackend(const EngineOptions& options, const WeightStore& weights,
                                               const ModelConfig& config) {
  if (options.backend == "cpu") return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(options.num_threads));
#if LLMRT_HAVE_CUDA
  CudaBackendOptions co;
  co.weight_dtype = computeDtype(options, weights, config);
  co.kv_dtype = kvCacheDtype(options, co.weight_dtype);
  return createCudaBackend(co);
#else
  (void)weights;
  (void)config;
  return unimplemented("EngineOptions: backend \"cuda\": this build has no CUDA backend "
                       "(configure with -DLLMRT_CUDA=ON where nvcc is installed)");
#endif
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const EngineOptions& options) {
  LLMRT_RETURN_IF_ERROR(options.validate());
  std::unique_ptr<Engine> e(new Engine());
  e->options_ = options;
  LLMRT_ASSIGN_OR_RETURN(e->dir_, ModelDirectory::open(options.model_dir));
  const ModelConfig& cfg = e->dir_.config;

  e->max_seq_len_ = options.max_seq_len > 0 ? options.max_seq_len : cfg.max_position_embeddings;
  if (e->max_seq_len_ > (int64_t{1} << 30))
    return fieldError("EngineOptions", "max_seq_len", std::to_string(e->max_seq_len_), "at most 2^30");

  if (e->dir_.generation && !e->dir_.generation->eos_token_ids.empty()) {
    for (int64_t id : e->dir_.generation->eos_token_ids) e->eos_ids_.push_back(static_cast<TokenId>(id));
  } else {
    for (int64_t id : cfg.eos_token_ids) e->eos_ids_.push_back(static_cast<TokenId>(id));
  }
  if (!cfg.bos_token_ids.empty()) e->bos_id_ = static_cast<TokenId>(cfg.bos_token_ids.front());

  if (e->dir_.tokenizer_json) {
    LLMRT_ASSIGN_OR_RETURN(e->tokenizer_, Tokenizer::fromFile(*e->dir_.tokenizer_json));
  }

  LLMRT_ASSIGN_OR_RETURN(e->backend_, createBackend(options, e->dir_.weights, cfg));
  const WeightStore* weights = &e->dir_.weights;
  LLMRT_ASSIGN_OR_RETURN(e->model_, LlamaModel::load(cfg, [weights](const std::string& n) { return weights->tensor(n); },
                                                     *e->backend_));
  LLMRT_LOG_INFO("[MemUsageChange] Allocated %s for weights (%s backend)",
                 formatBytes(e->backend_->weightBytes()).c_str(), e->backend_->name().c_str());
  if (e->backend_->device() != Device::kCpu) {
    // Activation buffers for a full step, allocated before the KV cache takes what is left,
    // so no step can run out of memory (the CPU backend grows them on demand instead).
    const uint64_t before = e->backend_->freeMemoryBytes();
    LLMRT_RETURN_IF_ERROR(e->model_->reserveActivations(options.max_num_tokens,
                                                        std::min<int64_t>(options.max_num_tokens, 1024)));
    const uint64_t after = e->backend_->freeMemoryBytes();
    LLMRT_LOG_INFO("[MemUsageChange] Allocated %s for activations and workspace (steps of up to %lld tokens)",
                   formatBytes(before > after ? before - after : 0).c_str(),
                   static_cast<long long>(std::max<int64_t>(options.max_num_tokens, LlamaModel::kMaxRecordedBatch)));
  }

  // KV cache: sized from what the backend has left, in the backend's KV dtype (F32 on CPU).
  const DType kv_dtype = e->backend_->preferredKvDtype();
  KvCacheLayout layout;
  layout.num_layers = static_cast<int32_t>(cfg.num_hidden_layers);
  layout.num_kv_heads = static_cast<int32_t>(cfg.num_key_value_heads);
  layout.head_dim = static_cast<int32_t>(cfg.head_dim);
  layout.dtype = kv_dtype;
  layout.max_sequence_length = static_cast<int32_t>(e->max_seq_len_);
  BackendMemoryReporter memory(*e->backend_);
  KvCacheConfig kv_config = options.kv_cache_config;
  if (e->backend_->device() == Device::kCpu && !kv_config.max_tokens && !kv_config.free_gpu_memory_fraction) {
    // On the CPU, host memory is shared with everything else: unless the user
    // sized the cache, cap it at what a few full-length sequences need.
    kv_config.max_tokens = std::max<int64_t>(4 * e->max_seq_len_, 32768);
    LLMRT_LOG_INFO("KV cache on the CPU backend capped at %lld tokens (set max_tokens or free_gpu_memory_fraction "
                   "to change)", static_cast<long long>(*kv_config.max_tokens));
  }
  LLMRT_ASSIGN_OR_RETURN(KvCacheSizing sizing, computeKvCacheSizing(kv_config, layout, memory));
  KvPoolGeometry geometry{sizing.num_primary_blocks, cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim,
                          sizing.tokens_per_block, kv_dtype};
  LLMRT_RETURN_IF_ERROR(e->backend_->allocateKvPools(geometry, sizing.num_secondary_blocks));
  if (const BackendMemoryStats m = e->backend_->memoryStats(); m.device_total > 0) {
    LLMRT_LOG_INFO("[MemUsage] %s: weights %s, workspace pool %s reserved (%s in use, peak %s), KV cache %s on the "
                   "device + %s pinned on the host; device free %s of %s",
                   e->backend_->name().c_str(), formatBytes(m.weights).c_str(),
                   formatBytes(m.workspace_reserved).c_str(), formatBytes(m.workspace_used).c_str(),
                   formatBytes(m.workspace_peak).c_str(), formatBytes(m.kv_primary).c_str(),
                   formatBytes(m.kv_secondary).c_str(), formatBytes(m.device_free).c_str(),
                   formatBytes(m.device_total).c_str());
  }
  LLMRT_ASSIGN_OR_RETURN(e->kv_, KvCacheManager::create(kv_config, sizing));
  e->runner_ = std::make_unique<ModelRunner>(*e->model_, *e->backend_, *e->kv_, e->eos_ids_);
  return e;
}

}  // namespace llmrt

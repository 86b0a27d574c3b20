#include "runtime/engine.h"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "backend/comm/in_process_communicator.h"
#include "backend/cpu/cpu_backend.h"
#if LLMRT_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "core/logging.h"
#include "core/thread_pool.h"
#include "kv/kv_cache_sizing.h"
#include "runtime/quantize_at_load.h"
#include "runtime/step_builder.h"
#include "model/attention_windows.h"

namespace llmrt {

Engine::~Engine() = default;

bool cudaBackendAvailable() {
#if LLMRT_HAVE_CUDA
  return ::access("/dev/nvidiactl", F_OK) == 0 || ::access("/dev/nvidia0", F_OK) == 0;
#else
  return false;
#endif
}

DType computeDtype(const EngineConfig& config, BackendKind backend, const WeightStore& weights,
                   const ModelConfig& model) {
  if (backend == BackendKind::kCpu || config.dtype == ComputeDtype::kFloat32) return DType::kF32;
  if (config.dtype == ComputeDtype::kBFloat16) return DType::kBF16;
  if (config.dtype == ComputeDtype::kFloat16) return DType::kF16;
  // auto: a float16 checkpoint stays float16 (rounding it to bf16 would drop 3 bits of every
  // weight); bf16 and fp32 checkpoints run in bf16. The checkpoint's dtype is what the config
  // says, else the floating-point dtype holding most of the weights' bytes.
  if (model.torch_dtype == "float16") return DType::kF16;
  if (!model.torch_dtype.empty()) return DType::kBF16;
  uint64_t f16 = 0, other = 0;
  for (const WeightEntry& w : weights.entries()) {
    if (w.dtype == DType::kF16)
      f16 += w.nbytes;
    else if (w.dtype == DType::kBF16 || w.dtype == DType::kF32)
      other += w.nbytes;
  }
  return f16 > other ? DType::kF16 : DType::kBF16;
}

DType kvCacheDtype(const EngineConfig& config, DType compute) {
  const KvCacheDtype d = config.kv_cache_config.dtype;
  if (d == KvCacheDtype::kFp8) return DType::kF8E4M3;  // any compute dtype (the CPU emulates it exactly)
  if (compute == DType::kF32 || d == KvCacheDtype::kFloat32) return DType::kF32;
  if (d == KvCacheDtype::kBFloat16) return DType::kBF16;
  if (d == KvCacheDtype::kFloat16) return DType::kF16;
  return compute;  // auto
}

Result<ResolvedConfig> resolveConfig(const EngineConfig& config, const ModelDirectory& dir) {
  ResolvedConfig r;
  r.config = config;
  EngineConfig& c = r.config;
  const ModelConfig& model = dir.config;
  constexpr std::string_view kWhere = "EngineConfig";

  if (c.backend == BackendKind::kAuto) {
    c.backend = cudaBackendAvailable() ? BackendKind::kCuda : BackendKind::kCpu;
    r.notes.push_back(c.backend == BackendKind::kCuda ? "backend auto: a GPU is present"
                                                      : "backend auto: no GPU or no CUDA backend in this build");
  }
  if (c.tensor_parallel_size == 0) {  // max: every visible GPU
    int gpus = 1;
#if LLMRT_HAVE_CUDA
    if (c.backend == BackendKind::kCuda) gpus = std::max(1, cudaDeviceCount());
#endif
    c.tensor_parallel_size = std::min(gpus, 8);
    r.notes.push_back("tensor_parallel_size max: " + std::to_string(c.tensor_parallel_size) +
                      (c.backend == BackendKind::kCuda ? " (the visible GPUs)" : " (backend cpu)"));
  }
  r.compute_dtype = computeDtype(c, c.backend, dir.weights, model);
  r.kv_dtype = kvCacheDtype(c, r.compute_dtype);
  c.dtype = r.compute_dtype == DType::kBF16 ? ComputeDtype::kBFloat16
            : r.compute_dtype == DType::kF16 ? ComputeDtype::kFloat16
                                             : ComputeDtype::kFloat32;
  c.kv_cache_config.dtype = r.kv_dtype == DType::kBF16 ? KvCacheDtype::kBFloat16
                            : r.kv_dtype == DType::kF16 ? KvCacheDtype::kFloat16
                            : r.kv_dtype == DType::kF8E4M3 ? KvCacheDtype::kFp8
                                                           : KvCacheDtype::kFloat32;
  if (c.quantization == Quantization::kAuto && model.weight_quantization == "awq") {
    r.int4_products = true;
    r.notes.push_back("quantization auto: an AWQ checkpoint (4-bit weights, 16-bit activations)");
  }
  if (c.quantization == Quantization::kAuto) {
    c.quantization = model.weight_quantization == "fp8"    ? Quantization::kFp8
                     : model.weight_quantization == "int8" ? Quantization::kInt8
                                                           : Quantization::kNone;
    if (c.quantization != Quantization::kNone)
      r.notes.push_back("quantization auto: an " + std::string(c.quantization == Quantization::kFp8 ? "FP8" : "INT8") +
                        " checkpoint");
  }
  if (c.quantization == Quantization::kSmoothQuant || c.quantization == Quantization::kAwq)
    return fieldError(kWhere, "quantization", toString(c.quantization),
                      "auto, none, fp8 or int8 here (Engine::create calibrates smoothquant and awq checkpoints first)");
  if (c.quantization != Quantization::kNone && model.weight_quantization == "awq")
    return fieldError(kWhere, "quantization", toString(c.quantization),
                      "auto (4-bit weights) or none (dequantized at load) for an AWQ checkpoint");
  r.product_codes = c.quantization == Quantization::kFp8    ? DType::kF8E4M3
                    : c.quantization == Quantization::kInt8 ? DType::kI8
                                                            : DType::kF32;
  if (r.product_codes != DType::kF32 && model.decoder.num_experts > 0)
    r.notes.push_back("quantization " + std::string(toString(c.quantization)) +
                      ": the experts of mixture-of-experts layers stay 16-bit");
  if (c.tensor_parallel_size > 1) {
    // (Which models split, and how, is DecoderModel::load's to say: planTensorParallel.)
    if (c.overlap == OverlapMode::kOn) r.notes.push_back("overlap off: tensor-parallel ranks run steps in lockstep");
    c.overlap = OverlapMode::kOff;
  }
  if (c.overlap == OverlapMode::kAuto) c.overlap = c.backend == BackendKind::kCuda ? OverlapMode::kOn : OverlapMode::kOff;

  const int64_t positions = model.max_position_embeddings;
  if (c.max_seq_len == 0) {
    c.max_seq_len = positions;
    r.notes.push_back("max_seq_len: the model's max_position_embeddings");
  } else if (c.max_seq_len > positions) {
    // Beyond the trained positions only where the RoPE scaling is made for it (as vLLM derives
    // its limit): linear and yarn stretch the positions by `factor` (yarn from the original
    // length); dynamic NTK rescales for any length.
    const RopeScaling& rs = model.rope_scaling;
    const int64_t original = rs.original_max_position_embeddings > 0 ? rs.original_max_position_embeddings : positions;
    int64_t limit = positions;
    std::string why = "the model's max_position_embeddings";
    if (rs.type == RopeScalingType::kLinear || rs.type == RopeScalingType::kYarn) {
      limit = std::max<int64_t>(positions, static_cast<int64_t>(static_cast<double>(original) * rs.factor));
      why = std::string(ropeScalingTypeName(rs.type)) + " RoPE scaling's factor x the model's positions";
    } else if (rs.type == RopeScalingType::kDynamic) {
      limit = c.max_seq_len;
      r.notes.push_back("max_seq_len beyond max_position_embeddings: dynamic NTK RoPE rescales for it");
    }
    if (c.max_seq_len > limit)
      return fieldError(kWhere, "max_seq_len", std::to_string(c.max_seq_len),
                        strprintf("at most %lld (%s; max_position_embeddings %lld, config.json)",
                                  static_cast<long long>(limit), why.c_str(), static_cast<long long>(positions)));
  }
  if (c.max_input_len == 0) {
    c.max_input_len = c.max_seq_len - 1;
  } else if (c.max_input_len >= c.max_seq_len) {
    return fieldError(kWhere, "max_input_len", std::to_string(c.max_input_len),
                      strprintf("less than max_seq_len (%lld%s), leaving room for one generated token",
                                static_cast<long long>(c.max_seq_len),
                                config.max_seq_len == 0 ? ": the model's max_position_embeddings" : ""));
  }

  // Attention windows (max_attention_window against the model's sliding windows): the model
  // applies them per layer, the KV cache manager releases blocks by the widest.
  LLMRT_ASSIGN_OR_RETURN(r.windows, resolveAttentionWindows(model, c.kv_cache_config.max_attention_window,
                                                            c.max_seq_len));
  c.kv_cache_config.max_attention_window.clear();  // the windows as a valid list (full = max_seq_len)
  for (int32_t w : r.windows.per_layer)
    c.kv_cache_config.max_attention_window.push_back(w > 0 ? w : static_cast<int32_t>(c.max_seq_len));

  KvCacheConfig& kv = c.kv_cache_config;
  if (c.backend == BackendKind::kCpu && !kv.max_tokens && !kv.free_gpu_memory_fraction) {
    // On the CPU, host memory is shared with everything else: unless the user sized the cache,
    // cap it at what a few full-length sequences need.
    kv.max_tokens = std::max<int64_t>(4 * c.max_seq_len, 32768);
    r.notes.push_back(strprintf("KV cache max_tokens %lld: the CPU backend's cap max(4 x max_seq_len, 32768) "
                                "(set kv_cache_config.max_tokens or free_gpu_memory_fraction to change it)",
                                static_cast<long long>(*kv.max_tokens)));
  }
  return r;
}

std::string describeConfig(const ResolvedConfig& r) {
  const EngineConfig& c = r.config;
  std::string s = strprintf(
      "backend %s, dtype %s, quantization %s, KV cache %s (%s tokens per block, max_tokens %s, reuse %s), max_seq_len %lld, "
      "max_input_len %lld, max_batch_size %d, max_num_tokens %lld, %s, overlap %s",
      std::string(toString(c.backend)).c_str(), std::string(toString(c.dtype)).c_str(),
      std::string(toString(c.quantization)).c_str(), std::string(toString(c.kv_cache_config.dtype)).c_str(),
      std::to_string(c.kv_cache_config.tokens_per_block).c_str(),
      c.kv_cache_config.max_tokens ? std::to_string(*c.kv_cache_config.max_tokens).c_str() : "from free memory",
      c.kv_cache_config.enable_block_reuse ? "on" : "off", static_cast<long long>(c.max_seq_len),
      static_cast<long long>(c.max_input_len), c.max_batch_size, static_cast<long long>(c.max_num_tokens),
      std::string(toString(c.scheduler_config.capacity_scheduler_policy)).c_str(),
      std::string(toString(c.overlap)).c_str());
  s += ", attention windows " + r.windows.toString();
  if (c.backend == BackendKind::kCuda && !c.cuda_tuning.toString().empty())
    s += ", cuda tuning " + c.cuda_tuning.toString();
  for (const std::string& n : r.notes) s += "; " + n;
  return s;
}

namespace {

// The CPU backend reports host memory to the KV sizing rule.
// `sharers` ranks use the backend's device: each is reported its share of the memory.
class BackendMemoryReporter final : public KvMemoryReporter {
 public:
  BackendMemoryReporter(const Backend& b, int sharers) : b_(b), sharers_(static_cast<uint64_t>(std::max(1, sharers))) {}
  KvMemoryInfo primaryMemoryInfo() const override {
    return {b_.totalMemoryBytes() / sharers_, b_.freeMemoryBytes() / sharers_};
  }

 private:
  const Backend& b_;
  uint64_t sharers_;
};

// The GPU of tensor-parallel rank `rank`: rank r on GPU r % visible GPUs.
int rankDevice(int rank) {
#if LLMRT_HAVE_CUDA
  return rank % std::max(1, cudaDeviceCount());
#else
  (void)rank;
  return 0;
#endif
}

// How many tensor-parallel ranks share `rank`'s memory: those on its GPU; on the CPU all of them.
int ranksOnDevice(const EngineConfig& c, int rank) {
  if (c.backend != BackendKind::kCuda) return c.tensor_parallel_size;
  int n = 0;
  for (int r = 0; r < c.tensor_parallel_size; ++r) n += rankDevice(r) == rankDevice(rank);
  return n;
}

// The ranks' communicators (index = rank): none for one rank (unless tp1_collectives asks for a
// group of one on the GPU); CPU ranks: the in-process group; CUDA ranks: the CUDA group.
Result<std::vector<std::unique_ptr<Communicator>>> makeCommunicators(const EngineConfig& c) {
  const int tp = c.tensor_parallel_size;
  const bool cuda = c.backend == BackendKind::kCuda;
  if (tp == 1 && !(cuda && c.cuda_tuning.tp1_collectives)) return std::vector<std::unique_ptr<Communicator>>{};
  if (!cuda) return makeInProcessGroup(tp);
#if LLMRT_HAVE_CUDA
  CudaGroupOptions g;
  for (int r = 0; r < tp; ++r) g.devices.push_back(rankDevice(r));
  g.custom_all_reduce = c.cuda_tuning.custom_all_reduce;
  const int gpus = std::max(1, cudaDeviceCount());
  if (tp > gpus) LLMRT_LOG_WARNING("[TensorParallel] %d ranks on %d GPU(s): ranks share GPUs (no speed-up)", tp, gpus);
  return makeCudaGroup(g);
#else
  return unimplemented("EngineConfig: backend cuda: this build has no CUDA backend");
#endif
}

// A CPU backend's threads: num_threads (0: every core), shared out among tensor-parallel ranks.
int cpuThreadsPerRank(const EngineConfig& c) {
  if (c.tensor_parallel_size <= 1) return c.num_threads;
  return std::max(1, (c.num_threads > 0 ? c.num_threads : availableCores()) / c.tensor_parallel_size);
}

// The backend of tensor-parallel rank `rank` (0 without tensor parallelism).
Result<std::unique_ptr<Backend>> createBackend(const ResolvedConfig& r, int rank) {
  const EngineConfig& c = r.config;
  if (c.backend == BackendKind::kCpu) return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(cpuThreadsPerRank(c)));
#if LLMRT_HAVE_CUDA
  CudaBackendOptions co;
  co.device = rankDevice(rank);
  co.weight_dtype = r.compute_dtype;
  co.kv_dtype = r.kv_dtype;
  co.tuning = c.cuda_tuning;
  return createCudaBackend(co);
#else
  return unimplemented("EngineConfig: backend cuda: this build has no CUDA backend "
                       "(configure with -DLLMRT_CUDA=ON where nvcc is installed)");
#endif
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config) {
  std::unique_ptr<Engine> e(new Engine());
  LLMRT_ASSIGN_OR_RETURN(e->dir_, ModelDirectory::open(config.model));
  EngineConfig to_load = config;
  if (config.quantization == Quantization::kSmoothQuant || config.quantization == Quantization::kAwq) {
    // Calibrated at the first load and cached: the engine loads the quantized checkpoint, as
    // quantization auto would load it.
    LLMRT_ASSIGN_OR_RETURN(const CalibratedCheckpoint q, calibratedCheckpointFor(config, e->dir_));
    if (q.made)
      LLMRT_LOG_INFO("[Quantization] %s: calibrated and written in %.1f s: %s", toString(config.quantization).data(),
                     q.seconds, q.dir.c_str());
    else
      LLMRT_LOG_INFO("[Quantization] %s: the cached checkpoint %s", toString(config.quantization).data(), q.dir.c_str());
    LLMRT_ASSIGN_OR_RETURN(e->dir_, ModelDirectory::open(q.dir));
    to_load.quantization = Quantization::kAuto;
  }
  const ModelConfig& cfg = e->dir_.config;
  LLMRT_ASSIGN_OR_RETURN(e->resolved_, resolveConfig(to_load, e->dir_));
  const EngineConfig& rc = e->resolved_.config;
  LLMRT_LOG_INFO("[Config] %s", describeConfig(e->resolved_).c_str());
  const AttentionWindows& windows = e->resolved_.windows;

  if (e->dir_.generation && !e->dir_.generation->eos_token_ids.empty()) {
    for (int64_t id : e->dir_.generation->eos_token_ids) e->eos_ids_.push_back(static_cast<TokenId>(id));
  } else {
    for (int64_t id : cfg.eos_token_ids) e->eos_ids_.push_back(static_cast<TokenId>(id));
  }
  if (!cfg.bos_token_ids.empty()) e->bos_id_ = static_cast<TokenId>(cfg.bos_token_ids.front());

  // tokenizer.json, else tokenizer.model, else *.tiktoken; none: null (token ids only).
  LLMRT_ASSIGN_OR_RETURN(e->tokenizer_, Tokenizer::fromDirectory(e->dir_.dir));

  LLMRT_ASSIGN_OR_RETURN(e->backend_, createBackend(e->resolved_, 0));
  const WeightStore* weights = &e->dir_.weights;
  DecoderModelOptions model_options;
  model_options.product_codes = e->resolved_.product_codes;
  model_options.fp8_kv_cache = e->resolved_.kv_dtype == DType::kF8E4M3;
  model_options.int4_products = e->resolved_.int4_products;
  const WeightSource source = [weights](const std::string& n) { return weights->tensor(n); };
  const int tp = rc.tensor_parallel_size;
  std::vector<PeerRanks::Rank> peers;
  LLMRT_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Communicator>> comms, makeCommunicators(rc));
  if (!comms.empty()) model_options.comm = comms[0].get();
  for (int r = 1; r < tp; ++r) {
    // Ranks 1..: their own backend (CPU: a share of the threads; CUDA: GPU r % visible GPUs).
    PeerRanks::Rank rank;
    LLMRT_ASSIGN_OR_RETURN(rank.backend, createBackend(e->resolved_, r));
    peers.push_back(std::move(rank));
  }
  // Every rank loads its share of the weights at once, ranks 1.. on threads of their own (loading
  // is host copies and uploads to each rank's GPU; no collective runs while loading). An exception
  // of a rank's load (e.g. std::bad_alloc) becomes its status: none leaves a thread.
  auto loadRank = [&](Backend& backend, Communicator* comm, std::unique_ptr<DecoderModel>& model) -> Status {
    try {
      LLMRT_RETURN_IF_ERROR(backend.bindThread());
      DecoderModelOptions o = model_options;
      o.comm = comm;
      LLMRT_ASSIGN_OR_RETURN(model, DecoderModel::load(cfg, source, backend, o));
      return model->setAttentionWindows(windows.per_layer);
    } catch (const std::exception& x) {
      return internalError(std::string("loading the weights: ") + x.what());
    }
  };
  std::vector<Status> loaded(peers.size() + 1);
  std::vector<std::thread> loaders;
  loaders.reserve(peers.size());
  for (size_t i = 0; i < peers.size(); ++i)
    loaders.emplace_back([&, i] { loaded[i + 1] = loadRank(*peers[i].backend, comms[i + 1].get(), peers[i].model); });
  loaded[0] = loadRank(*e->backend_, model_options.comm, e->model_);
  for (std::thread& t : loaders) t.join();
  for (const Status& st : loaded) LLMRT_RETURN_IF_ERROR(st);
  LLMRT_RETURN_IF_ERROR(e->backend_->bindThread());
  // The ranks' backends, rank 0 (the engine's) first, for the per-rank memory lines.
  std::vector<const Backend*> rank_backends{e->backend_.get()};
  for (const PeerRanks::Rank& r : peers) rank_backends.push_back(r.backend.get());
  auto rankSuffix = [&](size_t r) { return tp > 1 ? strprintf(", rank %zu", r) : std::string(); };
  for (size_t r = 0; r < rank_backends.size(); ++r)
    LLMRT_LOG_INFO("[MemUsageChange] Allocated %s for weights (%s backend%s)",
                   formatBytes(rank_backends[r]->weightBytes()).c_str(), rank_backends[r]->name().c_str(),
                   rankSuffix(r).c_str());
  if (e->backend_->device() != Device::kCpu) {
    // Activation buffers for a full step, allocated before the KV cache takes what is left,
    // so no step can run out of memory (the CPU backend grows them on demand instead).
    const uint64_t before = e->backend_->freeMemoryBytes();
    // Decode steps are padded up to StepBuilder::kMaxRecordedBatch rows, and each row has logits.
    const int64_t rows = std::max<int64_t>(rc.max_num_tokens, StepBuilder::kMaxRecordedBatch);
    const int64_t logit_rows = std::max<int64_t>(std::min<int64_t>(rc.max_num_tokens, 1024), StepBuilder::kMaxRecordedBatch);
    for (PeerRanks::Rank& r : peers) {
      LLMRT_RETURN_IF_ERROR(r.backend->bindThread());
      LLMRT_RETURN_IF_ERROR(r.model->reserveActivations(rows, logit_rows));
    }
    LLMRT_RETURN_IF_ERROR(e->backend_->bindThread());
    LLMRT_RETURN_IF_ERROR(e->model_->reserveActivations(rows, logit_rows));
    const uint64_t after = e->backend_->freeMemoryBytes();
    LLMRT_LOG_INFO("[MemUsageChange] Allocated %s for activations and workspace (steps of up to %lld tokens)",
                   formatBytes(before > after ? before - after : 0).c_str(),
                   static_cast<long long>(rows));
  }

  // KV cache: sized from what the backend has left, in the resolved KV dtype (kvCacheDtype: F32 with
  // float32 compute, the CPU's, unless FP8), the one the backend was created with.
  const DType kv_dtype = e->resolved_.kv_dtype;
  KvCacheLayout layout;
  layout.num_layers = static_cast<int32_t>(cfg.num_hidden_layers);
  layout.num_kv_heads = static_cast<int32_t>(e->model_->config().num_key_value_heads);  // (a rank's share)
  layout.head_dim = static_cast<int32_t>(cfg.head_dim);
  layout.dtype = kv_dtype;
  layout.max_sequence_length = static_cast<int32_t>(rc.max_seq_len);
  // Ranks that share rank 0's GPU (tests on one GPU) share its free memory too.
  BackendMemoryReporter memory(*e->backend_, ranksOnDevice(rc, 0));
  const KvCacheConfig& kv_config = rc.kv_cache_config;
  LLMRT_ASSIGN_OR_RETURN(KvCacheSizing sizing, computeKvCacheSizing(kv_config, layout, memory));
  KvPoolGeometry geometry{sizing.num_primary_blocks, cfg.num_hidden_layers, e->model_->config().num_key_value_heads,
                          cfg.head_dim, sizing.tokens_per_block, kv_dtype};
  LLMRT_RETURN_IF_ERROR(e->backend_->allocateKvPools(geometry, sizing.num_secondary_blocks));
  for (PeerRanks::Rank& r : peers) {  // every rank's pool holds its KV heads under the same block ids
    LLMRT_RETURN_IF_ERROR(r.backend->bindThread());
    LLMRT_RETURN_IF_ERROR(r.backend->allocateKvPools(geometry, sizing.num_secondary_blocks));
  }
  LLMRT_RETURN_IF_ERROR(e->backend_->bindThread());
  // Each rank's memory (rank 0 the engine's backend), where the backend reports it.
  for (size_t r = 0; r < rank_backends.size(); ++r) {
    const Backend& b = *rank_backends[r];
    const BackendMemoryStats m = b.memoryStats();
    if (m.device_total == 0) continue;
    LLMRT_LOG_INFO("[MemUsage] %s%s: weights %s, workspace pool %s reserved (%s in use, peak %s), KV cache %s on the "
                   "device + %s pinned on the host; device free %s of %s",
                   b.name().c_str(), rankSuffix(r).c_str(), formatBytes(m.weights).c_str(),
                   formatBytes(m.workspace_reserved).c_str(), formatBytes(m.workspace_used).c_str(),
                   formatBytes(m.workspace_peak).c_str(), formatBytes(m.kv_primary).c_str(),
                   formatBytes(m.kv_secondary).c_str(), formatBytes(m.device_free).c_str(),
                   formatBytes(m.device_total).c_str());
  }
  KvCacheManagerOptions kv_options;
  kv_options.attention_window = windows.kv_window;  // blocks outside every layer's window are released
  LLMRT_ASSIGN_OR_RETURN(e->kv_, KvCacheManager::create(kv_config, sizing, kv_options));
  if (!comms.empty()) {
    e->peers_ = std::make_unique<PeerRanks>(std::move(comms), std::move(peers));
    LLMRT_LOG_INFO("[TensorParallel] %d %s ranks, one thread each", tp, e->backend_->name().c_str());
  }
  e->runner_ = std::make_unique<ModelRunner>(*e->model_, *e->backend_, e->eos_ids_, e->peers_.get());
  return e;
}

}  // namespace llmrt

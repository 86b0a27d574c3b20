// EngineConfig::validate and the names of its enums (include/llmrt/engine_config.h).
#include "llmrt/engine_config.h"

#include <string>

#include "core/logging.h"

namespace llmrt {
namespace {

constexpr std::string_view kWhere = "EngineConfig";
constexpr int64_t kMaxBatchSize = int64_t{1} << 20;
constexpr int64_t kMaxNumTokens = int64_t{1} << 20;
constexpr int64_t kMaxSeqLenLimit = int64_t{1} << 30;

Status rangeError(std::string_view field, int64_t v, int64_t lo, int64_t hi) {
  return fieldError(kWhere, field, std::to_string(v),
                    strprintf("an integer in [%lld, %lld]", static_cast<long long>(lo), static_cast<long long>(hi)));
}

template <typename E, size_t N>
std::optional<E> parseName(std::string_view name, const E (&all)[N]) {
  for (E e : all)
    if (name == toString(e)) return e;
  return std::nullopt;
}

constexpr BackendKind kBackends[] = {BackendKind::kAuto, BackendKind::kCpu, BackendKind::kCuda};
constexpr ComputeDtype kDtypes[] = {ComputeDtype::kAuto, ComputeDtype::kBFloat16, ComputeDtype::kFloat16,
                                    ComputeDtype::kFloat32};
constexpr OverlapMode kOverlaps[] = {OverlapMode::kAuto, OverlapMode::kOn, OverlapMode::kOff};
constexpr Quantization kQuantizations[] = {Quantization::kAuto, Quantization::kNone, Quantization::kFp8,
                                          Quantization::kInt8, Quantization::kSmoothQuant, Quantization::kAwq};

}  // namespace

std::string_view toString(BackendKind kind) {
  switch (kind) {
    case BackendKind::kAuto: return "auto";
    case BackendKind::kCpu: return "cpu";
    case BackendKind::kCuda: return "cuda";
  }
  return "?";
}

std::string_view toString(ComputeDtype dtype) {
  switch (dtype) {
    case ComputeDtype::kAuto: return "auto";
    case ComputeDtype::kBFloat16: return "bfloat16";
    case ComputeDtype::kFloat16: return "float16";
    case ComputeDtype::kFloat32: return "float32";
  }
  return "?";
}

std::string_view toString(Quantization q) {
  switch (q) {
    case Quantization::kAuto: return "auto";
    case Quantization::kNone: return "none";
    case Quantization::kFp8: return "fp8";
    case Quantization::kInt8: return "int8";
    case Quantization::kSmoothQuant: return "smoothquant";
    case Quantization::kAwq: return "awq";
  }
  return "?";
}

std::string_view toString(OverlapMode mode) {
  switch (mode) {
    case OverlapMode::kAuto: return "auto";
    case OverlapMode::kOn: return "on";
    case OverlapMode::kOff: return "off";
  }
  return "?";
}

std::optional<BackendKind> parseBackendKind(std::string_view name) { return parseName(name, kBackends); }
std::optional<ComputeDtype> parseComputeDtype(std::string_view name) { return parseName(name, kDtypes); }
std::optional<OverlapMode> parseOverlapMode(std::string_view name) { return parseName(name, kOverlaps); }
std::optional<Quantization> parseQuantization(std::string_view name) { return parseName(name, kQuantizations); }

Status EngineConfig::validate() const {
  if (model.empty()) return fieldError(kWhere, "model", "\"\"", "a model directory");
  if (!parseBackendKind(toString(backend)))
    return fieldError(kWhere, "backend", std::to_string(static_cast<int>(backend)), "auto, cpu or cuda");
  if (!parseComputeDtype(toString(dtype)))
    return fieldError(kWhere, "dtype", std::to_string(static_cast<int>(dtype)),
                      "auto, bfloat16, float16 or float32");
  if (tensor_parallel_size < 0 || tensor_parallel_size > 64) return rangeError("tensor_parallel_size", tensor_parallel_size, 0, 64);
  if (tensor_parallel_size > 8 && backend == BackendKind::kCuda)
    return fieldError(kWhere, "tensor_parallel_size", std::to_string(tensor_parallel_size),
                      "at most 8 with backend cuda (GPUs of one host)");
  if (!parseQuantization(toString(quantization)))
    return fieldError(kWhere, "quantization", std::to_string(static_cast<int>(quantization)),
                      "auto, none, fp8, int8, smoothquant or awq");
  if (calibration_size < 1 || calibration_size > (1 << 20)) return rangeError("calibration_size", calibration_size, 1, 1 << 20);
  if (!(smoothquant_alpha >= 0.0 && smoothquant_alpha <= 1.0))
    return fieldError(kWhere, "smoothquant_alpha", strprintf("%g", smoothquant_alpha), "a number in [0, 1]");
  if ((quantization == Quantization::kSmoothQuant || quantization == Quantization::kAwq) && calibration_file.empty())
    return fieldError(kWhere, "calibration_file", "\"\"",
                      std::string("a calibration text for quantization ") + std::string(toString(quantization)) +
                          " (the bundled model's calibration.txt is the front ends' default)");
  if (!parseOverlapMode(toString(overlap)))
    return fieldError(kWhere, "overlap", std::to_string(static_cast<int>(overlap)), "auto, on or off");
  if (backend == BackendKind::kCpu && (dtype == ComputeDtype::kBFloat16 || dtype == ComputeDtype::kFloat16))
    return fieldError(kWhere, "dtype", std::string(toString(dtype)),
                      "auto or float32 with backend cpu (the CPU backend computes in float32)");
  const KvCacheDtype kvd = kv_cache_config.dtype;
  if (kvd == KvCacheDtype::kBFloat16 || kvd == KvCacheDtype::kFloat16) {
    if (backend == BackendKind::kCpu)
      return fieldError("KvCacheConfig", "dtype", std::string(toString(kvd)),
                        "auto, float32 or fp8 with backend cpu (it computes in float32)");
    if (dtype == ComputeDtype::kFloat32)
      return fieldError("KvCacheConfig", "dtype", std::string(toString(kvd)),
                        "auto, float32 or fp8 with dtype float32 (a 16-bit cache needs 16-bit weights)");
  }
  if (max_batch_size < 1 || max_batch_size > kMaxBatchSize) return rangeError("max_batch_size", max_batch_size, 1, kMaxBatchSize);
  if (max_num_tokens < 1 || max_num_tokens > kMaxNumTokens) return rangeError("max_num_tokens", max_num_tokens, 1, kMaxNumTokens);
  if (max_seq_len < 0 || max_seq_len > kMaxSeqLenLimit)
    return fieldError(kWhere, "max_seq_len", std::to_string(max_seq_len),
                      "an integer in [1, 1073741824], or 0 for the model's max_position_embeddings");
  if (max_input_len < 0 || max_input_len > kMaxSeqLenLimit)
    return fieldError(kWhere, "max_input_len", std::to_string(max_input_len),
                      "an integer in [1, 1073741824], or 0 for max_seq_len - 1");
  if (max_seq_len > 0 && max_input_len >= max_seq_len)
    return fieldError(kWhere, "max_input_len", std::to_string(max_input_len),
                      strprintf("less than max_seq_len (%lld), leaving room for one generated token",
                                static_cast<long long>(max_seq_len)));
  if (!scheduler_config.enable_chunked_context && max_input_len > max_num_tokens)
    return fieldError(kWhere, "max_input_len", std::to_string(max_input_len),
                      strprintf("at most max_num_tokens (%lld) without enable_chunked_context",
                                static_cast<long long>(max_num_tokens)));
  if (num_threads < 0 || num_threads > 1024)
    return fieldError(kWhere, "num_threads", std::to_string(num_threads), "an integer in [0, 1024] (0 = all cores)");
  if (iter_stats_max_iterations < 0 || iter_stats_max_iterations > (1 << 24))
    return rangeError("iter_stats_max_iterations", iter_stats_max_iterations, 0, 1 << 24);
  LLMRT_RETURN_IF_ERROR(cuda_tuning.validate());
  LLMRT_RETURN_IF_ERROR(scheduler_config.validate());
  return kv_cache_config.validate();
}

}  // namespace llmrt

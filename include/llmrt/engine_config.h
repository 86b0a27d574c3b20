// EngineConfig: the one configuration value of an llmrt engine — model, backend, dtype, KV cache,
// scheduler, batch limits, CUDA tuning — shared by every front end (LLM API, Executor, the llmrt
// and llmrt-bench commands, later the server and Python). It mirrors TensorRT-LLM's LlmArgs
// (`LlmArgs` in llm.h is this type) with typed enums instead of strings.
//
// Life of a configuration:
//   1. a front end fills it (designated initializers, or the option table of
//      llmrt/config_options.h: one flag/key table for the CLI, the server and Python);
//   2. Executor::create (and LLM::create through it) calls validate() once — the only
//      check of the value's own ranges and combinations;
//   3. once the model directory is read, what depends on the model is resolved and checked
//      (max_seq_len against max_position_embeddings, the attention windows against the model's,
//      "auto" choices, the CPU's KV cache cap) and logged on one line; Executor::config()
//      returns that resolved value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "llmrt/kv_cache_config.h"
#include "llmrt/scheduler_config.h"
#include "llmrt/status.h"

namespace llmrt {

enum class BackendKind {
  // CUDA when this build has the CUDA backend and the machine has an NVIDIA GPU (a driver
  // device node is present), else the CPU. Resolved once at load and logged.
  kAuto,
  kCpu,   // the float32 reference backend (OpenBLAS)
  kCuda,  // NVIDIA GPUs of compute capability 9.0 (Hopper, sm_90a builds)
};

enum class ComputeDtype {
  // cpu: float32; cuda: float16 for a float16 checkpoint, else bfloat16.
  kAuto,
  kBFloat16,  // cuda only: 16-bit weights, product inputs and KV cache
  kFloat16,   // cuda only: 8x finer rounding than bf16, overflows beyond 65504
  kFloat32,   // cuda: float32 weights and products (agrees with the CPU backend); cpu: the same as auto
};

// How the products inside the layers (q/k/v, o, MLP; not embeddings, LM head, routers or
// mixture-of-experts experts) compute.
enum class Quantization {
  // The checkpoint's own: FP8 products for an FP8 checkpoint, INT8 ones for an INT8 (W8A8)
  // checkpoint, else none.
  kAuto,
  // 16-bit (32-bit on the CPU) products; a quantized checkpoint's weights are dequantized at load.
  kNone,
  // FP8 E4M3 products (W8A8): weights with one scale per output channel, quantized at load
  // from a 16/32-bit checkpoint (an FP8 checkpoint's are requantized per row), activations
  // quantized per token as they are produced (dynamic). The CPU backend emulates it exactly.
  kFp8,
  // INT8 products (W8A8), as kFp8 with symmetric int8 codes (scale = amax / 127) summed in int32:
  // an INT8 checkpoint's (e.g. `llmrt quantize --method smoothquant`), or quantized at load from
  // a 16/32-bit one (no smoothing). The CPU backend gets the CUDA backend's bits.
  kInt8,
  // Calibrated at load from a 16/32-bit checkpoint (EngineConfig's calibration fields): the
  // checkpoint `llmrt quantize --method smoothquant` writes (INT8 products after SmoothQuant's
  // migration, strength smoothquant_alpha), made once and cached (quantization_cache_dir).
  kSmoothQuant,
  // The same for `llmrt quantize --method awq`: 4-bit AWQ weights (W4A16 products), scales
  // searched on the calibration text.
  kAwq,
};

enum class OverlapMode {
  kAuto,  // on where the backend runs behind the host (CUDA)
  kOn,
  kOff,
};

// Switches of the CUDA backend for measurements and diagnosis (every default is the fast,
// verified path). Set from front ends with `--cuda-tuning key=value,...` (parseCudaTuning);
// ignored by the CPU backend. One of them changes numerics (half_activations).
struct CudaTuning {
  bool graphs = true;              // CUDA graphs for decode steps
  bool gemv = true;                // the matrix-vector kernel for products of few rows
  bool flash = true;               // the flash-attention kernel for context rows
  bool mma_decode = true;          // the tensor-core decode attention kernel
  bool rope_fusion = true;         // RoPE + KV write inside the decode attention kernel
  bool half_activations = true;    // 16-bit product inputs with 16-bit weights (off: float32, changes numerics)
  bool pdl = true;                 // programmatic dependent launch
  bool sampling = true;            // sample on the GPU (off: on the host)
  bool compact_sampling = true;    // the compact sampling pass for few rows with a small top-k
  bool row_group_sampling = true;  // the row-group sampling kernel
  bool vector_ops = true;          // float4 kernels for RMSNorm and RoPE + KV write
  // Products of up to this many rows take the matrix-vector kernel, larger ones cuBLAS(Lt) (0-8):
  // the kernel wins at 1 row and ties at 2 (where the norm split needs it); from 3 rows on its
  // CUDA-core dot products lose to the tensor cores (batch-8 decode 4.78 vs 8.09 ms on an H200).
  int32_t gemv_rows = 2;
  // The RMSNorm split over the decode products for steps of up to this many rows (0-8; the same
  // bits either way): faster at 1-2 rows, slower at 4 (H200).
  int32_t norm_split_rows = 2;
  // FP8 products (quantization fp8) of up to this many rows take the tensor-core matrix-vector
  // kernel, larger ones cuBLASLt's FP8 GEMM (0-8).
  int32_t fp8_gemv_rows = 8;
  // Of those, products of up to this many rows (0-2) take the row-per-warp variant (each warp
  // one weight row, read in 512-byte runs as the 16-bit kernel reads its rows) instead of the
  // 16-rows-per-block kernel: batch-1 FP8 decode 1.1% faster on an H100; 2 rows not measured.
  int32_t fp8_row_gemv_rows = 1;
  // 8-bit products' inputs quantized by the ops that write them (RMSNorm, SiLU·mul: one pass
  // fewer per product, the same bits), or by each product itself (off).
  bool fused_quantization = true;
  // MLPs without a gate: the activation in the up product's epilogue where the matrix-vector
  // kernel runs it (the same bits), or a kernel of its own (off).
  bool act_fusion = true;
  int32_t split_waves = 2;         // decode attention key splits aim at this many CTAs per SM (1-16)
  int32_t split_keys = 32;         // and take at least this many keys each (16-4096)
  // Tensor parallelism over GPUs: the custom all-reduce kernels (peer access) for messages up to
  // 8 MiB, NCCL beyond (on; LMI's use_custom_all_reduce), or NCCL for every all-reduce (off).
  bool custom_all_reduce = true;
  // One GPU through a communicator group of one rank: the tensor-parallel step structure (each
  // residual product then its all-reduce, which exchanges nothing; the fused norm chain split)
  // for measuring what that structure costs.
  bool tp1_collectives = false;
  bool profile = false;            // time every op (turns graphs off) and print a table at exit

  // OK, or an InvalidArgument naming the key, its value and the allowed range.
  Status validate() const;
  // The settings that differ from the defaults, as parseCudaTuning reads them ("" when none).
  std::string toString() const;
  bool operator==(const CudaTuning&) const = default;
};

// Parses "key=value,key=value" (keys as the field names; booleans on/off/true/false/1/0;
// integers in their range) into `out`, starting from its current values. An unknown key, a
// bad value or a key given twice is an InvalidArgument naming it (and the nearest key).
Status parseCudaTuning(std::string_view spec, CudaTuning& out);

struct EngineConfig {
  std::string model;  // HF model directory (config.json, *.safetensors, tokenizer.json)
  BackendKind backend = BackendKind::kAuto;
  ComputeDtype dtype = ComputeDtype::kAuto;
  Quantization quantization = Quantization::kAuto;
  // quantization smoothquant / awq: the calibration text (UTF-8; required: front ends default it
  // to the bundled model's calibration.txt), cut into calibration_size samples of up to 512
  // tokens; the migration strength in [0, 1] (LMI's smoothquant_alpha); where calibrated
  // checkpoints are kept ("" = <the system's temporary directory>/llmrt-quantized-<uid>), each
  // under a key of the source checkpoint's content and these settings (runtime/quantize_at_load.h).
  std::string calibration_file;
  int64_t calibration_size = 64;
  double smoothquant_alpha = 0.8;
  std::string quantization_cache_dir;
  KvCacheConfig kv_cache_config;
  SchedulerConfig scheduler_config;  // capacity policy, context chunking
  int32_t max_batch_size = 256;      // sequences in flight (holding KV) at once, in [1, 2^20]
  int64_t max_num_tokens = 8192;     // tokens computed per step, in [1, 2^20] (longer prompts are chunked)
  int64_t max_input_len = 0;         // longest prompt; 0 = max_seq_len - 1
  int64_t max_seq_len = 0;           // prompt + generated tokens; 0 = the model's max_position_embeddings
  // CPU backend threads, OpenBLAS's included; 0 = every core the process may use.
  int32_t num_threads = 0;
  // Tensor parallelism: the model's weights split over this many ranks (docs/parallelism.md),
  // one thread each, under one scheduler and KV cache manager; in [1, 64]. backend cuda: rank r
  // on GPU r % (visible GPUs), at most 8 ranks (ranks sharing a GPU work, for tests, without a
  // speed-up); backend cpu: each rank its own CPU backend of num_threads / size threads.
  // Mixture-of-experts layers split every expert. 0 = every visible GPU (LMI's
  // tensor_parallel_degree max; backend cpu or no GPU: 1).
  int32_t tensor_parallel_size = 1;
  // Overlap scheduling: prepare and launch step N+1 while the device runs step N, feeding
  // step N's tokens (greedy or sampled on the device, penalties and logprobs included) to step
  // N+1 on the device; step N's results are handled while N+1 runs. A sequence that step N
  // finishes has computed one token in N+1 for nothing. Steps returning logits, and steps whose
  // rows the host samples, wait for their results as before.
  OverlapMode overlap = OverlapMode::kAuto;
  // Iteration stats kept for Executor::getLatestIterationStats() (oldest dropped); 0 = none.
  int32_t iter_stats_max_iterations = 1000;
  CudaTuning cuda_tuning;

  // Checks every field and the combinations that do not depend on the model (the CPU backend
  // computes in float32; a 16-bit KV cache needs 16-bit weights; max_input_len ≤ max_seq_len;
  // unchunked prompts fit a step). OK, or an InvalidArgument naming the first bad field
  // ("EngineConfig: field 'max_batch_size' has value 0; expected an integer in [1, 1048576]").
  Status validate() const;
};

// Names as the option table and the logs spell them ("auto", "cpu", "cuda"; "bfloat16", ...;
// "auto", "on", "off"; "auto", "none", "fp8"), and their parsers (exact, lower case; nullopt for anything else).
std::string_view toString(BackendKind kind);
std::string_view toString(ComputeDtype dtype);
std::string_view toString(OverlapMode mode);
std::string_view toString(Quantization q);
std::optional<BackendKind> parseBackendKind(std::string_view name);
std::optional<ComputeDtype> parseComputeDtype(std::string_view name);
std::optional<OverlapMode> parseOverlapMode(std::string_view name);
std::optional<Quantization> parseQuantization(std::string_view name);

}  // namespace llmrt

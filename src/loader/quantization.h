// Quantized checkpoints. FP8 and AWQ checkpoints are read (resolveQuantization:
// the scheme goes into ModelConfig; checkWeights and DecoderWeightReader take
// the scales and codes): config.json's quantization_config with quant_method
// "fp8" (block scales with weight_block_size, else per-tensor / per-channel
// weight_scale), "modelopt" with quant_algo "FP8", compressed-tensors
// float-quantized 8-bit floats, hf_quant_config.json's quant_algo "FP8", compressed-tensors
// int-quantized 8-bit symmetric integers (W8A8 INT8, e.g. SmoothQuant's), and
// "awq" version gemm, 4 bits, zero_point. Every other quantized checkpoint is recognised so that it is refused
// with a clear error (StatusCode kUnimplemented) instead of being run as if
// its integer or float8 codes were weights; any one of these signs counts:
//   * config.json's `quantization_config` (transformers' quantizers: fp8 /
//     FineGrainedFP8Config, awq, gptq, bitsandbytes, compressed-tensors,
//     modelopt, ...) or `compression_config` (older compressed-tensors);
//   * a quantize_config.json (AutoGPTQ, AutoAWQ) or hf_quant_config.json
//     (NVIDIA ModelOpt) in the model directory;
//   * a tensor only quantized checkpoints hold: scales, zero points and packed
//     codes (*.weight_scale_inv, *.weight_scale, *.input_scale, *.qweight,
//     *.qzeros, *.scales, *.g_idx, bitsandbytes' *.SCB / *.absmax /
//     *.quant_map / *.quant_state.*, compressed-tensors' *.weight_packed /
//     *.weight_zero_point, KV-cache *.k_scale / *.v_scale, ...);
//   * a `.weight` tensor stored as I8, U8 or F8_E4M3.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/json.h"
#include "llmrt/model_config.h"
#include "llmrt/status.h"
#include "loader/weight_store.h"

namespace llmrt {

struct QuantizationConfig {
  std::string file;          // the file it was found in
  std::string method_field;  // "quantization_config.quant_method", "quant_method", "quantization.quant_algo";
                             // the config's field when it names no method; "" for an unreadable file
  std::string method;        // the method as written, e.g. "fp8" (printable, bounded); "" when none
  std::string details;       // a few parameters, e.g. "weight_block_size [128, 128]" (may be empty)
  Json raw;                  // the config object as written (null for an unreadable file)

  // "quantization_config.quant_method 'fp8' (weight_block_size [128, 128])".
  std::string describe() const;
};

// config.json's quantization_config (or compression_config) when present and
// not null; `where` is config.json's path. Any non-null value counts, even one
// that names no method.
std::optional<QuantizationConfig> quantizationFromConfig(const Json& config_root, std::string_view where);

// quantize_config.json or hf_quant_config.json in `dir`, when one exists (an
// unreadable one still counts).
std::optional<QuantizationConfig> quantizationFromSideFiles(const std::string& dir);

// The first tensor (by name) that only a quantized checkpoint holds, as
// "tensor 'NAME' is F8_E4M3" or "tensor 'NAME' holds quantization data
// (scales, zero points or packed weights)"; nullopt when there is none.
std::optional<std::string> findQuantizedTensor(const WeightStore& weights);

// OK when `config` is nullopt and no tensor is quantized. Otherwise
// Unimplemented, one line naming the method (with its file) and the first
// quantized tensor (with the weights file), ending "; use a bf16/fp16/fp32
// checkpoint", e.g. "DIR/config.json: quantization_config.quant_method 'fp8'
// (weight_block_size [128, 128]) is not supported yet; DIR/model.safetensors:
// tensor 'model.layers.0.mlp.down_proj.weight' is F8_E4M3; use a bf16/fp16/fp32 checkpoint".
Status checkNotQuantized(const std::optional<QuantizationConfig>& config, const WeightStore& weights);

// The quantization llmrt runs for this checkpoint, written into `model`
// (weight_quantization, fp8_block_rows / fp8_block_cols, awq_group_size):
// nothing for an unquantized one; "fp8" / "int8" / "awq" for the configs above (a bad
// weight_block_size is InvalidArgument naming it; another AWQ variant
// Unimplemented naming what llmrt reads); otherwise checkNotQuantized's error.
Status resolveQuantization(const std::optional<QuantizationConfig>& config, const WeightStore& weights,
                           ModelConfig* model);

}  // namespace llmrt

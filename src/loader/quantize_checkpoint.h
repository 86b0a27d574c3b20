// Writing quantized checkpoints (include/llmrt/quantize.h's quantizeCheckpoint, which calibrates
// SmoothQuant in the runtime layer and writes through here).
#pragma once

#include <span>
#include <string>

#include "llmrt/quantize.h"
#include "loader/model_directory.h"

namespace llmrt {

class TensorSmoothing;

// InvalidArgument when options.output is empty, the model directory, or an existing non-empty
// directory or file (checked before calibrating, which takes a while).
Status checkQuantizeOutput(const QuantizeOptions& options);
// InvalidArgument when `m` cannot be quantized: already quantized, GPT-2's Conv1D layout, or (awq)
// a product matrix whose rows are not a multiple of 8 or whose inputs do not split into groups.
Status checkQuantizable(const QuantizeOptions& options, const ModelDirectory& m);

// quantizeCheckpoint's writer: options.method fp8, or int8 / smoothquant (INT8 codes), with the
// tensors `smoothing` names changed first (null: none); `producer` goes into the
// quantization_config ("" = "llmrt quantize --method METHOD"); `kv_scales` ([layer][K, V], empty:
// none) written as the FP8 KV cache's scales (kvCacheScaleName).
Result<QuantizeReport> writeQuantizedCheckpoint(const QuantizeOptions& options, const TensorSmoothing* smoothing,
                                                const std::string& producer, std::span<const float> kv_scales = {});

}  // namespace llmrt

// The FP8 KV cache's per-layer scales a checkpoint carries (ModelOpt / llm-compressor / vLLM
// "fp8" checkpoints with an FP8 KV cache): a scalar `k_scale` and `v_scale` per attention layer,
// beside the k / v projections (`<attn>.k_proj.k_scale`, `<attn>.v_proj.v_scale`, vLLM's older
// layout) or on the attention module (`<attn>.k_scale`, `<attn>.v_scale`); or one scale for both,
// `kv_scale`, in either place (the older vLLM / TensorRT-LLM export).
#pragma once

#include <string>
#include <vector>

#include "llmrt/model_config.h"
#include "llmrt/status.h"
#include "loader/decoder_weights.h"

namespace llmrt {

// [layer][K, V] for Backend::setKvCacheScales; empty when the checkpoint has none. A checkpoint
// with some but not all of them, or with a scale that is not one positive finite number, is an
// InvalidArgument naming the tensor.
Result<std::vector<float>> checkpointKvCacheScales(const ModelConfig& config, const WeightSource& weights);

// The name `llmrt quantize --kv-cache-scales` writes layer `layer`'s K (kv 0) or V (kv 1) scale
// under: "<attention module>.k_scale" / ".v_scale" (vLLM's current layout).
std::string kvCacheScaleName(const ModelConfig& config, int64_t layer, int kv);

}  // namespace llmrt

// Quantization at load for the methods that calibrate (EngineConfig::quantization smoothquant or
// awq on a 16/32-bit checkpoint): the checkpoint `llmrt quantize` would write, made once and kept
// in EngineConfig::quantization_cache_dir under a key of the source checkpoint's content and the
// calibration settings, so a second start loads it at once.
#pragma once

#include <string>

#include "llmrt/engine_config.h"
#include "llmrt/status.h"
#include "loader/model_directory.h"

namespace llmrt {

struct CalibratedCheckpoint {
  std::string dir;   // the quantized checkpoint to load (INT8 for smoothquant, AutoAWQ GEMM for awq)
  bool made = false;  // false: found in the cache
  double seconds = 0;  // calibration and writing, when made
};

// The cache key: 16 hex digits of a 64-bit hash over the method and its settings, the calibration
// text and every file of the model directory, whole (name and content: weights, config.json,
// tokenizer, chat template, generation defaults; the cached checkpoint carries copies of the
// non-weight files): every byte is read once.
Result<std::string> calibratedCheckpointKey(const EngineConfig& config, const ModelDirectory& source);

// `source` (the directory config.model names, opened) quantized by config.quantization
// (kSmoothQuant or kAwq): `<cache>/<method>-<key>` when it holds a complete checkpoint, else made
// there by quantizeCheckpoint (written beside it under a temporary name of this call, then
// renamed, so an interrupted start leaves no half checkpoint under the key). The cache directory
// (default <tmp>/llmrt-quantized-<uid>, made owner-only) must belong to this user. Errors:
// InvalidArgument for a checkpoint that is already quantized, or quantizeCheckpoint's own;
// FailedPrecondition for a cache directory of another user; Internal when it cannot be made or
// written.
Result<CalibratedCheckpoint> calibratedCheckpointFor(const EngineConfig& config, const ModelDirectory& source);

}  // namespace llmrt

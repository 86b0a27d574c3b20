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

// The cache key: 16 hex digits of a 64-bit FNV-1a hash over the method and its settings, the
// calibration text, config.json and, for each weight file, its name, size, safetensors header
// and 64 evenly spaced 4 KiB samples of its data (the whole file when smaller than 256 KiB):
// a changed tensor shape, dtype, name or file changes the key, and so does, with near certainty,
// retraining (every sample of the data changes); the cost is reading about 256 KiB per file.
Result<std::string> calibratedCheckpointKey(const EngineConfig& config, const ModelDirectory& source);

// `source` (the directory config.model names, opened) quantized by config.quantization
// (kSmoothQuant or kAwq): `<cache>/<method>-<key>` when it holds a complete checkpoint, else made
// there by quantizeCheckpoint (written beside it under a temporary name, then renamed, so an
// interrupted start leaves no half checkpoint under the key). Errors: InvalidArgument for a
// checkpoint that is already quantized, an empty calibration_file, or quantizeCheckpoint's own;
// Internal when the cache directory cannot be made or written.
Result<CalibratedCheckpoint> calibratedCheckpointFor(const EngineConfig& config, const ModelDirectory& source);

}  // namespace llmrt

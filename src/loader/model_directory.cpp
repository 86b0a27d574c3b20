#include "loader/model_directory.h"

#include "core/logging.h"
#include "core/mapped_file.h"
#include "loader/config_parser.h"
#include "loader/json_util.h"
#include "loader/decoder_weights.h"

namespace llmrt {

namespace {

std::string joinPath(const std::string& dir, const char* name) {
  if (!dir.empty() && dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace

Result<ModelDirectory> ModelDirectory::open(const std::string& dir, const ModelDirectoryOptions& options) {
  if (!isDirectory(dir)) {
    return notFound(dir +
                    ": not a directory (expected a model directory with config.json and *.safetensors)");
  }
  ModelDirectory m;
  m.dir = dir;
  const std::string config_path = joinPath(dir, "config.json");
  if (!fileExists(config_path))
    return notFound(config_path + ": missing (every model directory needs config.json)");
  // Parsed once for the config and for its quantization_config, which
  // ModelConfig does not hold.
  LLMRT_ASSIGN_OR_RETURN(std::string config_text, readTextFile(config_path));
  LLMRT_ASSIGN_OR_RETURN(Json config_root, detail::parseInputJson(config_text, config_path, kHfJsonLimits));
  LLMRT_ASSIGN_OR_RETURN(m.config, parseModelConfigJson(config_root, config_path));
  m.quantization = quantizationFromConfig(config_root, config_path);
  if (!m.quantization) m.quantization = quantizationFromSideFiles(dir);

  const std::string gen_path = joinPath(dir, "generation_config.json");
  if (fileExists(gen_path)) {
    LLMRT_ASSIGN_OR_RETURN(GenerationDefaults g, loadGenerationConfig(gen_path));
    m.generation = std::move(g);
  }
  const std::string tok_path = joinPath(dir, "tokenizer.json");
  if (fileExists(tok_path)) m.tokenizer_json = tok_path;

  LLMRT_ASSIGN_OR_RETURN(m.weights, WeightStore::openDirectory(dir));
  const Status quantization = resolveQuantization(m.quantization, m.weights, &m.config);
  if (options.reject_quantized) LLMRT_RETURN_IF_ERROR(quantization);
  if (options.check_weights) {
    LLMRT_ASSIGN_OR_RETURN(m.unused_tensors, checkWeights(m.config, m.weights));
    if (!m.unused_tensors.empty()) {
      LLMRT_LOG_INFO("%s: %zu tensor(s) not used by %s (first: %s)", m.weights.source().c_str(),
                     m.unused_tensors.size(), m.config.architecture.c_str(), m.unused_tensors[0].c_str());
    }
  }
  return m;
}

std::optional<DType> checkpointDtype(const WeightStore& weights) {
  std::optional<DType> best;
  uint64_t best_bytes = 0;
  for (const auto& [dt, bytes] : weights.bytesByDtype()) {
    if (!isFloatingPoint(dt) || dt == DType::kF8E4M3) continue;  // FP8 codes are dequantized at load
    if (!best || bytes > best_bytes) {
      best = dt;
      best_bytes = bytes;
    }
  }
  return best;
}

uint64_t kvBytesPerToken(const ModelConfig& c, DType kv_dtype) {
  return static_cast<uint64_t>(c.num_hidden_layers) * 2u * static_cast<uint64_t>(c.num_key_value_heads) *
         static_cast<uint64_t>(c.head_dim) * dtypeSize(kv_dtype);
}

}  // namespace llmrt

// Engine: one loaded model ready to run steps — the model directory, the
// backend, the model, the KV cache manager (with its pools allocated on the
// backend), the tokenizer and the model runner. Front ends reach it through
// the executor / LLM API; tests use it directly.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kv/kv_cache_manager.h"
#include "llmrt/kv_cache_config.h"
#include "llmrt/tokenizer.h"
#include "loader/model_directory.h"
#include "model/llama_model.h"
#include "runtime/model_runner.h"

namespace llmrt {

struct EngineOptions {
  std::string model_dir;
  KvCacheConfig kv_cache_config;
  std::string backend = "cpu";  // "cpu" | "cuda" (when built with LLMRT_CUDA)
  // Compute dtype of the weights: "auto" (cpu: float32; cuda: float16 for a float16 checkpoint,
  // else bfloat16), "bfloat16" / "float16" (cuda only: 16-bit weights, product inputs and KV
  // cache; float16 rounds 8x finer but overflows beyond 65504), "float32" (cuda: float32
  // weights, products and KV cache; agrees with the CPU backend).
  std::string dtype = "auto";
  int num_threads = 0;          // CPU backend threads; 0 = all cores
  int64_t max_seq_len = 0;      // prompt + generated; 0 = the model's max_position_embeddings
  int64_t max_num_tokens = 8192;  // tokens per step (context chunks are cut to fit)

  Status validate() const;
};

// What `options` resolve to for this checkpoint (computeDtype: the weights' and the products'
// dtype, F32 on the CPU; kvCacheDtype: the cache's, given that compute dtype). Validated options.
DType computeDtype(const EngineOptions& options, const WeightStore& weights, const ModelConfig& config);
DType kvCacheDtype(const EngineOptions& options, DType compute);

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineOptions& options);
  ~Engine();

  const EngineOptions& options() const { return options_; }
  const ModelConfig& modelConfig() const { return dir_.config; }
  const ModelDirectory& modelDirectory() const { return dir_; }
  // The tokenizer; null when the directory has no tokenizer.json.
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  // EOS ids: generation_config.json's when present, else config.json's.
  std::span<const TokenId> eosIds() const { return eos_ids_; }
  std::optional<TokenId> bosId() const { return bos_id_; }
  int64_t maxSeqLen() const { return max_seq_len_; }
  int64_t maxNumTokens() const { return options_.max_num_tokens; }

  // Sequence ids are unique over the engine's lifetime.
  SequenceId newSequenceId() { return next_sequence_id_++; }

  Backend& backend() { return *backend_; }
  KvCacheManager& kvCache() { return *kv_; }
  ModelRunner& runner() { return *runner_; }

 private:
  Engine() = default;

  EngineOptions options_;
  ModelDirectory dir_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ModelRunner> runner_;
  std::vector<TokenId> eos_ids_;
  std::optional<TokenId> bos_id_;
  int64_t max_seq_len_ = 0;
  SequenceId next_sequence_id_ = 1;
};

}  // namespace llmrt

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
#include "llmrt/engine_config.h"
#include "llmrt/tokenizer.h"
#include "loader/model_directory.h"
#include "model/attention_windows.h"
#include "model/decoder_model.h"
#include "runtime/model_runner.h"
#include "runtime/peer_ranks.h"

namespace llmrt {

// A validated EngineConfig (EngineConfig::validate(), run once by Executor::create) made
// concrete for one model directory: backend and dtypes chosen, max_seq_len / max_input_len
// filled in and checked against the model's max_position_embeddings, the CPU's default KV cap
// applied. `notes` says which values were chosen by a default or a policy, for the log line.
struct ResolvedConfig {
  EngineConfig config;  // backend, dtype, overlap, kv dtype concrete; lengths and KV cap set
  DType compute_dtype = DType::kF32;
  DType kv_dtype = DType::kF32;
  // config.quantization resolved: F8_E4M3 (kFp8) or I8 (kInt8) product codes, F32 for none.
  DType product_codes = DType::kF32;
  // An AWQ checkpoint under quantization auto: its matrices stay 4-bit (W4A16 products).
  bool int4_products = false;
  // Every layer's attention window; config.kv_cache_config.max_attention_window lists them too.
  AttentionWindows windows;
  std::vector<std::string> notes;
};

// Resolves `config` (already validated) against `dir`. Errors name the option and the model's
// limit, e.g. "EngineConfig: field 'max_seq_len' has value 100000; expected at most the model's
// max_position_embeddings (512, config.json)".
Result<ResolvedConfig> resolveConfig(const EngineConfig& config, const ModelDirectory& dir);
// The one-line summary of a resolved config the engine logs at load.
std::string describeConfig(const ResolvedConfig& r);

// Whether an NVIDIA GPU is visible to this process (its driver's device nodes exist) and this
// build has the CUDA backend: what backend "auto" asks. Loads no CUDA library.
bool cudaBackendAvailable();

// The compute dtype of `config`'s backend for this checkpoint (F32 on the CPU; "auto" on CUDA:
// F16 for a float16 checkpoint, else BF16) and the KV cache's dtype given that compute dtype.
DType computeDtype(const EngineConfig& config, BackendKind backend, const WeightStore& weights,
                   const ModelConfig& model);
DType kvCacheDtype(const EngineConfig& config, DType compute);

class Engine {
 public:
  // Loads the model for a config that EngineConfig::validate() accepted (Executor::create
  // validates; tests call validate() themselves) and resolves it (resolveConfig).
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config);
  ~Engine();

  // The resolved config (backend, dtype, lengths and KV cache sizes as the engine runs them).
  const EngineConfig& config() const { return resolved_.config; }
  const ResolvedConfig& resolved() const { return resolved_; }
  const ModelConfig& modelConfig() const { return dir_.config; }
  const ModelDirectory& modelDirectory() const { return dir_; }
  // The tokenizer (Tokenizer::fromDirectory); null when the directory has none.
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  // EOS ids: generation_config.json's when present, else config.json's.
  std::span<const TokenId> eosIds() const { return eos_ids_; }
  std::optional<TokenId> bosId() const { return bos_id_; }
  int64_t maxSeqLen() const { return resolved_.config.max_seq_len; }

  // Sequence ids are unique over the engine's lifetime.
  SequenceId newSequenceId() { return next_sequence_id_++; }

  Backend& backend() { return *backend_; }
  KvCacheManager& kvCache() { return *kv_; }
  ModelRunner& runner() { return *runner_; }

 private:
  Engine() = default;

  ResolvedConfig resolved_;
  ModelDirectory dir_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<DecoderModel> model_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<PeerRanks> peers_;  // tensor parallelism: ranks 1.. (their threads stop before model_ goes)
  std::unique_ptr<ModelRunner> runner_;
  std::vector<TokenId> eos_ids_;
  std::optional<TokenId> bos_id_;
  SequenceId next_sequence_id_ = 1;
};

}  // namespace llmrt

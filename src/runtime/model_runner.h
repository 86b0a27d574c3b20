// ModelRunner: one engine step. Takes the sequences the scheduler picked (each
// with how many of its tokens to compute), reads their block tables from the
// KV cache manager, runs the block copies the manager queued, runs the model
// on the packed batch, marks the KV as computed and samples the next token
// where one is due. Knows nothing of requests, streaming or text.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "kv/kv_cache_manager.h"
#include "llmrt/sampling_params.h"
#include "model/llama_model.h"
#include "runtime/device_sampling.h"
#include "sampling/sampler.h"
#include "sampling/sequence_state.h"

namespace llmrt {

struct StepSequence {
  SequenceId id = 0;
  std::span<const TokenId> tokens;  // every token of the sequence so far (prompt + generated)
  int32_t num_compute = 0;          // tokens to compute, from the KV manager's computed count
  bool sample = false;              // sample a token from the last computed position
  bool return_logits = false;       // copy the logits of every computed position (context logits)
  bool return_last_logits = false;  // copy the logits of the sampled position (generation logits)
  const SamplingParams* params = nullptr;      // required when sample
  const SequenceSamplingState* state = nullptr;  // required when sample
};

struct StepSequenceResult {
  bool sampled = false;
  SampleResult sample;
  std::vector<float> logits;       // [computed rows, vocab] when return_logits
  std::vector<float> last_logits;  // [vocab] of the sampled position when return_last_logits
  Status error;               // a per-sequence failure (e.g. NaN logits); others continue
};

class ModelRunner {
 public:
  ModelRunner(LlamaModel& model, Backend& backend, KvCacheManager& kv, std::vector<TokenId> eos_ids);

  // Runs one step. Fails as a whole only when the model or the KV copies fail.
  Result<std::vector<StepSequenceResult>> step(std::span<const StepSequence> seqs);

  // Counters since construction.
  uint64_t numSteps() const { return steps_; }
  uint64_t numComputedTokens() const { return computed_tokens_; }

 private:
  // Greedy with no penalty, no min_tokens mask in force and no logprobs: the
  // argmax of the raw logits is the token.
  static bool plainGreedy(const StepSequence& s);

  LlamaModel& model_;
  Backend& backend_;
  KvCacheManager& kv_;
  std::vector<TokenId> eos_ids_;
  Sampler sampler_;
  std::vector<float> host_logits_;  // this step's logits, copied from the backend
  std::vector<int32_t> argmax_;     // this step's greedy tokens, from Backend::argmaxRows
  DeviceSamplingBatch device_sampling_;  // this step's rows for Backend::sampleRows
  uint64_t steps_ = 0;
  uint64_t computed_tokens_ = 0;
};

}  // namespace llmrt

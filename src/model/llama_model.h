// The Llama family (Llama 2/3, Mistral, Qwen2, TinyLlama) as a composition of
// backend ops. Differences between the architectures are config values
// (biases, sliding window, rope scaling, tied embeddings), not code copies.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "llmrt/model_config.h"
#include "model/forward_batch.h"
#include "model/rope.h"

namespace llmrt {

// Returns the checkpoint tensor with this HF name (host memory, any float dtype).
using WeightSource = std::function<Result<TensorView>(const std::string& name)>;

class LlamaModel {
 public:
  // Loads every weight through the backend. Shapes are checked here too.
  static Result<std::unique_ptr<LlamaModel>> load(const ModelConfig& config, const WeightSource& weights,
                                                  Backend& backend);

  const ModelConfig& config() const { return config_; }

  // Runs one step. The KV of the new tokens is written into the backend's
  // pool at the slots the block tables give. Returns logits [numLogitRows, vocab]
  // (float32, backend memory, valid until the next call), rows in sequence order.
  Result<TensorView> forward(const ForwardBatch& batch);

  // Sizes every activation buffer for steps of up to `max_tokens` tokens and
  // `max_logit_rows` logits rows up front, so such a step never allocates.
  Status reserveActivations(int64_t max_tokens, int64_t max_logit_rows);

  // Decode steps (one new token per sequence, last logits only) of up to this
  // many sequences are padded to a bucket size and recorded per bucket on
  // backends that can record (CUDA graphs).
  static constexpr int64_t kMaxRecordedBatch = 512;
  // The padded size of a decode step of `n` sequences (n <= kMaxRecordedBatch).
  static int64_t decodeBucket(int64_t n);

 private:
  // The dtype of activation buffer `slot` (see run()).
  DType slotDtype(int slot) const;
  struct Layer {
    TensorView input_norm, post_norm;
    TensorView qkv_w, qkv_b;  // fused [q | k | v] rows; qkv_b empty when no bias
    TensorView o_w, o_b;
    TensorView gate_up_w, gate_up_b;  // fused [gate | up]
    TensorView down_w, down_b;
    std::optional<int64_t> sliding_window;
  };

  LlamaModel(const ModelConfig& c, Backend& b) : config_(c), backend_(b) {}
  Status loadWeights(const WeightSource& weights);
  // The ops of one step after beginStep: embedding, the layers, the logits rows.
  void run(int64_t tokens, int64_t logit_rows);

  // Per-step host buffers, reused.
  std::vector<int32_t> token_ids_, positions_;
  std::vector<int64_t> slots_, logit_rows_;
  std::vector<StepSeq> seqs_;
  std::vector<float> inv_freq_;

  ModelConfig config_;
  Backend& backend_;
  TensorView embed_, final_norm_, lm_head_;
  std::vector<Layer> layers_;
  RopeTable rope_;  // length-independent table (all but dynamic NTK)
};

}  // namespace llmrt

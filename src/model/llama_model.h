// The Llama family (Llama 2/3, Mistral, Qwen2, TinyLlama) as a composition of
// backend ops. Differences between the architectures are config values
// (biases, sliding window, rope scaling, tied embeddings), not code copies.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "llmrt/model_config.h"
#include "model/rope.h"

namespace llmrt {

// Returns the checkpoint tensor with this HF name (host memory, any float dtype).
using WeightSource = std::function<Result<TensorView>(const std::string& name)>;

// The shape of one step's StepInputs (the runtime's StepBuilder makes both).
struct StepLayout {
  int64_t rows = 0;             // token rows, padding included
  int64_t logit_rows = 0;       // logits rows, padding included
  int64_t real_logit_rows = 0;  // the first ones; the rest belong to padding rows
  bool record = false;          // a decode step backends that can record replay per `rows`
};

class LlamaModel {
 public:
  // Loads every weight through the backend. Shapes are checked here too.
  static Result<std::unique_ptr<LlamaModel>> load(const ModelConfig& config, const WeightSource& weights,
                                                  Backend& backend);

  const ModelConfig& config() const { return config_; }

  // The attention window of every layer (tokens; 0 = full attention), as
  // resolveAttentionWindows gives them; until set, the config's own sliding windows.
  // Steps declare the widest as StepInputs::attention_window, so block tables may hold
  // blocks the KV cache manager released below it. Errors: a count other than the
  // model's layers, a negative window.
  Status setAttentionWindows(std::span<const int32_t> per_layer);
  int64_t attentionWindow(int64_t layer) const { return layers_[static_cast<size_t>(layer)].window; }

  // What a step's inputs need from the model: its RoPE table (length-independent; dynamic NTK
  // tables are computed per sequence from config()) and the widest attention window of its
  // layers (StepInputs::attention_window; 0 when a layer attends fully).
  const RopeTable& ropeTable() const { return rope_; }
  int64_t stepAttentionWindow() const { return step_window_; }

  // Runs one step on inputs the runtime laid out (positions, slots, padding: StepBuilder): begins
  // the step on the backend, composes the layers' ops (recorded / replayed where
  // `layout.record`) and returns logits [layout.real_logit_rows, vocab] (float32, backend
  // memory, valid until the next call), rows in sequence order. The KV of the new tokens is
  // written into the backend's pool at the inputs' slots.
  Result<TensorView> forward(const StepInputs& in, const StepLayout& layout);

  // Sizes every activation buffer for steps of up to `max_tokens` tokens and
  // `max_logit_rows` logits rows up front, so such a step never allocates.
  Status reserveActivations(int64_t max_tokens, int64_t max_logit_rows);

 private:
  // The dtype of activation buffer `slot` (see run()).
  DType slotDtype(int slot) const;
  struct Layer {
    TensorView input_norm, post_norm;
    TensorView qkv_w, qkv_b;  // fused [q | k | v] rows; qkv_b empty when no bias
    TensorView o_w, o_b;
    TensorView gate_up_w, gate_up_b;  // fused [gate | up]
    TensorView down_w, down_b;
    int64_t window = 0;  // attention window in tokens; 0 = full
  };

  LlamaModel(const ModelConfig& c, Backend& b) : config_(c), backend_(b) {}
  Status loadWeights(const WeightSource& weights);
  // The ops of one step after beginStep: embedding, the layers, the logits rows.
  void run(int64_t tokens, int64_t logit_rows);


  ModelConfig config_;
  Backend& backend_;
  TensorView embed_, final_norm_, lm_head_;
  std::vector<Layer> layers_;
  RopeTable rope_;  // length-independent table (all but dynamic NTK)
  int64_t step_window_ = 0;  // the widest layer window, 0 when a layer attends fully
};

}  // namespace llmrt

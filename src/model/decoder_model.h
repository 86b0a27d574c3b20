// Every supported architecture as one composition of backend ops, driven by the config's
// decoder description (include/llmrt/model_config.h): which norm, how positions enter, how
// the residual is wired, which MLP, which soft-caps. Differences between families are values
// there and rows of the loader's architecture table, not code here.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/comm/communicator.h"
#include "llmrt/model_config.h"
#include "loader/decoder_weights.h"
#include "model/rope.h"

namespace llmrt {

// The shape of one step's StepInputs (the runtime's StepBuilder makes both).
struct StepLayout {
  int64_t rows = 0;             // token rows, padding included
  int64_t logit_rows = 0;       // logits rows, padding included
  int64_t real_logit_rows = 0;  // the first ones; the rest belong to padding rows
  bool record = false;          // a decode step backends that can record replay per `rows`
};

struct DecoderModelOptions {
  // The layers' dense product matrices (q/k/v, o, the MLP's, the shared expert's) as 8-bit
  // weights (Backend::loadQuantizedWeight) of this code dtype: F8_E4M3 (core/fp8.h's rule) or I8
  // (core/int8.h's), each row quantized at load — except a checkpoint's own codes of this type with
  // per-tensor or per-row scales (DecoderWeightReader::rowScales), kept with their scales. F32 (the
  // default): no quantized products.
  DType product_codes = DType::kF32;
  // An AWQ checkpoint's product matrices handed to the backend as its 4-bit codes, scales and zero
  // points (Backend::loadInt4Weight: W4A16 where the backend has 4-bit products) instead of
  // dequantized; Conv1D families and tensor-parallel ranks load them dequantized.
  bool int4_products = false;
  // The KV cache holds FP8 codes: the checkpoint's k_scale / v_scale (loader/kv_cache_scales.h)
  // go to the backend, and partial or bad ones fail the load (otherwise they are only logged), and
  // a checkpoint without them is logged as running scale 1.
  bool fp8_kv_cache = false;
  // Tensor parallelism: this model is rank comm->rank() of comm->size() (model/tensor_parallel.h);
  // it loads its share of the weights, and each step's forward must run on every rank of the
  // group at once (one thread each), with the same inputs. Null: one rank, no collectives (a
  // group of one runs them: what TP=1 through a communicator costs). Mixture-of-experts layers
  // split every expert by its intermediate features. The collectives are the backend's (Backend::allReduceSum,
  // allGatherColumns): on the device for CUDA communicators, through the host otherwise.
  Communicator* comm = nullptr;
};

class DecoderModel {
 public:
  // Loads every weight through the backend. Shapes are checked here too.
  static Result<std::unique_ptr<DecoderModel>> load(const ModelConfig& config, const WeightSource& weights,
                                                    Backend& backend, const DecoderModelOptions& options = {});

  // The model's config; with tensor parallelism the rank's share: num_attention_heads,
  // num_key_value_heads and intermediate_size per rank (what its KV pool and buffers hold).
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
    TensorView attn_norm, attn_norm_b;  // before attention
    TensorView mlp_norm, mlp_norm_b;    // before the MLP (sandwich: after attention)
    TensorView pre_mlp_norm, post_mlp_norm;  // sandwich only
    TensorView qkv_w, qkv_b;  // fused [q | k | v] rows; qkv_b empty when no bias
    TensorView o_w, o_b;
    TensorView up_w, up_b;  // fused [gate | up] when gated
    TensorView down_w, down_b;
    // mixture of experts (moe): the router, every expert's [gate | up] and down rows, the shared expert
    TensorView router_w, experts_gate_up, experts_down, shared_up, shared_down, shared_gate;
    bool moe = false;
    int64_t window = 0;  // attention window in tokens; 0 = full
  };

  // Llama-style blocks (RMSNorm, sequential, dense MLP): runFusedRmsLayers.
  bool fusedRmsLayers() const;
  // The dtype every layer's products with weights `w` (a Layer member) take their input in
  // (Backend::productInputDtype) when they all agree, else the activation dtype.
  DType layersInputDtype(TensorView Layer::*w) const;

  DecoderModel(const ModelConfig& c, Backend& b) : config_(c), backend_(b) {}
  Status loadWeights(const ModelConfig& full, const WeightSource& weights, const DecoderModelOptions& options);
  // Tensor parallelism: out = in W^T (+ bias, rank 0 only) summed over the ranks (a row-parallel
  // product), or that added to x; no communicator: linear / linearAdd.
  void rowParallel(const TensorView& in, const TensorView& w, const TensorView& b, TensorView out);
  void rowParallelAdd(const TensorView& in, const TensorView& w, const TensorView& b, TensorView x);
  // A collective's result: the first failure of a step is kept (tp_error_) and aborts the group.
  void collective(const Status& st);
  // The collectives of a sharded step (fencedCollective, with fences_): x summed over the ranks;
  // the ranks' [R, vocab_rows_] logits shards gathered into their columns of `logits`.
  void allReduce(TensorView x);
  void allGather(const TensorView& local, TensorView logits);
  // Enqueue fences (communicator.h, fencedCollective) around each collective of a step run op by
  // op on a device; a recorded step's graph holds its collectives, and the ranks meet before its
  // launch (beginStep's barrier) and after it (fence()).
  void fence();
  bool fences_ = false;
  // Whether the weights are split over several ranks (a communicator of one rank shards nothing).
  bool sharded() const { return comm_ != nullptr && comm_->size() > 1; }
  // The ops of one step after beginStep: embedding, the layers, the logits rows.
  void run(int64_t tokens, int64_t logit_rows);
  // Llama-style blocks (RMSNorm, sequential): products chained through linearAddNormLinear.
  void runFusedRmsLayers(TensorView x, TensorView h, TensorView qkv, TensorView attn_out, TensorView up,
                         TensorView act);
  // Any other wiring, op by op.
  void runLayer(const Layer& L, int64_t layer, TensorView x, TensorView h, TensorView qkv, TensorView attn_out,
                int64_t tokens);
  void attention(const Layer& L, int64_t layer, TensorView qkv, TensorView attn_out);
  // x += the layer's MLP (dense, or mixture of experts) of the normed rows h.
  void mlpAdd(const Layer& L, const TensorView& h, TensorView x, int64_t tokens);
  void mlpActivation(const TensorView& up, TensorView act);
  void norm(const TensorView& x, const TensorView& w, const TensorView& b, TensorView out);

  ModelConfig config_;
  Backend& backend_;
  TensorView embed_, pos_embed_, final_norm_, final_norm_b_, lm_head_, lm_head_b_;
  std::vector<Layer> layers_;
  RopeTable rope_;  // length-independent table (all but dynamic NTK)
  int64_t step_window_ = 0;  // the widest layer window, 0 when a layer attends fully
  Communicator* comm_ = nullptr;  // tensor parallelism (DecoderModelOptions::comm)
  int64_t vocab_rows_ = 0;        // the LM head rows this rank holds (the vocabulary without tensor parallelism)
  Status tp_error_;               // the first failed collective of a step
  // runFusedRmsLayers' normed rows (q/k/v and gate|up inputs) and MLP activations (down inputs):
  // what those products take (layersInputDtype), set at load.
  DType normed_dtype_ = DType::kF32, act_dtype_ = DType::kF32;
};

}  // namespace llmrt

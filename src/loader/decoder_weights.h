// The weights of the decoder description (include/llmrt/model_config.h), read from a checkpoint
// through its architecture's tensor names (arch_table.h), in the model's layout:
//
//   matrices [out_features, in_features] (GPT-2's Conv1D [in, out] transposed);
//   attention rows [q heads | k heads | v heads], each head's rotary features in the "half"
//   layout (an interleaved checkpoint's q/k rows are permuted: pair (2i, 2i+1) -> (i, i + r/2));
//   gated MLP rows [gate | up];
//   Gemma's norm weights as (1 + w).
//
// The loader checks a checkpoint against expectedTensors (checkWeights); the model loads each
// weight as the parts DecoderWeightReader::parts gives, concatenated along dim 0.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "llmrt/model_config.h"
#include "llmrt/status.h"
#include "loader/weight_store.h"

namespace llmrt {

// Returns the checkpoint tensor with this name (host memory, any float dtype).
using WeightSource = std::function<Result<TensorView>(const std::string& name)>;

enum class DecoderWeight : uint8_t {
  // global
  kEmbed,          // [vocab, hidden]
  kPosEmbed,       // [max_position_embeddings, hidden]        PositionEncoding::kLearned
  kFinalNorm,      // [hidden]
  kFinalNormBias,  // [hidden]                                  LayerNorm with bias
  kLmHead,         // [vocab, hidden]                           unless tied
  kLmHeadBias,     // [vocab]                                   GPT-J
  // per layer
  kAttnNorm, kAttnNormBias,  // the norm before attention
  kMlpNorm, kMlpNormBias,    // the norm before the MLP (sandwich: the one after attention)
  kPreMlpNorm,               // sandwich: before the MLP
  kPostMlpNorm,              // sandwich: after the MLP
  kQkv, kQkvBias,            // [q + 2 kv, hidden]
  kO, kOBias,                // [hidden, q]
  kUp, kUpBias,              // [2 inter (gate | up) or inter, hidden]
  kDown, kDownBias,          // [hidden, inter]
  // mixture-of-experts layers (instead of kUp / kDown)
  kRouter,          // [num_experts, hidden]
  kExpertsGateUp,   // [num_experts * 2 moe_inter, hidden]: expert e's [gate | up] rows from e * 2 moe_inter
  kExpertsDown,     // [num_experts * hidden, moe_inter]
  kSharedUp,        // [2 shared_inter, hidden]  (Qwen2-MoE's shared expert)
  kSharedDown,      // [hidden, shared_inter]
  kSharedGate,      // [1, hidden]
};

// Whether the config's model has the weight (in `layer`, for per-layer weights).
bool decoderWeightPresent(DecoderWeight w, const ModelConfig& config, int64_t layer = 0);
// Its shape in the model's layout.
Shape decoderWeightShape(DecoderWeight w, const ModelConfig& config);
// A name for messages and backends: "model.layers.3.qkv" style, per layer where it is one.
std::string decoderWeightName(DecoderWeight w, int64_t layer);
// The checkpoint tensors weight `w` of `layer` is made of, in the model's concatenation order
// (full names, with the family's optional prefix); none when the model has no such weight.
std::vector<std::string> decoderWeightTensors(DecoderWeight w, const ModelConfig& config, int64_t layer = 0);

struct ExpectedTensor {
  std::string name;
  Shape shape;
  std::string formula;  // the shape in config terms, e.g. "[num_key_value_heads*head_dim, hidden_size]"
  // A matrix of a product inside the layers (q/k/v, o, MLP, experts; not embeddings, LM head,
  // norms, biases or routers): what weight quantization converts.
  bool product_matrix = false;
};

// Every checkpoint tensor the config requires, with its checkpoint shape, in model order.
std::vector<ExpectedTensor> expectedTensors(const ModelConfig& config);

// Checks that every expected tensor exists (under its name, or without the family's optional
// prefix), has exactly the expected shape and a floating-point dtype. Errors name the tensor,
// its shape and the expected shape (NotFound for a missing tensor, InvalidArgument for a wrong
// shape or a non-floating dtype, Unimplemented for I8 / U8 / F8_E4M3: quantized codes). On
// success returns the names of tensors the model does not use, sorted.
Result<std::vector<std::string>> checkWeights(const ModelConfig& config, const WeightStore& weights);

class DecoderWeightReader {
 public:
  DecoderWeightReader(const ModelConfig& config, WeightSource source);
  // The parts of weight `w` of `layer` in the model's layout: views into the checkpoint where
  // its layout is the model's, else rearranged copies this reader holds until the next call.
  Result<std::vector<TensorView>> parts(DecoderWeight w, int64_t layer = 0);
  // Whether the last parts() are all views into the checkpoint (else some are this reader's
  // copies, gone at the next call: Backend::loadWeight's `borrowable`).
  bool lastPartsBorrowable() const { return held_.empty(); }

  // What parts() gives for a matrix an AWQ checkpoint stores as qweight / qzeros / scales
  // (ModelConfig::weight_quantization "awq"): its dequantized values (the default), or one
  // component in the model's row layout — the codes [out, in] (U8, 0..15), the scales
  // [out, in / group] (F32) or the zero points [out, in / group] (U8) — rearranged as the matrix would be
  // (q/k/v packing, interleaved-rotary row permutation, gate | up). Not for Conv1D families
  // (their matrices are transposed): Unimplemented there.
  enum class AwqComponent : uint8_t { kDequantized, kCodes, kScales, kZeros };
  void setAwqComponent(AwqComponent c) { awq_component_ = c; }

  // For a part of the last parts() made of whole rows of a matrix the checkpoint stores as 8-bit
  // codes with one scale per tensor or per output row (FP8 and INT8 checkpoints; not block
  // scales): each row's scale (part.shape[0] values; a per-tensor scale repeated), so its codes
  // can be recovered exactly (float(code) * scale / scale rounds back to the code). Empty for
  // anything else, rearranged copies included.
  std::vector<float> rowScales(const TensorView& part) const;

 private:
  Result<TensorView> fetch(const std::string& name, const Shape& checkpoint_shape);
  Result<TensorView> hold(std::vector<char> bytes, DType dtype, Shape shape);
  Result<TensorView> transpose(const TensorView& t);
  // A float8 ("fp8") or int8 ("int8") code matrix as float32 with its scales applied.
  Result<TensorView> dequantizeScaled(const std::string& name, const TensorView& w);
  // An AWQ matrix (ModelConfig::weight_quantization "awq") of checkpoint shape `shape` as float32:
  // dequantized, or the component setAwqComponent names.
  Result<TensorView> dequantizeAwq(const std::string& name, const Shape& shape);
  Result<std::vector<TensorView>> qkvParts(int64_t layer, bool bias);

  const ModelConfig& config_;
  WeightSource source_;
  std::deque<std::vector<char>> held_;  // copies of the current call
  struct ScaledRows {  // a dequantized matrix of held_ and its per-row scales (rowScales)
    const char* begin;
    int64_t rows, cols;
    std::vector<float> scales;
  };
  std::vector<ScaledRows> scaled_;  // (cleared with held_)
  AwqComponent awq_component_ = AwqComponent::kDequantized;
  std::unique_ptr<ThreadPool> pool_;    // transposes (Conv1D checkpoints), made at the first
};

}  // namespace llmrt

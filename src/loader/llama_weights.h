// The Llama tensor table: every tensor a Llama-family checkpoint (llama,
// mistral, qwen2) may hold, by HF name and shape, and when the config requires
// it. It is the one place these names and shapes are spelled: the loader
// checks checkpoints against it (checkLlamaWeights) and the model
// (src/model/llama_model.cpp) loads its weights through it.
//
// Names (N = layer index):
//   model.embed_tokens.weight                      [vocab_size, hidden_size]
//   model.layers.N.input_layernorm.weight          [hidden_size]
//   model.layers.N.post_attention_layernorm.weight [hidden_size]
//   model.layers.N.self_attn.q_proj.weight         [num_attention_heads*head_dim, hidden_size]
//   model.layers.N.self_attn.k_proj.weight         [num_key_value_heads*head_dim, hidden_size]
//   model.layers.N.self_attn.v_proj.weight         [num_key_value_heads*head_dim, hidden_size]
//   model.layers.N.self_attn.o_proj.weight         [hidden_size, num_attention_heads*head_dim]
//   model.layers.N.self_attn.{q,k,v}_proj.bias     when attention_bias (Llama) / always (Qwen2)
//   model.layers.N.self_attn.o_proj.bias           [hidden_size], when o_proj_bias
//   model.layers.N.mlp.{gate,up}_proj.weight       [intermediate_size, hidden_size]
//   model.layers.N.mlp.down_proj.weight            [hidden_size, intermediate_size]
//   model.layers.N.mlp.{gate,up,down}_proj.bias    when mlp_bias
//   model.norm.weight                              [hidden_size]
//   lm_head.weight                                 [vocab_size, hidden_size], unless tie_word_embeddings
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "llmrt/model_config.h"
#include "llmrt/status.h"
#include "loader/weight_store.h"

namespace llmrt {

// One entry per tensor kind; per-layer kinds exist once per layer.
enum class LlamaTensor : uint8_t {
  kEmbedTokens,
  kInputNorm,
  kQProj,
  kKProj,
  kVProj,
  kOProj,
  kQBias,
  kKBias,
  kVBias,
  kOBias,
  kPostNorm,
  kGateProj,
  kUpProj,
  kDownProj,
  kGateBias,
  kUpBias,
  kDownBias,
  kFinalNorm,
  kLmHead,
};

// True when `config` requires tensor `t` (biases per attention_bias /
// o_proj_bias / mlp_bias, lm_head unless tie_word_embeddings, the rest always).
bool llamaTensorPresent(LlamaTensor t, const ModelConfig& config);
// The HF name: "model.norm.weight", or for a per-layer kind
// "model.layers.<layer>.self_attn.q_proj.weight" (`layer` is ignored for the others).
std::string llamaTensorName(LlamaTensor t, int64_t layer = 0);
// The shape `config` requires, e.g. [num_key_value_heads*head_dim, hidden_size] for kKProj.
Shape llamaTensorShape(LlamaTensor t, const ModelConfig& config);
// That shape in config terms, e.g. "[num_key_value_heads*head_dim, hidden_size]".
std::string llamaTensorFormula(LlamaTensor t);

struct ExpectedTensor {
  std::string name;
  Shape shape;
  std::string formula;  // the shape in config terms, e.g. "[num_key_value_heads*head_dim, hidden_size]"
};

// "model.layers.<layer>.<suffix>", e.g. llamaLayerTensorName(3, "mlp.up_proj.weight").
std::string llamaLayerTensorName(int64_t layer, std::string_view suffix);

// Every tensor the config requires, in model order (embeddings, layers, final norm, lm_head).
std::vector<ExpectedTensor> expectedLlamaTensors(const ModelConfig& config);

// Checks that every expected tensor exists, has exactly the expected shape and a
// floating-point dtype. Errors name the tensor, its shape and the expected shape
// (NotFound for a missing tensor, InvalidArgument for a wrong shape or a
// non-floating dtype, Unimplemented for I8 / U8 / F8_E4M3: quantized codes).
// On success returns the names of tensors the model does not use (e.g. a tied
// checkpoint's lm_head.weight, rotary_emb.inv_freq buffers), sorted.
Result<std::vector<std::string>> checkLlamaWeights(const ModelConfig& config, const WeightStore& weights);

}  // namespace llmrt

#include "loader/llama_weights.h"

#include <set>

namespace llmrt {

std::string llamaLayerTensorName(int64_t layer, std::string_view suffix) {
  std::string s = "model.layers.";
  s += std::to_string(layer);
  s += '.';
  s += suffix;
  return s;
}

std::vector<ExpectedTensor> expectedLlamaTensors(const ModelConfig& c) {
  const int64_t h = c.hidden_size, q = c.qSize(), kv = c.kvSize(), inter = c.intermediate_size;
  std::vector<ExpectedTensor> out;
  out.push_back({"model.embed_tokens.weight", Shape{c.vocab_size, h}, "[vocab_size, hidden_size]"});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    auto add = [&](std::string_view suffix, Shape shape, const char* formula) {
      out.push_back({llamaLayerTensorName(l, suffix), shape, formula});
    };
    add("input_layernorm.weight", Shape{h}, "[hidden_size]");
    add("self_attn.q_proj.weight", Shape{q, h}, "[num_attention_heads*head_dim, hidden_size]");
    add("self_attn.k_proj.weight", Shape{kv, h}, "[num_key_value_heads*head_dim, hidden_size]");
    add("self_attn.v_proj.weight", Shape{kv, h}, "[num_key_value_heads*head_dim, hidden_size]");
    add("self_attn.o_proj.weight", Shape{h, q}, "[hidden_size, num_attention_heads*head_dim]");
    if (c.attention_bias) {
      add("self_attn.q_proj.bias", Shape{q}, "[num_attention_heads*head_dim]");
      add("self_attn.k_proj.bias", Shape{kv}, "[num_key_value_heads*head_dim]");
      add("self_attn.v_proj.bias", Shape{kv}, "[num_key_value_heads*head_dim]");
    }
    if (c.o_proj_bias) add("self_attn.o_proj.bias", Shape{h}, "[hidden_size]");
    add("post_attention_layernorm.weight", Shape{h}, "[hidden_size]");
    add("mlp.gate_proj.weight", Shape{inter, h}, "[intermediate_size, hidden_size]");
    add("mlp.up_proj.weight", Shape{inter, h}, "[intermediate_size, hidden_size]");
    add("mlp.down_proj.weight", Shape{h, inter}, "[hidden_size, intermediate_size]");
    if (c.mlp_bias) {
      add("mlp.gate_proj.bias", Shape{inter}, "[intermediate_size]");
      add("mlp.up_proj.bias", Shape{inter}, "[intermediate_size]");
      add("mlp.down_proj.bias", Shape{h}, "[hidden_size]");
    }
  }
  out.push_back({"model.norm.weight", Shape{h}, "[hidden_size]"});
  if (!c.tie_word_embeddings) {
    out.push_back({"lm_head.weight", Shape{c.vocab_size, h}, "[vocab_size, hidden_size]"});
  }
  return out;
}

Result<std::vector<std::string>> checkLlamaWeights(const ModelConfig& c, const WeightStore& weights) {
  const std::string& src = weights.source();
  std::set<std::string, std::less<>> used;
  for (const ExpectedTensor& e : expectedLlamaTensors(c)) {
    const WeightEntry* w = weights.find(e.name);
    if (w == nullptr) {
      std::string m = src + ": tensor '" + e.name + "' is missing; expected shape " + e.shape.toString() +
                      " " + e.formula + " for " + c.architecture;
      if (e.name == "lm_head.weight") m += " (tie_word_embeddings is false)";
      return notFound(std::move(m));
    }
    if (w->shape != e.shape) {
      return invalidArgument(src + ": tensor '" + e.name + "' has shape " + w->shape.toString() +
                             "; expected " + e.shape.toString() + " " + e.formula);
    }
    if (!isFloatingPoint(w->dtype)) {
      return invalidArgument(src + ": tensor '" + e.name + "' has dtype " + std::string(dtypeName(w->dtype)) +
                             "; expected a floating-point dtype (F32, F16, BF16, F8_E4M3, F64)");
    }
    used.insert(e.name);
  }
  std::vector<std::string> unused;
  for (const WeightEntry& w : weights.entries()) {
    if (used.find(w.name) == used.end()) unused.push_back(w.name);
  }
  return unused;
}

}  // namespace llmrt

#include "loader/llama_weights.h"

#include <iterator>
#include <set>

namespace llmrt {

std::string llamaLayerTensorName(int64_t layer, std::string_view suffix) {
  std::string s = "model.layers.";
  s += std::to_string(layer);
  s += '.';
  s += suffix;
  return s;
}

namespace {

// Dimensions in config terms.
enum class Dim : uint8_t { kNone, kVocab, kHidden, kQ, kKv, kInter };
// When a tensor is present.
enum class When : uint8_t { kAlways, kAttentionBias, kOProjBias, kMlpBias, kUntied };

struct Spec {
  LlamaTensor id;
  bool per_layer;         // named "model.layers.N." + name
  std::string_view name;  // the full name, or the per-layer suffix
  Dim rows, cols;         // cols is kNone for vectors
  When when;
};

// In checkpoint order: embeddings, each layer's tensors, final norm, lm_head.
// Indexed by LlamaTensor (checked by static_asserts below).
constexpr Spec kTable[] = {
    {LlamaTensor::kEmbedTokens, false, "model.embed_tokens.weight", Dim::kVocab, Dim::kHidden, When::kAlways},
    {LlamaTensor::kInputNorm, true, "input_layernorm.weight", Dim::kHidden, Dim::kNone, When::kAlways},
    {LlamaTensor::kQProj, true, "self_attn.q_proj.weight", Dim::kQ, Dim::kHidden, When::kAlways},
    {LlamaTensor::kKProj, true, "self_attn.k_proj.weight", Dim::kKv, Dim::kHidden, When::kAlways},
    {LlamaTensor::kVProj, true, "self_attn.v_proj.weight", Dim::kKv, Dim::kHidden, When::kAlways},
    {LlamaTensor::kOProj, true, "self_attn.o_proj.weight", Dim::kHidden, Dim::kQ, When::kAlways},
    {LlamaTensor::kQBias, true, "self_attn.q_proj.bias", Dim::kQ, Dim::kNone, When::kAttentionBias},
    {LlamaTensor::kKBias, true, "self_attn.k_proj.bias", Dim::kKv, Dim::kNone, When::kAttentionBias},
    {LlamaTensor::kVBias, true, "self_attn.v_proj.bias", Dim::kKv, Dim::kNone, When::kAttentionBias},
    {LlamaTensor::kOBias, true, "self_attn.o_proj.bias", Dim::kHidden, Dim::kNone, When::kOProjBias},
    {LlamaTensor::kPostNorm, true, "post_attention_layernorm.weight", Dim::kHidden, Dim::kNone,
     When::kAlways},
    {LlamaTensor::kGateProj, true, "mlp.gate_proj.weight", Dim::kInter, Dim::kHidden, When::kAlways},
    {LlamaTensor::kUpProj, true, "mlp.up_proj.weight", Dim::kInter, Dim::kHidden, When::kAlways},
    {LlamaTensor::kDownProj, true, "mlp.down_proj.weight", Dim::kHidden, Dim::kInter, When::kAlways},
    {LlamaTensor::kGateBias, true, "mlp.gate_proj.bias", Dim::kInter, Dim::kNone, When::kMlpBias},
    {LlamaTensor::kUpBias, true, "mlp.up_proj.bias", Dim::kInter, Dim::kNone, When::kMlpBias},
    {LlamaTensor::kDownBias, true, "mlp.down_proj.bias", Dim::kHidden, Dim::kNone, When::kMlpBias},
    {LlamaTensor::kFinalNorm, false, "model.norm.weight", Dim::kHidden, Dim::kNone, When::kAlways},
    {LlamaTensor::kLmHead, false, "lm_head.weight", Dim::kVocab, Dim::kHidden, When::kUntied},
};

constexpr bool tableIsIndexedById() {
  for (size_t i = 0; i < std::size(kTable); ++i) {
    if (static_cast<size_t>(kTable[i].id) != i) return false;
  }
  return std::size(kTable) == static_cast<size_t>(LlamaTensor::kLmHead) + 1;
}
static_assert(tableIsIndexedById(), "kTable must list every LlamaTensor in enum order");

const Spec& spec(LlamaTensor t) { return kTable[static_cast<size_t>(t)]; }

int64_t dimSize(Dim d, const ModelConfig& c) {
  switch (d) {
    case Dim::kVocab:
      return c.vocab_size;
    case Dim::kHidden:
      return c.hidden_size;
    case Dim::kQ:
      return c.qSize();
    case Dim::kKv:
      return c.kvSize();
    case Dim::kInter:
      return c.intermediate_size;
    case Dim::kNone:
      break;
  }
  return 0;
}

std::string_view dimName(Dim d) {
  switch (d) {
    case Dim::kVocab:
      return "vocab_size";
    case Dim::kHidden:
      return "hidden_size";
    case Dim::kQ:
      return "num_attention_heads*head_dim";
    case Dim::kKv:
      return "num_key_value_heads*head_dim";
    case Dim::kInter:
      return "intermediate_size";
    case Dim::kNone:
      break;
  }
  return "";
}

ExpectedTensor expected(const Spec& s, int64_t layer, const ModelConfig& c) {
  return {llamaTensorName(s.id, layer), llamaTensorShape(s.id, c), llamaTensorFormula(s.id)};
}

}  // namespace

bool llamaTensorPresent(LlamaTensor t, const ModelConfig& c) {
  switch (spec(t).when) {
    case When::kAlways:
      return true;
    case When::kAttentionBias:
      return c.attention_bias;
    case When::kOProjBias:
      return c.o_proj_bias;
    case When::kMlpBias:
      return c.mlp_bias;
    case When::kUntied:
      return !c.tie_word_embeddings;
  }
  return false;
}

std::string llamaTensorName(LlamaTensor t, int64_t layer) {
  const Spec& s = spec(t);
  return s.per_layer ? llamaLayerTensorName(layer, s.name) : std::string(s.name);
}

Shape llamaTensorShape(LlamaTensor t, const ModelConfig& c) {
  const Spec& s = spec(t);
  if (s.cols == Dim::kNone) return Shape{dimSize(s.rows, c)};
  return Shape{dimSize(s.rows, c), dimSize(s.cols, c)};
}

std::string llamaTensorFormula(LlamaTensor t) {
  const Spec& s = spec(t);
  std::string f = "[";
  f += dimName(s.rows);
  if (s.cols != Dim::kNone) {
    f += ", ";
    f += dimName(s.cols);
  }
  return f + "]";
}

std::vector<ExpectedTensor> expectedLlamaTensors(const ModelConfig& c) {
  std::vector<ExpectedTensor> out;
  // The table's global tensors before the layers, the layers, then the rest.
  size_t i = 0;
  for (; i < std::size(kTable) && !kTable[i].per_layer; ++i) {
    if (llamaTensorPresent(kTable[i].id, c)) out.push_back(expected(kTable[i], 0, c));
  }
  const size_t layer_begin = i;
  while (i < std::size(kTable) && kTable[i].per_layer) ++i;
  const size_t layer_end = i;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    for (size_t k = layer_begin; k < layer_end; ++k) {
      if (llamaTensorPresent(kTable[k].id, c)) out.push_back(expected(kTable[k], l, c));
    }
  }
  for (; i < std::size(kTable); ++i) {
    if (llamaTensorPresent(kTable[i].id, c)) out.push_back(expected(kTable[i], 0, c));
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
    if (w->dtype == DType::kF8E4M3 || w->dtype == DType::kI8 || w->dtype == DType::kU8) {
      return unimplemented(src + ": tensor '" + e.name + "' has dtype " + std::string(dtypeName(w->dtype)) +
                           ", quantized codes, which are not supported yet; use a bf16/fp16/fp32 checkpoint");
    }
    if (!isFloatingPoint(w->dtype)) {
      return invalidArgument(src + ": tensor '" + e.name + "' has dtype " + std::string(dtypeName(w->dtype)) +
                             "; expected a floating-point dtype (F32, F16, BF16, F64)");
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

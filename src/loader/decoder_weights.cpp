#include "loader/decoder_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <set>

#include "loader/arch_table.h"
#include "loader/awq_pack.h"

namespace llmrt {
namespace {

using W = DecoderWeight;

bool isLayerWeight(W w) { return w >= W::kAttnNorm; }
bool isBias(W w) {
  switch (w) {
    case W::kFinalNormBias: case W::kLmHeadBias: case W::kAttnNormBias: case W::kMlpNormBias:
    case W::kQkvBias: case W::kOBias: case W::kUpBias: case W::kDownBias:
      return true;
    default:
      return false;
  }
}
bool isNorm(W w) {
  switch (w) {
    case W::kFinalNorm: case W::kAttnNorm: case W::kMlpNorm: case W::kPreMlpNorm: case W::kPostMlpNorm:
      return true;
    default:
      return false;
  }
}

// One checkpoint tensor of a weight: its full name, checkpoint shape and shape formula.
struct Source {
  std::string name;
  Shape shape;
  std::string formula;
};

std::string layerName(const TensorNames& n, int64_t layer, std::string_view base, bool bias) {
  std::string s(n.layer_prefix);
  s += std::to_string(layer);
  s += '.';
  s += base;
  s += bias ? ".bias" : ".weight";
  return s;
}

std::string globalName(std::string_view base, bool bias) { return std::string(base) + (bias ? ".bias" : ".weight"); }

// The checkpoint tensors making up weight `w` of `layer`, in the order the model concatenates
// them (before any rearrangement), with checkpoint shapes.
std::vector<Source> sources(W w, int64_t layer, const ModelConfig& c) {
  const TensorNames& n = archEntry(c.arch).names;
  const int64_t V = c.vocab_size, H = c.hidden_size, Q = c.qSize(), KV = c.kvSize(), I = c.intermediate_size;
  const bool bias = isBias(w);
  // A matrix [rows, cols] as the checkpoint stores it (Conv1D: transposed), or a vector [rows].
  auto mat = [&](std::string name, int64_t rows, int64_t cols, std::string frows, std::string fcols) -> Source {
    if (bias) return {std::move(name), Shape{rows}, "[" + frows + "]"};
    if (n.transposed) return {std::move(name), Shape{cols, rows}, "[" + fcols + ", " + frows + "]"};
    return {std::move(name), Shape{rows, cols}, "[" + frows + ", " + fcols + "]"};
  };
  auto L = [&](std::string_view base) { return layerName(n, layer, base, bias); };
  const int64_t E = c.decoder.num_experts, EI = c.decoder.moe_intermediate_size;
  const int64_t SI = c.decoder.shared_expert_intermediate_size;
  auto expert = [&](int64_t e, std::string_view which) {
    std::string base(n.experts);
    base += std::to_string(e);
    base += '.';
    base += which;
    return L(base);
  };

  const bool two_norm_names = c.decoder.residual == ResidualWiring::kParallelTwoNorms && !n.parallel_attn_norm.empty();
  switch (w) {
    case W::kEmbed:
      return {{globalName(n.embed, false), Shape{V, H}, "[vocab_size, hidden_size]"}};
    case W::kPosEmbed:
      return {{globalName(n.pos_embed, false), Shape{c.max_position_embeddings, H},
               "[max_position_embeddings, hidden_size]"}};
    case W::kFinalNorm:
    case W::kFinalNormBias:
      return {{globalName(n.final_norm, bias), Shape{H}, "[hidden_size]"}};
    case W::kLmHead:
      return {{globalName(n.lm_head, false), Shape{V, H}, "[vocab_size, hidden_size]"}};
    case W::kLmHeadBias:
      return {{globalName(n.lm_head, true), Shape{V}, "[vocab_size]"}};
    case W::kAttnNorm:
    case W::kAttnNormBias:
      return {{L(two_norm_names ? n.parallel_attn_norm : n.attn_norm), Shape{H}, "[hidden_size]"}};
    case W::kMlpNorm:
    case W::kMlpNormBias:
      return {{L(two_norm_names ? n.parallel_mlp_norm : n.mlp_norm), Shape{H}, "[hidden_size]"}};
    case W::kPreMlpNorm:
      return {{L(n.pre_mlp_norm), Shape{H}, "[hidden_size]"}};
    case W::kPostMlpNorm:
      return {{L(n.post_mlp_norm), Shape{H}, "[hidden_size]"}};
    case W::kQkv:
    case W::kQkvBias:
      if (n.qkv.empty())
        return {mat(L(n.q), Q, H, "num_attention_heads*head_dim", "hidden_size"),
                mat(L(n.k), KV, H, "num_key_value_heads*head_dim", "hidden_size"),
                mat(L(n.v), KV, H, "num_key_value_heads*head_dim", "hidden_size")};
      return {mat(L(n.qkv), Q + 2 * KV, H, "(num_attention_heads+2*num_key_value_heads)*head_dim", "hidden_size")};
    case W::kO:
    case W::kOBias:
      return {mat(L(n.o), H, Q, "hidden_size", "num_attention_heads*head_dim")};
    case W::kUp:
    case W::kUpBias:
      if (!c.decoder.mlp_gated) return {mat(L(n.up), I, H, "intermediate_size", "hidden_size")};
      if (!n.gate_up.empty()) return {mat(L(n.gate_up), 2 * I, H, "2*intermediate_size", "hidden_size")};
      return {mat(L(n.gate), I, H, "intermediate_size", "hidden_size"),
              mat(L(n.up), I, H, "intermediate_size", "hidden_size")};
    case W::kDown:
    case W::kDownBias:
      return {mat(L(n.down), H, I, "hidden_size", "intermediate_size")};
    case W::kRouter:
      return {mat(L(n.router), E, H, "num_experts", "hidden_size")};
    case W::kExpertsGateUp: {
      std::vector<Source> v;
      for (int64_t e = 0; e < E; ++e) {
        v.push_back(mat(expert(e, n.expert_gate), EI, H, "moe_intermediate_size", "hidden_size"));
        v.push_back(mat(expert(e, n.expert_up), EI, H, "moe_intermediate_size", "hidden_size"));
      }
      return v;
    }
    case W::kExpertsDown: {
      std::vector<Source> v;
      for (int64_t e = 0; e < E; ++e)
        v.push_back(mat(expert(e, n.expert_down), H, EI, "hidden_size", "moe_intermediate_size"));
      return v;
    }
    case W::kSharedUp:
      return {mat(L(std::string(n.shared_expert) + "gate_proj"), SI, H, "shared_expert_intermediate_size", "hidden_size"),
              mat(L(std::string(n.shared_expert) + "up_proj"), SI, H, "shared_expert_intermediate_size", "hidden_size")};
    case W::kSharedDown:
      return {mat(L(std::string(n.shared_expert) + "down_proj"), H, SI, "hidden_size", "shared_expert_intermediate_size")};
    case W::kSharedGate:
      return {mat(L(n.shared_expert_gate), 1, H, "1", "hidden_size")};
  }
  return {};
}

constexpr W kGlobalsFirst[] = {W::kEmbed, W::kPosEmbed};
constexpr W kLayerWeights[] = {W::kAttnNorm, W::kAttnNormBias, W::kQkv, W::kQkvBias, W::kO, W::kOBias,
                               W::kMlpNorm, W::kMlpNormBias, W::kPreMlpNorm, W::kUp, W::kUpBias,
                               W::kDown, W::kDownBias, W::kRouter, W::kExpertsGateUp, W::kExpertsDown,
                               W::kSharedUp, W::kSharedDown, W::kSharedGate, W::kPostMlpNorm};
constexpr W kGlobalsLast[] = {W::kFinalNorm, W::kFinalNormBias, W::kLmHead, W::kLmHeadBias};

// Rows [start, start + n) of a contiguous view (elements of a vector).
TensorView rowSlice(const TensorView& t, int64_t start, int64_t n) {
  const int64_t row_elems = t.shape.rank() >= 2 ? t.shape[1] : 1;
  Shape s = t.shape;
  s[0] = n;
  return TensorView(static_cast<char*>(t.data) + start * row_elems * static_cast<int64_t>(dtypeSize(t.dtype)),
                    t.dtype, s, t.device, t.device_index);
}

// Feature `i` of a head in the half layout comes from this feature of the interleaved layout.
int64_t interleavedSource(int64_t i, int64_t rotary_dim) {
  const int64_t half = rotary_dim / 2;
  if (i < half) return 2 * i;
  if (i < rotary_dim) return 2 * (i - half) + 1;
  return i;
}

}  // namespace

bool decoderWeightPresent(DecoderWeight w, const ModelConfig& c, int64_t layer) {
  const DecoderDescription& d = c.decoder;
  const bool moe = c.moeLayer(layer);
  switch (w) {
    case W::kEmbed: case W::kFinalNorm: case W::kAttnNorm: case W::kQkv: case W::kO:
      return true;
    case W::kUp: case W::kDown:
      return !moe;
    case W::kRouter: case W::kExpertsGateUp: case W::kExpertsDown:
      return moe;
    case W::kSharedUp: case W::kSharedDown: case W::kSharedGate:
      return moe && d.shared_expert_intermediate_size > 0;
    case W::kPosEmbed:
      return d.positions == PositionEncoding::kLearned;
    case W::kFinalNormBias: case W::kAttnNormBias:
      return d.norm_bias;
    case W::kMlpNormBias:
      return d.norm_bias && d.residual != ResidualWiring::kParallel;
    case W::kMlpNorm:
      return d.residual != ResidualWiring::kParallel;
    case W::kPreMlpNorm: case W::kPostMlpNorm:
      return d.residual == ResidualWiring::kSandwich;
    case W::kLmHead:
      return !c.tie_word_embeddings;
    case W::kLmHeadBias:
      return d.lm_head_bias;
    case W::kQkvBias:
      return c.attention_bias;
    case W::kOBias:
      return c.o_proj_bias;
    case W::kUpBias: case W::kDownBias:
      return c.mlp_bias && !moe;
  }
  return false;
}

Shape decoderWeightShape(DecoderWeight w, const ModelConfig& c) {
  const int64_t V = c.vocab_size, H = c.hidden_size, QKV = c.qSize() + 2 * c.kvSize();
  const int64_t up = c.decoder.mlp_gated ? 2 * c.intermediate_size : c.intermediate_size;
  switch (w) {
    case W::kEmbed: case W::kLmHead: return Shape{V, H};
    case W::kPosEmbed: return Shape{c.max_position_embeddings, H};
    case W::kLmHeadBias: return Shape{V};
    case W::kQkv: return Shape{QKV, H};
    case W::kQkvBias: return Shape{QKV};
    case W::kO: return Shape{H, c.qSize()};
    case W::kUp: return Shape{up, H};
    case W::kUpBias: return Shape{up};
    case W::kDown: return Shape{H, c.intermediate_size};
    case W::kRouter: return Shape{c.decoder.num_experts, H};
    case W::kExpertsGateUp: return Shape{c.decoder.num_experts * 2 * c.decoder.moe_intermediate_size, H};
    case W::kExpertsDown: return Shape{c.decoder.num_experts * H, c.decoder.moe_intermediate_size};
    case W::kSharedUp: return Shape{2 * c.decoder.shared_expert_intermediate_size, H};
    case W::kSharedDown: return Shape{H, c.decoder.shared_expert_intermediate_size};
    case W::kSharedGate: return Shape{1, H};
    default: return Shape{H};  // norms, their biases, o and down biases
  }
}

std::string decoderWeightName(DecoderWeight w, int64_t layer) {
  static constexpr const char* kNames[] = {
      "embed", "pos_embed", "final_norm", "final_norm.bias", "lm_head", "lm_head.bias",
      "attn_norm", "attn_norm.bias", "mlp_norm", "mlp_norm.bias", "pre_mlp_norm", "post_mlp_norm",
      "qkv", "qkv.bias", "o", "o.bias", "up", "up.bias", "down", "down.bias",
      "router", "experts.gate_up", "experts.down", "shared_expert.up", "shared_expert.down", "shared_expert.gate"};
  const std::string base = kNames[static_cast<size_t>(w)];
  return isLayerWeight(w) ? "layers." + std::to_string(layer) + "." + base : base;
}

std::vector<std::string> decoderWeightTensors(DecoderWeight w, const ModelConfig& c, int64_t layer) {
  std::vector<std::string> names;
  if (!decoderWeightPresent(w, c, layer)) return names;
  for (Source& s : sources(w, layer, c)) names.push_back(std::move(s.name));
  return names;
}

std::vector<ExpectedTensor> expectedTensors(const ModelConfig& c) {
  std::vector<ExpectedTensor> out;
  auto add = [&](W w, int64_t layer) {
    if (!decoderWeightPresent(w, c, layer)) return;
    const bool product = w == W::kQkv || w == W::kO || w == W::kUp || w == W::kDown || w == W::kExpertsGateUp ||
                         w == W::kExpertsDown || w == W::kSharedUp || w == W::kSharedDown;
    for (Source& s : sources(w, layer, c))
      out.push_back({std::move(s.name), s.shape, std::move(s.formula), product && s.shape.rank() == 2});
  };
  for (W w : kGlobalsFirst) add(w, 0);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    for (W w : kLayerWeights) add(w, l);
  for (W w : kGlobalsLast) add(w, 0);
  return out;
}

namespace {

// FP8 and INT8 checkpoints (ModelConfig::weight_quantization "fp8" / "int8"): the name of a code matrix's scale
// tensor, and whether `scale` fits a [rows, cols] weight (block scales [ceil(rows / br),
// ceil(cols / bc)]; else one value, or one per row as [rows] or [rows, 1]).
std::string fp8ScaleName(const ModelConfig& c, std::string_view weight) {
  return std::string(weight) + (c.fp8_block_rows > 0 ? "_scale_inv" : "_scale");
}

bool fp8ScaleFits(const ModelConfig& c, const Shape& weight, const Shape& scale) {
  const int64_t rows = weight[0], cols = weight[1];
  if (c.fp8_block_rows > 0)
    return scale == Shape{(rows + c.fp8_block_rows - 1) / c.fp8_block_rows,
                          (cols + c.fp8_block_cols - 1) / c.fp8_block_cols};
  return scale.numel() == 1 || scale == Shape{rows} || scale == Shape{rows, 1};
}

std::string fp8ScaleExpectation(const ModelConfig& c, const Shape& weight) {
  if (c.fp8_block_rows > 0)
    return "shape " + Shape{(weight[0] + c.fp8_block_rows - 1) / c.fp8_block_rows,
                            (weight[1] + c.fp8_block_cols - 1) / c.fp8_block_cols}.toString() +
           " (one float per " + std::to_string(c.fp8_block_rows) + "x" + std::to_string(c.fp8_block_cols) +
           " block, weight_block_size)";
  return "one float per tensor or per row ([" + std::to_string(weight[0]) + "] or [" + std::to_string(weight[0]) +
         ", 1])";
}

// Checks the scale tensor of float8 (or int8) weight `w`; returns its name.
Result<std::string> checkFp8Scale(const ModelConfig& c, const WeightStore& weights, const WeightEntry& w) {
  const std::string& src = weights.source();
  if (w.shape.rank() != 2)
    return invalidArgument(src + ": tensor '" + w.name + "' is " + std::string(dtypeName(w.dtype)) + " with shape " +
                           w.shape.toString() + "; only matrices (linear weights) may be quantized");
  const std::string name = fp8ScaleName(c, w.name);
  const WeightEntry* s = weights.find(name);
  if (s == nullptr)
    return notFound(src + ": tensor '" + name + "' is missing; expected the scales of " +
                    std::string(dtypeName(w.dtype)) + " tensor '" + w.name + "': " + fp8ScaleExpectation(c, w.shape));
  if (!isFloatingPoint(s->dtype) || s->dtype == DType::kF8E4M3 || !fp8ScaleFits(c, w.shape, s->shape))
    return invalidArgument(src + ": tensor '" + name + "' is " + std::string(dtypeName(s->dtype)) + " " +
                           s->shape.toString() + "; expected F32/BF16/F16 " + fp8ScaleExpectation(c, w.shape));
  return name;
}

// AWQ checkpoints (ModelConfig::weight_quantization "awq"): a product matrix NAME.weight of
// `shape` (the checkpoint's: [out, in], or [in, out] for Conv1D families) is stored as
// NAME.qweight I32 [in, out / 8] (8 codes of 4 bits per int32, in AWQ's order), NAME.qzeros I32
// [in / group, out / 8] and NAME.scales F16 [in / group, out].
struct AwqTensors {
  std::string qweight, qzeros, scales;
  int64_t in = 0, out = 0, groups = 0;
};

AwqTensors awqTensors(const ModelConfig& c, std::string_view weight_name, const Shape& shape) {
  const std::string base(weight_name.substr(0, weight_name.size() - 6));  // without "weight"
  AwqTensors t{base + "qweight", base + "qzeros", base + "scales"};
  const bool transposed = archEntry(c.arch).names.transposed;
  t.in = transposed ? shape[0] : shape[1];
  t.out = transposed ? shape[1] : shape[0];
  t.groups = c.awq_group_size > 0 ? t.in / c.awq_group_size : 0;
  return t;
}

// Checks the three tensors of an AWQ matrix; returns their names.
Result<std::vector<std::string>> checkAwq(const ModelConfig& c, const WeightStore& weights, const ExpectedTensor& e,
                                          std::string_view optional_prefix) {
  const std::string& src = weights.source();
  const AwqTensors t = awqTensors(c, e.name, e.shape);
  if (t.out % 8 != 0 || t.in % c.awq_group_size != 0)
    return invalidArgument(src + ": tensor '" + e.name + "' " + e.shape.toString() + " cannot be AWQ-packed: " +
                           std::to_string(t.out) + " outputs must be a multiple of 8 and " + std::to_string(t.in) +
                           " inputs a multiple of group_size " + std::to_string(c.awq_group_size));
  std::vector<std::string> names;
  const struct {
    const std::string* name;
    Shape shape;
    bool scale;
  } parts[] = {{&t.qweight, Shape{t.in, t.out / 8}, false},
               {&t.qzeros, Shape{t.groups, t.out / 8}, false},
               {&t.scales, Shape{t.groups, t.out}, true}};
  for (const auto& p : parts) {
    const WeightEntry* w = weights.find(*p.name);
    if (w == nullptr && !optional_prefix.empty() && p.name->starts_with(optional_prefix))
      w = weights.find(std::string_view(*p.name).substr(optional_prefix.size()));
    const std::string want = std::string(p.scale ? "F16/BF16/F32 " : "I32 ") + p.shape.toString();
    if (w == nullptr)
      return notFound(src + ": tensor '" + *p.name + "' is missing; expected " + want + " for AWQ matrix '" +
                      e.name + "' (group_size " + std::to_string(c.awq_group_size) + ")");
    const bool dtype_ok = p.scale ? (isFloatingPoint(w->dtype) && w->dtype != DType::kF8E4M3) : w->dtype == DType::kI32;
    if (!dtype_ok || w->shape != p.shape)
      return invalidArgument(src + ": tensor '" + w->name + "' is " + std::string(dtypeName(w->dtype)) + " " +
                             w->shape.toString() + "; expected " + want + " (AWQ, group_size " +
                             std::to_string(c.awq_group_size) + ")");
    names.push_back(w->name);
  }
  return names;
}

}  // namespace

Result<std::vector<std::string>> checkWeights(const ModelConfig& c, const WeightStore& weights) {
  const std::string& src = weights.source();
  const std::string_view optional_prefix = archEntry(c.arch).names.optional_prefix;
  std::set<std::string, std::less<>> used;
  for (const ExpectedTensor& e : expectedTensors(c)) {
    const WeightEntry* w = weights.find(e.name);
    if (w == nullptr && !optional_prefix.empty() && e.name.starts_with(optional_prefix))
      w = weights.find(std::string_view(e.name).substr(optional_prefix.size()));
    if (w == nullptr && c.weight_quantization == "awq" && e.product_matrix) {
      LLMRT_ASSIGN_OR_RETURN(std::vector<std::string> awq, checkAwq(c, weights, e, optional_prefix));
      used.insert(awq.begin(), awq.end());
      continue;
    }
    if (w == nullptr) {
      std::string m = src + ": tensor '" + e.name + "' is missing; expected shape " + e.shape.toString() + " " +
                      e.formula + " for " + c.architecture;
      if (e.name == "lm_head.weight") m += " (tie_word_embeddings is false)";
      return notFound(std::move(m));
    }
    if (w->shape != e.shape) {
      return invalidArgument(src + ": tensor '" + w->name + "' has shape " + w->shape.toString() + "; expected " +
                             e.shape.toString() + " " + e.formula);
    }
    if ((w->dtype == DType::kF8E4M3 && c.weight_quantization == "fp8") ||
        (w->dtype == DType::kI8 && c.weight_quantization == "int8")) {
      LLMRT_ASSIGN_OR_RETURN(std::string scale, checkFp8Scale(c, weights, *w));
      used.insert(std::move(scale));
    } else if (w->dtype == DType::kF8E4M3 || w->dtype == DType::kI8 || w->dtype == DType::kU8) {
      return unimplemented(src + ": tensor '" + w->name + "' has dtype " + std::string(dtypeName(w->dtype)) +
                           ", quantized codes, which are not supported yet; use a bf16/fp16/fp32 checkpoint");
    } else if (!isFloatingPoint(w->dtype)) {
      return invalidArgument(src + ": tensor '" + w->name + "' has dtype " + std::string(dtypeName(w->dtype)) +
                             "; expected a floating-point dtype (F32, F16, BF16, F64)");
    }
    used.insert(w->name);
  }
  std::vector<std::string> unused;
  for (const WeightEntry& w : weights.entries())
    // (An FP8 KV cache's k_scale / v_scale / kv_scale are read by loader/kv_cache_scales.h.)
    if (used.find(w.name) == used.end() && !w.name.ends_with(".k_scale") && !w.name.ends_with(".v_scale") &&
        !w.name.ends_with(".kv_scale"))
      unused.push_back(w.name);
  return unused;
}

DecoderWeightReader::DecoderWeightReader(const ModelConfig& config, WeightSource source)
    : config_(config), source_(std::move(source)) {}

Result<TensorView> DecoderWeightReader::fetch(const std::string& name, const Shape& shape) {
  Result<TensorView> t = source_(name);
  std::string found = name;
  const std::string_view prefix = archEntry(config_.arch).names.optional_prefix;
  if (!t.isOk() && !prefix.empty() && name.starts_with(prefix)) {
    Result<TensorView> alt = source_(name.substr(prefix.size()));
    if (alt.isOk()) {
      t = std::move(alt);
      found = name.substr(prefix.size());
    }
  }
  if (!t.isOk()) {
    // An AWQ checkpoint holds a product matrix as NAME.qweight / qzeros / scales instead.
    if (config_.weight_quantization == "awq" && name.ends_with(".weight") && shape.rank() == 2)
      return dequantizeAwq(name, shape);
    return t.status();
  }
  if (t->shape != shape)
    return invalidArgument("tensor '" + name + "' has shape " + t->shape.toString() + "; expected " +
                           shape.toString());
  if (t->dtype == DType::kF8E4M3 || (t->dtype == DType::kI8 && config_.weight_quantization == "int8"))
    return dequantizeScaled(found, *t);
  return t;
}

Result<TensorView> DecoderWeightReader::dequantizeAwq(const std::string& name, const Shape& shape) {
  // w[in][out] = float(code - zero) * scale as AutoAWQ's dequantize_gemm defines it, in float32;
  // output column c of a packed int32 sits in nibble kAwqNibble[c % 8] (loader/awq_pack.h).
  const AwqTensors a = awqTensors(config_, name, shape);
  const std::string_view prefix = archEntry(config_.arch).names.optional_prefix;
  auto get = [&](const std::string& n) -> Result<TensorView> {
    Result<TensorView> t = source_(n);
    if (!t.isOk() && !prefix.empty() && n.starts_with(prefix)) t = source_(n.substr(prefix.size()));
    return t;
  };
  LLMRT_ASSIGN_OR_RETURN(TensorView qw, get(a.qweight));
  LLMRT_ASSIGN_OR_RETURN(TensorView qz, get(a.qzeros));
  LLMRT_ASSIGN_OR_RETURN(TensorView sc, get(a.scales));
  const int64_t packs = a.out / 8, group = config_.awq_group_size;
  if (a.out % 8 != 0 || group < 1 || a.in % group != 0 || qw.dtype != DType::kI32 || qz.dtype != DType::kI32 ||
      qw.shape != Shape{a.in, packs} || qz.shape != Shape{a.groups, packs} || sc.shape != Shape{a.groups, a.out} ||
      !isFloatingPoint(sc.dtype))
    return invalidArgument("AWQ matrix '" + name + "': qweight / qzeros / scales do not fit " + shape.toString() +
                           " with group_size " + std::to_string(group));
  std::vector<float> scales(static_cast<size_t>(sc.numel()));
  convertToF32(sc.data, sc.dtype, scales.data(), scales.size());
  auto word = [](const TensorView& t, int64_t i) {
    uint32_t v;
    std::memcpy(&v, static_cast<const char*>(t.data) + i * 4, 4);  // mapped data may be unaligned
    return v;
  };
  const bool transposed = archEntry(config_.arch).names.transposed;
  if (awq_component_ != AwqComponent::kDequantized) {
    if (transposed) return unimplemented("AWQ matrix '" + name + "': components of a Conv1D (transposed) layout");
    // One component in the model's layout: row c (output channel), columns r (input) or g (group).
    const bool codes = awq_component_ == AwqComponent::kCodes;
    const int64_t cols = codes ? a.in : a.groups;
    const bool scales_part = awq_component_ == AwqComponent::kScales;
    std::vector<char> bytes(static_cast<size_t>(a.out * cols) * (scales_part ? sizeof(float) : 1));
    float* out_f = reinterpret_cast<float*>(bytes.data());
    auto* out_u8 = reinterpret_cast<uint8_t*>(bytes.data());
    // Bands of 64 input rows (columns of the output) on every core: the transposition's writes
    // stay within a few cache lines per output row.
    constexpr int64_t kBand = 64;
    if (!pool_) pool_ = std::make_unique<ThreadPool>();
    pool_->parallelFor((cols + kBand - 1) / kBand, [&](int64_t b0, int64_t b1) {
      for (int64_t p = 0; p < packs; ++p)
        for (int64_t r = b0 * kBand; r < std::min(cols, b1 * kBand); ++r) {
          const uint32_t q = codes ? word(qw, r * packs + p) : word(qz, r * packs + p);
          for (int j = 0; j < 8; ++j) {
            const int64_t c = p * 8 + j;
            if (scales_part)
              out_f[c * cols + r] = scales[static_cast<size_t>(r * a.out + c)];
            else
              out_u8[c * cols + r] = static_cast<uint8_t>((q >> (4 * kAwqNibble[j])) & 15u);
          }
        }
    });
    return hold(std::move(bytes), scales_part ? DType::kF32 : DType::kU8, Shape{a.out, cols});
  }
  std::vector<char> bytes(static_cast<size_t>(a.in * a.out) * sizeof(float));
  float* out = reinterpret_cast<float*>(bytes.data());
  for (int64_t r = 0; r < a.in; ++r) {
    const int64_t g = r / group;
    for (int64_t p = 0; p < packs; ++p) {
      const uint32_t q = word(qw, r * packs + p), z = word(qz, g * packs + p);
      for (int j = 0; j < 8; ++j) {
        const int shift = 4 * kAwqNibble[j];
        const int64_t c = p * 8 + j;
        const auto code = static_cast<int32_t>((q >> shift) & 15u), zero = static_cast<int32_t>((z >> shift) & 15u);
        const float v = static_cast<float>(code - zero) * scales[static_cast<size_t>(g * a.out + c)];
        out[transposed ? r * a.out + c : c * a.in + r] = v;
      }
    }
  }
  return hold(std::move(bytes), DType::kF32, shape);
}

Result<TensorView> DecoderWeightReader::dequantizeScaled(const std::string& name, const TensorView& w) {
  // Float32 math on the codes: w[i][j] = float(code[i][j]) * scale(i, j), as the checkpoint's
  // dequantization defines it (transformers' FP8 reference, vLLM's weight-only fallback;
  // compressed-tensors' int8 the same with integer codes).
  const bool int8 = w.dtype == DType::kI8;
  if (config_.weight_quantization != (int8 ? "int8" : "fp8") || w.shape.rank() != 2)
    return unimplemented("tensor '" + name + "' is " + std::string(dtypeName(w.dtype)) + " but the checkpoint declares no " +
                         (int8 ? "INT8" : "FP8") + " quantization");
  const std::string scale_name = fp8ScaleName(config_, name);
  LLMRT_ASSIGN_OR_RETURN(TensorView s, source_(scale_name));
  if (!isFloatingPoint(s.dtype) || s.dtype == DType::kF8E4M3 || !fp8ScaleFits(config_, w.shape, s.shape))
    return invalidArgument("tensor '" + scale_name + "' is " + std::string(dtypeName(s.dtype)) + " " +
                           s.shape.toString() + "; expected " + fp8ScaleExpectation(config_, w.shape));
  const int64_t rows = w.shape[0], cols = w.shape[1];
  std::vector<float> scale(static_cast<size_t>(s.numel()));
  convertToF32(s.data, s.dtype, scale.data(), scale.size());
  std::vector<char> bytes(static_cast<size_t>(rows * cols) * sizeof(float));
  float* out = reinterpret_cast<float*>(bytes.data());
  if (int8) {
    const auto* codes = static_cast<const int8_t*>(w.data);
    for (int64_t i = 0; i < rows * cols; ++i) out[i] = static_cast<float>(codes[i]);
  } else {
    convertToF32(w.data, DType::kF8E4M3, out, static_cast<size_t>(rows * cols));
  }
  const int64_t br = config_.fp8_block_rows, bc = config_.fp8_block_cols;
  const int64_t scale_cols = br > 0 ? (cols + bc - 1) / bc : 0;
  std::vector<float> row_scales;
  for (int64_t i = 0; i < rows; ++i) {
    float* row = out + i * cols;
    if (br > 0) {
      const float* srow = scale.data() + (i / br) * scale_cols;
      for (int64_t j = 0; j < cols; ++j) row[j] *= srow[j / bc];
    } else {
      const float f = scale.size() == 1 ? scale[0] : scale[static_cast<size_t>(i)];
      for (int64_t j = 0; j < cols; ++j) row[j] *= f;
      row_scales.push_back(f);
    }
  }
  LLMRT_ASSIGN_OR_RETURN(TensorView held, hold(std::move(bytes), DType::kF32, w.shape));
  if (br == 0) scaled_.push_back({static_cast<const char*>(held.data), rows, cols, std::move(row_scales)});
  return held;
}

std::vector<float> DecoderWeightReader::rowScales(const TensorView& part) const {
  if (part.dtype != DType::kF32 || part.shape.rank() != 2 || !part.isContiguous()) return {};
  const auto* p = static_cast<const char*>(part.data);
  for (const ScaledRows& m : scaled_) {
    const int64_t row_bytes = m.cols * static_cast<int64_t>(sizeof(float));
    if (part.shape[1] != m.cols || p < m.begin || p >= m.begin + m.rows * row_bytes) continue;
    const int64_t offset = p - m.begin;
    if (offset % row_bytes != 0 || offset / row_bytes + part.shape[0] > m.rows) return {};
    const auto first = m.scales.begin() + offset / row_bytes;
    return std::vector<float>(first, first + part.shape[0]);
  }
  return {};
}

Result<TensorView> DecoderWeightReader::hold(std::vector<char> bytes, DType dtype, Shape shape) {
  held_.push_back(std::move(bytes));
  return TensorView(held_.back().data(), dtype, std::move(shape));
}

namespace {

constexpr int64_t kTileSide = 64;

// dst[j][i] = src[i][j] for rows [i_begin, i_end) of a [rows, cols] matrix of kSize-byte
// elements, in 64 x 64 tiles so that both sides stay in cache. Fixed-size memcpy: one load and
// one store, alignment not assumed.
template <size_t kSize>
void transposeTiled(const char* src, char* dst, int64_t rows, int64_t cols, int64_t i_begin, int64_t i_end) {
  for (int64_t i0 = i_begin; i0 < i_end; i0 += kTileSide)
    for (int64_t j0 = 0; j0 < cols; j0 += kTileSide) {
      const int64_t i1 = std::min(i_end, i0 + kTileSide), j1 = std::min(cols, j0 + kTileSide);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j)
          std::memcpy(dst + static_cast<size_t>(j * rows + i) * kSize, src + static_cast<size_t>(i * cols + j) * kSize,
                      kSize);
    }
}

}  // namespace

Result<TensorView> DecoderWeightReader::transpose(const TensorView& t) {
  // Conv1D [in, out] -> [out, in], element bytes moved as they are.
  const int64_t r = t.shape[0], cl = t.shape[1];
  const size_t esz = dtypeSize(t.dtype);
  std::vector<char> b(static_cast<size_t>(r * cl) * esz);
  const char* src = static_cast<const char*>(t.data);
  void (*tiles)(const char*, char*, int64_t, int64_t, int64_t, int64_t) = nullptr;
  switch (esz) {
    case 1: tiles = transposeTiled<1>; break;
    case 2: tiles = transposeTiled<2>; break;
    case 4: tiles = transposeTiled<4>; break;
    case 8: tiles = transposeTiled<8>; break;
    default: return invalidArgument("transpose: elements of " + std::to_string(esz) + " bytes");
  }
  // Every core takes whole 64-row bands (the pages of the checkpoint and of the copy are touched
  // by the thread that moves them).
  if (!pool_) pool_ = std::make_unique<ThreadPool>();
  const int64_t bands = (r + kTileSide - 1) / kTileSide;
  pool_->parallelFor(bands, [&](int64_t b0, int64_t b1) {
    tiles(src, b.data(), r, cl, b0 * kTileSide, std::min(r, b1 * kTileSide));
  });
  return hold(std::move(b), t.dtype, Shape{cl, r});
}

Result<std::vector<TensorView>> DecoderWeightReader::parts(DecoderWeight w, int64_t layer) {
  held_.clear();
  scaled_.clear();
  const ModelConfig& c = config_;
  const bool transposed = archEntry(c.arch).names.transposed;
  if (w == W::kQkv || w == W::kQkvBias) return qkvParts(layer, w == W::kQkvBias);
  std::vector<TensorView> out;
  for (const Source& s : sources(w, layer, c)) {
    LLMRT_ASSIGN_OR_RETURN(TensorView t, fetch(s.name, s.shape));
    if (transposed && t.shape.rank() == 2 && w != W::kEmbed && w != W::kPosEmbed && w != W::kLmHead) {
      LLMRT_ASSIGN_OR_RETURN(t, transpose(t));
    }
    if (w == W::kLmHead && c.decoder.lm_head_normalized) {
      // Baichuan2's NormHead: every row divided by its L2 norm (F.normalize, eps 1e-12).
      const int64_t V = t.shape[0], H = t.shape[1];
      std::vector<float> f(static_cast<size_t>(t.numel()));
      convertToF32(static_cast<const uint8_t*>(t.data), t.dtype, f.data(), f.size());
      for (int64_t r = 0; r < V; ++r) {
        double ss = 0.0;
        for (int64_t i = 0; i < H; ++i) ss += static_cast<double>(f[static_cast<size_t>(r * H + i)]) * f[static_cast<size_t>(r * H + i)];
        const auto inv = static_cast<float>(1.0 / std::max(std::sqrt(ss), 1e-12));
        for (int64_t i = 0; i < H; ++i) f[static_cast<size_t>(r * H + i)] *= inv;
      }
      std::vector<char> b(f.size() * sizeof(float));
      std::memcpy(b.data(), f.data(), b.size());
      LLMRT_ASSIGN_OR_RETURN(t, hold(std::move(b), DType::kF32, t.shape));
    }
    if (isNorm(w) && c.decoder.norm_weight_offset_one) {
      // Gemma: the checkpoint's w scales as (1 + w), computed in float32 as HF does.
      std::vector<float> f(static_cast<size_t>(t.numel()));
      convertToF32(static_cast<const uint8_t*>(t.data), t.dtype, f.data(), f.size());
      for (float& v : f) v = 1.0f + v;
      std::vector<char> b(f.size() * sizeof(float));
      std::memcpy(b.data(), f.data(), b.size());
      LLMRT_ASSIGN_OR_RETURN(t, hold(std::move(b), DType::kF32, t.shape));
    }
    out.push_back(t);
  }
  return out;
}

Result<std::vector<TensorView>> DecoderWeightReader::qkvParts(int64_t layer, bool bias) {
  const ModelConfig& c = config_;
  const W w = bias ? W::kQkvBias : W::kQkv;
  const bool transposed = archEntry(c.arch).names.transposed && !bias;
  std::vector<TensorView> src;
  for (const Source& s : sources(w, layer, c)) {
    LLMRT_ASSIGN_OR_RETURN(TensorView t, fetch(s.name, s.shape));
    if (transposed) {
      LLMRT_ASSIGN_OR_RETURN(t, transpose(t));
    }
    src.push_back(t);
  }
  // The source (tensor, row) of every output row: q heads, then k heads, then v heads.
  const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim;
  const int64_t Q = c.qSize(), KV = c.kvSize();
  const int64_t qpg = nh / nkv;
  const QkvPacking packing = qkvPacking(c);
  const bool permute = c.decoder.positions == PositionEncoding::kRotary &&
                       c.decoder.rotary_layout == RotaryLayout::kInterleaved;
  const auto rotary_dim = static_cast<int64_t>(static_cast<double>(hd) * c.partial_rotary_factor);
  // part: 0 = q, 1 = k, 2 = v; head within its part; feature within the head.
  auto sourceRow = [&](int part, int64_t head, int64_t f) -> std::pair<size_t, int64_t> {
    switch (packing) {
      case QkvPacking::kSeparate:
        return {static_cast<size_t>(part), head * hd + f};
      case QkvPacking::kConcatenated:
        return {0, (part == 0 ? 0 : part == 1 ? Q : Q + KV) + head * hd + f};
      case QkvPacking::kPerHead:
        return {0, head * 3 * hd + part * hd + f};
      case QkvPacking::kGrouped: {
        const int64_t g = part == 0 ? head / qpg : head;
        const int64_t slot = part == 0 ? head % qpg : qpg + part - 1;
        return {0, (g * (qpg + 2) + slot) * hd + f};
      }
    }
    return {0, 0};
  };
  std::vector<std::pair<size_t, int64_t>> rows;
  rows.reserve(static_cast<size_t>(Q + 2 * KV));
  for (int part = 0; part < 3; ++part)
    for (int64_t head = 0; head < (part == 0 ? nh : nkv); ++head)
      for (int64_t f = 0; f < hd; ++f)
        rows.push_back(sourceRow(part, head, permute && part < 2 ? interleavedSource(f, rotary_dim) : f));
  // Runs of consecutive source rows become views; many short runs become one gathered copy.
  std::vector<std::pair<size_t, std::pair<int64_t, int64_t>>> runs;  // (tensor, (start, count))
  for (const auto& [t, r] : rows) {
    if (!runs.empty() && runs.back().first == t && runs.back().second.first + runs.back().second.second == r)
      ++runs.back().second.second;
    else
      runs.push_back({t, {r, 1}});
  }
  std::vector<TensorView> out;
  if (runs.size() <= 64) {
    for (const auto& [t, range] : runs) out.push_back(rowSlice(src[t], range.first, range.second));
    return out;
  }
  const DType dt = src[0].dtype;
  for (const TensorView& s : src)
    if (s.dtype != dt) return invalidArgument("q, k and v of layer " + std::to_string(layer) + " differ in dtype");
  const int64_t row_elems = src[0].shape.rank() >= 2 ? src[0].shape[1] : 1;
  const size_t row_bytes = static_cast<size_t>(row_elems) * dtypeSize(dt);
  std::vector<char> b(rows.size() * row_bytes);
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(b.data() + i * row_bytes,
                static_cast<const char*>(src[rows[i].first].data) + static_cast<size_t>(rows[i].second) * row_bytes,
                row_bytes);
  Shape shape = src[0].shape.rank() >= 2 ? Shape{static_cast<int64_t>(rows.size()), row_elems}
                                         : Shape{static_cast<int64_t>(rows.size())};
  LLMRT_ASSIGN_OR_RETURN(TensorView t, hold(std::move(b), dt, shape));
  out.push_back(t);
  return out;
}

}  // namespace llmrt

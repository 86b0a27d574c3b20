// The architecture table (arch_table.h): each family's config keys, tensor names and the
// `describe` function that maps its own config.json fields onto the decoder description.
#include "loader/arch_table.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace llmrt {

using detail::Json;

namespace {

// ---- helpers shared by the describe functions ------------------------------------------------

Status readFlag(const Json& root, std::string_view key, std::string_view where, bool fallback, bool* out) {
  std::optional<bool> v;
  LLMRT_RETURN_IF_ERROR(detail::readBool(root, key, key, where, &v));
  *out = v.value_or(fallback);
  return Status::ok();
}

// `sliding_window`: an integer, null (none) or absent (the family's default).
Status readSlidingWindow(const Json& root, std::string_view where, std::optional<int64_t> fallback,
                         std::optional<int64_t>* out) {
  *out = fallback;
  auto it = root.find("sliding_window");
  if (it == root.end()) return Status::ok();
  if (it->is_null()) {
    out->reset();
  } else if (std::optional<int64_t> v = jsonInt64(*it)) {
    *out = *v;
  } else {
    return fieldError(where, "sliding_window", jsonSnippet(*it), "an integer >= 1 or null");
  }
  return Status::ok();
}

// `layer_types` when config.json gives it (transformers 5.x writes it for Qwen2 and Gemma-2).
Status readLayerTypes(const Json& root, std::string_view where, std::vector<std::string>* out) {
  auto lt = root.find("layer_types");
  if (lt == root.end() || lt->is_null()) return Status::ok();
  const std::string_view expected = "a list of \"full_attention\" / \"sliding_attention\"";
  if (!lt->is_array()) return fieldError(where, "layer_types", jsonSnippet(*lt), expected);
  out->clear();
  for (const Json& e : *lt) {
    if (!e.is_string()) return fieldError(where, "layer_types", jsonSnippet(*lt), expected);
    out->push_back(e.get<std::string>());
  }
  return Status::ok();
}

bool layerCountSane(const ModelConfig& c) { return c.num_hidden_layers > 0 && c.num_hidden_layers <= (1 << 14); }

// Whether config.json sets partial_rotary_factor (top level or in transformers 5.x's rope_parameters).
bool hasPartialRotaryFactor(const Json& root) {
  if (root.contains("partial_rotary_factor")) return true;
  auto rp = root.find("rope_parameters");
  return rp != root.end() && rp->is_object() && rp->contains("partial_rotary_factor");
}

// ---- the families -------------------------------------------------------------------------

Status describeLlama(const Json& root, std::string_view where, ModelConfig* c) {
  std::optional<bool> attn_bias, mlp_bias;
  LLMRT_RETURN_IF_ERROR(detail::readBool(root, "attention_bias", "attention_bias", where, &attn_bias));
  LLMRT_RETURN_IF_ERROR(detail::readBool(root, "mlp_bias", "mlp_bias", where, &mlp_bias));
  c->attention_bias = attn_bias.value_or(false);
  c->o_proj_bias = c->attention_bias;
  c->mlp_bias = mlp_bias.value_or(false);
  return Status::ok();
}

Status describeMistral(const Json& root, std::string_view where, ModelConfig* c) {
  return readSlidingWindow(root, where, 4096, &c->sliding_window);
}

Status describeQwen2(const Json& root, std::string_view where, ModelConfig* c) {
  c->attention_bias = true;  // q/k/v only
  std::optional<int64_t> window;
  LLMRT_RETURN_IF_ERROR(readSlidingWindow(root, where, 4096, &window));
  std::optional<int64_t> mwl;
  LLMRT_RETURN_IF_ERROR(readFlag(root, "use_sliding_window", where, false, &c->use_sliding_window));
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "max_window_layers", "max_window_layers", where, &mwl));
  c->max_window_layers = mwl.value_or(28);
  c->sliding_window = c->use_sliding_window ? window : std::nullopt;  // as HF: none unless used
  LLMRT_RETURN_IF_ERROR(readLayerTypes(root, where, &c->layer_types));
  if (c->layer_types.empty() && layerCountSane(*c)) {
    for (int64_t i = 0; i < c->num_hidden_layers; ++i) {
      const bool sliding = c->sliding_window.has_value() && i >= c->max_window_layers;
      c->layer_types.emplace_back(sliding ? "sliding_attention" : "full_attention");
    }
  }
  return Status::ok();
}

// GPT-2 and GPTBigCode: LayerNorm with bias, learned positions, a plain MLP, biases everywhere.
Status describeGpt2Like(const Json& root, std::string_view where, ModelConfig* c) {
  c->attention_bias = c->o_proj_bias = c->mlp_bias = true;
  DecoderDescription& d = c->decoder;
  d.norm = NormKind::kLayerNorm;
  d.norm_bias = true;
  d.positions = PositionEncoding::kLearned;
  d.mlp_gated = false;
  bool by_layer = false, scale = true;
  LLMRT_RETURN_IF_ERROR(readFlag(root, "scale_attn_by_inverse_layer_idx", where, false, &by_layer));
  LLMRT_RETURN_IF_ERROR(readFlag(root, "scale_attn_weights", where, true, &scale));
  if (by_layer)
    return unimplemented(std::string(where) + ": scale_attn_by_inverse_layer_idx true is not supported");
  if (!scale) d.attention_scale = 1.0;
  return Status::ok();
}

Status describeGpt2(const Json& root, std::string_view where, ModelConfig* c) { return describeGpt2Like(root, where, c); }

Status describeGptBigCode(const Json& root, std::string_view where, ModelConfig* c) {
  LLMRT_RETURN_IF_ERROR(describeGpt2Like(root, where, c));
  bool mqa = true;
  LLMRT_RETURN_IF_ERROR(readFlag(root, "multi_query", where, true, &mqa));
  c->num_key_value_heads = mqa ? 1 : c->num_attention_heads;
  return Status::ok();
}

Status describeGptJ(const Json& root, std::string_view where, ModelConfig* c) {
  c->mlp_bias = true;  // fc_in / fc_out; attention has no biases
  DecoderDescription& d = c->decoder;
  d.norm = NormKind::kLayerNorm;
  d.norm_bias = true;
  d.rotary_layout = RotaryLayout::kInterleaved;
  d.residual = ResidualWiring::kParallel;
  d.mlp_gated = false;
  d.lm_head_bias = true;
  std::optional<int64_t> rotary_dim;
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "rotary_dim", "rotary_dim", where, &rotary_dim));
  // HF: None rotates the whole head. The rotary dimension as a fraction of the head.
  if (c->head_dim > 0)
    c->partial_rotary_factor = static_cast<double>(rotary_dim.value_or(c->head_dim)) / static_cast<double>(c->head_dim);
  return Status::ok();
}

Status describeGptNeoX(const Json& root, std::string_view where, ModelConfig* c) {
  bool bias = true, parallel = true;
  LLMRT_RETURN_IF_ERROR(readFlag(root, "attention_bias", where, true, &bias));
  LLMRT_RETURN_IF_ERROR(readFlag(root, "use_parallel_residual", where, true, &parallel));
  c->attention_bias = c->o_proj_bias = bias;
  c->mlp_bias = true;
  DecoderDescription& d = c->decoder;
  d.norm = NormKind::kLayerNorm;
  d.norm_bias = true;
  d.residual = parallel ? ResidualWiring::kParallelTwoNorms : ResidualWiring::kSequential;
  d.mlp_gated = false;
  // transformers 4.x spells the rotary fraction and base rotary_pct / rotary_emb_base; 5.x moves
  // them into rope_parameters (partial_rotary_factor, rope_theta), which the common reader took.
  std::optional<double> pct, base;
  LLMRT_RETURN_IF_ERROR(detail::readDouble(root, "rotary_pct", "rotary_pct", where, &pct));
  LLMRT_RETURN_IF_ERROR(detail::readDouble(root, "rotary_emb_base", "rotary_emb_base", where, &base));
  if (!hasPartialRotaryFactor(root)) c->partial_rotary_factor = pct.value_or(0.25);
  if (base && !root.contains("rope_theta") && !root.contains("rope_parameters")) c->rope_theta = *base;
  return Status::ok();
}

Status describeFalcon(const Json& root, std::string_view where, ModelConfig* c) {
  bool alibi = false, parallel = true, new_arch = false, mqa = true, bias = false;
  LLMRT_RETURN_IF_ERROR(readFlag(root, "alibi", where, false, &alibi));
  LLMRT_RETURN_IF_ERROR(readFlag(root, "parallel_attn", where, true, &parallel));
  LLMRT_RETURN_IF_ERROR(readFlag(root, "new_decoder_architecture", where, false, &new_arch));
  LLMRT_RETURN_IF_ERROR(readFlag(root, "multi_query", where, true, &mqa));
  LLMRT_RETURN_IF_ERROR(readFlag(root, "bias", where, false, &bias));
  std::optional<int64_t> kv, lns;
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "num_kv_heads", "num_kv_heads", where, &kv));
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "num_ln_in_parallel_attn", "num_ln_in_parallel_attn", where, &lns));
  // HF FalconAttention: new_decoder_architecture uses num_kv_heads, else multi_query one, else all.
  c->num_key_value_heads = new_arch ? kv.value_or(c->num_attention_heads) : (mqa ? 1 : c->num_attention_heads);
  c->attention_bias = c->o_proj_bias = c->mlp_bias = bias;
  DecoderDescription& d = c->decoder;
  d.norm = NormKind::kLayerNorm;
  d.norm_bias = true;
  d.mlp_gated = false;
  if (alibi) {
    // HF Falcon adds the ALiBi bias to q.k before scaling by 1/sqrt(head_dim).
    d.positions = PositionEncoding::kAlibi;
    if (c->head_dim > 0) d.alibi_slope_multiplier = 1.0 / std::sqrt(static_cast<double>(c->head_dim));
  }
  const int64_t norms = new_arch ? lns.value_or(2) : 1;
  if (new_arch || parallel)
    d.residual = norms == 2 ? ResidualWiring::kParallelTwoNorms : ResidualWiring::kParallel;
  else
    d.residual = ResidualWiring::kSequential;
  return Status::ok();
}

Status describePhi3(const Json& root, std::string_view where, ModelConfig* c) {
  return readSlidingWindow(root, where, std::nullopt, &c->sliding_window);
}

Status describeGemma2(const Json& root, std::string_view where, ModelConfig* c) {
  std::optional<double> qpas, attn_cap, final_cap;
  LLMRT_RETURN_IF_ERROR(detail::readDouble(root, "query_pre_attn_scalar", "query_pre_attn_scalar", where, &qpas));
  LLMRT_RETURN_IF_ERROR(
      detail::readDouble(root, "attn_logit_softcapping", "attn_logit_softcapping", where, &attn_cap));
  LLMRT_RETURN_IF_ERROR(
      detail::readDouble(root, "final_logit_softcapping", "final_logit_softcapping", where, &final_cap));
  bool attention_bias = false;
  LLMRT_RETURN_IF_ERROR(readFlag(root, "attention_bias", where, false, &attention_bias));
  c->attention_bias = c->o_proj_bias = attention_bias;
  const double scalar = qpas.value_or(256.0);
  if (!(scalar > 0) || !std::isfinite(scalar))
    return fieldError(where, "query_pre_attn_scalar", jsonSnippet(Json(scalar)), "a number > 0");
  DecoderDescription& d = c->decoder;
  d.embedding_multiplier = std::sqrt(static_cast<double>(c->hidden_size));
  d.norm_weight_offset_one = true;
  d.residual = ResidualWiring::kSandwich;
  d.attention_scale = 1.0 / std::sqrt(scalar);
  // An explicit null turns a cap off (HF: `if softcap is not None`).
  d.attn_logit_softcap = root.contains("attn_logit_softcapping") ? attn_cap.value_or(0.0) : 50.0;
  d.final_logit_softcap = root.contains("final_logit_softcapping") ? final_cap.value_or(0.0) : 30.0;
  LLMRT_RETURN_IF_ERROR(readSlidingWindow(root, where, 4096, &c->sliding_window));
  LLMRT_RETURN_IF_ERROR(readLayerTypes(root, where, &c->layer_types));
  if (c->layer_types.empty() && layerCountSane(*c)) {
    // HF Gemma2Config: even layers (0, 2, ...) slide, odd ones attend fully.
    for (int64_t i = 0; i < c->num_hidden_layers; ++i)
      c->layer_types.emplace_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
  }
  return Status::ok();
}

Status describeGlm(const Json& root, std::string_view where, ModelConfig* c) {
  bool attention_bias = true;
  LLMRT_RETURN_IF_ERROR(readFlag(root, "attention_bias", where, true, &attention_bias));
  c->attention_bias = attention_bias;  // q/k/v only; o_proj has none
  c->decoder.rotary_layout = RotaryLayout::kInterleaved;
  if (!hasPartialRotaryFactor(root)) c->partial_rotary_factor = 0.5;  // GlmConfig's default
  return Status::ok();
}

// The expert count under `experts_key` and num_experts_per_tok, with the family's defaults.
Status describeMoe(const Json& root, std::string_view where, std::string_view experts_key, int64_t default_experts,
                   int64_t default_per_token, ModelConfig* c) {
  std::optional<int64_t> experts, per_token;
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, experts_key, experts_key, where, &experts));
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "num_experts_per_tok", "num_experts_per_tok", where, &per_token));
  DecoderDescription& d = c->decoder;
  d.num_experts = experts.value_or(default_experts);
  d.experts_per_token = per_token.value_or(default_per_token);
  return Status::ok();
}

Status describeMixtral(const Json& root, std::string_view where, ModelConfig* c) {
  LLMRT_RETURN_IF_ERROR(describeMoe(root, where, "num_local_experts", 8, 2, c));
  c->decoder.moe_intermediate_size = c->intermediate_size;  // every layer is sparse
  c->decoder.norm_topk_prob = true;
  return readSlidingWindow(root, where, std::nullopt, &c->sliding_window);
}

Status describeQwen2Moe(const Json& root, std::string_view where, ModelConfig* c) {
  LLMRT_RETURN_IF_ERROR(describeQwen2(root, where, c));
  LLMRT_RETURN_IF_ERROR(describeMoe(root, where, "num_experts", 60, 4, c));
  DecoderDescription& d = c->decoder;
  std::optional<int64_t> moe_inter, shared_inter, step;
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "moe_intermediate_size", "moe_intermediate_size", where, &moe_inter));
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "shared_expert_intermediate_size", "shared_expert_intermediate_size",
                                        where, &shared_inter));
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "decoder_sparse_step", "decoder_sparse_step", where, &step));
  LLMRT_RETURN_IF_ERROR(readFlag(root, "norm_topk_prob", where, false, &d.norm_topk_prob));
  d.moe_intermediate_size = moe_inter.value_or(1408);
  d.shared_expert_intermediate_size = shared_inter.value_or(5632);
  d.decoder_sparse_step = step.value_or(1);
  auto it = root.find("mlp_only_layers");
  if (it != root.end() && !it->is_null()) {
    if (!it->is_array()) return fieldError(where, "mlp_only_layers", jsonSnippet(*it), "a list of layer indices");
    for (const Json& e : *it) {
      std::optional<int64_t> v = jsonInt64(e);
      if (!v) return fieldError(where, "mlp_only_layers", jsonSnippet(*it), "a list of layer indices");
      d.mlp_only_layers.push_back(*v);
    }
  }
  return Status::ok();
}

// The four families whose checkpoints carry their own modeling code (docs/architectures.md says
// which published code each row follows).

Status describeInternLM2(const Json& root, std::string_view where, ModelConfig* c) {
  bool bias = true;  // InternLM2Config's default; released configs write false
  LLMRT_RETURN_IF_ERROR(readFlag(root, "bias", where, true, &bias));
  c->attention_bias = c->o_proj_bias = bias;
  return Status::ok();
}

// Baichuan's variants are not in config.json; as vLLM tells them: "BaiChuanForCausalLM" (7B) is
// rotary, "BaichuanForCausalLM" rotary at hidden_size 4096 (Baichuan2-7B) and ALiBi otherwise
// (13B); vocab_size 125696 is Baichuan2, whose LM head rows are L2-normalized.
Status describeBaichuan(const Json& root, std::string_view where, ModelConfig* c) {
  std::string arch;
  auto a = root.find("architectures");
  if (a != root.end() && a->is_array() && !a->empty() && (*a)[0].is_string()) arch = (*a)[0].get<std::string>();
  if (arch == "BaichuanForCausalLM" && c->hidden_size != 4096) c->decoder.positions = PositionEncoding::kAlibi;
  c->decoder.lm_head_normalized = c->vocab_size == 125696;
  std::optional<int64_t> model_max;
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "model_max_length", "model_max_length", where, &model_max));
  if (!root.contains("max_position_embeddings") && model_max) c->max_position_embeddings = *model_max;
  return Status::ok();
}

// Qwen (v1): c_attn always has a bias; w2 is the gated branch; intermediate_size is twice the
// width of w1 / w2. Dynamic NTK and logn attention change nothing up to seq_length, so the
// context is limited to it.
Status describeQwen(const Json& root, std::string_view where, ModelConfig* c) {
  c->attention_bias = true;
  c->intermediate_size /= 2;
  std::optional<double> pct, base;
  std::optional<int64_t> seq_length;
  LLMRT_RETURN_IF_ERROR(detail::readDouble(root, "rotary_pct", "rotary_pct", where, &pct));
  LLMRT_RETURN_IF_ERROR(detail::readDouble(root, "rotary_emb_base", "rotary_emb_base", where, &base));
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "seq_length", "seq_length", where, &seq_length));
  if (pct) c->partial_rotary_factor = *pct;
  if (base) c->rope_theta = *base;
  bool ntk = false, logn = false;
  LLMRT_RETURN_IF_ERROR(readFlag(root, "use_dynamic_ntk", where, false, &ntk));
  LLMRT_RETURN_IF_ERROR(readFlag(root, "use_logn_attn", where, false, &logn));
  if ((ntk || logn) && seq_length && *seq_length > 0)
    c->max_position_embeddings = std::min(c->max_position_embeddings, *seq_length);
  if (c->num_attention_heads > 0 && c->head_dim * c->num_attention_heads != c->hidden_size)
    return fieldError(where, "kv_channels", std::to_string(c->head_dim),
                      "hidden_size / num_attention_heads (" + std::to_string(c->hidden_size) + " / " +
                          std::to_string(c->num_attention_heads) + ")");
  return Status::ok();
}

// ChatGLM2/3: multi-query groups, rotary on the first half of each head in interleaved pairs,
// [gate | up] in dense_h_to_4h. rope_ratio scales the base (ChatGLM3, GLM-4) except in ChatGLM2
// (chatglm2-6b-32k divides positions): only `_name_or_path` tells them apart.
Status describeChatGlm(const Json& root, std::string_view where, ModelConfig* c) {
  if (root.contains("position_encoding_2d"))
    return unimplemented(std::string(where) + ": ChatGLM-6B (v1) is not supported; ChatGLM2/3 are");
  const std::pair<const char*, bool> required[] = {{"rmsnorm", true},
                                                   {"post_layer_norm", true},
                                                   {"apply_residual_connection_post_layernorm", false},
                                                   {"add_bias_linear", false},
                                                   {"original_rope", true}};
  for (const auto& [key, want] : required) {
    bool v = want;
    LLMRT_RETURN_IF_ERROR(readFlag(root, key, where, want, &v));
    if (v != want)
      return unimplemented(std::string(where) + ": " + key + " " + (v ? "true" : "false") +
                           " is not supported (released ChatGLM2/3 checkpoints have " + (want ? "true" : "false") +
                           ")");
  }
  bool mqa = false, qkv_bias = true;
  std::optional<int64_t> groups;
  LLMRT_RETURN_IF_ERROR(readFlag(root, "multi_query_attention", where, false, &mqa));
  LLMRT_RETURN_IF_ERROR(readFlag(root, "add_qkv_bias", where, false, &qkv_bias));
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "multi_query_group_num", "multi_query_group_num", where, &groups));
  c->num_key_value_heads = mqa ? groups.value_or(1) : c->num_attention_heads;
  c->attention_bias = qkv_bias;
  c->decoder.rotary_layout = RotaryLayout::kInterleaved;
  c->partial_rotary_factor = 0.5;
  std::optional<double> ratio;
  std::optional<std::string> name;
  LLMRT_RETURN_IF_ERROR(detail::readDouble(root, "rope_ratio", "rope_ratio", where, &ratio));
  LLMRT_RETURN_IF_ERROR(detail::readString(root, "_name_or_path", "_name_or_path", where, &name));
  if (ratio && *ratio != 1.0) {
    if (name && name->find("chatglm2") != std::string::npos) {
      c->rope_scaling.type = RopeScalingType::kLinear;
      c->rope_scaling.factor = *ratio;
    } else {
      c->rope_theta *= *ratio;
    }
  }
  return Status::ok();
}

// ---- the table ----------------------------------------------------------------------------

constexpr TensorNames gpt2Names(bool transposed, std::string_view optional_prefix) {
  TensorNames n;
  n.embed = "transformer.wte";
  n.pos_embed = "transformer.wpe";
  n.final_norm = "transformer.ln_f";
  n.layer_prefix = "transformer.h.";
  n.attn_norm = "ln_1";
  n.mlp_norm = "ln_2";
  n.q = n.k = n.v = "";
  n.qkv = "attn.c_attn";
  n.o = "attn.c_proj";
  n.gate = "";
  n.up = "mlp.c_fc";
  n.down = "mlp.c_proj";
  n.transposed = transposed;
  n.optional_prefix = optional_prefix;
  return n;
}

constexpr TensorNames gptjNames() {
  TensorNames n;
  n.embed = "transformer.wte";
  n.final_norm = "transformer.ln_f";
  n.layer_prefix = "transformer.h.";
  n.attn_norm = "ln_1";
  n.mlp_norm = "";
  n.q = "attn.q_proj", n.k = "attn.k_proj", n.v = "attn.v_proj";
  n.o = "attn.out_proj";
  n.gate = "";
  n.up = "mlp.fc_in";
  n.down = "mlp.fc_out";
  return n;
}

constexpr TensorNames neoxNames() {
  TensorNames n;
  n.embed = "gpt_neox.embed_in";
  n.final_norm = "gpt_neox.final_layer_norm";
  n.lm_head = "embed_out";
  n.layer_prefix = "gpt_neox.layers.";
  n.q = n.k = n.v = "";
  n.qkv = "attention.query_key_value";
  n.o = "attention.dense";
  n.gate = "";
  n.up = "mlp.dense_h_to_4h";
  n.down = "mlp.dense_4h_to_h";
  return n;
}

constexpr TensorNames falconNames() {
  TensorNames n;
  n.embed = "transformer.word_embeddings";
  n.final_norm = "transformer.ln_f";
  n.layer_prefix = "transformer.h.";
  n.parallel_attn_norm = "ln_attn";
  n.parallel_mlp_norm = "ln_mlp";
  n.q = n.k = n.v = "";
  n.qkv = "self_attention.query_key_value";
  n.o = "self_attention.dense";
  n.gate = "";
  n.up = "mlp.dense_h_to_4h";
  n.down = "mlp.dense_4h_to_h";
  return n;
}

constexpr TensorNames phi3Names() {
  TensorNames n;
  n.q = n.k = n.v = "";
  n.qkv = "self_attn.qkv_proj";
  n.gate = n.up = "";
  n.gate_up = "mlp.gate_up_proj";
  return n;
}

constexpr TensorNames gemma2Names() {
  TensorNames n;
  n.pre_mlp_norm = "pre_feedforward_layernorm";
  n.post_mlp_norm = "post_feedforward_layernorm";
  return n;
}

constexpr TensorNames glmNames() {
  TensorNames n;
  n.gate = n.up = "";
  n.gate_up = "mlp.gate_up_proj";
  return n;
}

constexpr TensorNames mixtralNames() {
  TensorNames n;
  n.gate = n.up = n.down = "";
  n.router = "block_sparse_moe.gate";
  n.experts = "block_sparse_moe.experts.";
  n.expert_gate = "w1", n.expert_up = "w3", n.expert_down = "w2";
  return n;
}

constexpr TensorNames qwen2MoeNames() {
  TensorNames n;
  n.router = "mlp.gate";
  n.experts = "mlp.experts.";
  n.expert_gate = "gate_proj", n.expert_up = "up_proj", n.expert_down = "down_proj";
  n.shared_expert = "mlp.shared_expert.";
  n.shared_expert_gate = "mlp.shared_expert_gate";
  return n;  // dense layers (mlp_only_layers) keep mlp.gate_proj / up_proj / down_proj
}

constexpr TensorNames internLM2Names() {
  TensorNames n;
  n.embed = "model.tok_embeddings";
  n.lm_head = "output";
  n.attn_norm = "attention_norm";
  n.mlp_norm = "ffn_norm";
  n.q = n.k = n.v = "";
  n.qkv = "attention.wqkv";
  n.o = "attention.wo";
  n.gate = "feed_forward.w1", n.up = "feed_forward.w3", n.down = "feed_forward.w2";
  return n;
}

constexpr TensorNames baichuanNames() {
  TensorNames n;
  n.q = n.k = n.v = "";
  n.qkv = "self_attn.W_pack";
  return n;
}

constexpr TensorNames qwenNames() {
  TensorNames n;
  n.embed = "transformer.wte";
  n.final_norm = "transformer.ln_f";
  n.layer_prefix = "transformer.h.";
  n.attn_norm = "ln_1";
  n.mlp_norm = "ln_2";
  n.q = n.k = n.v = "";
  n.qkv = "attn.c_attn";
  n.o = "attn.c_proj";
  n.gate = "mlp.w2", n.up = "mlp.w1", n.down = "mlp.c_proj";
  return n;
}

constexpr TensorNames chatGlmNames() {
  TensorNames n;
  n.embed = "transformer.embedding.word_embeddings";
  n.final_norm = "transformer.encoder.final_layernorm";
  n.lm_head = "transformer.output_layer";
  n.layer_prefix = "transformer.encoder.layers.";
  n.q = n.k = n.v = "";
  n.qkv = "self_attention.query_key_value";
  n.o = "self_attention.dense";
  n.gate = n.up = "";
  n.gate_up = "mlp.dense_h_to_4h";
  n.down = "mlp.dense_4h_to_h";
  return n;
}

constexpr TensorNames kLlamaNames = {};
constexpr ConfigKeys kLlamaKeys = {};
constexpr ConfigKeys kGpt2Keys = {"vocab_size", "head_dim", "n_embd", "n_layer", "n_head", "", "n_inner",
                                  "n_positions", "layer_norm_epsilon", "activation_function", true};
constexpr ConfigKeys kNeoXKeys = {"vocab_size", "head_dim", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                  "", "intermediate_size", "max_position_embeddings", "layer_norm_eps", "hidden_act"};
constexpr ConfigKeys kFalconKeys = {"vocab_size", "head_dim", "hidden_size", "num_hidden_layers",
                                    "num_attention_heads", "", "ffn_hidden_size", "max_position_embeddings",
                                    "layer_norm_epsilon", "activation", true};
constexpr ConfigKeys kGemma2Keys = {"vocab_size", "head_dim", "hidden_size", "num_hidden_layers",
                                    "num_attention_heads", "num_key_value_heads", "intermediate_size",
                                    "max_position_embeddings", "rms_norm_eps", "hidden_activation"};
constexpr ConfigKeys kQwenKeys = {"vocab_size", "kv_channels", "hidden_size", "num_hidden_layers",
                                  "num_attention_heads", "", "intermediate_size", "max_position_embeddings",
                                  "layer_norm_epsilon", "hidden_act"};
constexpr ConfigKeys kChatGlmKeys = {"padded_vocab_size", "kv_channels", "hidden_size", "num_layers",
                                     "num_attention_heads", "", "ffn_hidden_size", "seq_length",
                                     "layernorm_epsilon", "hidden_act"};

const std::array<ArchEntry, 17> kArchs = {{
    {"LlamaForCausalLM", "", "llama", ModelArch::kLlama, 2048, 1, 2, std::nullopt, 1e-6, "silu", false, kLlamaKeys,
     kLlamaNames, describeLlama},
    {"MistralForCausalLM", "", "mistral", ModelArch::kMistral, 4096 * 32, 1, 2, 4096, 1e-6, "silu", false, kLlamaKeys,
     kLlamaNames, describeMistral},
    {"Qwen2ForCausalLM", "", "qwen2", ModelArch::kQwen2, 32768, std::nullopt, std::nullopt, 4096, 1e-6, "silu", false,
     kLlamaKeys, kLlamaNames, describeQwen2},
    {"GPT2LMHeadModel", "", "gpt2", ModelArch::kGpt2, 1024, 50256, 50256, std::nullopt, 1e-5, "gelu_new", true,
     kGpt2Keys, gpt2Names(true, "transformer."), describeGpt2},
    {"GPTBigCodeForCausalLM", "", "gpt_bigcode", ModelArch::kGptBigCode, 1024, 50256, 50256, std::nullopt, 1e-5,
     "gelu_pytorch_tanh", true, kGpt2Keys, gpt2Names(false, ""), describeGptBigCode},
    {"GPTJForCausalLM", "", "gptj", ModelArch::kGptJ, 2048, 50256, 50256, std::nullopt, 1e-5, "gelu_new", false,
     kGpt2Keys, gptjNames(), describeGptJ},
    {"GPTNeoXForCausalLM", "", "gpt_neox", ModelArch::kGptNeoX, 2048, 0, 2, std::nullopt, 1e-5, "gelu", false,
     kNeoXKeys, neoxNames(), describeGptNeoX},
    {"FalconForCausalLM", "RWForCausalLM", "falcon", ModelArch::kFalcon, 2048, 11, 11, std::nullopt, 1e-5, "gelu",
     true, kFalconKeys, falconNames(), describeFalcon},
    {"Phi3ForCausalLM", "", "phi3", ModelArch::kPhi3, 4096, 1, 32000, std::nullopt, 1e-5, "silu", false, kLlamaKeys,
     phi3Names(), describePhi3},
    {"Gemma2ForCausalLM", "", "gemma2", ModelArch::kGemma2, 8192, 2, 1, 4096, 1e-6, "gelu_pytorch_tanh", true,
     kGemma2Keys, gemma2Names(), describeGemma2},
    {"GlmForCausalLM", "", "glm", ModelArch::kGlm, 131072, std::nullopt, 151329, std::nullopt, 1.5625e-07, "silu",
     false, kLlamaKeys, glmNames(), describeGlm},
    {"MixtralForCausalLM", "", "mixtral", ModelArch::kMixtral, 4096 * 32, 1, 2, std::nullopt, 1e-5, "silu", false,
     kLlamaKeys, mixtralNames(), describeMixtral},
    {"Qwen2MoeForCausalLM", "", "qwen2_moe", ModelArch::kQwen2Moe, 32768, std::nullopt, std::nullopt, 4096, 1e-6,
     "silu", false, kLlamaKeys, qwen2MoeNames(), describeQwen2Moe},
    {"InternLM2ForCausalLM", "", "internlm2", ModelArch::kInternLM2, 2048, 1, 2, std::nullopt, 1e-6, "silu", false,
     kLlamaKeys, internLM2Names(), describeInternLM2},
    {"BaichuanForCausalLM", "BaiChuanForCausalLM", "baichuan", ModelArch::kBaichuan, 4096, 1, 2, std::nullopt, 1e-6,
     "silu", false, kLlamaKeys, baichuanNames(), describeBaichuan},
    {"QWenLMHeadModel", "", "qwen", ModelArch::kQwen, 8192, std::nullopt, 151643, std::nullopt, 1e-6, "silu", false,
     kQwenKeys, qwenNames(), describeQwen},
    {"ChatGLMForConditionalGeneration", "ChatGLMModel", "chatglm", ModelArch::kChatGlm, 32768, std::nullopt, 2,
     std::nullopt, 1e-5, "silu", false, kChatGlmKeys, chatGlmNames(), describeChatGlm},
}};

}  // namespace

std::span<const ArchEntry> archTable() { return kArchs; }

const ArchEntry& archEntry(ModelArch arch) {
  for (const ArchEntry& e : kArchs)
    if (e.arch == arch) return e;
  return kArchs[0];  // unreachable: every ModelArch has a row
}

QkvPacking qkvPacking(const ModelConfig& c) {
  switch (c.arch) {
    case ModelArch::kGpt2:
    case ModelArch::kPhi3:
    case ModelArch::kBaichuan:
    case ModelArch::kQwen:
      return QkvPacking::kConcatenated;
    case ModelArch::kGptBigCode:  // multi_query: [q | k | v]; else per head
    case ModelArch::kChatGlm:     // multi-query groups: [q | k | v]; else per head
      return c.num_key_value_heads == c.num_attention_heads && c.num_attention_heads > 1 ? QkvPacking::kPerHead
                                                                                         : QkvPacking::kConcatenated;
    case ModelArch::kGptNeoX:
      return QkvPacking::kPerHead;
    case ModelArch::kInternLM2:
      return QkvPacking::kGrouped;
    case ModelArch::kFalcon:  // new decoder: grouped; multi_query: [q | k | v]; else per head
      if (c.num_key_value_heads == c.num_attention_heads && c.num_attention_heads > 1) return QkvPacking::kPerHead;
      return c.num_key_value_heads == 1 ? QkvPacking::kConcatenated : QkvPacking::kGrouped;
    default:
      return QkvPacking::kSeparate;
  }
}

std::string supportedArchitectures() {
  std::string s;
  for (const ArchEntry& e : kArchs) {
    if (!s.empty()) s += ", ";
    s += e.architecture;
  }
  return s;
}

}  // namespace llmrt

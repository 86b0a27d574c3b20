// The architecture table: one row per supported HF class, mapping its config.json keys and its
// checkpoint tensor names onto the decoder description (include/llmrt/model_config.h). Adding
// an architecture adds a row here (and its `describe` function); no kernel and no other row
// changes. The config parser reads the common fields through `keys`, then calls `describe` for
// what is the family's own; the weight reader (decoder_weights.h) finds tensors through `names`.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "llmrt/model_config.h"
#include "llmrt/status.h"
#include "loader/json_util.h"

namespace llmrt {

// config.json key names of the fields every architecture has ("" = the family has no such key).
struct ConfigKeys {
  std::string_view vocab_size = "vocab_size";
  std::string_view head_dim = "head_dim";
  std::string_view hidden_size = "hidden_size";
  std::string_view num_hidden_layers = "num_hidden_layers";
  std::string_view num_attention_heads = "num_attention_heads";
  std::string_view num_key_value_heads = "num_key_value_heads";
  std::string_view intermediate_size = "intermediate_size";  // null or absent: 4 * hidden_size
  std::string_view max_position_embeddings = "max_position_embeddings";
  std::string_view norm_eps = "rms_norm_eps";
  std::string_view hidden_act = "hidden_act";
  bool intermediate_optional = false;  // absent or null: 4 * hidden_size (GPT-2's n_inner, Falcon's ffn_hidden_size)
};

// How a checkpoint stores q, k and v.
enum class QkvPacking : uint8_t {
  kSeparate,      // three tensors (q, k, v names)
  kConcatenated,  // one tensor, rows [q | k | v]                              (Phi-3 qkv_proj, GPT-2 c_attn)
  kPerHead,       // one tensor, rows [head][q, k, v][head_dim]                (GPT-NeoX query_key_value)
  kGrouped,       // rows [kv_head][q of its group..., k, v][head_dim]         (Falcon new decoder)
};

// Checkpoint tensor names, without ".weight" / ".bias". Per-layer names follow `layer_prefix`
// with the layer index, e.g. "model.layers." + "3." + "self_attn.q_proj". "" = not in this family.
struct TensorNames {
  std::string_view embed = "model.embed_tokens";
  std::string_view pos_embed;  // learned positions
  std::string_view final_norm = "model.norm";
  std::string_view lm_head = "lm_head";
  std::string_view layer_prefix = "model.layers.";
  std::string_view attn_norm = "input_layernorm";
  std::string_view mlp_norm = "post_attention_layernorm";  // sequential: before the MLP; sandwich: after attention
  std::string_view pre_mlp_norm;                           // sandwich: before the MLP
  std::string_view post_mlp_norm;                          // sandwich: after the MLP
  // Parallel wiring with two norms, where the family names them apart (Falcon's ln_attn, ln_mlp).
  std::string_view parallel_attn_norm, parallel_mlp_norm;
  std::string_view q = "self_attn.q_proj", k = "self_attn.k_proj", v = "self_attn.v_proj";
  std::string_view qkv;  // the packed tensor (QkvPacking other than kSeparate)
  std::string_view o = "self_attn.o_proj";
  std::string_view gate = "mlp.gate_proj", up = "mlp.up_proj";  // plain MLPs: `up` is the first product
  std::string_view gate_up;                                      // packed rows [gate | up]
  std::string_view down = "mlp.down_proj";
  // Mixture of experts: the router [num_experts, hidden]; expert e's gated MLP under
  // experts + e + "." + expert_gate / expert_up / expert_down (Mixtral's w1 / w3 / w2; transformers
  // 5.x saves this layout too); Qwen2-MoE's shared expert (a gated MLP under `shared_expert`) and
  // its gate [1, hidden].
  std::string_view router;
  std::string_view experts;
  std::string_view expert_gate, expert_up, expert_down;
  std::string_view shared_expert, shared_expert_gate;
  // GPT-2's Conv1D stores matrices [in, out]; the loader transposes them.
  bool transposed = false;
  // A prefix older checkpoints of the family leave out (GPT-2's "transformer.").
  std::string_view optional_prefix;
};

struct ArchEntry {
  std::string_view architecture;  // HF class name in "architectures"
  std::string_view alias;         // another class name of the same row ("" = none)
  std::string_view model_type;
  ModelArch arch;
  // HF config-class defaults for fields config.json may omit.
  int64_t max_position_embeddings;
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> eos_token_id;
  std::optional<int64_t> sliding_window;
  double norm_eps;
  std::string_view hidden_act;
  bool tie_word_embeddings;
  ConfigKeys keys;
  TensorNames names;
  // The family's own fields: fills config->decoder and the fields the common reader does not
  // (biases, kv heads of MQA families, rotary fractions, sliding windows). Called after the
  // common fields are read.
  Status (*describe)(const detail::Json& root, std::string_view where, ModelConfig* config);
};

std::span<const ArchEntry> archTable();
// The row of a parsed config's architecture (every ModelArch has one).
const ArchEntry& archEntry(ModelArch arch);
// How this config's checkpoint packs q/k/v (some families decide by config: Falcon, BigCode).
QkvPacking qkvPacking(const ModelConfig& config);
// The names of every supported class, for messages: "LlamaForCausalLM, MistralForCausalLM, ...".
std::string supportedArchitectures();

}  // namespace llmrt

// inspectModel / formatModelInfo / modelInfoToJson (include/llmrt/model_info.h).
#include "llmrt/model_info.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/logging.h"
#include "loader/decoder_weights.h"
#include "loader/model_directory.h"

namespace llmrt {

// Insertion-ordered so the JSON report reads in the same order as the text one.
using ReportJson = nlohmann::ordered_json;

namespace {

std::string g(double v) { return strprintf("%g", v); }

std::string joinIds(const std::vector<int64_t>& ids) {
  if (ids.empty()) return "none";
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(ids[i]);
  }
  return s;
}

std::string describeRope(const ModelConfig& c) {
  std::string s = "theta " + g(c.rope_theta);
  if (c.partial_rotary_factor != 1.0) s += ", partial_rotary_factor " + g(c.partial_rotary_factor);
  const RopeScaling& r = c.rope_scaling;
  switch (r.type) {
    case RopeScalingType::kNone:
      return s + ", no scaling";
    case RopeScalingType::kLinear:
      return s + ", linear scaling (factor " + g(r.factor) + ")";
    case RopeScalingType::kDynamic:
      s += ", dynamic NTK scaling (factor " + g(r.factor);
      if (r.original_max_position_embeddings)
        s += ", original_max_position_embeddings " + std::to_string(r.original_max_position_embeddings);
      return s + ")";
    case RopeScalingType::kLlama3:
      return s + ", llama3 scaling (factor " + g(r.factor) + ", low_freq_factor " + g(r.low_freq_factor) +
             ", high_freq_factor " + g(r.high_freq_factor) + ", original_max_position_embeddings " +
             std::to_string(r.original_max_position_embeddings) + ")";
    case RopeScalingType::kYarn:
      s += ", yarn scaling (factor " + g(r.factor) + ", original_max_position_embeddings " +
           std::to_string(r.original_max_position_embeddings) + ", beta_fast " + g(r.beta_fast) +
           ", beta_slow " + g(r.beta_slow);
      if (r.attention_factor) s += ", attention_factor " + g(*r.attention_factor);
      if (r.mscale) s += ", mscale " + g(*r.mscale);
      if (r.mscale_all_dim) s += ", mscale_all_dim " + g(*r.mscale_all_dim);
      return s + ", truncate " + (r.truncate ? "true" : "false") + ")";
  }
  return s;
}

std::string_view residualName(ResidualWiring r) {
  switch (r) {
    case ResidualWiring::kSequential: return "sequential (x += attn(norm(x)); x += mlp(norm(x)))";
    case ResidualWiring::kParallel: return "parallel, one norm (x += attn(n(x)) + mlp(n(x)))";
    case ResidualWiring::kParallelTwoNorms: return "parallel, two norms (x += attn(n1(x)) + mlp(n2(x)))";
    case ResidualWiring::kSandwich: return "sandwich (x += n2(attn(n1(x))); x += n4(mlp(n3(x))))";
  }
  return "?";
}

std::string describeNorm(const ModelConfig& c) {
  const DecoderDescription& d = c.decoder;
  std::string s = d.norm == NormKind::kRmsNorm ? "RMSNorm" : "LayerNorm";
  if (d.norm_bias) s += " with bias";
  if (d.norm_weight_offset_one) s += ", weight (1 + w)";
  return s + ", eps " + strprintf("%g", c.norm_eps);
}

std::string describePositions(const ModelConfig& c) {
  const DecoderDescription& d = c.decoder;
  if (d.positions == PositionEncoding::kLearned) return "learned absolute (" + std::to_string(c.max_position_embeddings) + ")";
  if (d.positions == PositionEncoding::kAlibi) return "ALiBi";
  const auto rotary = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
  return "rotary on " + std::to_string(rotary) + " of " + std::to_string(c.head_dim) + " features, " +
         (d.rotary_layout == RotaryLayout::kHalf ? "half (rotate_half)" : "interleaved pairs (rotate_every_two)");
}

std::string describeMlp(const ModelConfig& c) {
  const DecoderDescription& d = c.decoder;
  return std::string(d.mlp_gated ? "gated " : "plain ") + c.hidden_act + (c.mlp_bias ? ", with bias" : "") +
         (d.lm_head_bias ? "; LM head with bias" : "");
}

std::vector<int64_t> slidingLayers(const ModelConfig& c) {
  std::vector<int64_t> v;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (c.slidingWindowForLayer(l)) v.push_back(l);
  }
  return v;
}

std::string describeSlidingWindow(const ModelConfig& c) {
  const std::vector<int64_t> layers = slidingLayers(c);
  if (layers.empty()) {
    if (c.arch == ModelArch::kQwen2 && !c.use_sliding_window) return "none (use_sliding_window is false)";
    return "none";
  }
  std::string s = std::to_string(*c.sliding_window) + " tokens on ";
  if (static_cast<int64_t>(layers.size()) == c.num_hidden_layers) return s + "all layers";
  s += std::to_string(layers.size()) + " of " + std::to_string(c.num_hidden_layers) +
       " layers (first: " + std::to_string(layers.front()) + ")";
  return s;
}

std::string describeBiases(const ModelConfig& c) {
  std::string s;
  if (c.attention_bias) s = c.o_proj_bias ? "q,k,v,o" : "q,k,v";
  if (c.mlp_bias) s += s.empty() ? "mlp" : " + mlp";
  return s.empty() ? "none" : s;
}

std::string describeGeneration(const GenerationDefaults& gd) {
  std::vector<std::string> parts;
  if (gd.do_sample) parts.push_back(std::string("do_sample ") + (*gd.do_sample ? "true" : "false"));
  if (gd.temperature) parts.push_back("temperature " + g(*gd.temperature));
  if (gd.top_k) parts.push_back("top_k " + std::to_string(*gd.top_k));
  if (gd.top_p) parts.push_back("top_p " + g(*gd.top_p));
  if (gd.min_p) parts.push_back("min_p " + g(*gd.min_p));
  if (gd.repetition_penalty) parts.push_back("repetition_penalty " + g(*gd.repetition_penalty));
  if (gd.max_new_tokens) parts.push_back("max_new_tokens " + std::to_string(*gd.max_new_tokens));
  if (gd.max_length) parts.push_back("max_length " + std::to_string(*gd.max_length));
  if (!gd.bos_token_ids.empty()) parts.push_back("bos " + joinIds(gd.bos_token_ids));
  if (!gd.eos_token_ids.empty()) parts.push_back("eos " + joinIds(gd.eos_token_ids));
  if (gd.pad_token_id) parts.push_back("pad " + std::to_string(*gd.pad_token_id));
  if (parts.empty()) return "present, no sampling defaults";
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
  return s;
}

template <typename T>
ReportJson optionalJson(const std::optional<T>& v) {
  return v ? ReportJson(*v) : ReportJson(nullptr);
}

}  // namespace

std::string formatParameterCount(int64_t n) {
  const double v = static_cast<double>(n);
  if (n < 1000) return std::to_string(n);
  if (v < 999.95e3) return strprintf("%.1fK", v / 1e3);
  if (v < 999.995e6) return strprintf("%.2fM", v / 1e6);
  if (v < 999.995e9) return strprintf("%.2fB", v / 1e9);
  return strprintf("%.2fT", v / 1e12);
}

Result<ModelInfo> inspectModel(const std::string& dir) {
  ModelDirectoryOptions opts;
  opts.check_weights = false;     // checked below, so a mismatch is reported rather than fatal
  opts.reject_quantized = false;  // likewise: described, and reported as not runnable
  LLMRT_ASSIGN_OR_RETURN(ModelDirectory m, ModelDirectory::open(dir, opts));
  ModelInfo info;
  info.model_dir = dir;
  info.config = m.config;
  info.parameter_count = m.weights.totalParameters();
  info.weights_bytes = m.weights.totalBytes();
  info.tensor_count = static_cast<int64_t>(m.weights.size());
  info.weights_source = m.weights.source();
  for (const SafetensorsFile& f : m.weights.files()) info.weight_files.push_back(f.path());
  for (const auto& [dt, bytes] : m.weights.bytesByDtype())
    info.bytes_by_dtype.emplace_back(dtypeName(dt), bytes);
  std::stable_sort(info.bytes_by_dtype.begin(), info.bytes_by_dtype.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (std::optional<DType> dt = checkpointDtype(m.weights)) {
    info.dtype = dtypeName(*dt);
    info.kv_dtype = info.dtype;
    info.kv_dtype_bytes = dtypeSize(*dt);
    info.kv_bytes_per_token = kvBytesPerToken(m.config, *dt);
  }
  info.has_tokenizer_json = m.tokenizer_json.has_value();
  info.tokenizer_json_path = m.tokenizer_json.value_or("");
  info.generation = m.generation;

  // A quantized checkpoint cannot run: that, not the tensors it lacks, is the report.
  if (Status q = resolveQuantization(m.quantization, m.weights, &m.config); !q.isOk()) {
    info.weights_valid = false;
    info.weights_error = q.message();
    return info;
  }
  Result<std::vector<std::string>> check = checkWeights(m.config, m.weights);
  info.weights_valid = check.isOk();
  if (check.isOk()) {
    info.unused_tensors = std::move(check).value();
  } else {
    info.weights_error = check.status().message();
  }
  return info;
}

std::string formatModelInfo(const ModelInfo& info) {
  const ModelConfig& c = info.config;
  std::vector<std::pair<std::string, std::string>> rows;
  auto row = [&](std::string k, std::string v) { rows.emplace_back(std::move(k), std::move(v)); };
  row("model dir", info.model_dir);
  row("architecture", c.architecture + " (model_type " + c.model_type + ")");
  row("parameters",
      formatParameterCount(info.parameter_count) + " (" + std::to_string(info.parameter_count) + ")");
  std::string dtype = info.dtype.empty() ? "none (no floating-point tensors)" : info.dtype;
  if (info.bytes_by_dtype.size() > 1) {
    dtype += " (mixed:";
    for (const auto& [name, bytes] : info.bytes_by_dtype) dtype += " " + name + " " + formatBytes(bytes);
    dtype += ")";
  }
  if (!c.torch_dtype.empty()) dtype += "; config dtype " + c.torch_dtype;
  row("dtype", dtype);
  if (!c.weight_quantization.empty()) {
    std::string scheme = c.weight_quantization == "awq"  ? " (4-bit, group_size " + std::to_string(c.awq_group_size) + ")"
                         : c.fp8_block_rows > 0          ? " (block scales " + std::to_string(c.fp8_block_rows) + "x" +
                                                      std::to_string(c.fp8_block_cols) + ")"
                                                         : " (per-tensor or per-channel scales)";
    const std::string runs =
        c.weight_quantization == "awq"
            ? "; runs as 4-bit weights with 16-bit activations (CUDA; the CPU computes with them dequantized)"
            : std::string("; runs as ") + (c.weight_quantization == "fp8" ? "FP8" : "INT8") +
                  " products (W8A8: weights requantized per row, activations per token)";
    row("quantization", c.weight_quantization + scheme + runs + "; --quantization none dequantizes them at load");
  }
  row("layers", std::to_string(c.num_hidden_layers));
  row("hidden size", std::to_string(c.hidden_size));
  row("heads", std::to_string(c.num_attention_heads) + " query, " + std::to_string(c.num_key_value_heads) +
                   " kv, head_dim " + std::to_string(c.head_dim) + (c.head_dim_explicit ? "" : " (derived)"));
  row("intermediate size", std::to_string(c.intermediate_size) + " (" + c.hidden_act + ")");
  row("vocab size", std::to_string(c.vocab_size));
  row("max positions", std::to_string(c.max_position_embeddings));
  row("rope", describeRope(c));
  row("sliding window", describeSlidingWindow(c));
  row("tied embeddings", c.tie_word_embeddings ? "yes" : "no");
  row("biases", describeBiases(c));
  row("norm", describeNorm(c));
  row("positions", describePositions(c));
  row("residual", std::string(residualName(c.decoder.residual)));
  row("mlp", describeMlp(c));
  if (c.decoder.attn_logit_softcap > 0 || c.decoder.final_logit_softcap > 0 || c.decoder.embedding_multiplier != 1.0)
    row("scaling", "attention logits soft-cap " + g(c.decoder.attn_logit_softcap) + ", final logits soft-cap " +
                       g(c.decoder.final_logit_softcap) + ", embeddings x " + g(c.decoder.embedding_multiplier));
  row("bos / eos", joinIds(c.bos_token_ids) + " / " + joinIds(c.eos_token_ids));
  row("weights memory", formatBytes(info.weights_bytes) + " (" + std::to_string(info.weights_bytes) +
                            " bytes; " + std::to_string(info.tensor_count) + " tensors in " +
                            std::to_string(info.weight_files.size()) + " file" +
                            (info.weight_files.size() == 1 ? "" : "s") + ")");
  if (info.kv_dtype.empty()) {
    row("KV cache / token", "unknown (no floating-point weights to take the dtype from)");
  } else {
    row("KV cache / token",
        formatBytes(info.kv_bytes_per_token) + " (" + std::to_string(info.kv_bytes_per_token) +
            " bytes = " + std::to_string(c.num_hidden_layers) + " layers x 2 (K,V) x " +
            std::to_string(c.num_key_value_heads) + " kv heads x " + std::to_string(c.head_dim) +
            " head_dim x " + std::to_string(info.kv_dtype_bytes) + " bytes; " + info.kv_dtype +
            ", the checkpoint dtype)");
  }
  row("tokenizer", info.has_tokenizer_json ? "tokenizer.json present" : "no tokenizer.json");
  row("generation config", info.generation ? describeGeneration(*info.generation) : "none");
  if (info.weights_valid) {
    std::string v = "OK";
    if (!info.unused_tensors.empty()) {
      v += " (" + std::to_string(info.unused_tensors.size()) + " unused tensor" +
           (info.unused_tensors.size() == 1 ? "" : "s") + ", e.g. " + info.unused_tensors.front() + ")";
    }
    row("weights check", v);
  } else {
    row("weights check", "FAILED: " + info.weights_error);
  }

  size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.first.size());
  std::string out;
  for (const auto& [k, v] : rows) {
    out += k;
    out += ':';
    out.append(width + 2 - k.size(), ' ');
    out += v;
    out += '\n';
  }
  return out;
}

std::string modelInfoToJson(const ModelInfo& info) {
  const ModelConfig& c = info.config;
  const RopeScaling& r = c.rope_scaling;
  ReportJson rope = {{"theta", c.rope_theta},
                     {"partial_rotary_factor", c.partial_rotary_factor},
                     {"scaling", std::string(ropeScalingTypeName(r.type))}};
  if (r.type != RopeScalingType::kNone) rope["factor"] = r.factor;
  if (r.original_max_position_embeddings)
    rope["original_max_position_embeddings"] = r.original_max_position_embeddings;
  if (r.type == RopeScalingType::kLlama3) {
    rope["low_freq_factor"] = r.low_freq_factor;
    rope["high_freq_factor"] = r.high_freq_factor;
  }
  if (r.type == RopeScalingType::kYarn) {
    rope["beta_fast"] = r.beta_fast;
    rope["beta_slow"] = r.beta_slow;
    rope["attention_factor"] = optionalJson(r.attention_factor);
    rope["mscale"] = optionalJson(r.mscale);
    rope["mscale_all_dim"] = optionalJson(r.mscale_all_dim);
    rope["truncate"] = r.truncate;
  }
  ReportJson by_dtype = ReportJson::object();
  for (const auto& [name, bytes] : info.bytes_by_dtype) by_dtype[name] = bytes;
  ReportJson gen = nullptr;
  if (info.generation) {
    const GenerationDefaults& gd = *info.generation;
    gen = {{"do_sample", optionalJson(gd.do_sample)},
           {"temperature", optionalJson(gd.temperature)},
           {"top_k", optionalJson(gd.top_k)},
           {"top_p", optionalJson(gd.top_p)},
           {"min_p", optionalJson(gd.min_p)},
           {"repetition_penalty", optionalJson(gd.repetition_penalty)},
           {"max_new_tokens", optionalJson(gd.max_new_tokens)},
           {"max_length", optionalJson(gd.max_length)},
           {"bos_token_ids", gd.bos_token_ids},
           {"eos_token_ids", gd.eos_token_ids},
           {"pad_token_id", optionalJson(gd.pad_token_id)}};
  }
  ReportJson j = {
      {"model_dir", info.model_dir},
      {"architecture", c.architecture},
      {"model_type", c.model_type},
      {"parameters", info.parameter_count},
      {"parameters_human", formatParameterCount(info.parameter_count)},
      {"dtype", info.dtype},
      {"config_dtype", c.torch_dtype},
      {"weight_quantization", c.weight_quantization},
      {"fp8_block", {c.fp8_block_rows, c.fp8_block_cols}},
      {"awq_group_size", c.awq_group_size},
      {"bytes_by_dtype", by_dtype},
      {"num_hidden_layers", c.num_hidden_layers},
      {"hidden_size", c.hidden_size},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"intermediate_size", c.intermediate_size},
      {"hidden_act", c.hidden_act},
      {"vocab_size", c.vocab_size},
      {"max_position_embeddings", c.max_position_embeddings},
      {"norm_eps", c.norm_eps},
      {"decoder",
       {{"norm", describeNorm(c)},
        {"positions", describePositions(c)},
        {"residual", residualName(c.decoder.residual)},
        {"mlp", describeMlp(c)},
        {"attention_scale", c.decoder.attention_scale},
        {"attn_logit_softcap", c.decoder.attn_logit_softcap},
        {"final_logit_softcap", c.decoder.final_logit_softcap},
        {"embedding_multiplier", c.decoder.embedding_multiplier},
        {"lm_head_bias", c.decoder.lm_head_bias}}},
      {"rope", rope},
      {"sliding_window", optionalJson(c.sliding_window)},
      {"sliding_window_layers", slidingLayers(c)},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"attention_bias", c.attention_bias},
      {"o_proj_bias", c.o_proj_bias},
      {"mlp_bias", c.mlp_bias},
      {"bos_token_ids", c.bos_token_ids},
      {"eos_token_ids", c.eos_token_ids},
      {"pad_token_id", optionalJson(c.pad_token_id)},
      {"weights_bytes", info.weights_bytes},
      {"tensor_count", info.tensor_count},
      {"weights_source", info.weights_source},
      {"weight_files", info.weight_files},
      {"kv_dtype", info.kv_dtype},
      {"kv_bytes_per_token", info.kv_bytes_per_token},
      {"tokenizer_json",
       info.has_tokenizer_json ? ReportJson(info.tokenizer_json_path) : ReportJson(nullptr)},
      {"generation_config", gen},
      {"weights_valid", info.weights_valid},
      {"weights_error", info.weights_error},
      {"unused_tensors", info.unused_tensors},
  };
  try {
    return j.dump(2, ' ', false, ReportJson::error_handler_t::replace) + "\n";
  } catch (const std::exception&) {
    return std::string("{\"error\": \"cannot format model info\"}\n");
  }
}

}  // namespace llmrt

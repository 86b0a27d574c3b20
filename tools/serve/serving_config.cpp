#include "serving_config.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "llmrt/config_options.h"
#include "llmrt/util.h"

namespace llmrt::serve {
namespace {

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Status badValue(const std::string& key, const LmiValue& v, const std::string& expected) {
  return invalidArgument(v.source + ": " + key + ": '" + printableText(v.value, 80) + "' is not valid; expected " +
                         expected);
}

std::optional<bool> parseBool(const std::string& v) {
  const std::string l = lower(v);
  if (l == "true" || l == "1" || l == "yes" || l == "on") return true;
  if (l == "false" || l == "0" || l == "no" || l == "off") return false;
  return std::nullopt;
}

std::optional<int64_t> parseInt(const std::string& v) {
  if (v.empty() || v.size() > 18) return std::nullopt;
  size_t i = v[0] == '-' ? 1 : 0;
  if (i == v.size()) return std::nullopt;
  for (size_t k = i; k < v.size(); ++k)
    if (!std::isdigit(static_cast<unsigned char>(v[k]))) return std::nullopt;
  return std::stoll(v);
}

// Options LMI documents that mean nothing for llmrt (the model's config.json decides, or the
// feature is always on): accepted with a warning saying why.
const std::map<std::string, std::string>& ignoredOptions() {
  static const std::map<std::string, std::string> m = {
      {"option.trust_remote_code", "llmrt runs no model code from the checkpoint"},
      {"option.use_fused_mlp", "llmrt's kernels choose their own fusion"},
      {"option.rotary_base", "llmrt reads rope_theta from config.json"},
      {"option.rotary_dim", "llmrt reads the rotary dimension from config.json"},
      {"option.rotary_scaling_type", "llmrt reads rope_scaling from config.json"},
      {"option.rotary_scaling_factor", "llmrt reads rope_scaling from config.json"},
      {"option.baichuan_model_version", "llmrt reads the architecture from config.json"},
      {"option.chatglm_model_version", "llmrt reads the architecture from config.json"},
      {"option.gpt_model_version", "llmrt reads the architecture from config.json"},
      {"option.entrypoint", "llmrt is its own model server"},
      {"option.revision", "llmrt loads local directories only"},
      {"option.output_formatter", "responses are OpenAI's format"},
      {"option.model_loading_timeout", "the model loads before /health answers 200"},
  };
  return m;
}

// The options LMI sets a default for (seed: DJL LMI's TensorRT-LLM user guide).
const std::vector<std::pair<std::string, std::string>>& lmiDefaults() {
  static const std::vector<std::pair<std::string, std::string>> d = {
      {"option.max_rolling_batch_size", "32"},       {"option.max_input_len", "1024"},
      {"option.max_output_len", "512"},              {"option.tokens_per_block", "128"},
      {"option.batch_scheduler_policy", "max_utilization"}, {"option.kv_cache_free_gpu_mem_fraction", "0.95"},
      {"option.enable_trt_overlap", "false"},        {"option.enable_kv_cache_reuse", "false"},
  };
  return d;
}

}  // namespace

Result<LmiSettings> parseProperties(std::string_view text, const std::string& name) {
  LmiSettings out;
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string line = trim(text.substr(pos, end - pos));
    pos = end + 1;
    const int first_line = ++line_no;
    // A trailing backslash continues the logical line.
    while (!line.empty() && line.back() == '\\' && pos < text.size()) {
      line.pop_back();
      end = text.find('\n', pos);
      if (end == std::string_view::npos) end = text.size();
      line += trim(text.substr(pos, end - pos));
      pos = end + 1;
      ++line_no;
    }
    if (line.empty() || line[0] == '#' || line[0] == '!') continue;
    size_t sep = line.find_first_of("=:");
    if (sep == std::string::npos) sep = line.find_first_of(" \t");
    if (sep == std::string::npos)
      return invalidArgument(name + ":" + std::to_string(first_line) + ": '" + printableText(line, 80) +
                             "' is not a property; expected key=value");
    std::string key = trim(std::string_view(line).substr(0, sep));
    std::string value = trim(std::string_view(line).substr(sep + 1));
    if (key.empty()) return invalidArgument(name + ":" + std::to_string(first_line) + ": a property without a key");
    out[key] = LmiValue{value, name + ":" + std::to_string(first_line)};
  }
  return out;
}

LmiSettings lmiFromEnvironment(const std::map<std::string, std::string>& env) {
  LmiSettings out;
  for (const auto& [name, value] : env) {
    if (name.rfind("OPTION_", 0) == 0 && name.size() > 7) {
      std::string key = lower(name.substr(7));
      out[key == "engine" ? "engine" : "option." + key] = LmiValue{value, name};
    }
  }
  if (auto it = env.find("HF_MODEL_ID"); it != env.end() && !out.count("option.model_id"))
    out["option.model_id"] = LmiValue{it->second, "HF_MODEL_ID"};
  if (auto it = env.find("TENSOR_PARALLEL_DEGREE"); it != env.end() && !out.count("option.tensor_parallel_degree"))
    out["option.tensor_parallel_degree"] = LmiValue{it->second, "TENSOR_PARALLEL_DEGREE"};
  if (auto it = env.find("SERVING_JOB_QUEUE_SIZE"); it != env.end()) out["job_queue_size"] = LmiValue{it->second, "SERVING_JOB_QUEUE_SIZE"};
  return out;
}

Result<LmiResult> applyLmi(const LmiSettings& given, EngineConfig& config, ServeOptions& options,
                           Provenance& provenance) {
  LmiResult result;
  result.configured = !given.empty();
  if (!result.configured) return result;
  // LMI's defaults under what was given.
  LmiSettings s = given;
  for (const auto& [key, value] : lmiDefaults())
    if (!s.count(key)) s[key] = LmiValue{value, "LMI default"};
  if (s.count("option.max_num_sequences")) s.erase("option.max_rolling_batch_size");
  // AWQ at server start calibrates on 32 samples unless told otherwise (LMI's awq_calib_size).
  if (auto q = s.find("option.quantize"); q != s.end() && lower(q->second.value) == "awq" && !s.count("option.awq_calib_size"))
    s["option.awq_calib_size"] = LmiValue{"32", "LMI default"};

  auto setEngine = [&](const std::string& lmi_key, const std::string& engine_key, const std::string& value,
                       const LmiValue& from) -> Status {
    Status st = setEngineOption(config, engine_key, value);
    if (!st.isOk()) return invalidArgument(from.source + ": " + lmi_key + ": " + st.message());
    provenance[engine_key] = from.source + " (" + lmi_key + ")";
    return Status::ok();
  };
  // Sizes and counts: positive integers, checked here so the error names the LMI source.
  auto setCount = [&](const std::string& lmi_key, const std::string& engine_key, const LmiValue& from) -> Status {
    auto n = parseInt(from.value);
    if (!n || *n < 1) return badValue(lmi_key, from, "a positive integer");
    return setEngine(lmi_key, engine_key, from.value, from);
  };
  auto boolOf = [&](const std::string& key, const LmiValue& v) -> Result<bool> {
    auto b = parseBool(v.value);
    if (!b) return badValue(key, v, "true or false");
    return *b;
  };

  for (const auto& [key, v] : s) {
    const std::string& val = v.value;
    if (key == "engine") {
      const std::string e = lower(val);
      if (e != "mpi" && e != "python" && e != "llmrt")
        return badValue(key, v, "MPI, Python or llmrt (llmrt runs its own engine either way)");
    } else if (key == "option.model_id") {
      std::error_code ec;
      if (!std::filesystem::is_directory(val, ec))
        return badValue(key, v, "a local model directory (llmrt downloads nothing; copy the model there first)");
      LLMRT_RETURN_IF_ERROR(setEngine(key, "model", val, v));
    } else if (key == "option.rolling_batch") {
      const std::string rb = lower(val);
      if (rb == "disable") {
        LLMRT_RETURN_IF_ERROR(setEngine(key, "scheduler_config.capacity_scheduler_policy", "static_batch", v));
      } else if (rb != "trtllm" && rb != "auto" && rb != "lmi-dist" && rb != "vllm" && rb != "scheduler") {
        return badValue(key, v, "auto, trtllm, lmi-dist, vllm (all: in-flight batching) or disable (static batches)");
      }
    } else if (key == "option.max_rolling_batch_size" || key == "option.max_num_sequences") {
      LLMRT_RETURN_IF_ERROR(setCount(key, "max_batch_size", v));
    } else if (key == "option.max_input_len") {
      LLMRT_RETURN_IF_ERROR(setCount(key, "max_input_len", v));
    } else if (key == "option.max_model_len") {
      LLMRT_RETURN_IF_ERROR(setCount(key, "max_seq_len", v));
    } else if (key == "option.max_output_len") {
      auto n = parseInt(val);
      if (!n || *n < 1 || *n > INT32_MAX) return badValue(key, v, "an integer in [1, 2^31)");
      options.max_output_len = static_cast<int32_t>(*n);
      provenance["serve.max_output_len"] = v.source + " (" + key + ")";
    } else if (key == "option.tensor_parallel_degree") {
      // max: every visible GPU (EngineConfig::tensor_parallel_size 0).
      const bool max = lower(val) == "max";
      auto n = parseInt(val);
      if (!max && (!n || *n < 1)) return badValue(key, v, "a positive integer or max");
      LLMRT_RETURN_IF_ERROR(setEngine(key, "tensor_parallel_size", max ? "0" : val, v));
    } else if (key == "option.use_custom_all_reduce") {
      LLMRT_ASSIGN_OR_RETURN(bool b, boolOf(key, v));
      LLMRT_RETURN_IF_ERROR(setEngine(key, "cuda_tuning", b ? "custom_all_reduce=on" : "custom_all_reduce=off", v));
    } else if (key == "option.tokens_per_block") {
      LLMRT_RETURN_IF_ERROR(setCount(key, "kv_cache_config.tokens_per_block", v));
    } else if (key == "option.batch_scheduler_policy") {
      const std::string p = lower(val);
      if (p != "max_utilization" && p != "guaranteed_no_evict")
        return badValue(key, v, "max_utilization or guaranteed_no_evict");
      if (!(s.count("option.rolling_batch") && lower(s.at("option.rolling_batch").value) == "disable"))
        LLMRT_RETURN_IF_ERROR(setEngine(key, "scheduler_config.capacity_scheduler_policy", p, v));
    } else if (key == "option.kv_cache_free_gpu_mem_fraction") {
      LLMRT_RETURN_IF_ERROR(setEngine(key, "kv_cache_config.free_gpu_memory_fraction", val, v));
    } else if (key == "option.enable_trt_overlap") {
      LLMRT_ASSIGN_OR_RETURN(bool b, boolOf(key, v));
      LLMRT_RETURN_IF_ERROR(setEngine(key, "overlap", b ? "on" : "off", v));
    } else if (key == "option.enable_kv_cache_reuse") {
      LLMRT_ASSIGN_OR_RETURN(bool b, boolOf(key, v));
      LLMRT_RETURN_IF_ERROR(setEngine(key, "kv_cache_config.enable_block_reuse", b ? "true" : "false", v));
    } else if (key == "option.enable_chunked_context") {
      LLMRT_ASSIGN_OR_RETURN(bool b, boolOf(key, v));
      LLMRT_RETURN_IF_ERROR(setEngine(key, "scheduler_config.enable_chunked_context", b ? "true" : "false", v));
    } else if (key == "option.max_num_tokens") {
      LLMRT_RETURN_IF_ERROR(setCount(key, "max_num_tokens", v));
    } else if (key == "option.multi_block_mode") {
      LLMRT_ASSIGN_OR_RETURN(bool b, boolOf(key, v));
      if (!b)
        result.warnings.push_back(v.source + ": " + key +
                                  "=false has no effect: llmrt's decode attention always splits long KV sequences");
    } else if (key == "option.dtype") {
      const std::string d = lower(val);
      const std::string mapped = d == "fp16" || d == "float16"   ? "float16"
                                 : d == "bf16" || d == "bfloat16" ? "bfloat16"
                                 : d == "fp32" || d == "float32"  ? "float32"
                                 : d == "auto"                    ? "auto"
                                                                  : "";
      if (mapped.empty()) return badValue(key, v, "fp16, bf16, fp32 or auto");
      LLMRT_RETURN_IF_ERROR(setEngine(key, "dtype", mapped, v));
    } else if (key == "option.quantize") {
      // fp8: FP8 products quantized at server start; smoothquant / awq: calibrated at the first
      // start and cached (EngineConfig::quantization and its calibration fields).
      const std::string q = lower(val);
      if (q != "fp8" && q != "smoothquant" && q != "awq") return badValue(key, v, "fp8, smoothquant or awq");
      LLMRT_RETURN_IF_ERROR(setEngine(key, "quantization", q, v));
    } else if (key == "option.kv_cache_dtype") {
      // (LMI's vLLM / lmi-dist option, as vLLM names it: fp8 is E4M3 codes with per-layer scales.)
      const std::string d = lower(val);
      if (d != "auto" && d != "fp8" && d != "fp8_e4m3") return badValue(key, v, "auto, fp8 or fp8_e4m3");
      LLMRT_RETURN_IF_ERROR(setEngine(key, "kv_cache_config.dtype", d == "auto" ? "auto" : "fp8", v));
    } else if (key == "option.smoothquant_alpha") {
      LLMRT_RETURN_IF_ERROR(setEngine(key, "smoothquant_alpha", val, v));
    } else if (key == "option.awq_calib_size") {
      LLMRT_RETURN_IF_ERROR(setCount(key, "calibration_size", v));
    } else if (key == "option.awq_format") {
      if (lower(val) != "int4_awq") return badValue(key, v, "int4_awq (AutoAWQ's 4-bit GEMM weights)");
    } else if (key == "option.smoothquant_per_token" || key == "option.smoothquant_per_channel") {
      LLMRT_ASSIGN_OR_RETURN(const bool on, boolOf(key, v));
      if (!on)
        result.warnings.push_back(v.source + ": " + key + "=false is ignored: llmrt's INT8 products always scale " +
                                  "activations per token and weights per channel");
    } else if (key == "option.multi_query_mode") {
      result.warnings.push_back(v.source + ": " + key + " is ignored: llmrt reads the attention heads from config.json");
    } else if (key == "job_queue_size" || key == "option.job_queue_size") {
      auto n = parseInt(val);
      if (!n || *n < 1 || *n > INT32_MAX) return badValue(key, v, "an integer in [1, 2^31)");
      options.max_queued_requests = static_cast<int32_t>(*n);
      provenance["serve.max_queued_requests"] = v.source + " (" + key + ")";
    } else if (auto it = ignoredOptions().find(key); it != ignoredOptions().end()) {
      result.warnings.push_back(v.source + ": " + key + " is ignored: " + it->second);
    } else {
      std::vector<std::string> known = {"engine", "option.model_id", "option.rolling_batch", "option.max_rolling_batch_size",
                                        "option.max_num_sequences", "option.max_input_len", "option.max_output_len",
                                        "option.tensor_parallel_degree", "option.tokens_per_block",
                                        "option.batch_scheduler_policy", "option.kv_cache_free_gpu_mem_fraction",
                                        "option.enable_trt_overlap", "option.enable_kv_cache_reuse",
                                        "option.enable_chunked_context", "option.max_num_tokens",
                                        "option.multi_block_mode", "option.dtype", "option.quantize",
                                        "option.kv_cache_dtype", "option.use_custom_all_reduce",
                                        "option.smoothquant_alpha", "option.awq_calib_size", "option.awq_format",
                                        "option.max_model_len", "job_queue_size"};
      result.warnings.push_back(v.source + ": unknown key " + printableText(key, 80) + " is ignored" +
                                didYouMean(key, known));
    }
  }
  return result;
}

std::string describeServeConfig(const EngineConfig& config, const ServeOptions& options, const Provenance& provenance) {
  std::string out;
  auto line = [&](const std::string& key, const std::string& value) {
    auto it = provenance.find(key);
    out += key + " = " + value + "  (" + (it == provenance.end() ? "default" : it->second) + ")\n";
  };
  for (const OptionInfo& o : engineOptionTable()) line(std::string(o.key), engineOptionValue(config, o.key));
  line("serve.host", options.host);
  line("serve.port", std::to_string(options.port));
  line("serve.api_key", options.api_key.empty() ? "(none)" : "(set)");
  line("serve.served_model_name", options.served_model_name.empty() ? "(the model directory's name)" : options.served_model_name);
  line("serve.chat_template", options.chat_template_file.empty() ? "(the model's)" : options.chat_template_file);
  line("serve.max_queued_requests", std::to_string(options.max_queued_requests));
  line("serve.max_output_len", options.max_output_len > 0 ? std::to_string(options.max_output_len) : "(the context's room)");
  line("serve.max_request_bytes", std::to_string(options.http.max_body_bytes));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", options.shutdown_timeout_s);
  line("serve.shutdown_timeout", buf);
  return out;
}

}  // namespace llmrt::serve

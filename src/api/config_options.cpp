// The option tables of llmrt/config_options.h. One entry per knob: its OptionInfo, a setter
// that parses text strictly into the field, and a getter that prints the field back.
#include "llmrt/config_options.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "core/names.h"

namespace llmrt {
namespace {

// ---- strict text -> value ----------------------------------------------------------------

Status notA(std::string_view what, std::string_view value) {
  std::string shown(value.substr(0, 80));
  if (value.size() > 80) shown += "...";
  return invalidArgument("'" + shown + "' is not " + std::string(what));
}

template <typename Int>
Status parseInto(Int& out, std::string_view v) requires std::is_integral_v<Int> && (!std::is_same_v<Int, bool>) {
  Int x{};
  const char* end = v.data() + v.size();
  auto [p, ec] = std::from_chars(v.data(), end, x);
  if (v.empty() || ec != std::errc() || p != end) {
    const std::string range = std::is_signed_v<Int>
                                  ? "an integer in [" + std::to_string(std::numeric_limits<Int>::min()) + ", " +
                                        std::to_string(std::numeric_limits<Int>::max()) + "]"
                                  : "an integer in [0, " + std::to_string(std::numeric_limits<Int>::max()) + "]";
    return notA(range, v);
  }
  out = x;
  return Status::ok();
}

Status parseInto(double& out, std::string_view v) {
  const std::string s(v);
  char* end = nullptr;
  errno = 0;
  const double x = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(x) || s.find_first_of(" \t\n") != std::string::npos)
    return notA("a finite number", v);
  out = x;
  return Status::ok();
}

Status parseInto(float& out, std::string_view v) {
  double d = 0.0;
  LLMRT_RETURN_IF_ERROR(parseInto(d, v));
  if (std::fabs(d) > std::numeric_limits<float>::max()) return notA("a finite 32-bit number", v);
  out = static_cast<float>(d);
  return Status::ok();
}

Status parseInto(bool& out, std::string_view v) {
  if (v == "true" || v == "on" || v == "1") {
    out = true;
  } else if (v == "false" || v == "off" || v == "0") {
    out = false;
  } else {
    return notA("true or false", v);
  }
  return Status::ok();
}

Status parseInto(std::string& out, std::string_view v) {
  out = std::string(v);
  return Status::ok();
}

template <typename T>
Status parseInto(std::optional<T>& out, std::string_view v) {
  T x{};
  LLMRT_RETURN_IF_ERROR(parseInto(x, v));
  out = x;
  return Status::ok();
}

// Each occurrence appends its comma-separated integers.
Status parseInto(std::vector<int32_t>& out, std::string_view v) {
  std::vector<int32_t> add;
  while (true) {
    const size_t comma = v.find(',');
    int32_t x = 0;
    LLMRT_RETURN_IF_ERROR(parseInto(x, v.substr(0, comma)));
    add.push_back(x);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  out.insert(out.end(), add.begin(), add.end());
  return Status::ok();
}

Status parseInto(std::vector<std::string>& out, std::string_view v) {
  out.emplace_back(v);
  return Status::ok();
}

template <typename E>
Status parseEnum(E& out, std::string_view v, std::optional<E> (*parse)(std::string_view), std::string_view choices) {
  std::optional<E> e = parse(v);
  if (!e) return notA(std::string("one of ") + std::string(choices), v);
  out = *e;
  return Status::ok();
}

// ---- value -> text -----------------------------------------------------------------------

std::string show(bool v) { return v ? "true" : "false"; }
std::string show(const std::string& v) { return v; }
std::string show(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}
std::string show(float v) { return show(static_cast<double>(v)); }
template <typename Int>
std::string show(Int v) requires std::is_integral_v<Int> {
  return std::to_string(v);
}
template <typename T>
std::string show(const std::optional<T>& v) {
  return v ? show(*v) : "";
}
std::string show(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t x : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(x);
  }
  return s;
}
std::string show(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

template <typename C>
struct Entry {
  OptionInfo info;
  Status (*set)(C&, std::string_view);
  std::string (*get)(const C&);
};

// A field read and written as text with the overloads above.
#define LLMRT_FIELD(C, path) \
  [](C& c, std::string_view v) { return parseInto(c.path, v); }, [](const C& c) { return show(c.path); }
#define LLMRT_ENUM(C, path, parser, choices)                                             \
  [](C& c, std::string_view v) { return parseEnum(c.path, v, parser, choices); },       \
      [](const C& c) { return std::string(toString(c.path)); }

constexpr std::string_view kBackends = "auto|cpu|cuda";
constexpr std::string_view kDtypes = "auto|bfloat16|float16|float32";
constexpr std::string_view kKvDtypes = "auto|float32|bfloat16|float16|fp8";
constexpr std::string_view kOverlaps = "auto|on|off";
constexpr std::string_view kQuantizations = "auto|none|fp8|int8|smoothquant|awq";
constexpr std::string_view kPolicies = "guaranteed_no_evict|max_utilization|static_batch";
constexpr std::string_view kChunking = "first_come_first_served|equal_progress";

using E = EngineConfig;
const Entry<E> kEngine[] = {
    {{"model", "--model", "", OptionKind::kString, "DIR",
      "HF model directory (config.json, *.safetensors, tokenizer.json)"},
     LLMRT_FIELD(E, model)},
    {{"backend", "--backend", "", OptionKind::kEnum, kBackends,
      "Compute backend (auto: cuda when built with it and a GPU is present, else cpu)"},
     LLMRT_ENUM(E, backend, parseBackendKind, kBackends)},
    {{"dtype", "--dtype", "", OptionKind::kEnum, kDtypes,
      "Weights and compute dtype (auto: cpu float32; cuda float16 for fp16 checkpoints, else bfloat16)"},
     LLMRT_ENUM(E, dtype, parseComputeDtype, kDtypes)},
    {{"quantization", "--quantization", "", OptionKind::kEnum, kQuantizations,
      "Products inside the layers: fp8 = FP8 E4M3 weights per channel and activations per token (W8A8), "
      "quantized at load; int8 = the same with INT8 codes; smoothquant = INT8 after SmoothQuant's "
      "calibrated migration, awq = 4-bit AWQ weights (both calibrated at the first load, then cached); "
      "none = 16-bit (a quantized checkpoint dequantized); auto: the checkpoint's own"},
     LLMRT_ENUM(E, quantization, parseQuantization, kQuantizations)},
    {{"calibration_file", "--calibration-file", "", OptionKind::kString, "FILE",
      "quantization smoothquant, awq: calibration text (default: the bundled model's calibration.txt)"},
     LLMRT_FIELD(E, calibration_file)},
    {{"calibration_size", "--calibration-size", "", OptionKind::kInt, "N",
      "quantization smoothquant, awq: calibration samples of up to 512 tokens (LMI's awq_calib_size)"},
     LLMRT_FIELD(E, calibration_size)},
    {{"smoothquant_alpha", "--smoothquant-alpha", "", OptionKind::kFloat, "A",
      "quantization smoothquant: migration strength in [0, 1]"},
     LLMRT_FIELD(E, smoothquant_alpha)},
    {{"quantization_cache_dir", "--quantization-cache-dir", "", OptionKind::kString, "DIR",
      "Where calibrated checkpoints are kept (default: <temporary directory>/llmrt-quantized-<uid>)"},
     LLMRT_FIELD(E, quantization_cache_dir)},
    {{"max_batch_size", "--max-batch-size", "", OptionKind::kInt, "N", "Sequences in flight at once"},
     LLMRT_FIELD(E, max_batch_size)},
    {{"max_num_tokens", "--max-num-tokens", "", OptionKind::kInt, "N",
      "Tokens computed per step (prompts are chunked to fit)"},
     LLMRT_FIELD(E, max_num_tokens)},
    {{"max_seq_len", "--max-seq-len", "", OptionKind::kInt, "N",
      "Prompt + generated tokens (0: the model's max_position_embeddings)"},
     LLMRT_FIELD(E, max_seq_len)},
    {{"max_input_len", "--max-input-len", "", OptionKind::kInt, "N", "Longest prompt (0: max_seq_len - 1)"},
     LLMRT_FIELD(E, max_input_len)},
    {{"tensor_parallel_size", "--tensor-parallel-size", "", OptionKind::kInt, "N",
      "Split the model over N ranks (tensor parallelism; 0: every visible GPU, one rank on the CPU)"},
     LLMRT_FIELD(E, tensor_parallel_size)},
    {{"num_threads", "--threads", "", OptionKind::kInt, "N",
      "CPU backend threads, OpenBLAS's included (0: every core this process may use)"},
     LLMRT_FIELD(E, num_threads)},
    {{"overlap", "--overlap", "", OptionKind::kEnum, kOverlaps,
      "Launch step N+1 before step N's tokens are back (auto: on with CUDA)"},
     LLMRT_ENUM(E, overlap, parseOverlapMode, kOverlaps)},
    {{"scheduler_config.capacity_scheduler_policy", "--scheduler-policy", "", OptionKind::kEnum, kPolicies,
      "Which requests get KV blocks: never pause (guaranteed_no_evict), pack and pause (max_utilization), "
      "whole batches (static_batch)"},
     LLMRT_ENUM(E, scheduler_config.capacity_scheduler_policy, parseCapacitySchedulerPolicy, kPolicies)},
    {{"scheduler_config.context_chunking_policy", "--context-chunking-policy", "", OptionKind::kEnum,
      kChunking, "Order of prompt chunks within a step"},
     LLMRT_ENUM(E, scheduler_config.context_chunking_policy, parseContextChunkingPolicy, kChunking)},
    {{"scheduler_config.enable_chunked_context", "--enable-chunked-context", "--disable-chunked-context",
      OptionKind::kBool, "", "Compute long prompts in chunks over several steps"},
     LLMRT_FIELD(E, scheduler_config.enable_chunked_context)},
    {{"kv_cache_config.tokens_per_block", "--tokens-per-block", "", OptionKind::kInt, "N",
      "Tokens per KV cache block (a power of two)"},
     LLMRT_FIELD(E, kv_cache_config.tokens_per_block)},
    {{"kv_cache_config.max_tokens", "--kv-cache-max-tokens", "", OptionKind::kInt, "N",
      "Upper bound on the KV cache size in tokens (unset: from free memory on the GPU; on the CPU "
      "max(4 x max_seq_len, 32768))"},
     LLMRT_FIELD(E, kv_cache_config.max_tokens)},
    {{"kv_cache_config.free_gpu_memory_fraction", "--kv-cache-free-gpu-memory-fraction", "",
      OptionKind::kFloat, "FRACTION",
      "Share of the memory free after weights and activations that the KV cache takes, in (0, 1) "
      "(unset: 0.9)"},
     LLMRT_FIELD(E, kv_cache_config.free_gpu_memory_fraction)},
    {{"kv_cache_config.host_cache_size", "--kv-cache-host-size", "", OptionKind::kInt, "BYTES",
      "Host memory for offloaded KV blocks (0: no offload)"},
     LLMRT_FIELD(E, kv_cache_config.host_cache_size)},
    {{"kv_cache_config.enable_block_reuse", "--enable-block-reuse", "--disable-block-reuse",
      OptionKind::kBool, "", "Keep computed blocks and reuse them for prompts with the same prefix"},
     LLMRT_FIELD(E, kv_cache_config.enable_block_reuse)},
    {{"kv_cache_config.enable_partial_reuse", "--enable-partial-reuse", "--disable-partial-reuse",
      OptionKind::kBool, "", "Copy the matching part of a partly matching cached block"},
     LLMRT_FIELD(E, kv_cache_config.enable_partial_reuse)},
    {{"kv_cache_config.onboard_blocks", "--onboard-blocks", "--no-onboard-blocks", OptionKind::kBool, "",
      "Copy reused host-pool blocks back to the primary pool (off: reuse stops at the first host block)"},
     LLMRT_FIELD(E, kv_cache_config.onboard_blocks)},
    {{"kv_cache_config.max_attention_window", "--max-attention-window", "", OptionKind::kIntList, "W[,W...]",
      "Attend to the last W tokens: one value for every layer, or a per-layer list repeated over the layers "
      "(unset: the model's sliding windows)"},
     LLMRT_FIELD(E, kv_cache_config.max_attention_window)},
    {{"kv_cache_config.dtype", "--kv-cache-dtype", "", OptionKind::kEnum, kKvDtypes,
      "KV cache element type (auto: the compute dtype; fp8: E4M3 with per-layer K and V scales from the "
      "checkpoint, else 1)"},
     LLMRT_ENUM(E, kv_cache_config.dtype, parseKvCacheDtype, kKvDtypes)},
    {{"kv_cache_config.secondary_offload_min_priority", "--kv-cache-offload-min-priority", "",
      OptionKind::kInt, "P", "Evicted blocks of at least this retention priority go to the host cache"},
     LLMRT_FIELD(E, kv_cache_config.secondary_offload_min_priority)},
    {{"kv_cache_config.event_buffer_max_size", "--kv-cache-event-buffer-size", "", OptionKind::kInt, "N",
      "KV cache events kept for get_kv_cache_events (0: none)"},
     LLMRT_FIELD(E, kv_cache_config.event_buffer_max_size)},
    {{"iter_stats_max_iterations", "--iter-stats-max-iterations", "", OptionKind::kInt, "N",
      "Iteration stats kept (0: none)"},
     LLMRT_FIELD(E, iter_stats_max_iterations)},
    {{"cuda_tuning", "--cuda-tuning", "", OptionKind::kString, "KEY=VALUE,...",
      "CUDA backend switches for measurements (graphs, gemv, flash, mma_decode, rope_fusion, "
      "half_activations, pdl, "
      "sampling, compact_sampling, row_group_sampling, vector_ops, fused_quantization, act_fusion: on|off; "
      "gemv_rows, "
      "norm_split_rows, fp8_gemv_rows: 0-8; fp8_row_gemv_rows: 0-2; "
      "split_waves: 1-16; split_keys: 16-4096; profile: on|off)"},
     [](E& c, std::string_view v) { return parseCudaTuning(v, c.cuda_tuning); },
     [](const E& c) { return c.cuda_tuning.toString(); }},
};

using S = SamplingParams;
const Entry<S> kSampling[] = {
    {{"max_tokens", "--max-tokens", "", OptionKind::kInt, "N", "Most tokens generated per sequence"},
     LLMRT_FIELD(S, max_tokens)},
    {{"min_tokens", "--min-tokens", "", OptionKind::kInt, "N", "Generate at least this many tokens"},
     LLMRT_FIELD(S, min_tokens)},
    {{"temperature", "--temperature", "", OptionKind::kFloat, "T", "Sampling temperature (0: greedy)"},
     LLMRT_FIELD(S, temperature)},
    {{"top_k", "--top-k", "", OptionKind::kInt, "K", "Keep the K most likely tokens (0: off)"}, LLMRT_FIELD(S, top_k)},
    {{"top_p", "--top-p", "", OptionKind::kFloat, "P", "Nucleus sampling mass, in (0, 1] (1: off)"},
     LLMRT_FIELD(S, top_p)},
    {{"min_p", "--min-p", "", OptionKind::kFloat, "P", "Drop tokens below P x the top probability (0: off)"},
     LLMRT_FIELD(S, min_p)},
    {{"repetition_penalty", "--repetition-penalty", "", OptionKind::kFloat, "R", "HF repetition penalty (1: off)"},
     LLMRT_FIELD(S, repetition_penalty)},
    {{"presence_penalty", "--presence-penalty", "", OptionKind::kFloat, "X", "OpenAI presence penalty, in [-2, 2]"},
     LLMRT_FIELD(S, presence_penalty)},
    {{"frequency_penalty", "--frequency-penalty", "", OptionKind::kFloat, "X", "OpenAI frequency penalty, in [-2, 2]"},
     LLMRT_FIELD(S, frequency_penalty)},
    {{"seed", "--seed", "", OptionKind::kInt, "S", "Sampling seed, in [0, 2^64) (unset: random per request)"},
     LLMRT_FIELD(S, seed)},
    {{"n", "--n", "", OptionKind::kInt, "N", "Independent samples of each prompt"}, LLMRT_FIELD(S, n)},
    {{"stop", "--stop", "", OptionKind::kStringList, "TEXT", "Stop string (repeatable)"}, LLMRT_FIELD(S, stop)},
    {{"stop_token_ids", "--stop-token-id", "", OptionKind::kIntList, "ID", "Extra stop token ids (repeatable)"},
     LLMRT_FIELD(S, stop_token_ids)},
    {{"ignore_eos", "--ignore-eos", "", OptionKind::kBool, "", "Do not stop at EOS"}, LLMRT_FIELD(S, ignore_eos)},
    {{"logprobs", "--logprobs", "", OptionKind::kInt, "K", "Report the chosen token's logprob and K alternatives"},
     LLMRT_FIELD(S, logprobs)},
    {{"skip_special_tokens", "--skip-special-tokens", "--keep-special-tokens", OptionKind::kBool, "",
      "Leave special tokens out of the text"},
     LLMRT_FIELD(S, skip_special_tokens)},
    {{"include_stop_str_in_output", "--include-stop-str-in-output", "", OptionKind::kBool, "",
      "Keep the matched stop string in the text"},
     LLMRT_FIELD(S, include_stop_str_in_output)},
};

#undef LLMRT_FIELD
#undef LLMRT_ENUM

template <typename C, size_t N>
std::vector<OptionInfo> infos(const Entry<C> (&table)[N]) {
  std::vector<OptionInfo> v;
  for (const Entry<C>& e : table) v.push_back(e.info);
  return v;
}

std::string_view stripDashes(std::string_view n) {
  while (!n.empty() && n.front() == '-') n.remove_prefix(1);
  return n;
}

// Which entry `name` means (key, flag or negation flag; dashes optional), and whether it is the
// negation.
template <typename C, size_t N>
const Entry<C>* lookup(const Entry<C> (&table)[N], std::string_view name, bool* negated) {
  const std::string_view bare = stripDashes(name);
  for (const Entry<C>& e : table) {
    if (bare == e.info.key || bare == stripDashes(e.info.flag)) {
      *negated = false;
      return &e;
    }
    if (!e.info.negation.empty() && bare == stripDashes(e.info.negation)) {
      *negated = true;
      return &e;
    }
  }
  return nullptr;
}

template <typename C, size_t N>
Status setIn(const Entry<C> (&table)[N], C& config, std::string_view name, std::string_view value) {
  bool negated = false;
  const Entry<C>* e = lookup(table, name, &negated);
  if (e == nullptr)
    return invalidArgument("unknown option '" + std::string(name.substr(0, 80)) + "'" + suggestOption(name));
  Status s = Status::ok();
  if (negated) {
    bool b = true;
    s = value.empty() ? Status::ok() : parseInto(b, value);
    if (s.isOk()) s = e->set(config, b ? "false" : "true");
  } else {
    s = e->set(config, value.empty() && e->info.kind == OptionKind::kBool ? "true" : value);
  }
  if (!s.isOk()) return invalidArgument(std::string(name) + ": " + s.message());
  return Status::ok();
}

template <typename C, size_t N>
std::string getIn(const Entry<C> (&table)[N], const C& config, std::string_view key) {
  bool negated = false;
  const Entry<C>* e = lookup(table, key, &negated);
  return e ? e->get(config) : "";
}

}  // namespace

std::span<const OptionInfo> engineOptionTable() {
  static const std::vector<OptionInfo> v = infos(kEngine);
  return v;
}

std::span<const OptionInfo> samplingOptionTable() {
  static const std::vector<OptionInfo> v = infos(kSampling);
  return v;
}

Status setEngineOption(EngineConfig& config, std::string_view name, std::string_view value) {
  return setIn(kEngine, config, name, value);
}

std::string engineOptionValue(const EngineConfig& config, std::string_view key) { return getIn(kEngine, config, key); }

Status setSamplingOption(SamplingParams& params, std::string_view name, std::string_view value) {
  return setIn(kSampling, params, name, value);
}

std::string samplingOptionValue(const SamplingParams& params, std::string_view key) {
  return getIn(kSampling, params, key);
}

const OptionInfo* findOption(std::string_view name) {
  bool negated = false;
  if (const auto* e = lookup(kEngine, name, &negated)) return &engineOptionTable()[static_cast<size_t>(e - kEngine)];
  if (const auto* e = lookup(kSampling, name, &negated))
    return &samplingOptionTable()[static_cast<size_t>(e - kSampling)];
  return nullptr;
}

std::string suggestOption(std::string_view unknown) {
  std::vector<std::string_view> names;
  const bool as_flag = unknown.substr(0, 2) == "--";
  for (auto tables : {engineOptionTable(), samplingOptionTable()}) {
    for (const OptionInfo& o : tables) {
      names.push_back(as_flag ? o.flag : o.key);
      if (as_flag && !o.negation.empty()) names.push_back(o.negation);
    }
  }
  return didYouMean(unknown, names);
}

}  // namespace llmrt

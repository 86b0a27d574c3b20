// The option tables: every knob of an EngineConfig (and the per-request defaults of a
// SamplingParams) with its key, its command-line flag, its help and a strict parser. Every
// front end goes through these tables — the llmrt and llmrt-bench commands register them as
// flags, the server maps serving.properties keys and OPTION_* variables onto the keys, Python
// keyword arguments use the same keys — so a knob is spelt, parsed and reported the same way
// everywhere. The setters check syntax and representability ("abc" is not an integer, -1 is
// not a byte count); ranges and combinations are checked once, by EngineConfig::validate() and
// SamplingParams::validate(), with the same messages as for a config built in C++.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "llmrt/engine_config.h"
#include "llmrt/sampling_params.h"
#include "llmrt/status.h"

namespace llmrt {

enum class OptionKind {
  kBool,        // "true"/"false" (also on/off, 1/0); a flag without a value means true
  kInt,         // a decimal integer
  kFloat,       // a finite decimal number
  kString,      // any text
  kEnum,        // one of the names in `value_name` ("a|b|c")
  kIntList,     // comma-separated integers; each occurrence appends
  kStringList,  // one element per occurrence
};

struct OptionInfo {
  std::string_view key;       // the config path: "max_batch_size", "kv_cache_config.enable_block_reuse"
  std::string_view flag;      // the command-line flag: "--max-batch-size"
  std::string_view negation;  // kBool: the flag that sets false ("--disable-block-reuse"), or ""
  OptionKind kind = OptionKind::kString;
  std::string_view value_name;  // "N", "FRACTION", "cpu|cuda|auto" (kEnum: the choices)
  std::string_view help;
};

// ---- EngineConfig -------------------------------------------------------------------
std::span<const OptionInfo> engineOptionTable();
// Sets the option named by its key or its flag (with or without the leading "--") from text;
// for a kBool option named by its negation flag the value is negated. Unknown names are an
// InvalidArgument that suggests the nearest name ("unknown option '--max-token', did you mean
// '--max-tokens'?").
Status setEngineOption(EngineConfig& config, std::string_view name, std::string_view value);
// The option's value in `config` as text ("" when unset), e.g. for --help's defaults.
std::string engineOptionValue(const EngineConfig& config, std::string_view key);

// ---- SamplingParams (the defaults a front end applies to every request) ---------------
std::span<const OptionInfo> samplingOptionTable();
Status setSamplingOption(SamplingParams& params, std::string_view name, std::string_view value);
std::string samplingOptionValue(const SamplingParams& params, std::string_view key);

// The option (of either table) a name refers to, or null.
const OptionInfo* findOption(std::string_view name);
// ", did you mean '--max-tokens'?" for the flag nearest to an unknown one, or "".
std::string suggestOption(std::string_view unknown);

}  // namespace llmrt

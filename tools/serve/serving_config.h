// LMI configuration (DJL's serving.properties and OPTION_* variables) for `llmrt serve`,
// mapped onto the engine's option table (llmrt/config_options.h) and the server's options.
//
// Sources, lowest precedence first:
//  1. the library's defaults;
//  2. LMI's defaults for the keys LMI sets one for — only when the server is configured the LMI
//     way (a serving.properties file or an OPTION_* / HF_MODEL_ID variable);
//  3. environment: OPTION_<KEY> (-> option.<key>), HF_MODEL_ID, TENSOR_PARALLEL_DEGREE;
//  4. serving.properties (`--config FILE`, else <model dir>/serving.properties);
//  5. command-line flags.
// Every value remembers where it came from, for `--print-config` and for error messages
// ("serving.properties:4: option.max_input_len: 'abc' is not an integer ...").
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "llmrt/engine_config.h"
#include "llmrt/status.h"
#include "server.h"

namespace llmrt::serve {

struct LmiValue {
  std::string value;
  std::string source;  // "serving.properties:12", "OPTION_MAX_INPUT_LEN"
};

// key ("engine", "option.max_input_len", "job_queue_size") -> value, properties over environment.
using LmiSettings = std::map<std::string, LmiValue>;

// Reads a Java properties file's text (key=value, key: value; # and ! comments; lines ending in a backslash
// continue on the next; surrounding blanks trimmed). `name` names it in sources and errors.
Result<LmiSettings> parseProperties(std::string_view text, const std::string& name);
// The LMI variables of an environment (name -> value).
LmiSettings lmiFromEnvironment(const std::map<std::string, std::string>& env);

// Where each resolved value came from, by option key ("max_batch_size", "serve.port").
using Provenance = std::map<std::string, std::string>;

struct LmiResult {
  std::vector<std::string> warnings;  // unknown keys, ignored options
  bool configured = false;            // any LMI source was present
};

// Applies `settings` (properties merged over environment) onto `config` and `options`,
// after LMI's defaults when `settings` is not empty. Errors name key, value, source and what
// is expected.
Result<LmiResult> applyLmi(const LmiSettings& settings, EngineConfig& config, ServeOptions& options,
                           Provenance& provenance);

// The resolved configuration, one "key = value  (source)" line per option, for --print-config.
std::string describeServeConfig(const EngineConfig& config, const ServeOptions& options, const Provenance& provenance);

}  // namespace llmrt::serve

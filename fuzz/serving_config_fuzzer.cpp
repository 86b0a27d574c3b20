// libFuzzer target: LMI configuration for `llmrt serve` (tools/serve/serving_config.h). The input
// is a serving.properties file; its lines NAME=VALUE also serve as the environment (OPTION_*,
// HF_MODEL_ID, TENSOR_PARALLEL_DEGREE, SERVING_JOB_QUEUE_SIZE). The file and the environment are
// read (parseProperties, lmiFromEnvironment) and applied over LMI's defaults onto the library's
// (applyLmi), as `llmrt serve` does, then the engine configuration is validated and described.
// Any answer is fine; a crash or sanitizer report is a bug, as is an error that is not one line
// of at most 4 KB. Every option the configuration ends with must print as text that its parser
// reads back to the same text (engineOptionValue / setEngineOption), so what --print-config shows
// can be given back as flags. The same NAME=VALUE lines are also given to the option tables
// directly (setEngineOption / setSamplingOption, as flags, Python keyword arguments and
// --cuda-tuning reach them), with the same checks.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "llmrt/config_options.h"
#include "serving_config.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  llmrt::fuzz::quiet();
  return 0;
}

namespace {

// NAME=VALUE lines (the first '=' splits; later lines win), as an environment would hold them.
std::map<std::string, std::string> environmentOf(std::string_view text) {
  std::map<std::string, std::string> env;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    if (const size_t eq = line.find('='); eq != std::string_view::npos && eq > 0)
      env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    pos = end + 1;
  }
  return env;
}

// Every option but the lists (each occurrence appends) reads back what it prints.
void checkRoundTrip(const llmrt::EngineConfig& config) {
  for (const llmrt::OptionInfo& o : llmrt::engineOptionTable()) {
    if (o.kind == llmrt::OptionKind::kIntList || o.kind == llmrt::OptionKind::kStringList) continue;
    const std::string printed = llmrt::engineOptionValue(config, o.key);
    if (printed.empty()) continue;  // unset
    llmrt::EngineConfig again = config;
    if (!llmrt::setEngineOption(again, o.key, printed).isOk()) std::abort();
    if (llmrt::engineOptionValue(again, o.key) != printed) std::abort();
  }
}

// The lines that name an option (by key or flag) set it in its table: every error one line; what
// is accepted validates or fails with one line, and prints back. (Unknown names are left to the
// LMI path below: their did-you-mean search over every name is what a run would spend its time on.)
void checkOptionTables(const std::map<std::string, std::string>& lines) {
  llmrt::EngineConfig config;
  llmrt::SamplingParams sampling;
  const std::span<const llmrt::OptionInfo> engine = llmrt::engineOptionTable();
  for (const auto& [name, value] : lines) {
    const llmrt::OptionInfo* o = llmrt::findOption(name);
    if (o == nullptr) continue;
    const bool in_engine = o >= engine.data() && o < engine.data() + engine.size();
    const llmrt::Status s = in_engine ? llmrt::setEngineOption(config, name, value)
                                      : llmrt::setSamplingOption(sampling, name, value);
    if (!s.isOk()) llmrt::fuzz::checkMessage(s);
  }
  if (llmrt::Status valid = config.validate(); !valid.isOk()) llmrt::fuzz::checkMessage(valid);
  if (llmrt::Status valid = sampling.validate(); !valid.isOk()) llmrt::fuzz::checkMessage(valid);
  checkRoundTrip(config);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmrt;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::map<std::string, std::string> lines = environmentOf(text);
  checkOptionTables(lines);
  auto props = serve::parseProperties(text, "serving.properties");
  if (!props.isOk()) {
    fuzz::checkMessage(props.status());
    return 0;
  }
  // Properties over the environment, as the server merges them.
  serve::LmiSettings settings = serve::lmiFromEnvironment(lines);
  for (const auto& [key, value] : *props) settings[key] = value;

  EngineConfig config;
  serve::ServeOptions options;
  serve::Provenance provenance;
  auto applied = serve::applyLmi(settings, config, options, provenance);
  if (!applied.isOk()) {
    fuzz::checkMessage(applied.status());
    return 0;
  }
  if (Status valid = config.validate(); !valid.isOk()) fuzz::checkMessage(valid);
  if (serve::describeServeConfig(config, options, provenance).empty()) std::abort();
  checkRoundTrip(config);
  return 0;
}

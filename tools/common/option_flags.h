// The option tables of llmrt/config_options.h on a CLI11 command: every front end that takes
// engine options (llmrt generate / perplexity, llmrt-bench, later the server) registers them
// here, so flags, help texts, defaults and error messages are the same everywhere.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "llmrt/config_options.h"

namespace llmrt::cli {

class OptionFlags {
 public:
  // Registers the engine options on `cmd`; --help shows each one's value in `defaults` (the
  // front end's defaults). Options whose key is in `skip` are left out.
  void addEngineOptions(CLI::App* cmd, const EngineConfig& defaults, std::vector<std::string_view> skip = {});
  // The same for the per-request sampling options.
  void addSamplingOptions(CLI::App* cmd, const SamplingParams& defaults, std::vector<std::string_view> skip = {});

  // After parsing: sets each option the user gave, in table order. The error names the flag
  // ("--max-batch-size: 'x' is not an integer in [...]").
  Status applyEngine(EngineConfig& config) const;
  Status applySampling(SamplingParams& params) const;
  // Whether the user gave the option with this key.
  bool given(std::string_view key) const;

 private:
  struct Flag {
    const OptionInfo* info = nullptr;
    bool engine = true;
    std::vector<std::string> values;   // the occurrences of the flag (a bare bool flag: "true")
    std::vector<std::string> negated;  // the occurrences of its negation
  };
  void add(CLI::App* cmd, const OptionInfo& info, bool engine, const std::string& default_value);
  Status apply(const Flag& f, EngineConfig* config, SamplingParams* params) const;
  std::vector<std::unique_ptr<Flag>> flags_;
};

// The command's error line and exit code for a CLI11 parse error: unknown flags get the
// nearest known flag of `cmd` ("unknown option '--max-token', did you mean '--max-tokens'?").
// Returns the exit code (2 for usage errors; 0 for --help / --version, printed by CLI11).
int reportParseError(CLI::App& app, const CLI::ParseError& e, std::string_view program);

// The model used when --model is not given: ./models/llmrt-tiny when it exists, else the
// installed copy (<prefix>/share/llmrt/models/llmrt-tiny beside <prefix>/bin), else the copy in
// the source tree this binary was built from. Its calibration.txt is the front ends' default
// calibration text (OptionFlags::applyEngine, `llmrt quantize`).
std::string defaultModelDir();

}  // namespace llmrt::cli

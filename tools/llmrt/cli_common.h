// Shared helpers of the llmrt command's subcommands.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "llmrt/status.h"
#include "llmrt/tokenizer.h"
#include "option_flags.h"

namespace llmrt::cli {

// Exit codes: 0 success, 1 runtime failure (bad file, bad model), 2 usage error.
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// Prints "llmrt: error: <message>" on stderr and returns kExitFailure.
int fail(const Status& status);
int fail(const std::string& message, int code = kExitFailure);

// Parses token ids separated by commas, spaces or newlines (brackets allowed:
// "[1, 2, 3]"). Each must be an integer in [0, 2^31); an empty list is allowed.
Result<std::vector<TokenId>> parseTokenIds(const std::string& text);

// Each subcommand registers itself and returns the function that runs it.
using Runner = std::function<int()>;
struct Command {
  CLI::App* app;
  Runner run;
};
Command addTokenizeCommand(CLI::App& app);
Command addDetokenizeCommand(CLI::App& app);
Command addInspectCommand(CLI::App& app);
Command addGenerateCommand(CLI::App& app);
Command addPerplexityCommand(CLI::App& app);
Command addServeCommand(CLI::App& app);
Command addQuantizeCommand(CLI::App& app);

// (defaultModelDir(): option_flags.h.)



}  // namespace llmrt::cli

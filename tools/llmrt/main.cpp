// llmrt: the command-line front end. Subcommands live in cmd_*.cpp and use only
// the public API in include/llmrt/.
#include <cstdio>
#include <vector>

#include "cli_common.h"
#include "option_flags.h"

int main(int argc, char** argv) {
  CLI::App app{"llmrt: LLM inference runtime"};
  app.require_subcommand(1);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_version_flag("--version", "llmrt 0.1.0");
  const std::vector<llmrt::cli::Command> commands = {
      llmrt::cli::addInspectCommand(app),
      llmrt::cli::addGenerateCommand(app),
      llmrt::cli::addPerplexityCommand(app),
      llmrt::cli::addTokenizeCommand(app),
      llmrt::cli::addDetokenizeCommand(app),
      llmrt::cli::addServeCommand(app),
      llmrt::cli::addQuantizeCommand(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return llmrt::cli::reportParseError(app, e, "llmrt");
  }
  for (const auto& cmd : commands) {
    if (cmd.app->parsed()) {
      try {
        return cmd.run();
      } catch (const std::exception& e) {
        return llmrt::cli::fail(std::string("internal error: ") + e.what());
      }
    }
  }
  return llmrt::cli::kExitUsage;
}

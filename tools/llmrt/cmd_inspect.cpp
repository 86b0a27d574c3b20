// llmrt inspect MODEL_DIR: what a model directory holds and what it will cost.
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "llmrt/model_info.h"

namespace llmrt::cli {

Command addInspectCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Describe a HuggingFace model directory");
  auto dir = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("model_dir", *dir, "Model directory (config.json, *.safetensors)")->required();
  cmd->add_flag("--json", *json, "Print one JSON object");
  return {cmd, [=]() -> int {
    auto info = inspectModel(*dir);
    if (!info.isOk()) return fail(info.status());
    std::string text = *json ? modelInfoToJson(*info) : formatModelInfo(*info);
    std::fputs(text.c_str(), stdout);
    if (!text.empty() && text.back() != '\n') std::fputc('\n', stdout);
    if (!info->weights_valid) return fail("weights do not match config.json: " + info->weights_error);
    return 0;
  }};
}

}  // namespace llmrt::cli
